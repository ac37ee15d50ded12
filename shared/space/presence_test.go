package space

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const presenceSpace = "11111111-1111-4111-8111-111111111111"

func TestPresenceNames(t *testing.T) {
	if c := AgentClientID("stack-", presenceSpace); c != "stack-"+presenceSpace {
		t.Errorf("AgentClientID = %q", c)
	}
	if w := WakeTopic("stack-", presenceSpace); w != "spaces/stack-"+presenceSpace+"/wake" {
		t.Errorf("WakeTopic = %q", w)
	}
	for _, c := range []struct {
		client string
		id     string
		ok     bool
	}{
		{"stack-" + presenceSpace, presenceSpace, true},
		{"other-" + presenceSpace, "", false},        // another stack's
		{"stack-" + presenceSpace + "x", "", false},  // not a space id
		{"stack-", "", false},                        // no id
		{presenceSpace, "", false},                   // no prefix
		{"stack-stack-" + presenceSpace, "", false},  // prefix twice
		{"STACK-" + presenceSpace, "", false},        // case matters
		{"stack-../" + presenceSpace[3:], "", false}, // junk
	} {
		id, ok := SpaceOfClient("stack-", c.client)
		if id != c.id || ok != c.ok {
			t.Errorf("SpaceOfClient(%q) = %q %v, want %q %v", c.client, id, ok, c.id, c.ok)
		}
	}
}

// TestPrincipalMatches: a lifecycle event counts for a space only with
// the principal its authorizer answer carries, the id without dashes.
func TestPrincipalMatches(t *testing.T) {
	const other = "22222222-2222-4222-8222-222222222222"
	principal := "11111111111141118111111111111111"
	if p := PrincipalOf(presenceSpace); p != principal {
		t.Fatalf("PrincipalOf = %q, want %q", p, principal)
	}
	for _, c := range []struct {
		space, principal string
		ok               bool
	}{
		{presenceSpace, principal, true},
		{presenceSpace, PrincipalOf(other), false},          // another space's connection
		{presenceSpace, presenceSpace, false},               // the id with its dashes
		{presenceSpace, "", false},                          // none
		{presenceSpace, principal + "1", false},             // longer
		{presenceSpace, "123456789012:" + principal, false}, // not bare
		{presenceSpace, "123456789012/" + principal, true},  // after the account id
		{presenceSpace, "12345/" + principal, false},        // not an account id
		{presenceSpace, "12345678901a/" + principal, false}, // not an account id
		{presenceSpace, "123456789012/" + PrincipalOf(other), false},
		{presenceSpace, "/" + principal, false},
		{presenceSpace, "AROAEXAMPLE:" + presenceSpace, false}, // an IAM principal
		{"", "", false}, // no space
		{"aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", "AAAAAAAABBBB4CCC8DDDEEEEEEEEEEEE", false}, // case matters
	} {
		if ok := PrincipalMatches(c.space, c.principal); ok != c.ok {
			t.Errorf("PrincipalMatches(%q, %q) = %v, want %v", c.space, c.principal, ok, c.ok)
		}
	}
}

func TestPresenceNewer(t *testing.T) {
	con := func(v int64) *Presence { return &Presence{Connected: true, Version: v, At: t0} }
	dis := func(v int64) *Presence { return &Presence{Version: v, At: t0, Reason: "CONNECTION_LOST"} }
	for _, c := range []struct {
		name    string
		p, than *Presence
		newer   bool
	}{
		{"first connect", con(1), nil, true},
		{"first event a disconnect", dis(1), nil, true},
		{"disconnect of the same connection", dis(1), con(1), true},
		{"its connect after its disconnect (out of order)", con(1), dis(1), false},
		{"duplicate connect", con(1), con(1), false},
		{"duplicate disconnect", dis(1), dis(1), false},
		{"next connection", con(2), dis(1), true},
		{"next connection's connect before the last disconnect", con(2), con(1), true},
		{"older connection's disconnect arriving late", dis(1), con(2), false},
		{"older connect arriving late", con(1), dis(2), false},
	} {
		if got := c.p.Newer(c.than); got != c.newer {
			t.Errorf("%s: Newer = %v, want %v", c.name, got, c.newer)
		}
	}
}

// TestPresenceNewerAcrossAVersionReset: IoT restarts a client id's
// versions at 0 after about an hour disconnected; the new run is newer,
// and no event of the old run, however late it arrives, brings back its
// state.
func TestPresenceNewerAcrossAVersionReset(t *testing.T) {
	at := func(v int64, d time.Duration, connected bool) *Presence {
		p := &Presence{Connected: connected, Version: v, At: t0.Add(d)}
		if !connected {
			p.Reason = "CONNECTION_LOST"
		}
		return p
	}
	const up, down = true, false
	hour := time.Hour
	for _, c := range []struct {
		name    string
		p, than *Presence
		newer   bool
	}{
		{"connect after the reset over the old run's disconnect", at(0, hour, up), at(57, 0, down), true},
		{"connect after the reset at the old run's version", at(0, hour, up), at(0, 0, down), true},
		{"connect after the reset, its last disconnect lost", at(0, 2*hour, up), at(57, -hour, up), true},
		{"the new run's disconnect", at(0, hour+time.Minute, down), at(0, hour, up), true},
		{"the old run's disconnect arriving after the new connect", at(57, 0, down), at(0, hour, up), false},
		{"the old run's connect arriving after the new connect", at(57, -time.Minute, up), at(0, hour, up), false},
		{"the old run's connect arriving after the new disconnect", at(57, -time.Minute, up), at(0, hour, down), false},
		{"a day-old duplicate of a connect at the stored version", at(3, -24*hour, up), at(3, 0, down), false},
		// Nearer than PresenceVersionReset: versions decide, timestamps
		// notwithstanding.
		{"a higher version stamped a little earlier", at(5, -time.Minute, up), at(4, 0, down), true},
		{"a lower version stamped a little later", at(4, time.Minute, down), at(5, 0, up), false},
		{"29 minutes later at a lower version", at(1, PresenceVersionReset-time.Minute, up), at(2, 0, down), false},
		{"30 minutes later at a lower version", at(1, PresenceVersionReset, up), at(2, 0, down), true},
		{"the same connection's disconnect, long after", at(7, 3*24*hour, down), at(7, 0, up), true},
	} {
		if got := c.p.Newer(c.than); got != c.newer {
			t.Errorf("%s: Newer = %v, want %v", c.name, got, c.newer)
		}
	}
}

// TestPresenceOutcome: what a lease with a presence says, case by case.
func TestPresenceOutcome(t *testing.T) {
	v := &ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	con := &Presence{Connected: true, Version: 1, At: t0}
	dis := func(d time.Duration, reason string) *Presence {
		return &Presence{Version: 1, At: at(d), Reason: reason}
	}
	type tc struct {
		name     string
		renewed  *time.Duration
		p        *Presence
		check    time.Duration
		reason   string
		missed   int
		inactive bool // Missed reaches FailureThreshold
	}
	d := func(x time.Duration) *time.Duration { return &x }
	cases := []tc{
		{"connected, no HTTP renewal yet", nil, con, time.Minute, ReasonAgentNotConnected, 0, false},
		{"connected, renewed at the fallback", d(0), con, PresenceFallback, "", 0, false},
		{"connected, two fallbacks missed", d(0), con, 3*PresenceFallback - time.Second, "", 0, false},
		{"connected, HTTP silent for 3 fallbacks", d(0), con, 3 * PresenceFallback, ReasonAgentLeaseExpired, int((3*PresenceFallback - LeaseGrace) / LeaseInterval), true},
		{"connected event older than the renewal", d(20 * time.Minute), con, 21 * time.Minute, "", 0, false},
	}
	for _, reason := range []string{"CLIENT_INITIATED_DISCONNECT", "CONNECTION_LOST", "DUPLICATE_CLIENTID",
		"AUTHORIZATION_FAILURE", "SERVER_INITIATED_DISCONNECT", "CUSTOMAUTH_TTL_EXPIRATION"} {
		p := dis(5*time.Minute, reason)
		cases = append(cases,
			tc{reason + ", within an interval", d(0), p, 5*time.Minute + LeaseInterval + LeaseGrace - time.Second, "", 0, false},
			tc{reason + ", one interval late", d(0), p, 5*time.Minute + LeaseInterval + LeaseGrace, ReasonAgentLeaseExpired, 1, false},
			tc{reason + ", three intervals late", d(0), p, 5*time.Minute + 3*LeaseInterval + LeaseGrace, ReasonAgentLeaseExpired, 3, true},
		)
	}
	ka := dis(5*time.Minute, ReasonKeepAliveTimeout) // last alive at 4m15s
	cases = append(cases,
		tc{"keep-alive timeout: ages from 45 s before", d(0), ka, 4*time.Minute + 15*time.Second + LeaseInterval + LeaseGrace - time.Second, "", 0, false},
		tc{"keep-alive timeout: one interval after the last packet", d(0), ka, 4*time.Minute + 15*time.Second + LeaseInterval + LeaseGrace, ReasonAgentLeaseExpired, 1, false},
		tc{"keep-alive timeout: three", d(0), ka, 4*time.Minute + 15*time.Second + 3*LeaseInterval + LeaseGrace, ReasonAgentLeaseExpired, 3, true},
		tc{"disconnected, renewed over HTTP since: ages from the renewal", d(6 * time.Minute), dis(5*time.Minute, "CONNECTION_LOST"), 6*time.Minute + LeaseInterval + LeaseGrace, ReasonAgentLeaseExpired, 1, false},
		tc{"disconnected, renewed over HTTP since: fresh", d(6 * time.Minute), dis(5*time.Minute, "CONNECTION_LOST"), 6*time.Minute + LeaseInterval, "", 0, false},
		tc{"keep-alive timeout whose last packet is before the renewal", d(4*time.Minute + 50*time.Second), ka, 4*time.Minute + 50*time.Second + LeaseInterval + LeaseGrace - time.Second, "", 0, false},
	)
	for _, c := range cases {
		l := Lease{ServerVersion: v, Presence: c.p}
		if c.renewed != nil {
			r := at(*c.renewed)
			l.RenewedAt = &r
		}
		o := LeaseCadence(0).Outcome(l, at(c.check))
		if o.Reason != c.reason || o.Missed != c.missed || (o.Missed >= FailureThreshold) != c.inactive {
			t.Errorf("%s: %q missed %d, want %q %d", c.name, o.Reason, o.Missed, c.reason, c.missed)
		}
		if o.OK() && o.Version != v {
			t.Errorf("%s: fresh without the renewal's server version", c.name)
		}
		if o.Reason == ReasonAgentLeaseExpired && c.p != nil && !c.p.Connected && c.renewed != nil && *c.renewed < c.p.At.Sub(t0) &&
			!strings.Contains(o.Message, c.p.Reason) {
			t.Errorf("%s: message %q does not say the disconnect", c.name, o.Message)
		}
	}
}

// TestPresenceStatus walks an agent space through its connection's life
// with the prober's minute checks (ApplyProbe): a blip of 20 s (even one
// IoT notices by keep-alive timeout) never makes it inactive; a lasting
// disconnect does; a reconnect (and its HTTP renewal) makes it active.
func TestPresenceStatus(t *testing.T) {
	v := &ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		renewed time.Duration
		p       Presence
		check   time.Duration
		status  Status
	}
	up := func(v int64, d time.Duration) Presence { return Presence{Connected: true, Version: v, At: at(d)} }
	down := func(v int64, d time.Duration, reason string) Presence {
		return Presence{Version: v, At: at(d), Reason: reason}
	}
	var steps []step
	// Connected for an hour; the HTTP fallback every 10 minutes.
	for m := time.Duration(1); m <= 60; m++ {
		steps = append(steps, step{(m * time.Minute / PresenceFallback) * PresenceFallback, up(1, 0), m * time.Minute, Active})
	}
	// A blip at 60m30s noticed late (keep-alive timeout at 61m): every
	// second until the reconnect at 61m20s.
	for s := time.Duration(0); s < 20; s++ {
		steps = append(steps, step{60 * time.Minute, down(1, 61*time.Minute, ReasonKeepAliveTimeout), 61*time.Minute + s*time.Second, Active})
	}
	steps = append(steps,
		step{61*time.Minute + 21*time.Second, up(2, 61*time.Minute+20*time.Second), 62 * time.Minute, Active},
		// The agent goes away for good at 70m.
		step{70 * time.Minute, down(2, 70*time.Minute, "CONNECTION_LOST"), 71 * time.Minute, Active},
		// 3 × 35 s + 5 s after the loss: inactive.
		step{70 * time.Minute, down(2, 70*time.Minute, "CONNECTION_LOST"), 71*time.Minute + 49*time.Second, Active},
		step{70 * time.Minute, down(2, 70*time.Minute, "CONNECTION_LOST"), 71*time.Minute + 50*time.Second, Inactive},
		// Back: the connect alone (its HTTP renewal younger than 3
		// fallbacks) makes it active, then the renewal it makes.
		step{70 * time.Minute, up(3, 80*time.Minute), 80*time.Minute + 2*time.Second, Active},
		step{80*time.Minute + 3*time.Second, up(3, 80*time.Minute), 81 * time.Minute, Active},
	)
	s := Space{Status: Unknown, CreatedAt: t0, Connectivity: ViaAgent}
	for i, st := range steps {
		r, p := at(st.renewed), st.p
		next, _ := ApplyProbe(s, LeaseCadence(0).Outcome(Lease{RenewedAt: &r, ServerVersion: v, Presence: &p}, at(st.check)))
		if next.Status != st.status {
			t.Fatalf("step %d (+%s): %s %q failures=%d, want %s", i, st.check, next.Status, next.Probe.Reason, next.Probe.ConsecutiveFailures, st.status)
		}
		s = next
	}
}

func TestCredentialPresenceBlock(t *testing.T) {
	a := &Agents{}
	if c := a.answer(NewAgentCredential(presenceSpace), t0, ""); c.Presence != nil {
		t.Fatalf("a stack without presence answers %+v", c.Presence)
	}
	a.Presence = PresenceConfig{Endpoint: "iot.example:443", Authorizer: "stack-agent", ClientPrefix: "stack-"}
	raw, err := json.Marshal(a.answer(NewAgentCredential(presenceSpace), t0, ""))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Presence map[string]any }
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"endpoint": "iot.example:443", "authorizer": "stack-agent", "client_id": "stack-" + presenceSpace,
		"wake_topic": "spaces/stack-" + presenceSpace + "/wake", "keep_alive_seconds": 30.0, "fallback_seconds": 600.0}
	if len(got.Presence) != len(want) {
		t.Fatalf("presence = %v", got.Presence)
	}
	for k, v := range want {
		if got.Presence[k] != v {
			t.Errorf("presence.%s = %v, want %v", k, got.Presence[k], v)
		}
	}
}
