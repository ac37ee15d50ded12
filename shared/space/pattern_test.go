package space

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// samePattern checks that match says what the counted expression said, on
// random strings of every length up to max+2: strings of the rule's own
// characters (valid), and the same with one character it refuses or that is
// unusual (uppercase, punctuation, non-ASCII, the Kelvin sign).
func samePattern(t *testing.T, counted string, max int, valid string, match func(string) bool) {
	t.Helper()
	want := regexp.MustCompile(counted)
	chars, odd := []rune(valid), []rune("A._-/()é\u212a")
	r := rand.New(rand.NewPCG(1, uint64(max)))
	for n := 0; n <= max+2; n++ {
		for i := range 40 {
			s := make([]rune, n)
			for j := range s {
				s[j] = chars[r.IntN(len(chars))]
			}
			if n > 0 && i%2 == 1 {
				s[r.IntN(n)] = odd[r.IntN(len(odd))]
			}
			if w, g := want.MatchString(string(s)), match(string(s)); w != g {
				t.Errorf("%s on %q (%d bytes): counted %t, now %t", counted, string(s), len(string(s)), w, g)
			}
		}
	}
}

func TestPatternsSayWhatTheCountedFormsSaid(t *testing.T) {
	samePattern(t, `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`, 63, "az09-", dnsLabel.MatchString)
	samePattern(t, `^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`, 253, "az09-.", dnsSubdomain.MatchString)
	samePattern(t, `^[a-z0-9][a-z0-9-]{0,46}$`, 47, "az09-", plainOrg.MatchString)
	samePattern(t, `^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`, 100, "aZ09_-", configKeys[AWS]["clusterName"].ok)
	samePattern(t, `^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`, 40, "az09-", configKeys[GCP]["clusterName"].ok)
	samePattern(t, `^[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$`, 63, "aZ09_-", configKeys[Azure]["clusterName"].ok)
	samePattern(t, `^[-\w.()]{0,89}[-\w()]$`, 90, "aZ09_-.()", configKeys[Azure]["resourceGroup"].ok)
}
