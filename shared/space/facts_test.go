package space

import (
	"testing"
	"time"
)

// TestFacts: a space's facts as read at a time: the version the cluster
// answered wins over the cloud's at registration; the support state comes
// from the provider's file (a version it does not list, or none at all, is
// unknown, never supported) and moves with the calendar, not with writes.
func TestFacts(t *testing.T) {
	dec5 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	jan1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	probed := func(p Provider, v string) Space {
		return Space{Provider: p, KubernetesVersion: "1.30", Probe: Probe{ServerVersion: &ServerVersion{GitVersion: v}, Certificate: cert1}}
	}
	cases := []struct {
		name    string
		s       Space
		at      time.Time
		version string
		want    SupportFacts
	}{
		{"the probe's version wins", probed(AWS, "v1.32.3-eks-4a2b1c"), dec5, "v1.32.3-eks-4a2b1c",
			SupportFacts{State: FactExtended, StandardEnds: "2026-03-23", ExtendedEnds: "2027-03-23"}},
		{"the same version earlier in the year", probed(AWS, "v1.32.3-eks-4a2b1c"), jan1, "v1.32.3-eks-4a2b1c",
			SupportFacts{State: FactSupported, StandardEnds: "2026-03-23", ExtendedEnds: "2027-03-23"}},
		{"past extended support", probed(AWS, "v1.31.4"), dec5, "v1.31.4",
			SupportFacts{State: FactUnsupported, StandardEnds: "2025-11-26", ExtendedEnds: "2026-11-26"}},
		{"the cloud's version at registration", Space{Provider: AWS, KubernetesVersion: "1.33"}, jan1, "1.33",
			SupportFacts{State: FactSupported, StandardEnds: "2026-07-29", ExtendedEnds: "2027-07-29"}},
		{"no extended support: ended", probed(GCP, "v1.26.5-gke.100"), dec5, "v1.26.5-gke.100",
			SupportFacts{State: FactUnsupported, StandardEnds: "2024-06-30"}},
		{"not in the file", probed(AWS, "v1.40.0"), dec5, "v1.40.0", SupportFacts{State: FactUnknown}},
		{"a provider's file without the row", probed(Azure, "v1.31.4"), dec5, "v1.31.4", SupportFacts{State: FactUnknown}},
		{"no version", Space{Provider: AWS}, dec5, "", SupportFacts{State: FactUnknown}},
		{"not a version", probed(AWS, "latest"), dec5, "latest", SupportFacts{State: FactUnknown}},
	}
	for _, c := range cases {
		f := c.s.FactsAt(c.at)
		if f.KubernetesVersion != c.version || f.Support != c.want {
			t.Errorf("%s: facts %+v, want version %q support %+v", c.name, f, c.version, c.want)
		}
		if f.Certificate != c.s.Probe.Certificate {
			t.Errorf("%s: certificate %+v, want the stored one", c.name, f.Certificate)
		}
	}
}

// TestFactFilters: "support ends within N days" is the end of standard
// support N UTC days away or past (unknown never matches); "certificate
// expires within N days" is notAfter at most N days away or past (no
// certificate never matches).
func TestFactFilters(t *testing.T) {
	jan1 := time.Date(2026, 1, 1, 15, 0, 0, 0, time.UTC)
	v := func(p Provider, gv string) Space {
		return Space{Provider: p, Probe: Probe{ServerVersion: &ServerVersion{GitVersion: gv}}}
	}
	support := []struct {
		s    Space
		days int
		want bool
	}{
		{v(AWS, "v1.32.1"), 81, true}, // 2026-03-23 is 81 days after 2026-01-01
		{v(AWS, "v1.32.1"), 80, false},
		{v(AWS, "v1.31.1"), 0, true}, // in extended support: standard has ended
		{v(AWS, "v1.40.0"), MaxWithinDays, false},
		{Space{Provider: AWS}, MaxWithinDays, false},
	}
	for i, c := range support {
		if got := c.s.SupportEndsWithin(jan1, c.days); got != c.want {
			t.Errorf("support case %d: SupportEndsWithin(%d) = %v, want %v", i, c.days, got, c.want)
		}
	}
	cert := func(d time.Duration) Space {
		return Space{Probe: Probe{Certificate: &Certificate{NotAfter: jan1.Add(d), Issuer: "CN=kubernetes"}}}
	}
	certs := []struct {
		s    Space
		days int
		want bool
	}{
		{cert(10 * 24 * time.Hour), 10, true},
		{cert(10*24*time.Hour + time.Second), 10, false},
		{cert(-time.Hour), 0, true}, // expired
		{Space{}, MaxWithinDays, false},
	}
	for i, c := range certs {
		if got := c.s.CertificateExpiresWithin(jan1, c.days); got != c.want {
			t.Errorf("certificate case %d: CertificateExpiresWithin(%d) = %v, want %v", i, c.days, got, c.want)
		}
	}
}
