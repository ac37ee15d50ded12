package space

import "time"

// Inventory events: a space's stored Kubernetes version changing
// (space.version_changed), its version nearing the end of its provider's
// standard support (space.support_ending) and its serving certificate
// nearing its not_after (space.certificate_expiring), each sent once per
// threshold.
//
// A time threshold is crossed without any change in what a probe sees, and
// a probe of an unchanged space writes nothing, reading only the probe
// index's digest. So the thresholds already announced are stored on the
// space (Notices), and the digest carries, for each kind, the window in
// which a threshold not yet announced is due (ProbeDigest.Due): the
// prober's decision from the digest sees a due threshold, reads the space,
// and ApplyProbe records the announcement in one conditional write, which
// the table's stream turns into the event (InventoryEvent). Between
// thresholds nothing is written.
//
// The rules (TestNoticeSteps, TestInventoryEvent):
//   - A threshold is announced once, for the fact it is about: the support
//     marker names the minor version, the certificate's its not_after. A
//     new minor version or a renewed certificate starts its thresholds
//     again; a patch release (same minor, same support window) does not.
//   - A threshold first due with a more urgent one (a space registered 10
//     days before its version's end) announces the most urgent only and
//     counts the other announced: no stale "60 days" after "14 days".
//   - Nothing is announced once the end has passed (the facts say it), for
//     a version its provider's file does not list (its window is unknown),
//     nor about a certificate for a space that has none (an agent space).
//   - A write announces at most one threshold, and none when it changes
//     the version: each stored change is at most one event, and the next
//     probe announces what is still due.

// SupportNoticeDays are the days before the end of standard support at
// which space.support_ending is sent, most distant first.
var SupportNoticeDays = []int{60, 14}

// CertificateNoticeDays are the days before a serving certificate's
// not_after at which space.certificate_expiring is sent, most distant
// first.
var CertificateNoticeDays = []int{30, 7}

// Notices are the thresholds already announced, each with the fact it was
// about. Stored on the space's item, not part of its API body.
type Notices struct {
	// SupportMinor is the "major.minor" whose end of standard support
	// SupportDays (the most urgent threshold sent) was announced for.
	SupportMinor string `json:"support_minor,omitempty"`
	SupportDays  int    `json:"support_days,omitempty"`
	// CertificateNotAfter is the not_after of the certificate whose expiry
	// CertificateDays was announced for.
	CertificateNotAfter *time.Time `json:"certificate_not_after,omitempty"`
	CertificateDays     int        `json:"certificate_days,omitempty"`
}

// IsZero reports whether nothing is announced.
func (n Notices) IsZero() bool { return n.Equal(Notices{}) }

// Equal compares two notices, their times as instants.
func (n Notices) Equal(o Notices) bool {
	if n.SupportMinor != o.SupportMinor || n.SupportDays != o.SupportDays || n.CertificateDays != o.CertificateDays {
		return false
	}
	if (n.CertificateNotAfter == nil) != (o.CertificateNotAfter == nil) {
		return false
	}
	return n.CertificateNotAfter == nil || n.CertificateNotAfter.Equal(*o.CertificateNotAfter)
}

// NoticeWindow is when a kind of notice has a threshold due and not yet
// announced: from the earliest such threshold's crossing to the end it
// counts down to (the end of standard support, the certificate's
// not_after). Thresholds of one kind share their end, so one window covers
// them all.
// Its Start is always a whole number of 24-hour days before its End (a
// support end is a UTC midnight), which the digest's text relies on.
type NoticeWindow struct {
	Type  EventType
	Start time.Time
	End   time.Time
}

// Contains reports whether a threshold is due at t.
func (w NoticeWindow) Contains(t time.Time) bool { return !t.Before(w.Start) && t.Before(w.End) }

// supportEnd is the end of standard support of s's version, or false when
// its provider's file does not list it.
func (s Space) supportEnd() (Support, string, bool) {
	m := s.MinorVersion()
	if m == "" {
		return Support{}, "", false
	}
	sup := SupportOf(s.Provider, m+".0", time.Time{})
	return sup, m, !sup.EndOfStandard.IsZero()
}

// announcedSupport is the most urgent support threshold announced for s's
// current minor version (0: none).
func (s Space) announcedSupport(minor string) int {
	if s.Notices.SupportMinor != minor {
		return 0
	}
	return s.Notices.SupportDays
}

func (s Space) announcedCertificate() int {
	c, n := s.Probe.Certificate, s.Notices.CertificateNotAfter
	if c == nil || n == nil || !n.Equal(c.NotAfter) {
		return 0
	}
	return s.Notices.CertificateDays
}

// unannounced are the thresholds of days not covered by announced (every
// threshold at or above the most urgent one sent).
func unannounced(days []int, announced int) []int {
	var out []int
	for _, d := range days {
		if announced == 0 || d < announced {
			out = append(out, d)
		}
	}
	return out
}

// NoticeWindows are the windows in which s, as stored, has a threshold due
// and not announced: at most one per kind.
func (s Space) NoticeWindows() []NoticeWindow {
	var out []NoticeWindow
	if sup, minor, ok := s.supportEnd(); ok {
		if days := unannounced(SupportNoticeDays, s.announcedSupport(minor)); len(days) > 0 {
			out = append(out, NoticeWindow{Type: EventSupportEnding, Start: sup.EndOfStandard.AddDate(0, 0, -days[0]), End: sup.EndOfStandard})
		}
	}
	if c := s.Probe.Certificate; c != nil {
		if days := unannounced(CertificateNoticeDays, s.announcedCertificate()); len(days) > 0 {
			end := c.NotAfter.UTC()
			out = append(out, NoticeWindow{Type: EventCertificateExpiring, Start: end.Add(-time.Duration(days[0]) * 24 * time.Hour), End: end})
		}
	}
	return out
}

// Announce records on s at most one threshold due at now and not yet
// announced (support first, then the certificate): the most urgent of its
// kind that now has crossed. It reports whether it announced one.
func (s Space) Announce(now time.Time) (Space, bool) {
	for _, w := range s.NoticeWindows() {
		if !w.Contains(now) {
			continue
		}
		switch w.Type {
		case EventSupportEnding:
			sup, minor, _ := s.supportEnd()
			s.Notices.SupportMinor, s.Notices.SupportDays = minor, crossed(SupportNoticeDays, func(d int) time.Time {
				return sup.EndOfStandard.AddDate(0, 0, -d)
			}, now)
		case EventCertificateExpiring:
			na := s.Probe.Certificate.NotAfter.UTC()
			s.Notices.CertificateNotAfter, s.Notices.CertificateDays = &na, crossed(CertificateNoticeDays, func(d int) time.Time {
				return na.Add(-time.Duration(d) * 24 * time.Hour)
			}, now)
		}
		return s, true
	}
	return s, false
}

// crossed is the most urgent of days whose threshold (at(d)) now has
// reached.
func crossed(days []int, at func(int) time.Time, now time.Time) int {
	out := 0
	for _, d := range days {
		if !now.Before(at(d)) {
			out = d
		}
	}
	return out
}

// forgetStale drops the markers of facts s no longer has: another minor
// version, another certificate. A space keeps no certificate marker
// without a certificate.
func (s Space) forgetStale() Space {
	if s.Notices.SupportMinor != "" && s.Notices.SupportMinor != s.MinorVersion() {
		s.Notices.SupportMinor, s.Notices.SupportDays = "", 0
	}
	if n := s.Notices.CertificateNotAfter; n != nil && (s.Probe.Certificate == nil || !n.Equal(s.Probe.Certificate.NotAfter)) {
		s.Notices.CertificateNotAfter, s.Notices.CertificateDays = nil, 0
	}
	return s
}

// VersionChanged reports the change of s's stored version from before to
// after: the cluster answered a version other than the one known. The
// cloud's own form at registration ("1.31") answered as the same minor
// ("v1.31.4-eks-2d5f260") is not a change, only a first answer.
func VersionChanged(before, after Space) (from, to string, ok bool) {
	from, to = before.CurrentVersion(), after.CurrentVersion()
	if from == "" || to == "" || from == to || after.Probe.ServerVersion == nil {
		return "", "", false
	}
	if before.Probe.ServerVersion == nil && before.MinorVersion() == after.MinorVersion() {
		return "", "", false
	}
	return from, to, true
}

// VersionChangedData is the data of space.version_changed.
type VersionChangedData struct {
	SpaceID string    `json:"space_id"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	At      time.Time `json:"at"`
}

// SupportEndingData is the data of space.support_ending: the version, the
// threshold crossed, and its provider's window (dates as in the facts).
type SupportEndingData struct {
	SpaceID           string   `json:"space_id"`
	Provider          Provider `json:"provider"`
	KubernetesVersion string   `json:"kubernetes_version"`
	ThresholdDays     int      `json:"threshold_days"`
	// DaysRemaining counts UTC calendar days to StandardEnds.
	DaysRemaining int       `json:"days_remaining"`
	StandardEnds  string    `json:"standard_ends"`
	ExtendedEnds  string    `json:"extended_ends,omitempty"`
	Source        string    `json:"source"`
	At            time.Time `json:"at"`
}

// CertificateExpiringData is the data of space.certificate_expiring.
type CertificateExpiringData struct {
	SpaceID       string `json:"space_id"`
	ThresholdDays int    `json:"threshold_days"`
	// DaysRemaining counts 24-hour days to NotAfter, a part day as one (as
	// the "expires within N days" filter does).
	DaysRemaining int       `json:"days_remaining"`
	NotAfter      time.Time `json:"not_after"`
	Issuer        string    `json:"issuer"`
	At            time.Time `json:"at"`
}

// InventoryEvent is the event of a live space's stored change from before
// to after (its time: after's updated_at), or false when the change is
// none of the inventory's: a version changed, or a threshold newly
// announced (Announce).
func InventoryEvent(before, after Space) (EventType, any, bool) {
	if after.ID == "" || after.OrgID == "" || after.Deleted() || before.ID == "" {
		return "", nil, false
	}
	at := after.UpdatedAt.UTC()
	if from, to, ok := VersionChanged(before, after); ok {
		return EventSpaceVersionChanged, VersionChangedData{SpaceID: after.ID, From: from, To: to, At: at}, true
	}
	n, o := after.Notices, before.Notices
	if n.SupportDays != 0 && (n.SupportMinor != o.SupportMinor || n.SupportDays != o.SupportDays) {
		sup := SupportOf(after.Provider, n.SupportMinor+".0", at)
		if sup.DaysToEndOfStandard == nil {
			return "", nil, false
		}
		d := SupportEndingData{SpaceID: after.ID, Provider: after.Provider, KubernetesVersion: after.CurrentVersion(),
			ThresholdDays: n.SupportDays, DaysRemaining: *sup.DaysToEndOfStandard, StandardEnds: sup.EndOfStandard.Format(day),
			Source: sup.Source, At: at}
		if !sup.EndOfExtended.IsZero() {
			d.ExtendedEnds = sup.EndOfExtended.Format(day)
		}
		return EventSupportEnding, d, true
	}
	if n.CertificateDays != 0 && n.CertificateNotAfter != nil && after.Probe.Certificate != nil &&
		(o.CertificateNotAfter == nil || !o.CertificateNotAfter.Equal(*n.CertificateNotAfter) || n.CertificateDays != o.CertificateDays) {
		c := after.Probe.Certificate
		return EventCertificateExpiring, CertificateExpiringData{SpaceID: after.ID, ThresholdDays: n.CertificateDays,
			DaysRemaining: daysUp(c.NotAfter.Sub(at)), NotAfter: c.NotAfter.UTC(), Issuer: c.Issuer, At: at}, true
	}
	return "", nil, false
}

// daysUp is d in 24-hour days, a part day counted as one.
func daysUp(d time.Duration) int {
	const day = 24 * time.Hour
	n := int(d / day)
	if d%day > 0 {
		n++
	}
	return n
}
