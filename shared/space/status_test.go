package space

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ok(at time.Time) Outcome {
	return Outcome{At: at, Latency: 40 * time.Millisecond, Version: &ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}}
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

// nextDue is the first whole second after from at which id's heartbeat
// falls due.
func nextDue(t *testing.T, id string, from time.Time, hb time.Duration) time.Time {
	t.Helper()
	for at := from.Add(time.Second); at.Sub(from) <= hb; at = at.Add(time.Second) {
		if HeartbeatDue(id, from, at, hb) {
			return at
		}
	}
	t.Fatalf("no heartbeat of %s due within %s of %s", id, hb, from)
	return time.Time{}
}

func TestNeedsWrite(t *testing.T) {
	hb := 5 * time.Minute
	// Probes start 10 s after the space's heartbeat fell due, so the next
	// one falls due 4 min 50 s after the first probe.
	t0 := nextDue(t, "space-a", t0, hb).Add(10 * time.Second)
	old, _ := ApplyProbe(Space{ID: "space-a", Status: Unknown}, ok(t0))
	same, _ := ApplyProbe(old, ok(t0.Add(time.Minute)))
	if NeedsWrite(old, same, hb) {
		t.Error("an unchanged success within the heartbeat must not be written")
	}
	late, _ := ApplyProbe(old, ok(t0.Add(hb)))
	if !NeedsWrite(old, late, hb) {
		t.Error("a heartbeat is due")
	}
	failed, _ := ApplyProbe(old, fail(t0.Add(time.Minute), ReasonTimeout))
	if !NeedsWrite(old, failed, hb) {
		t.Error("a failure changes consecutive_failures and must be written")
	}
	upgraded := ok(t0.Add(time.Minute))
	upgraded.Version = &ServerVersion{GitVersion: "v1.32.0", Platform: "linux/amd64"}
	up, _ := ApplyProbe(old, upgraded)
	if !NeedsWrite(old, up, hb) {
		t.Error("a new server version must be written")
	}
	if !NeedsWrite(Space{Status: Unknown}, old, hb) {
		t.Error("the first probe must be written")
	}
	// A dead cluster: failures up to the threshold are written, later ones
	// with the same reason only with the heartbeat.
	dead := old
	var writes int
	for i := 1; i <= 10; i++ {
		next, _ := ApplyProbe(dead, fail(t0.Add(time.Duration(i)*time.Minute), ReasonUnreachable))
		if NeedsWrite(dead, next, hb) {
			writes++
			dead = next
		}
		if i == FailureThreshold && next.Status != Inactive {
			t.Fatalf("not inactive after %d failures", i)
		}
	}
	// Failures 1-3 are written; of 4-10 only those at the first probe
	// after a heartbeat fell due (minutes 5 and 10) are.
	if writes != FailureThreshold+2 {
		t.Errorf("%d writes for 10 failed probes of a dead cluster", writes)
	}
	other, _ := ApplyProbe(dead, fail(dead.Probe.LastProbeAt.Add(time.Minute), ReasonUnauthorized))
	if !NeedsWrite(dead, other, hb) {
		t.Error("a new failure reason must be written")
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

// TestHeartbeatDue: one heartbeat per period per space, at its own phase,
// never later than a period plus a probe interval after the last write;
// and a fleet written in the same instant spreads its heartbeats evenly
// over the period's minutes.
func TestHeartbeatDue(t *testing.T) {
	hb := 5 * time.Minute
	due := nextDue(t, "space-a", t0, hb)
	for _, c := range []struct {
		name     string
		last, at time.Time
		want     bool
	}{
		{"a minute after it fell due and was written", due, due.Add(time.Minute), false},
		{"just before it falls due again", due, due.Add(hb - time.Second), false},
		{"when it falls due again", due, due.Add(hb), true},
		{"written just before it fell due", due.Add(-time.Second), due, true},
		{"written just before, probed a second later", due.Add(-2 * time.Second), due.Add(-time.Second), false},
		{"a whole period later, whatever the phase", due.Add(17 * time.Second), due.Add(17*time.Second + hb), true},
		{"the same instant", due, due, false},
		{"no heartbeat period: every probe", due, due, false},
	} {
		h := hb
		if c.name == "no heartbeat period: every probe" {
			h, c.want = 0, true
		}
		if got := HeartbeatDue("space-a", c.last, c.at, h); got != c.want {
			t.Errorf("%s: due %t, want %t", c.name, got, c.want)
		}
	}

	const fleet = 10000
	perMinute := make([]int, 6)
	for i := range fleet {
		id := fmt.Sprintf("space-%05d", i)
		last, writes := t0, 0
		for m := 1; m <= 5; m++ {
			at := t0.Add(time.Duration(m) * time.Minute)
			if HeartbeatDue(id, last, at, hb) {
				perMinute[m]++
				writes++
				last = at
			}
		}
		if writes != 1 {
			t.Fatalf("%s: %d heartbeats in the 5 minutes after its write, want 1", id, writes)
		}
		// Never later than a period plus an interval: the first due probe
		// after any write time.
		w := t0.Add(time.Duration(i) * 7 * time.Second)
		first := w
		for at := w.Add(time.Minute); ; at = at.Add(time.Minute) {
			if HeartbeatDue(id, w, at, hb) {
				first = at
				break
			}
		}
		if first.Sub(w) > hb+time.Minute {
			t.Fatalf("%s: written at %s, next heartbeat %s later", id, w, first.Sub(w))
		}
	}
	for m := 1; m <= 5; m++ {
		if share := float64(perMinute[m]) / fleet; share < 0.17 || share > 0.23 {
			t.Errorf("minute %d: %.1f %% of the fleet's heartbeats, want about 20 %% (%v)", m, 100*share, perMinute[1:])
		}
	}
}
