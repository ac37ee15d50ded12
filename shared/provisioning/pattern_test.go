package provisioning

import (
	"regexp"
	"strings"
	"testing"
)

// The length-limited rules (space.Pattern) say what their counted forms
// said, at and around each limit.
func TestPatternsKeepTheirLimits(t *testing.T) {
	for _, c := range []struct {
		counted string
		match   func(string) bool
		unit    string
		max     int
	}{
		{`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`, gcpNetName.MatchString, "a", 63},
		{`^[a-z][a-z0-9]{2,39}$`, azureRegion.MatchString, "a", 40},
		{`^[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}$`, func(s string) bool { return gcpLabel(gcpLabelKey, s) }, "é", 63},
		{`^[\p{Ll}\p{Lo}\p{N}_-]{0,63}$`, func(s string) bool { return gcpLabel(gcpLabelVal, s) }, "_", 63},
	} {
		want := regexp.MustCompile(c.counted)
		for n := 0; n <= c.max+1; n++ {
			s := strings.Repeat(c.unit, n)
			if w, g := want.MatchString(s), c.match(s); w != g {
				t.Errorf("%s on %d characters: counted %t, now %t", c.counted, n, w, g)
			}
		}
	}

	counted := regexp.MustCompile(`(?i)^/subscriptions/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/resourceGroups/[-\w.()]{1,90}/providers/Microsoft\.Network/virtualNetworks/[-\w.]{2,64}/subnets/[-\w.]{1,80}$`)
	id := func(group, vnet, subnet string) string {
		return "/subscriptions/3a1b2c4d-5e6f-4a8b-9c0d-e1f2a3b4c5d6/resourceGroups/" + group +
			"/providers/Microsoft.Network/virtualNetworks/" + vnet + "/subnets/" + subnet
	}
	// The Kelvin sign folds to k: a character, three bytes.
	for _, unit := range []string{"a", "\u212a"} {
		for _, n := range []int{0, 1, 2, 63, 64, 65, 79, 80, 81, 89, 90, 91} {
			s := strings.Repeat(unit, n)
			for _, v := range []string{id(s, "vn", "s"), id("rg", s, "s"), id("rg", "vn", s)} {
				m := azureSubnetID(v)
				if w := counted.FindStringSubmatch(v); (w == nil) != (m == nil) || (m != nil && m[1] != w[1]) {
					t.Errorf("%q: counted %q, now %q", v, w, m)
				}
			}
		}
	}
}
