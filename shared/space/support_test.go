package space

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// maxSupportDataAge is how old a support-window file may be before
// TestSupportWindowFiles fails.
const maxSupportDataAge = 400 * 24 * time.Hour

// TestSupportWindowFiles holds each embedded provider file to the rules: it
// parses, every row names an https source, its dates parse and are in order
// (released < end_of_standard <= end_of_extended), and the file's as_of is
// neither in the future nor more than 400 days before the machine's clock.
//
// The age rule reads the real clock ON PURPOSE: providers publish a new
// minor version about every four months, so a file not refreshed for 400
// days no longer lists what fleets run, and those spaces silently answer
// "unknown". This test is meant to start failing when that happens, with
// nothing else changed; the fix is to re-read the providers' calendars
// (each row's source) and bump as_of, not to raise the limit.
func TestSupportWindowFiles(t *testing.T) {
	all, err := LoadedSupportWindows()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, p := range Providers {
		w := all[p]
		if w == nil {
			t.Errorf("%s: no support-window file", p)
			continue
		}
		if w.AsOfDate().After(now.Add(24 * time.Hour)) {
			t.Errorf("%s: as_of %s is in the future", p, w.AsOf)
		}
		if age := now.Sub(w.AsOfDate()); age > maxSupportDataAge {
			t.Errorf("%s: as_of %s is %d days old (limit %d): re-read the providers' calendars",
				p, w.AsOf, int(age.Hours()/24), int(maxSupportDataAge.Hours()/24))
		}
		if strings.TrimSpace(w.Note) == "" {
			t.Errorf("%s: the file says nothing about where its rows come from", p)
		}
		for _, r := range w.Versions {
			u, err := url.Parse(r.Source)
			if err != nil || u.Scheme != "https" || u.Host == "" {
				t.Errorf("%s %s: source %q is not an https URL", p, r.Minor, r.Source)
			}
			if !r.released.Before(r.endStandard) {
				t.Errorf("%s %s: released %s not before end of standard %s", p, r.Minor, r.Released, r.EndOfStandard)
			}
			if r.EndOfExtended != "" && r.endExtended.Before(r.endStandard) {
				t.Errorf("%s %s: end of extended %s before end of standard %s", p, r.Minor, r.EndOfExtended, r.EndOfStandard)
			}
		}
	}
}

// TestParseSupportWindowsRefuses shows each rule of the file check can
// fail: a file that breaks one is refused, naming the row.
func TestParseSupportWindowsRefuses(t *testing.T) {
	const src = `"source": "https://example.com/calendar"`
	for _, c := range []struct{ name, file, want string }{
		{"not json", `{`, "unexpected end"},
		{"bad as_of", `{"provider":"aws","as_of":"5 Dec 2026","versions":[]}`, "as_of"},
		{"no source", `{"provider":"aws","as_of":"2026-12-05","versions":[
			{"minor":"1.30","released":"2024-05-23","end_of_standard":"2025-07-23"}]}`, "source"},
		{"http source", `{"provider":"aws","as_of":"2026-12-05","versions":[
			{"minor":"1.30","released":"2024-05-23","end_of_standard":"2025-07-23","source":"http://example.com/x"}]}`, "https"},
		{"bad minor", `{"provider":"aws","as_of":"2026-12-05","versions":[
			{"minor":"v1.30","released":"2024-05-23","end_of_standard":"2025-07-23",` + src + `}]}`, "major.minor"},
		{"bad date", `{"provider":"aws","as_of":"2026-12-05","versions":[
			{"minor":"1.30","released":"May 2024","end_of_standard":"2025-07-23",` + src + `}]}`, "released"},
		{"month only", `{"provider":"aws","as_of":"2026-12-05","versions":[
			{"minor":"1.30","released":"2024-05-23","end_of_standard":"2025-07",` + src + `}]}`, "end_of_standard"},
		{"released after end", `{"provider":"aws","as_of":"2026-12-05","versions":[
			{"minor":"1.30","released":"2025-07-23","end_of_standard":"2025-07-23",` + src + `}]}`, "not before"},
		{"extended before standard", `{"provider":"aws","as_of":"2026-12-05","versions":[
			{"minor":"1.30","released":"2024-05-23","end_of_standard":"2025-07-23","end_of_extended":"2025-07-22",` + src + `}]}`, "before end_of_standard"},
		{"listed twice", `{"provider":"aws","as_of":"2026-12-05","versions":[
			{"minor":"1.30","released":"2024-05-23","end_of_standard":"2025-07-23",` + src + `},
			{"minor":"1.30","released":"2024-05-23","end_of_standard":"2025-07-23",` + src + `}]}`, "twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSupportWindows([]byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// testWindows is a file of the tests' own, so the steps below do not move
// when the real calendars are refreshed: 1.30 has extended support, 1.26
// has none, 1.40 is listed before its release.
const testWindows = `{"provider":"aws","as_of":"2026-12-05","note":"test","versions":[
	{"minor":"1.26","released":"2023-04-14","end_of_standard":"2024-06-30","source":"https://example.com/gke"},
	{"minor":"1.30","released":"2024-05-23","end_of_standard":"2025-07-23","end_of_extended":"2026-07-23","source":"https://example.com/eks"},
	{"minor":"1.40","released":"2030-01-10","end_of_standard":"2031-03-10","end_of_extended":"2032-03-10","source":"https://example.com/eks"}
]}`

func TestSupportOfSteps(t *testing.T) {
	w, err := ParseSupportWindows([]byte(testWindows))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	none := 1 << 30 // "no day count" in the table
	for _, c := range []struct {
		name, version, at string
		state             SupportState
		minor             string
		daysStd, daysExt  int
	}{
		// Parsing: the provider suffixes are ignored, anything else is unknown.
		{"eks suffix", "v1.30.5-eks-1234", "2025-01-01T00:00:00Z", SupportStandard, "1.30", 203, 568},
		{"gke suffix", "v1.30.5-gke.100", "2025-01-01T00:00:00Z", SupportStandard, "1.30", 203, 568},
		{"plain", "v1.30.14", "2025-01-01T00:00:00Z", SupportStandard, "1.30", 203, 568},
		{"no v", "1.30.14", "2025-01-01T00:00:00Z", SupportStandard, "1.30", 203, 568},
		{"build metadata", "v1.30.2+k3s1", "2025-01-01T00:00:00Z", SupportStandard, "1.30", 203, 568},
		{"empty", "", "2025-01-01T00:00:00Z", SupportUnknown, "", none, none},
		{"minor only", "v1.30", "2025-01-01T00:00:00Z", SupportUnknown, "", none, none},
		{"words", "unknown", "2025-01-01T00:00:00Z", SupportUnknown, "", none, none},
		{"leading zero", "v1.030.1", "2025-01-01T00:00:00Z", SupportUnknown, "", none, none},
		{"space inside", "v1.30.1 -eks", "2025-01-01T00:00:00Z", SupportUnknown, "", none, none},
		{"trailing dot", "v1.30.", "2025-01-01T00:00:00Z", SupportUnknown, "", none, none},
		// Missing rows are unknown, never supported.
		{"not listed", "v1.31.4-eks-1234", "2025-01-01T00:00:00Z", SupportUnknown, "1.31", none, none},
		{"major 2", "v2.30.0", "2025-01-01T00:00:00Z", SupportUnknown, "2.30", none, none},
		// Boundaries: each end date is the first day without that support (UTC).
		{"release day", "v1.30.0", "2024-05-23T00:00:00Z", SupportStandard, "1.30", 426, 791},
		{"eve of end of standard, last second", "v1.30.0", "2025-07-22T23:59:59Z", SupportStandard, "1.30", 1, 366},
		{"end of standard day, first second", "v1.30.0", "2025-07-23T00:00:00Z", SupportExtended, "1.30", 0, 365},
		{"day after end of standard", "v1.30.0", "2025-07-24T12:00:00Z", SupportExtended, "1.30", -1, 364},
		{"eve of end of extended", "v1.30.0", "2026-07-22T23:59:59Z", SupportExtended, "1.30", -364, 1},
		{"end of extended day", "v1.30.0", "2026-07-23T00:00:00Z", SupportEnded, "1.30", -365, 0},
		{"long after", "v1.30.0", "2027-07-23T00:00:00Z", SupportEnded, "1.30", -730, -365},
		// The day is the UTC day, whatever zone the time is given in:
		// 2025-07-23T01:00+02:00 is still 2025-07-22 in UTC.
		{"zone ahead of UTC", "v1.30.0", "2025-07-23T01:00:00+02:00", SupportStandard, "1.30", 1, 366},
		// No extended support: standard, then ended.
		{"no extended, eve", "v1.26.15-gke.1", "2024-06-29T23:59:59Z", SupportStandard, "1.26", 1, none},
		{"no extended, end day", "v1.26.15-gke.1", "2024-06-30T00:00:00Z", SupportEnded, "1.26", 0, none},
		// Listed but not yet released by the provider: unknown, dates given.
		{"before release", "v1.40.0", "2030-01-09T23:59:59Z", SupportUnknown, "1.40", 425, 791},
		{"on release", "v1.40.0", "2030-01-10T00:00:00Z", SupportStandard, "1.40", 424, 790},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := w.SupportOf(c.version, at(c.at))
			if s.State != c.state || s.Minor != c.minor {
				t.Fatalf("SupportOf(%q, %s) = %s %q, want %s %q", c.version, c.at, s.State, s.Minor, c.state, c.minor)
			}
			checkDays(t, "standard", s.DaysToEndOfStandard, c.daysStd, none)
			checkDays(t, "extended", s.DaysToEndOfExtended, c.daysExt, none)
			if (c.daysStd == none) != s.EndOfStandard.IsZero() || (c.daysStd == none) != (s.Source == "") {
				t.Errorf("dates and source are given exactly when a row is found: %+v", s)
			}
		})
	}
}

func checkDays(t *testing.T, which string, got *int, want, none int) {
	t.Helper()
	switch {
	case want == none && got != nil:
		t.Errorf("days to end of %s = %d, want none", which, *got)
	case want != none && got == nil:
		t.Errorf("days to end of %s missing, want %d", which, want)
	case want != none && *got != want:
		t.Errorf("days to end of %s = %d, want %d", which, *got, want)
	}
}

// TestSupportOfEmbedded reads the shipped files through the package
// function: a listed EKS version, a provider whose file lists nothing yet
// (AKS: its stored calendar gives months, not days), and an unknown
// provider all answer as the rules say.
func TestSupportOfEmbedded(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := SupportOf(AWS, "v1.31.4-eks-1234", at)
	if s.State != SupportExtended || s.EndOfExtended != time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC) ||
		*s.DaysToEndOfExtended != 329 || !strings.HasPrefix(s.Source, "https://") {
		t.Errorf("EKS 1.31 on 2026-01-01 = %+v, want extended until 2026-11-26 (329 days) with a source", s)
	}
	if s := SupportOf(AWS, "v1.99.0-eks-1", at); s.State != SupportUnknown {
		t.Errorf("an EKS version the file does not list = %s, want unknown", s.State)
	}
	if s := SupportOf(Azure, "v1.30.5", at); s.State != SupportUnknown || s.Minor != "1.30" {
		t.Errorf("AKS 1.30 = %s %q, want unknown 1.30", s.State, s.Minor)
	}
	if s := SupportOf(GCP, "v1.25.16-gke.1000", at); s.State != SupportEnded {
		t.Errorf("GKE 1.25 on 2026-01-01 = %s, want ended", s.State)
	}
	if s := SupportOf(Provider("oracle"), "v1.30.5", at); s.State != SupportUnknown {
		t.Errorf("an unknown provider = %s, want unknown", s.State)
	}
}

// FuzzSupportOf: whatever the version string and time, SupportOf never
// panics, and it answers standard or extended only for a string that parses
// to a minor the file lists, released by then; everything else is unknown
// or ended.
func FuzzSupportOf(f *testing.F) {
	w, err := ParseSupportWindows([]byte(testWindows))
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range []string{"v1.30.5-eks-1234", "v1.30.5-gke.100", "v1.26.1", "v1.31.0", "v1.30", "", "v1.30.5\n", "v01.30.5", "v1.40.0"} {
		f.Add(v, int64(1735689600))
	}
	f.Fuzz(func(t *testing.T, version string, unix int64) {
		at := time.Unix(unix%(1<<35), 0)
		s := w.SupportOf(version, at)
		minor, ok := MinorOf(version)
		r := w.minor[minor]
		switch s.State {
		case SupportStandard, SupportExtended:
			if !ok || r == nil || at.UTC().Before(r.released) {
				t.Fatalf("%q at %s answered %s: not a listed, released version", version, at, s.State)
			}
		case SupportEnded:
			if !ok || r == nil {
				t.Fatalf("%q answered ended without a row", version)
			}
		case SupportUnknown:
		default:
			t.Fatalf("state %q", s.State)
		}
		if ok != (s.Minor != "") || s.Minor != minor {
			t.Fatalf("minor %q, MinorOf says %q %t", s.Minor, minor, ok)
		}
	})
}
