package space

import (
	"strings"
	"testing"
	"time"
)

// TestLeaseStateMachine walks an agent space through its lease, checked at
// various times, through the probe's state machine (ApplyProbe, NeedsWrite):
// unknown until the first renewal (AgentNotConnected never makes it
// inactive), active while fresh, a late lease counts the intervals missed
// (not the checks), inactive at FailureThreshold missed intervals, active
// again at the next renewal.
func TestLeaseStateMachine(t *testing.T) {
	v := &ServerVersion{GitVersion: "v1.31.4", Platform: "linux/arm64"}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		renewed  *time.Duration // the lease's last renewal, nil: none yet
		check    time.Duration  // when the lease is checked
		status   Status
		reason   string
		failures int
		write    bool // NeedsWrite
	}
	d := func(x time.Duration) *time.Duration { return &x }
	s := Space{Status: Unknown, CreatedAt: t0, Connectivity: ViaAgent}
	steps := []step{
		{nil, 60 * time.Second, Unknown, ReasonAgentNotConnected, 1, true},
		{nil, 120 * time.Second, Unknown, ReasonAgentNotConnected, 2, true},
		{nil, 180 * time.Second, Unknown, ReasonAgentNotConnected, 3, true},
		{nil, 240 * time.Second, Unknown, ReasonAgentNotConnected, 4, false}, // never inactive; nothing new to store
		{d(250 * time.Second), 260 * time.Second, Active, "", 0, true},
		{d(285 * time.Second), 300 * time.Second, Active, "", 0, false},
		// Late by one interval (+ grace): one miss, still active.
		{d(285 * time.Second), 285*time.Second + LeaseInterval + LeaseGrace, Active, ReasonAgentLeaseExpired, 1, true},
		// Checked again within the same missed interval: no new failure.
		{d(285 * time.Second), 285*time.Second + LeaseInterval + LeaseGrace + 12*time.Second, Active, ReasonAgentLeaseExpired, 1, false},
		{d(285 * time.Second), 285*time.Second + 2*LeaseInterval + LeaseGrace, Active, ReasonAgentLeaseExpired, 2, true},
		{d(285 * time.Second), 285*time.Second + 3*LeaseInterval + LeaseGrace, Inactive, ReasonAgentLeaseExpired, 3, true},
		{d(285 * time.Second), 285*time.Second + 5*LeaseInterval + LeaseGrace, Inactive, ReasonAgentLeaseExpired, 5, false},
		{d(600 * time.Second), 610 * time.Second, Active, "", 0, true},
	}
	for i, st := range steps {
		l := Lease{ServerVersion: v}
		if st.renewed != nil {
			r := at(*st.renewed)
			l.RenewedAt = &r
		}
		next, _ := ApplyProbe(s, LeaseCadence(0).Outcome(l, at(st.check)))
		if next.Status != st.status || next.Probe.Reason != st.reason || next.Probe.ConsecutiveFailures != st.failures {
			t.Fatalf("step %d: got %s %q failures=%d, want %s %q %d", i, next.Status, next.Probe.Reason, next.Probe.ConsecutiveFailures, st.status, st.reason, st.failures)
		}
		if w := NeedsWrite(s, next); w != st.write {
			t.Fatalf("step %d: NeedsWrite = %v, want %v", i, w, st.write)
		}
		if st.status == Active && st.reason == "" && next.Probe.ServerVersion != v {
			t.Fatalf("step %d: the reported server version is not kept: %+v", i, next.Probe.ServerVersion)
		}
		if st.write {
			s = next
		}
	}
}

// TestAgentBlipIsNotInactive: an agent that cannot reach Spaces for 20 s
// (and retries every 5 s) misses at most one interval, checked at any time.
func TestAgentBlipIsNotInactive(t *testing.T) {
	last := t0
	// The renewal due at t0+35s is lost; the retries resume at +55 s.
	for check := time.Duration(0); check < 55*time.Second; check += time.Second {
		o := LeaseCadence(0).Outcome(Lease{RenewedAt: &last}, t0.Add(check))
		if o.Missed >= FailureThreshold || (o.Missed > 1) {
			t.Fatalf("at +%s: %d missed intervals", check, o.Missed)
		}
	}
}

func TestObservedAgentNotConnected(t *testing.T) {
	s := NewSpace("11111111-1111-4111-8111-111111111111", "org", RegisterInput{Name: "a", Connectivity: ViaAgent}, t0)
	if o := s.Observed(t0.Add(time.Second), DefaultStaleAfter); o.Probe.Reason != ReasonAgentNotConnected || o.Status != Unknown {
		t.Fatalf("a new agent space reads %s %q", o.Status, o.Probe.Reason)
	}
	d := NewSpace("11111111-1111-4111-8111-111111111111", "org", RegisterInput{Name: "a"}, t0)
	if d.Connectivity != Direct || d.Observed(t0, DefaultStaleAfter).Probe.Reason != ReasonNotProbed {
		t.Fatalf("a new direct space: %+v", d)
	}
	old := d
	old.Connectivity = "" // stored before the field existed
	if old.Observed(t0, DefaultStaleAfter).Connectivity != Direct {
		t.Fatal("a space stored without connectivity does not read as direct")
	}
}

func TestAgentTokens(t *testing.T) {
	id := "11111111-1111-4111-8111-111111111111"
	b, c := NewBootstrapToken(id), NewAgentCredential(id)
	if _, err := ParseBootstrapToken(b.Raw); err != nil {
		t.Fatal(err)
	}
	if got, err := ParseAgentCredential(c.Raw); err != nil || got.SpaceID != id {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"", b.Raw + "x", strings.Replace(c.Raw, id, "x", 1), c.Raw[:len(c.Raw)-1] + "!"} {
		if _, err := ParseAgentCredential(bad); KindOf(err) != KindUnauthenticated {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// A bootstrap token is never a credential, nor the other way round.
	if _, err := ParseAgentCredential(b.Raw); err == nil {
		t.Error("a bootstrap token parsed as a credential")
	}
	if _, err := ParseBootstrapToken(c.Raw); err == nil {
		t.Error("a credential parsed as a bootstrap token")
	}
	if b.Hash() == NewBootstrapToken(id).Hash() || !b.SameHash(b.Hash()) || b.SameHash(c.Hash()) || b.SameHash("") {
		t.Error("hashes do not tell tokens apart")
	}
	if strings.Contains(b.Hash(), b.Raw[len(b.Raw)-43:]) {
		t.Error("the hash carries the secret")
	}
}

func TestLeaseReportValidate(t *testing.T) {
	good := LeaseReport{AgentVersion: "0.1.0", ServerVersion: ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := LeaseReport{AgentVersion: strings.Repeat("x", 65), ServerVersion: ServerVersion{GitVersion: "v1\n"}}
	err := bad.Validate()
	var e *Error
	if !asError(err, &e) || e.Kind != KindInvalid || len(e.Fields) != 3 {
		t.Fatalf("%v", err)
	}
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

func TestRegisterConnectivity(t *testing.T) {
	in := RegisterInput{Provider: AWS, SpaceType: TypeKubernetes, CloudAccountID: "11111111-1111-4111-8111-111111111111",
		Config: Config{"region": "us-east-1", "clusterName": "c"}, Connectivity: "tunnel"}
	err := in.Validate()
	var e *Error
	if !asError(err, &e) || len(e.Fields) != 1 || e.Fields[0].Field != "connectivity" {
		t.Fatalf("%v", err)
	}
}

// TestLeaseCadence: the zero cadence is the deployed LeaseInterval; a
// shorter one (the local stack's) counts missed intervals by itself, with
// the same grace.
func TestLeaseCadence(t *testing.T) {
	if LeaseCadence(0).Interval() != 35*time.Second || LeaseInterval != 35*time.Second {
		t.Fatalf("the deployed cadence is %s", LeaseCadence(0).Interval())
	}
	last, c := t0, LeaseCadence(5*time.Second)
	for _, st := range []struct {
		after  time.Duration
		missed int
		ok     bool
	}{
		{9 * time.Second, 0, true}, {10 * time.Second, 1, false}, {19 * time.Second, 2, false}, {20 * time.Second, 3, false},
	} {
		o := c.Outcome(Lease{RenewedAt: &last}, t0.Add(st.after))
		if o.OK() != st.ok || o.Missed != st.missed {
			t.Errorf("5 s cadence, +%s: ok %v, %d missed; want %v, %d", st.after, o.OK(), o.Missed, st.ok, st.missed)
		}
	}
	if o := LeaseCadence(0).Outcome(Lease{RenewedAt: &last}, t0.Add(20*time.Second)); !o.OK() {
		t.Errorf("the deployed cadence judges +20 s late: %+v", o)
	}
}

// TestNamespacesReportHash: the hash names the list as stored: the same
// namespaces in another order hash alike, any change to a name, phase,
// label or creation time does not.
func TestNamespacesReportHash(t *testing.T) {
	ns := func(name, phase, label, at string) ReportedNamespace {
		return ReportedNamespace{Name: name, Phase: phase, Labels: map[string]string{"team": label}, CreatedAt: at}
	}
	a := ns("a", "Active", "x", "2026-12-01T00:00:00Z")
	b := ns("b", "Active", "y", "2026-12-01T00:00:00Z")
	base := NamespacesReport{Items: []ReportedNamespace{a, b}}.Hash()
	for _, c := range []struct {
		name  string
		items []ReportedNamespace
		same  bool
	}{
		{"another order", []ReportedNamespace{b, a}, true},
		{"the same time in another zone", []ReportedNamespace{ns("a", "Active", "x", "2026-12-01T01:00:00+01:00"), b}, true},
		{"a namespace less", []ReportedNamespace{a}, false},
		{"a phase", []ReportedNamespace{ns("a", "Terminating", "x", "2026-12-01T00:00:00Z"), b}, false},
		{"a label", []ReportedNamespace{ns("a", "Active", "z", "2026-12-01T00:00:00Z"), b}, false},
		{"a creation time", []ReportedNamespace{ns("a", "Active", "x", "2026-12-01T00:00:01Z"), b}, false},
	} {
		if got := (NamespacesReport{Items: c.items}.Hash() == base); got != c.same {
			t.Errorf("%s: equal hash %v, want %v", c.name, got, c.same)
		}
	}
}
