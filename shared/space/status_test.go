package space

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var cert1 = &Certificate{NotAfter: time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC), Issuer: "CN=kubernetes"}

func ok(at time.Time) Outcome {
	return Outcome{At: at, Latency: 40 * time.Millisecond, Version: &ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}, Certificate: cert1}
}

func fail(at time.Time, reason string) Outcome {
	return Outcome{At: at, Reason: reason, Message: "boom"}
}

func TestStateMachine(t *testing.T) {
	type step struct {
		o           Outcome
		status      Status
		changed     bool
		consecutive int
	}
	s := Space{Status: Unknown, CreatedAt: t0}
	steps := []step{
		{fail(t0.Add(1*time.Second), ReasonUnreachable), Unknown, false, 1},
		{ok(t0.Add(2 * time.Second)), Active, true, 0},
		{fail(t0.Add(3*time.Second), ReasonTimeout), Active, false, 1},
		{fail(t0.Add(4*time.Second), ReasonTimeout), Active, false, 2},
		{ok(t0.Add(5 * time.Second)), Active, false, 0},
		{fail(t0.Add(6*time.Second), ReasonUnauthorized), Active, false, 1},
		{fail(t0.Add(7*time.Second), ReasonUnreachable), Active, false, 2},
		{fail(t0.Add(8*time.Second), ReasonUnreachable), Inactive, true, 3},
		{fail(t0.Add(9*time.Second), ReasonUnreachable), Inactive, false, 4},
		{ok(t0.Add(10 * time.Second)), Active, true, 0},
	}
	for i, st := range steps {
		var changed bool
		s, changed = ApplyProbe(s, st.o)
		if s.Status != st.status || changed != st.changed || s.Probe.ConsecutiveFailures != st.consecutive {
			t.Fatalf("step %d: got %s changed=%v failures=%d, want %s %v %d", i, s.Status, changed, s.Probe.ConsecutiveFailures, st.status, st.changed, st.consecutive)
		}
		if !s.Probe.LastProbeAt.Equal(st.o.At) {
			t.Fatalf("step %d: last_probe_at %v", i, s.Probe.LastProbeAt)
		}
		if changed && !s.Probe.LastTransitionAt.Equal(st.o.At) {
			t.Fatalf("step %d: last_transition_at %v", i, s.Probe.LastTransitionAt)
		}
		if st.o.OK() {
			if s.Probe.Reason != "" || s.Probe.ServerVersion == nil || !s.Probe.LastSuccessAt.Equal(st.o.At) || s.Probe.LatencyMS != 40 {
				t.Fatalf("step %d: success not recorded: %+v", i, s.Probe)
			}
		} else if s.Probe.Reason != st.o.Reason || s.Probe.Message != "boom" {
			t.Fatalf("step %d: failure not recorded: %+v", i, s.Probe)
		}
	}
}

func TestFirstProbesFailingStayUnknownThenInactive(t *testing.T) {
	s := Space{Status: Unknown}
	for i := 1; i <= 3; i++ {
		s, _ = ApplyProbe(s, fail(t0.Add(time.Duration(i)*time.Second), ReasonUnreachable))
	}
	if s.Status != Inactive {
		t.Fatalf("status %s", s.Status)
	}
}

func TestApplyManual(t *testing.T) {
	s := Space{Status: Inactive, Probe: Probe{ConsecutiveFailures: 5}}
	s, changed := ApplyManual(s, Active, "maintenance over", t0)
	if !changed || s.Status != Active || s.Probe.ConsecutiveFailures != 0 || s.Probe.Reason != "maintenance over" || !s.Probe.LastTransitionAt.Equal(t0) {
		t.Fatalf("%+v", s)
	}
	s, changed = ApplyManual(s, Active, "again", t0.Add(time.Minute))
	if changed || !s.Probe.LastTransitionAt.Equal(t0) {
		t.Fatalf("unchanged status must keep its transition time: %+v", s)
	}
}

// TestNeedsWrite walks a space through probes, step by step: only a
// change is written (the first probe, a transition, a new reason, a new
// server version, a new serving certificate, a failure count below the
// threshold); an unchanged success, however long after the last write, the
// same certificate seen again (in another time zone too), and the further
// failures of an inactive space with the same reason are not.
func TestNeedsWrite(t *testing.T) {
	v2 := &ServerVersion{GitVersion: "v1.32.0", Platform: "linux/amd64"}
	type step struct {
		after    time.Duration // since t0
		o        func(time.Time) Outcome
		status   Status
		failures int
		write    bool
	}
	upgraded := func(at time.Time) Outcome { o := ok(at); o.Version = v2; return o }
	cert2 := &Certificate{NotAfter: cert1.NotAfter.AddDate(1, 0, 0), Issuer: cert1.Issuer}
	renewed := func(at time.Time) Outcome { o := upgraded(at); o.Certificate = cert2; return o }
	reissued := func(at time.Time) Outcome {
		o := renewed(at)
		o.Certificate = &Certificate{NotAfter: cert2.NotAfter, Issuer: "CN=other CA"}
		return o
	}
	sameInParis := func(at time.Time) Outcome {
		o := reissued(at)
		paris := time.FixedZone("CET", 3600)
		o.Certificate = &Certificate{NotAfter: cert2.NotAfter.In(paris), Issuer: "CN=other CA"}
		return o
	}
	refusedWithCert := func(at time.Time) Outcome { // a 401 shows the certificate too
		o := fail(at, ReasonUnauthorized)
		o.Certificate = cert2
		return o
	}
	timeout := func(at time.Time) Outcome { return fail(at, ReasonTimeout) }
	unreachable := func(at time.Time) Outcome { return fail(at, ReasonUnreachable) }
	unauthorized := func(at time.Time) Outcome { return fail(at, ReasonUnauthorized) }
	steps := []step{
		{0, ok, Active, 0, true},                               // the first probe
		{time.Minute, ok, Active, 0, false},                    // unchanged
		{time.Hour, ok, Active, 0, false},                      // unchanged, however late: no heartbeat
		{time.Hour + time.Minute, upgraded, Active, 0, true},   // a new server version
		{time.Hour + 2*time.Minute, timeout, Active, 1, true},  // one failure: a change
		{time.Hour + 3*time.Minute, upgraded, Active, 0, true}, // recovered: the count and reason reset
		{2 * time.Hour, unreachable, Active, 1, true},
		{2*time.Hour + 12*time.Second, unreachable, Active, 2, true},
		{2*time.Hour + 24*time.Second, unreachable, Inactive, 3, true},
		{2*time.Hour + time.Minute, unreachable, Inactive, 4, false}, // dead, same reason
		{5 * time.Hour, unreachable, Inactive, 4, false},
		{5*time.Hour + time.Minute, unauthorized, Inactive, 4, true}, // a new reason
		{5*time.Hour + 2*time.Minute, upgraded, Active, 0, true},     // back
		{6 * time.Hour, upgraded, Active, 0, false},                  // the same certificate
		{6*time.Hour + time.Minute, renewed, Active, 0, true},        // a renewed certificate: a new notAfter
		{6*time.Hour + 2*time.Minute, renewed, Active, 0, false},     // seen again
		{6*time.Hour + 3*time.Minute, reissued, Active, 0, true},     // another issuer
		{6*time.Hour + 4*time.Minute, sameInParis, Active, 0, false}, // the same instant
		{7 * time.Hour, timeout, Active, 1, true},                    // no answer: the certificate is kept
		{7*time.Hour + time.Minute, upgraded, Active, 0, true},       // recovered, with the first certificate again
		{8 * time.Hour, refusedWithCert, Active, 1, true},            // a refusal that showed a new certificate
		{8*time.Hour + time.Minute, renewed, Active, 0, true},        // recovered: the count resets, the certificate stays
		{8*time.Hour + 2*time.Minute, renewed, Active, 0, false},
	}
	s := Space{ID: "space-a", Status: Unknown, CreatedAt: t0}
	for i, st := range steps {
		next, _ := ApplyProbe(s, st.o(t0.Add(st.after)))
		if next.Status != st.status {
			t.Fatalf("step %d: status %s, want %s", i, next.Status, st.status)
		}
		if w := NeedsWrite(s, next); w != st.write {
			t.Fatalf("step %d: NeedsWrite = %v, want %v", i, w, st.write)
		}
		if next.Probe.Certificate == nil {
			t.Fatalf("step %d: no certificate after %+v", i, st.o(t0))
		}
		if o := st.o(t0); o.Certificate != nil && (!next.Probe.Certificate.NotAfter.Equal(o.Certificate.NotAfter) || next.Probe.Certificate.NotAfter.Location() != time.UTC) {
			t.Fatalf("step %d: certificate %+v, want %+v in UTC", i, next.Probe.Certificate, o.Certificate)
		}
		if st.write {
			s = next
			if s.Probe.ConsecutiveFailures != st.failures {
				t.Fatalf("step %d: stored failures %d, want %d", i, s.Probe.ConsecutiveFailures, st.failures)
			}
		}
	}
}

func TestObservedStale(t *testing.T) {
	stale := 3 * time.Minute
	s, _ := ApplyProbe(Space{Status: Unknown, CreatedAt: t0}, ok(t0))
	if o := s.Observed(t0.Add(stale), stale); o.Status != Active {
		t.Errorf("fresh status reported as %s", o.Status)
	}
	o := s.Observed(t0.Add(stale+time.Second), stale)
	if o.Status != Unknown || o.Probe.Reason != ReasonProbeStale {
		t.Errorf("stale status reported as %s/%s", o.Status, o.Probe.Reason)
	}
	if s.Status != Active {
		t.Error("Observed must not change the stored space")
	}
	never := Space{Status: Unknown, CreatedAt: t0}
	if o := never.Observed(t0.Add(time.Second), stale); o.Probe.Reason != ReasonNotProbed {
		t.Errorf("new space reason %q", o.Probe.Reason)
	}
	if o := never.Observed(t0.Add(time.Hour), stale); o.Probe.Reason != ReasonProbeStale {
		t.Errorf("never-probed old space reason %q", o.Probe.Reason)
	}
	syn := Space{Status: Unknown, CreatedAt: t0, Synthetic: true}
	if o := syn.Observed(t0.Add(time.Hour), stale); o.Probe.Reason == ReasonProbeStale {
		t.Error("synthetic spaces are never probed, so never stale")
	}
}

func TestPickers(t *testing.T) {
	now := time.Now()
	cases := []struct {
		s                        Space
		env, autoscaler, readies bool
	}{
		{Space{Status: Active}, true, true, true},
		{Space{Status: Unknown}, true, true, true},
		{Space{Status: Inactive}, false, false, false},
		{Space{Status: Active, Synthetic: true}, true, false, false},
		{Space{Status: Inactive, Synthetic: true}, false, false, false},
		{Space{Status: Active, DeletedAt: &now}, false, false, false},
	}
	for i, c := range cases {
		if PickerEnvironment.Allows(c.s) != c.env || PickerAutoscaler.Allows(c.s) != c.autoscaler || PickerEventReadiness.Allows(c.s) != c.readies {
			t.Errorf("case %d: %+v", i, c.s)
		}
	}
}
