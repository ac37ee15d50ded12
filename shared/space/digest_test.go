package space

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var digestAcct = "0b5d3c52-4d7e-4b0e-9a43-2f0d6c1e8a11"

// TestDigestText: the digest's text, field by field, for the common shapes
// and the awkward ones (escapes, a literal status and config key, an agent
// space, never probed), and each reads back to the same digest.
func TestDigestText(t *testing.T) {
	at := t0.Add(1500 * time.Millisecond)
	v := &ServerVersion{GitVersion: "v1.31.4-eks-1", Platform: "linux/amd64"}
	vPrint := factPrint(v)
	noCert := "," + factPrint(nil)
	cases := []struct {
		name string
		s    Space
		want string
	}{
		{"eks, active", Space{Version: 7, Status: Active, Provider: AWS, CloudAccountID: digestAcct, Connectivity: Direct,
			Config: Config{"clusterName": "prod-1", "region": "us-east-1"},
			Probe:  Probe{LastProbeAt: &at, ServerVersion: v, Certificate: cert1}},
			// EKS 1.31's standard support ends 2025-11-26 (60 days before:
			// 2025-09-27); cert1's 30 days before its not_after.
			"1|7|a|0||" + "tpbdc1" + "|" + vPrint + "," + factPrint(*cert1) + "|aws|" + digestAcct + "|c=prod-1,r=us-east-1||" +
				"s" + b36(time.Date(2025, 11, 26, 0, 0, 0, 0, time.UTC)) + "-60" + ",c" + b36(cert1.NotAfter) + "-30"},
		{"gke, inactive, timed out", Space{Version: 40, Status: Inactive, Provider: GCP, CloudAccountID: digestAcct,
			Config: Config{"projectId": "acme-prod", "region": "us-central1", "clusterName": "c"},
			Probe:  Probe{ConsecutiveFailures: 4, Reason: ReasonTimeout, LastProbeAt: &at}},
			"1|14|i|4|Timeout|tpbdc1|" + factPrint((*ServerVersion)(nil)) + noCert + "|gcp|" + digestAcct + "|c=c,p=acme-prod,r=us-central1|"},
		{"never probed, an agent space", Space{Version: 1, Status: Unknown, Provider: Azure, CloudAccountID: digestAcct, Connectivity: ViaAgent,
			Config: Config{"resourceGroup": "rg(1).a_b", "subscriptionId": digestAcct, "clusterName": "k"}},
			"1|1|u|0|||" + factPrint((*ServerVersion)(nil)) + noCert + "|azure|" + digestAcct + "|c=k,g=rg(1).a_b,s=" + digestAcct + "|agent"},
		{"escapes, a literal status and key", Space{Version: 2, Status: "paused", Provider: AWS, CloudAccountID: "a|b",
			Config: Config{"odd,key": "x=y|z%", "clusterName": "c"}, Probe: Probe{Reason: "A|B"}},
			"1|2|~paused|0|A%7CB||" + factPrint((*ServerVersion)(nil)) + noCert + "|aws|a%7Cb|c=c,~odd%2Ckey=x%3Dy%7Cz%25|"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := DigestOf(c.s)
			if got := d.String(); got != c.want {
				t.Errorf("text\n got %s\nwant %s", got, c.want)
			}
			back, err := ParseDigest(d.String())
			if err != nil || !reflect.DeepEqual(back, d) {
				t.Errorf("read back: %+v, %v; want %+v", back, err, d)
			}
			// What the digest says of the space is the space, its last
			// probe to the second.
			got := back.Space("o", "id")
			if got.Status != c.s.Status || got.Version != c.s.Version || got.Provider != c.s.Provider ||
				got.CloudAccountID != c.s.CloudAccountID || !reflect.DeepEqual(got.Config, c.s.Config) ||
				got.Probe.Reason != c.s.Probe.Reason || got.Probe.ConsecutiveFailures != c.s.Probe.ConsecutiveFailures ||
				(got.Probe.LastProbeAt == nil) != (c.s.Probe.LastProbeAt == nil) ||
				(got.Probe.LastProbeAt != nil && !got.Probe.LastProbeAt.Equal(c.s.Probe.LastProbeAt.Truncate(time.Second))) ||
				got.OrgID != "o" || got.ID != "id" || got.Connectivity != cmpOr(c.s.Connectivity, Direct) {
				t.Errorf("Space() = %+v, stored %+v", got, c.s)
			}
		})
	}
}

func b36(t time.Time) string { return strconv.FormatInt(t.Unix(), 36) }

func cmpOr(c, def Connectivity) Connectivity {
	if c == "" {
		return def
	}
	return c
}

// TestDigestTextRefused: a text that is not a digest is refused, not
// half read; a shorter one (of a build with fewer fields) reads with the
// rest zero, and a longer one with the rest ignored.
func TestDigestTextRefused(t *testing.T) {
	for _, text := range []string{"", "2|7|a", "1", "1|0|a", "1|x!|a", "1|7|q", "1|7|a|x", "1|7|a|0||zz!",
		"1|7|a|0||||aws|acct|c", "1|7|a|0||||aws|acct|Q=v", "1|7|a|0||||aws|acct|c=a,c=b", "1|7|a|0|%7|", "1|7|a|0|%zz|",
		"1|7|a|0||||aws|acct|||x1-2", "1|7|a|0||||aws|acct|||s1", "1|7|a|0||||aws|acct|||s1-z", "1|7|a|0||||aws|acct|||s1-2,", "1|7|a|0||||aws|acct|||s!-2"} {
		if d, err := ParseDigest(text); err == nil {
			t.Errorf("ParseDigest(%q) = %+v, want an error", text, d)
		}
	}
	short, err := ParseDigest("1|7|a|0|")
	if err != nil || short.Version != 7 || short.Status != Active || short.Facts != nil || short.Provider != "" {
		t.Errorf("a shorter digest: %+v, %v", short, err)
	}
	long, err := ParseDigest(DigestOf(Space{Version: 3, Status: Active, Provider: AWS}).String() + "||a later field")
	if err != nil || long.Version != 3 || long.Provider != AWS {
		t.Errorf("a longer digest: %+v, %v", long, err)
	}
}

// TestDigestNeedsWrite: what the prober decides from a digest is what
// NeedsWrite decides from the stored space, for every stored state and
// outcome here (statuses, failure counts around the threshold, reasons,
// never probed, server versions alike, changed, absent; successes,
// failures and an agent's missed leases); and a digest that lacks a fact
// (a build before it was added) needs a write.
func TestDigestNeedsWrite(t *testing.T) {
	at := t0.Add(time.Minute)
	later := at.Add(time.Minute)
	v1 := &ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}
	v1b := &ServerVersion{GitVersion: "v1.31.4", Platform: "linux/arm64"}
	v2 := &ServerVersion{GitVersion: "v1.32.0", Platform: "linux/amd64"}
	// cert1 in another zone is the same fact; a renewal and a new issuer are not.
	cert1Zoned := &Certificate{NotAfter: cert1.NotAfter.In(time.FixedZone("CET", 3600)), Issuer: cert1.Issuer}
	renewed := &Certificate{NotAfter: cert1.NotAfter.AddDate(0, 3, 0), Issuer: cert1.Issuer}
	reissued := &Certificate{NotAfter: cert1.NotAfter, Issuer: "CN=other"}
	var stored []Space
	for _, st := range []Status{Active, Inactive, Unknown} {
		for _, fails := range []int{0, 1, 2, 3, 4} {
			for _, reason := range []string{"", ReasonTimeout, ReasonAgentNotConnected} {
				for _, probed := range []*time.Time{nil, &at} {
					for _, sv := range []*ServerVersion{nil, v1} {
						for _, c := range []*Certificate{nil, cert1} {
							stored = append(stored, Space{Version: 5, Status: st, Provider: AWS,
								Probe: Probe{ConsecutiveFailures: fails, Reason: reason, LastProbeAt: probed, ServerVersion: sv, Certificate: c}})
						}
					}
				}
			}
		}
	}
	outcomes := []Outcome{
		{At: later, Version: v1}, {At: later, Version: v1b}, {At: later, Version: v2}, {At: later},
		{At: later, Reason: ReasonTimeout, Message: "slow"}, {At: later, Reason: ReasonUnreachable},
		{At: later, Reason: ReasonAgentNotConnected, Missed: 1}, {At: later, Reason: ReasonTimeout, Missed: 5},
		{At: later, Version: v1, Certificate: cert1}, {At: later, Version: v1, Certificate: cert1Zoned},
		{At: later, Version: v1, Certificate: renewed}, {At: later, Version: v1, Certificate: reissued},
		{At: later, Reason: ReasonUnauthorized, Certificate: renewed},
	}
	writes := 0
	for _, s := range stored {
		d, err := ParseDigest(DigestOf(s).String())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outcomes {
			next, _ := ApplyProbe(s, o)
			want := NeedsWrite(s, next)
			if got := d.NeedsWrite(o); got != want {
				t.Errorf("stored %+v / probe %+v, outcome %+v: digest says write %t, NeedsWrite %t", s, s.Probe, o, got, want)
			}
			if want {
				writes++
			}
		}
	}
	// Both answers occur: the table is not one-sided.
	if writes == 0 || writes == len(stored)*len(outcomes) {
		t.Fatalf("%d of %d write", writes, len(stored)*len(outcomes))
	}
	old := DigestOf(Space{Version: 5, Status: Active, Probe: Probe{LastProbeAt: &at, ServerVersion: v1}})
	old.Facts = nil
	if !old.NeedsWrite(Outcome{At: later, Version: v1}) {
		t.Error("a digest without the facts' fingerprints must need a write")
	}
}

// FuzzProbeDigest: any text either is refused or reads to a digest whose
// text reads back to the same digest; any space's digest reads back.
func FuzzProbeDigest(f *testing.F) {
	f.Add("1|7|a|0||tpbdc1|abcdef|aws|acct|c=prod-1,r=us-east-1|", "clusterName", "a|b,c=d%", int64(3))
	f.Add("1|2|~paused|0|A%7CB|||aws|a%7Cb|c=c,~odd%2Ckey=x%3Dy%7Cz%25|agent", "~c", "", int64(1))
	f.Add("1|1|u|0", "", "=", int64(-1))
	f.Fuzz(func(t *testing.T, text, key, value string, version int64) {
		if d, err := ParseDigest(text); err == nil {
			again, err := ParseDigest(d.String())
			if err != nil || !reflect.DeepEqual(again, d) {
				t.Fatalf("%q read %+v, whose text %q reads %+v, %v", text, d, d.String(), again, err)
			}
		}
		if version < 1 || strings.ContainsRune(key, 0) {
			return
		}
		at := time.Unix(1_800_000_000, 0).UTC()
		s := Space{Version: version, Status: Status(value), Provider: Provider(key), CloudAccountID: value,
			Config: Config{key: value, "region": value}, Probe: Probe{Reason: key, LastProbeAt: &at}}
		d := DigestOf(s)
		back, err := ParseDigest(d.String())
		if err != nil || !reflect.DeepEqual(back, d) {
			t.Fatalf("digest %+v: text %q reads %+v, %v", d, d.String(), back, err)
		}
	})
}
