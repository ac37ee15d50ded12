package space

import "time"

// Facts are what Spaces knows of a space's cluster beside its status: its
// Kubernetes version, its API server's serving certificate, and where that
// version stands in its provider's support window. The version and the
// certificate are stored (a probe writes them only when they change,
// NeedsWrite); the support is computed when read (SupportOf), so a window
// that ends moves a space to extended or unsupported without a write, and
// a corrected support file takes effect with the next deploy.
type Facts struct {
	// KubernetesVersion is the version the cluster last answered (the
	// probe's GET /version, or an agent's lease), else the one the cloud
	// named at registration; absent when neither is known.
	KubernetesVersion string       `json:"kubernetes_version,omitempty"`
	Certificate       *Certificate `json:"certificate,omitempty"`
	// Nodes: an agent space's node count and kubelet versions, as its
	// agent last reported them (Nodes).
	Nodes   *Nodes       `json:"nodes,omitempty"`
	Support SupportFacts `json:"support"`
}

// SupportFacts is where the version stands in its provider's support
// window: its State and the days (YYYY-MM-DD, UTC; the first day without
// that support) on which standard and, where the provider has it, extended
// support end.
type SupportFacts struct {
	State        FactSupport `json:"state"`
	StandardEnds string      `json:"standard_ends,omitempty"`
	ExtendedEnds string      `json:"extended_ends,omitempty"`
}

// FactSupport is the API's name of a SupportState.
type FactSupport string

const (
	FactSupported   FactSupport = "supported"
	FactExtended    FactSupport = "extended"
	FactUnsupported FactSupport = "unsupported"
	// FactUnknown: no version, or one the provider's file does not list:
	// never reported as supported.
	FactUnknown FactSupport = "unknown"
)

// CurrentVersion is the space's Kubernetes version as last known: what its
// cluster answered, else what its cloud said at registration.
func (s Space) CurrentVersion() string {
	if s.Probe.ServerVersion != nil && s.Probe.ServerVersion.GitVersion != "" {
		return s.Probe.ServerVersion.GitVersion
	}
	return s.KubernetesVersion
}

// MinorVersion is the "major.minor" of the space's current version, or ""
// when it has none that parses. A cloud's own form ("1.31", EKS at
// registration) counts like a gitVersion ("v1.31.4-eks-2d5f260").
func (s Space) MinorVersion() string {
	v := s.CurrentVersion()
	if minorRE.MatchString(v) {
		return v
	}
	m, _ := MinorOf(v)
	return m
}

// SupportAt is where the space's current version stands at now.
func (s Space) SupportAt(now time.Time) Support {
	m := s.MinorVersion()
	if m == "" {
		return Support{State: SupportUnknown}
	}
	return SupportOf(s.Provider, m+".0", now)
}

// FactsAt are s's facts as read at now.
func (s Space) FactsAt(now time.Time) Facts {
	f := Facts{KubernetesVersion: s.CurrentVersion(), Certificate: s.Probe.Certificate, Nodes: s.Probe.Nodes}
	sup := s.SupportAt(now)
	switch sup.State {
	case SupportStandard:
		f.Support.State = FactSupported
	case SupportExtended:
		f.Support.State = FactExtended
	case SupportEnded:
		f.Support.State = FactUnsupported
	default:
		f.Support.State = FactUnknown
	}
	if sup.State != SupportUnknown {
		f.Support.StandardEnds = sup.EndOfStandard.Format(day)
		if !sup.EndOfExtended.IsZero() {
			f.Support.ExtendedEnds = sup.EndOfExtended.Format(day)
		}
	}
	return f
}

// MaxWithinDays bounds the "within N days" filters: ten years.
const MaxWithinDays = 3650

// SupportEndsWithin reports whether the space's version leaves standard
// support within days of now, or already has (extended or unsupported): a
// version in the provider's file whose end_of_standard is at most days UTC
// calendar days away. An unknown version never matches: nothing is known
// to end.
func (s Space) SupportEndsWithin(now time.Time, days int) bool {
	sup := s.SupportAt(now)
	return sup.State != SupportUnknown && sup.DaysToEndOfStandard != nil && *sup.DaysToEndOfStandard <= days
}

// CertificateExpiresWithin reports whether the serving certificate last
// seen stops being valid within days (24-hour days) of now, or already
// has. A space without one (an agent space, or one never answered) never
// matches.
func (s Space) CertificateExpiresWithin(now time.Time, days int) bool {
	c := s.Probe.Certificate
	return c != nil && !c.NotAfter.After(now.Add(time.Duration(days)*24*time.Hour))
}
