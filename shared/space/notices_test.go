package space

import (
	"testing"
	"time"
)

// EKS 1.31's standard support ends 2025-11-26 (supportwindows/eks.json);
// 1.29 has ended by then; 1.99 is in no file.
var endOf131 = time.Date(2025, 11, 26, 0, 0, 0, 0, time.UTC)

func dayTo131(d int) time.Time { return endOf131.AddDate(0, 0, d) }

func sv(git string) *ServerVersion { return &ServerVersion{GitVersion: git, Platform: "linux/amd64"} }

// noticeStep is one probe: its outcome, and the event the write it makes
// turns into ("" and 0: none; write says whether it is written at all).
type noticeStep struct {
	name  string
	o     Outcome
	write bool
	event EventType
	days  int
}

// runNoticeSteps applies each step as the prober and the store do: the
// digest decides, ApplyProbe changes, NeedsWrite stores (version and
// updated_at stamped as space.Run does), and the stored change is read as
// an event. The digest's decision must be NeedsWrite's at every step.
func runNoticeSteps(t *testing.T, s Space, steps []noticeStep) Space {
	t.Helper()
	for _, st := range steps {
		d, err := ParseDigest(DigestOf(s).String())
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		next, _ := ApplyProbe(s, st.o)
		write := NeedsWrite(s, next)
		if got := d.NeedsWrite(st.o); got != write {
			t.Errorf("%s: the digest says write %t, NeedsWrite %t (windows %+v)", st.name, got, write, d.Due)
		}
		if write != st.write {
			t.Errorf("%s: write %t, want %t (notices %+v → %+v)", st.name, write, st.write, s.Notices, next.Notices)
		}
		if !write {
			continue
		}
		next.Version, next.UpdatedAt = s.Version+1, st.o.At.UTC()
		typ, data, ok := InventoryEvent(s, next)
		days := 0
		switch d := data.(type) {
		case SupportEndingData:
			days = d.ThresholdDays
		case CertificateExpiringData:
			days = d.ThresholdDays
		}
		if !ok {
			typ = ""
		}
		if typ != st.event || days != st.days {
			t.Errorf("%s: event %q (threshold %d, %+v), want %q (%d)", st.name, typ, days, data, st.event, st.days)
		}
		s = next
	}
	return s
}

func probed(at time.Time, git string, c *Certificate) Outcome {
	return Outcome{At: at, Version: sv(git), Certificate: c}
}

// TestNoticeSteps: each threshold is announced once, by one write, and
// probes between thresholds write nothing; a new minor version starts the
// support thresholds again (after its own version_changed event, never in
// the same write), a patch release does not; a space first seen inside
// both thresholds hears only the more urgent; an unknown version and an
// ended one announce nothing; an agent space (no certificate) hears only
// of its version's support; a renewal starts the certificate's thresholds
// again; two kinds due at once take two writes, one event each.
func TestNoticeSteps(t *testing.T) {
	far := &Certificate{NotAfter: endOf131.AddDate(2, 0, 0), Issuer: "CN=kubernetes"}
	base := Space{ID: "s1", OrgID: "o", Provider: AWS, Status: Active, Version: 1, CreatedAt: dayTo131(-90)}
	first := func(at time.Time, git string, c *Certificate) Space {
		s, _ := ApplyProbe(base, probed(at, git, c))
		s.Version = 2
		return s
	}

	t.Run("support, each threshold once", func(t *testing.T) {
		s := first(dayTo131(-70), "v1.31.4-eks-1", far)
		runNoticeSteps(t, s, []noticeStep{
			{"61 days before", probed(dayTo131(-61), "v1.31.4-eks-1", far), false, "", 0},
			{"60 days before", probed(dayTo131(-60), "v1.31.4-eks-1", far), true, EventSupportEnding, 60},
			{"same minute again", probed(dayTo131(-60).Add(time.Minute), "v1.31.4-eks-1", far), false, "", 0},
			{"30 days before", probed(dayTo131(-30), "v1.31.4-eks-1", far), false, "", 0},
			{"15 days before, at 23:59", probed(dayTo131(-14).Add(-time.Minute), "v1.31.4-eks-1", far), false, "", 0},
			{"14 days before", probed(dayTo131(-14), "v1.31.4-eks-1", far), true, EventSupportEnding, 14},
			{"13 days before", probed(dayTo131(-13), "v1.31.4-eks-1", far), false, "", 0},
			{"the end day", probed(dayTo131(0), "v1.31.4-eks-1", far), false, "", 0},
			{"after the end", probed(dayTo131(20), "v1.31.4-eks-1", far), false, "", 0},
		})
	})

	t.Run("a patch release keeps the markers, a new minor resets them", func(t *testing.T) {
		s := first(dayTo131(-70), "v1.31.4-eks-1", far)
		runNoticeSteps(t, s, []noticeStep{
			{"60 days before", probed(dayTo131(-60), "v1.31.4-eks-1", far), true, EventSupportEnding, 60},
			{"a patch release", probed(dayTo131(-50), "v1.31.5-eks-2", far), true, EventSpaceVersionChanged, 0},
			{"after the patch", probed(dayTo131(-49), "v1.31.5-eks-2", far), false, "", 0},
			{"a downgrade to 1.29, ended", probed(dayTo131(-40), "v1.29.9-eks-3", far), true, EventSpaceVersionChanged, 0},
			{"1.29 announces nothing", probed(dayTo131(-39), "v1.29.9-eks-3", far), false, "", 0},
			{"back to 1.31: a change, no notice in the same write", probed(dayTo131(-20), "v1.31.5-eks-2", far), true, EventSpaceVersionChanged, 0},
			{"the next probe announces 60 again", probed(dayTo131(-20).Add(time.Minute), "v1.31.5-eks-2", far), true, EventSupportEnding, 60},
			{"then 14", probed(dayTo131(-14), "v1.31.5-eks-2", far), true, EventSupportEnding, 14},
		})
	})

	t.Run("first seen inside both thresholds: the urgent one only", func(t *testing.T) {
		reg := base
		reg.KubernetesVersion = "1.31" // the cloud's form at registration
		s, _ := ApplyProbe(reg, probed(dayTo131(-10), "v1.31.4-eks-1", far))
		if len(s.Notices.SupportMinor) == 0 || s.Notices.SupportDays != 14 {
			t.Fatalf("the first probe 10 days before recorded %+v, want 14 days for 1.31", s.Notices)
		}
		s.Version = 2
		typ, _, ok := InventoryEvent(reg, s)
		if !ok || typ != EventSupportEnding {
			t.Fatalf("the first probe's write is %q, %t; want space.support_ending (1.31 → v1.31.4 is no version change)", typ, ok)
		}
		runNoticeSteps(t, s, []noticeStep{
			{"no 60 afterwards", probed(dayTo131(-9), "v1.31.4-eks-1", far), false, "", 0},
		})
	})

	t.Run("an unknown version announces no support", func(t *testing.T) {
		s := first(dayTo131(-70), "v1.99.0-eks-1", far)
		for _, w := range s.NoticeWindows() {
			if w.Type == EventSupportEnding {
				t.Fatalf("an unknown version has a support window %+v", w)
			}
		}
		runNoticeSteps(t, s, []noticeStep{
			{"60 days before 1.31's end", probed(dayTo131(-60), "v1.99.0-eks-1", far), false, "", 0},
			{"14 days before", probed(dayTo131(-14), "v1.99.0-eks-1", far), false, "", 0},
		})
	})

	t.Run("an agent space: support only, no certificate", func(t *testing.T) {
		agent := base
		agent.Connectivity = ViaAgent
		s, _ := ApplyProbe(agent, Outcome{At: dayTo131(-70), Version: sv("v1.31.4")})
		s.Version = 2
		for _, w := range s.NoticeWindows() {
			if w.Type == EventCertificateExpiring {
				t.Fatalf("an agent space has a certificate window %+v", w)
			}
		}
		runNoticeSteps(t, s, []noticeStep{
			{"60 days before", Outcome{At: dayTo131(-60), Version: sv("v1.31.4")}, true, EventSupportEnding, 60},
			{"a missed lease still announces 14", Outcome{At: dayTo131(-14), Reason: ReasonAgentLeaseExpired, Missed: 1}, true, EventSupportEnding, 14},
		})
	})

	t.Run("certificate: each threshold once, a renewal starts again", func(t *testing.T) {
		notAfter := dayTo131(500).Add(6 * time.Hour) // far from 1.31's end
		c := &Certificate{NotAfter: notAfter, Issuer: "CN=kubernetes"}
		renewed := &Certificate{NotAfter: notAfter.AddDate(0, 0, 90), Issuer: "CN=kubernetes"}
		on := func(d time.Duration) time.Time { return notAfter.Add(-d * 24 * time.Hour) }
		s := first(on(40), "v1.99.0", c)
		runNoticeSteps(t, s, []noticeStep{
			{"just before 30 days", probed(on(30).Add(-time.Second), "v1.99.0", c), false, "", 0},
			{"30 days before", probed(on(30), "v1.99.0", c), true, EventCertificateExpiring, 30},
			{"29 days before", probed(on(29), "v1.99.0", c), false, "", 0},
			{"7 days before, the cluster down", Outcome{At: on(7), Reason: ReasonTimeout}, true, EventCertificateExpiring, 7},
			{"6 days before", probed(on(6), "v1.99.0", c), true, "", 0}, // back up: a status write, no event
			{"5 days before", probed(on(5), "v1.99.0", c), false, "", 0},
			{"renewed: a fact, no event", probed(on(4), "v1.99.0", renewed), true, "", 0},
			{"the renewed one's 30 days", probed(on(30-90), "v1.99.0", renewed), true, EventCertificateExpiring, 30},
		})
	})

	t.Run("expired certificate announces nothing", func(t *testing.T) {
		c := &Certificate{NotAfter: dayTo131(500), Issuer: "CN=kubernetes"}
		s := first(dayTo131(501), "v1.99.0", c)
		if s.Notices != (Notices{}) {
			t.Fatalf("an expired certificate's first probe recorded %+v", s.Notices)
		}
		runNoticeSteps(t, s, []noticeStep{{"a day later", probed(dayTo131(502), "v1.99.0", c), false, "", 0}})
	})

	t.Run("two kinds due at once: two writes, one event each", func(t *testing.T) {
		c := &Certificate{NotAfter: dayTo131(10), Issuer: "CN=kubernetes"}
		s := first(dayTo131(-70), "v1.31.4", c)
		runNoticeSteps(t, s, []noticeStep{
			{"both due", probed(dayTo131(-12), "v1.31.4", c), true, EventSupportEnding, 14},
			{"the next probe", probed(dayTo131(-12).Add(time.Minute), "v1.31.4", c), true, EventCertificateExpiring, 30},
			{"then nothing", probed(dayTo131(-11), "v1.31.4", c), false, "", 0},
		})
	})
}

// TestInventoryEvent: the data of each event, and the changes that are
// none (a first answer in the cloud's form, a deregistration, a write of
// something else).
func TestInventoryEvent(t *testing.T) {
	at := dayTo131(-14).Add(3 * time.Hour)
	c := &Certificate{NotAfter: at.Add(7*24*time.Hour - time.Hour), Issuer: "CN=kube-ca"} // 6 days 23 hours: 7 days
	before := Space{ID: "s1", OrgID: "o", Provider: AWS, Probe: Probe{ServerVersion: sv("v1.31.4-eks-1"), Certificate: c}}
	after := before
	after.UpdatedAt = at
	after.Notices = Notices{SupportMinor: "1.31", SupportDays: 14}
	typ, data, ok := InventoryEvent(before, after)
	want := SupportEndingData{SpaceID: "s1", Provider: AWS, KubernetesVersion: "v1.31.4-eks-1", ThresholdDays: 14, DaysRemaining: 14,
		StandardEnds: "2025-11-26", ExtendedEnds: "2026-11-26", At: at}
	if d, isData := data.(SupportEndingData); !ok || typ != EventSupportEnding || !isData || d.Source == "" {
		t.Fatalf("support: %q %+v %t", typ, data, ok)
	} else if d.Source = ""; d != want {
		t.Errorf("support data %+v, want %+v", d, want)
	}

	na := c.NotAfter
	after.Notices = Notices{CertificateNotAfter: &na, CertificateDays: 7}
	typ, data, ok = InventoryEvent(before, after)
	if wantC := (CertificateExpiringData{SpaceID: "s1", ThresholdDays: 7, DaysRemaining: 7, NotAfter: na, Issuer: "CN=kube-ca", At: at}); !ok ||
		typ != EventCertificateExpiring || data != wantC {
		t.Errorf("certificate: %q %+v %t, want %+v", typ, data, ok, wantC)
	}

	after.Notices = Notices{}
	after.Probe.ServerVersion = sv("v1.32.0-eks-1")
	typ, data, ok = InventoryEvent(before, after)
	if wantV := (VersionChangedData{SpaceID: "s1", From: "v1.31.4-eks-1", To: "v1.32.0-eks-1", At: at}); !ok || typ != EventSpaceVersionChanged || data != wantV {
		t.Errorf("version: %q %+v %t, want %+v", typ, data, ok, wantV)
	}

	none := map[string]func() (Space, Space){
		"the cloud's 1.31 answered as v1.31.4": func() (Space, Space) {
			b := Space{ID: "s1", OrgID: "o", Provider: AWS, KubernetesVersion: "1.31"}
			a := b
			a.Probe.ServerVersion = sv("v1.31.4-eks-1")
			return b, a
		},
		"a deregistration": func() (Space, Space) {
			a := before
			a.DeletedAt = &at
			a.Probe.ServerVersion = sv("v1.32.0")
			return before, a
		},
		"a rename": func() (Space, Space) { a := before; a.Name = "other"; return before, a },
		"a notice unchanged": func() (Space, Space) {
			b := before
			b.Notices = Notices{SupportMinor: "1.31", SupportDays: 60}
			a := b
			a.Status = Inactive
			return b, a
		},
		"a marker cleared": func() (Space, Space) {
			b := before
			b.Notices = Notices{CertificateNotAfter: &na, CertificateDays: 7}
			return b, before
		},
	}
	for name, f := range none {
		b, a := f()
		if typ, data, ok := InventoryEvent(b, a); ok {
			t.Errorf("%s: %q %+v", name, typ, data)
		}
	}
}
