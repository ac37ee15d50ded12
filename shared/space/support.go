package space

// Support windows: how long a provider supports a Kubernetes minor version.
//
// The windows are data, not code: one dated file per provider in
// supportwindows/ (eks.json, gke.json, aks.json), embedded in the binary.
// Each file says when it was written ("as_of") and each row names the page
// its dates were read from ("source"). The rules:
//
//   - A date is a UTC calendar day and is the first day WITHOUT that
//     support: on the end_of_standard day a version is already in extended
//     support (EKS bills extended support from the start of that day, UTC);
//     on the end_of_extended day it has ended.
//   - A row without end_of_extended has no extended support: at
//     end_of_standard it has ended.
//   - A version the file does not list, a version not yet released by the
//     provider, and a version string that does not parse are "unknown",
//     never "supported": the absence of data is not a promise.
//   - Only major.minor selects the row; the patch and the provider's suffix
//     ("-eks-1234", "-gke.100") are ignored.
//
// TestSupportWindowFiles holds every file to these rules (a source per row,
// dates that parse and are in order) and to its age.

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sync"
	"time"
)

// SupportState is where a version stands in its provider's support window.
type SupportState string

const (
	SupportStandard SupportState = "standard"
	SupportExtended SupportState = "extended"
	SupportEnded    SupportState = "ended"
	SupportUnknown  SupportState = "unknown"
)

// Support answers SupportOf. The dates and day counts are set only when the
// provider's file has a row for the version; DaysTo* count UTC calendar days
// from the asked time's day to the end date (0 on the end day itself,
// negative once past), so "within N days" is a plain comparison.
type Support struct {
	State SupportState
	// Minor is the version's "major.minor", empty when it did not parse.
	Minor               string
	Released            time.Time
	EndOfStandard       time.Time
	EndOfExtended       time.Time // zero when the version has no extended support
	DaysToEndOfStandard *int
	DaysToEndOfExtended *int
	Source              string
}

// SupportWindow is one row of a provider's file.
type SupportWindow struct {
	Minor         string `json:"minor"`
	Released      string `json:"released"`
	EndOfStandard string `json:"end_of_standard"`
	EndOfExtended string `json:"end_of_extended,omitempty"`
	Source        string `json:"source"`

	released, endStandard, endExtended time.Time
}

// SupportWindows is one provider's file.
type SupportWindows struct {
	Provider Provider        `json:"provider"`
	AsOf     string          `json:"as_of"`
	Note     string          `json:"note"`
	Versions []SupportWindow `json:"versions"`

	asOf  time.Time
	minor map[string]*SupportWindow
}

// AsOfDate is the day the file was written.
func (w *SupportWindows) AsOfDate() time.Time { return w.asOf }

//go:embed supportwindows/*.json
var supportFiles embed.FS

// supportFileOf names each provider's file; a provider without one answers
// unknown for every version.
var supportFileOf = map[Provider]string{AWS: "eks.json", GCP: "gke.json", Azure: "aks.json"}

var loadSupport = sync.OnceValues(func() (map[Provider]*SupportWindows, error) {
	out := map[Provider]*SupportWindows{}
	for p, name := range supportFileOf {
		b, err := supportFiles.ReadFile("supportwindows/" + name)
		if err != nil {
			return nil, err
		}
		w, err := ParseSupportWindows(b)
		if err != nil {
			return nil, fmt.Errorf("supportwindows/%s: %w", name, err)
		}
		if w.Provider != p {
			return nil, fmt.Errorf("supportwindows/%s: provider %q, want %q", name, w.Provider, p)
		}
		out[p] = w
	}
	return out, nil
})

// LoadedSupportWindows is every provider's embedded file, parsed and
// checked; an error means a file breaks the rules above (the tests refuse
// it before it ships).
func LoadedSupportWindows() (map[Provider]*SupportWindows, error) { return loadSupport() }

const day = "2006-01-02"

// ParseSupportWindows decodes and checks one provider's file: every date
// parses, released < end_of_standard <= end_of_extended, every row has an
// https source, and no minor is listed twice.
func ParseSupportWindows(b []byte) (*SupportWindows, error) {
	var w SupportWindows
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	var err error
	if w.asOf, err = time.Parse(day, w.AsOf); err != nil {
		return nil, fmt.Errorf("as_of: %w", err)
	}
	w.minor = map[string]*SupportWindow{}
	for i := range w.Versions {
		r := &w.Versions[i]
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("versions[%d] (%q): %w", i, r.Minor, err)
		}
		if _, dup := w.minor[r.Minor]; dup {
			return nil, fmt.Errorf("versions[%d]: %q listed twice", i, r.Minor)
		}
		w.minor[r.Minor] = r
	}
	return &w, nil
}

var minorRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

func (r *SupportWindow) check() error {
	if !minorRE.MatchString(r.Minor) {
		return fmt.Errorf("minor %q is not major.minor", r.Minor)
	}
	u, err := url.Parse(r.Source)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("source %q is not an https URL", r.Source)
	}
	if r.released, err = time.Parse(day, r.Released); err != nil {
		return fmt.Errorf("released: %w", err)
	}
	if r.endStandard, err = time.Parse(day, r.EndOfStandard); err != nil {
		return fmt.Errorf("end_of_standard: %w", err)
	}
	if !r.released.Before(r.endStandard) {
		return fmt.Errorf("released %s is not before end_of_standard %s", r.Released, r.EndOfStandard)
	}
	if r.EndOfExtended != "" {
		if r.endExtended, err = time.Parse(day, r.EndOfExtended); err != nil {
			return fmt.Errorf("end_of_extended: %w", err)
		}
		if r.endExtended.Before(r.endStandard) {
			return fmt.Errorf("end_of_extended %s is before end_of_standard %s", r.EndOfExtended, r.EndOfStandard)
		}
	}
	return nil
}

// gitVersionRE is a GET /version gitVersion: v, major.minor.patch, and
// whatever suffix the provider adds after - or +.
var gitVersionRE = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:[-+][0-9A-Za-z.+-]*)?$`)

// MinorOf is the "major.minor" of a gitVersion such as "v1.31.4-eks-1234",
// or false when the string is not one.
func MinorOf(gitVersion string) (string, bool) {
	m := gitVersionRE.FindStringSubmatch(gitVersion)
	if m == nil {
		return "", false
	}
	return m[1] + "." + m[2], true
}

// SupportOf is where gitVersion stands in p's support window at t.
func SupportOf(p Provider, gitVersion string, t time.Time) Support {
	all, err := loadSupport()
	if err != nil {
		return Support{State: SupportUnknown}
	}
	return all[p].supportOf(gitVersion, t)
}

// SupportOf is where gitVersion stands in this file's windows at t; a nil
// file knows no version.
func (w *SupportWindows) SupportOf(gitVersion string, t time.Time) Support {
	return w.supportOf(gitVersion, t)
}

func (w *SupportWindows) supportOf(gitVersion string, t time.Time) Support {
	minor, ok := MinorOf(gitVersion)
	if !ok {
		return Support{State: SupportUnknown}
	}
	s := Support{State: SupportUnknown, Minor: minor}
	if w == nil {
		return s
	}
	r := w.minor[minor]
	if r == nil {
		return s
	}
	s.Released, s.EndOfStandard, s.EndOfExtended, s.Source = r.released, r.endStandard, r.endExtended, r.Source
	u := t.UTC()
	today := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
	s.DaysToEndOfStandard = daysFrom(today, r.endStandard)
	if !r.endExtended.IsZero() {
		s.DaysToEndOfExtended = daysFrom(today, r.endExtended)
	}
	switch {
	case today.Before(r.released):
		// Running a version the provider has not released is not something
		// the calendar can vouch for.
	case today.Before(r.endStandard):
		s.State = SupportStandard
	case !r.endExtended.IsZero() && today.Before(r.endExtended):
		s.State = SupportExtended
	default:
		s.State = SupportEnded
	}
	return s
}

func daysFrom(today, end time.Time) *int {
	n := int(end.Sub(today) / (24 * time.Hour))
	return &n
}
