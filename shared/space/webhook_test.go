package space

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestWebhookURLRules(t *testing.T) {
	strict, local := WebhookRules{}, WebhookRules{AllowLoopback: true}
	for _, c := range []struct {
		url         string
		strict, loc string // "" accepted, else a fragment of the refusal
	}{
		{"https://hooks.example.com/spaces", "", ""},
		{"https://hooks.example.com:8443/a?b=c", "", ""},
		{"", "required", "required"},
		{"http://hooks.example.com/", "https", "https"},
		{"ftp://hooks.example.com/", "https URL", "https URL"},
		{"hooks.example.com/x", "https URL", "https URL"},
		{"https://user:pw@hooks.example.com/", "credentials", "credentials"},
		{"https://hooks.example.com/#frag", "fragment", "fragment"},
		{"https:///nohost", "host", "host"},
		{"https://hooks.example.com:0/", "port", "port"},
		{"https://hooks.example.com:70000/", "port", "port"},
		{"https://intranet/", "fully qualified", "fully qualified"},
		{"https://127.0.0.1/", "loopback", ""},
		{"http://127.0.0.1:9000/", "https", ""},
		{"http://localhost:9000/", "https", ""},
		{"https://localhost/", "loopback", ""},
		{"https://[::1]/", "loopback", ""},
		{"https://10.0.0.1/", "private", "private"},
		{"https://192.168.1.1/", "private", "private"},
		{"https://[fd00::1]/", "private", "private"},
		{"https://169.254.169.254/latest/meta-data", "metadata", "metadata"},
		{"https://[fd00:ec2::254]/", "private", "private"},
		{"https://0.0.0.0/", "unspecified", "unspecified"},
		{"https://239.1.2.3/", "multicast", "multicast"},
		{"https://224.0.0.1/", "link-local", "link-local"},
		{"https://[::ffff:10.1.2.3]/", "private", "private"},
		{"https://8.8.8.8/", "", ""},
		{"https://hooks.example.com/" + strings.Repeat("a", 2048), "2048", "2048"},
	} {
		for _, r := range []struct {
			rules WebhookRules
			want  string
		}{{strict, c.strict}, {local, c.loc}} {
			got := r.rules.CheckURL(c.url)
			if (got == "") != (r.want == "") || !strings.Contains(got, r.want) {
				t.Errorf("CheckURL(%.60q) loopback=%v = %q; want %q", c.url, r.rules.AllowLoopback, got, r.want)
			}
		}
	}
}

func TestAddressRefusal(t *testing.T) {
	for _, c := range []struct {
		addr     string
		want     string // fragment; "" allowed
		loopback bool
	}{
		{"93.184.216.34", "", false},
		{"2606:4700::1111", "", false},
		{"127.0.0.1", "loopback", false},
		{"127.0.0.1", "", true},
		{"::1", "loopback", false},
		{"10.1.2.3", "private", true},
		{"172.16.0.1", "private", false},
		{"192.168.0.1", "private", false},
		{"fc00::1", "private", false},
		{"169.254.169.254", "metadata", true},
		{"169.254.170.2", "metadata", false},
		{"fd00:ec2::254", "private", false},
		{"169.254.1.1", "link-local", false},
		{"fe80::1", "link-local", false},
		{"224.0.0.251", "link-local", false},
		{"239.255.255.250", "multicast", false},
		{"ff02::1", "link-local", false},
		{"ff0e::1", "multicast", false},
		{"0.0.0.0", "unspecified", false},
		{"::", "unspecified", false},
		{"0.1.2.3", "this-network", false},
		{"255.255.255.255", "broadcast", false},
		{"100.64.0.1", "carrier-grade", false},
		{"198.18.0.1", "benchmarking", false},
		{"::ffff:127.0.0.1", "loopback", false},
		{"::ffff:169.254.169.254", "metadata", false},
		{"64:ff9b::a00:1", "translation", false},
		{"2002:a00:1::", "6to4", false},
	} {
		got := AddressRefusal(netip.MustParseAddr(c.addr), c.loopback)
		if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
			t.Errorf("AddressRefusal(%s, loopback=%v) = %q; want %q", c.addr, c.loopback, got, c.want)
		}
	}
	if got := AddressRefusal(netip.Addr{}, true); got == "" {
		t.Error("the zero address is allowed")
	}
}

func TestWebhookApply(t *testing.T) {
	s := func(v string) *string { return &v }
	r := WebhookRules{}
	good := WebhookInput{URL: s("https://hooks.example.com/x"), EventTypes: []EventType{EventSpaceRegistered}}
	e, err := r.Apply(WebhookEndpoint{}, good, true)
	if err != nil || e.URL != "https://hooks.example.com/x" || len(e.EventTypes) != 1 {
		t.Fatalf("good input: %+v, %v", e, err)
	}
	for name, c := range map[string]struct {
		in       WebhookInput
		creating bool
		fields   []string
	}{
		"creation needs url and types":  {WebhookInput{}, true, []string{"url", "event_types"}},
		"unknown type":                  {WebhookInput{EventTypes: []EventType{"space.exploded"}}, false, []string{"event_types.0"}},
		"test type is not subscribable": {WebhookInput{EventTypes: []EventType{EventWebhookTest}}, false, []string{"event_types.0"}},
		"duplicate type":                {WebhookInput{EventTypes: []EventType{EventSpaceRegistered, EventSpaceRegistered}}, false, []string{"event_types.1"}},
		"empty types on update":         {WebhookInput{EventTypes: []EventType{}}, false, []string{"event_types"}},
		"bad selector":                  {WebhookInput{LabelSelector: s("env in (a")}, false, []string{"label_selector"}},
		"control character":             {WebhookInput{Description: s("a\x00b")}, false, []string{"description"}},
		"long description":              {WebhookInput{Description: s(strings.Repeat("x", 501))}, false, []string{"description"}},
		"every bad field at once":       {WebhookInput{URL: s("http://x.example.com"), EventTypes: []EventType{"x"}, LabelSelector: s("!")}, false, []string{"url", "event_types.0", "label_selector"}},
	} {
		_, err := r.Apply(e, c.in, c.creating)
		var de *Error
		if !errors.As(err, &de) || de.Kind != KindInvalid {
			t.Errorf("%s: %v; want KindInvalid", name, err)
			continue
		}
		var got []string
		for _, f := range de.Fields {
			got = append(got, f.Field)
		}
		if strings.Join(got, ",") != strings.Join(c.fields, ",") {
			t.Errorf("%s: fields %v; want %v", name, got, c.fields)
		}
	}
	// An update changes only what it names.
	next, err := r.Apply(e, WebhookInput{Description: s("ops"), LabelSelector: s("env=prod")}, false)
	if err != nil || next.URL != e.URL || next.Description != "ops" || next.LabelSelector != "env=prod" || len(next.EventTypes) != 1 {
		t.Errorf("partial update: %+v, %v", next, err)
	}
}

func TestWebhookWants(t *testing.T) {
	e := WebhookEndpoint{State: WebhookEnabled, EventTypes: []EventType{EventSpaceRegistered, EventAccountVerificationFailed}, LabelSelector: "env=prod"}
	prod, dev := map[string]string{"env": "prod"}, map[string]string{"env": "dev"}
	for _, c := range []struct {
		e      WebhookEndpoint
		t      EventType
		about  bool
		labels map[string]string
		want   bool
	}{
		{e, EventSpaceRegistered, true, prod, true},
		{e, EventSpaceRegistered, true, dev, false},
		{e, EventSpaceRegistered, true, nil, false},
		{e, EventSpaceDeregistered, true, prod, false},
		{e, EventAccountVerificationFailed, false, nil, true},
		{WebhookEndpoint{State: WebhookPaused, EventTypes: e.EventTypes}, EventSpaceRegistered, true, prod, false},
		{WebhookEndpoint{State: WebhookDisabled, EventTypes: e.EventTypes}, EventSpaceRegistered, true, prod, false},
		{WebhookEndpoint{State: WebhookEnabled, EventTypes: e.EventTypes}, EventSpaceRegistered, true, dev, true},
	} {
		if got := c.e.Wants(c.t, c.about, c.labels); got != c.want {
			t.Errorf("%s %q wants %s about=%v %v: %v; want %v", c.e.State, c.e.LabelSelector, c.t, c.about, c.labels, got, c.want)
		}
	}
}

func TestWebhookRotation(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := WebhookEndpoint{Secrets: []WebhookSecret{{Value: "a"}}}
	steps := []struct {
		at      time.Duration
		rotate  string
		signing string // at that time, after the rotation if any
	}{
		{0, "", "a"},
		{time.Hour, "b", "b,a"},
		{time.Hour + WebhookRotationOverlap - time.Second, "", "b,a"},
		{time.Hour + WebhookRotationOverlap, "", "b"},
		{30 * time.Hour, "c", "c,b"},
		{31 * time.Hour, "d", "d,c"}, // a second rotation within the overlap drops the oldest
		{31*time.Hour + WebhookRotationOverlap, "", "d"},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		if s.rotate != "" {
			e = e.Rotate(s.rotate, now, WebhookRotationOverlap)
		}
		if got := strings.Join(e.SigningSecrets(now), ","); got != s.signing {
			t.Errorf("step %d: signing %q; want %q", i, got, s.signing)
		}
		if len(e.Secrets) > 2 {
			t.Errorf("step %d: %d secrets stored", i, len(e.Secrets))
		}
	}
}

func TestWebhookState(t *testing.T) {
	e := WebhookEndpoint{State: WebhookEnabled}
	steps := []struct {
		to        WebhookState
		reason    string
		unchanged bool
	}{
		{WebhookPaused, "", false},
		{WebhookPaused, "", true},
		{WebhookEnabled, "", false},
		{WebhookDisabled, ReasonReceiverGone, false},
		{WebhookEnabled, "", false},
	}
	for i, s := range steps {
		next, err := e.SetState(s.to, s.reason, t0)
		if errors.Is(err, ErrUnchanged) != s.unchanged {
			t.Errorf("step %d: %v", i, err)
		}
		if next.State != s.to || next.StateReason != s.reason || (next.DisabledAt != nil) != (s.to == WebhookDisabled) {
			t.Errorf("step %d: %s %q %v", i, next.State, next.StateReason, next.DisabledAt)
		}
		e = next
	}
}

// TestWebhookFailingRun: failures start a run (written once), a delivery
// ends it, five days of failures disable the endpoint (FailedTooLong, with
// when), a disabled endpoint is judged no more, and resuming starts afresh.
func TestWebhookFailingRun(t *testing.T) {
	e := WebhookEndpoint{State: WebhookEnabled}
	day := 24 * time.Hour
	steps := []struct {
		v         DeliveryVerdict
		at        time.Duration
		unchanged bool
		since     time.Duration // -1: no run
		state     WebhookState
	}{
		{Delivered, 0, true, -1, WebhookEnabled},
		{RetryLater, 1 * day, false, 1 * day, WebhookEnabled},
		{Rejected, 3 * day, true, 1 * day, WebhookEnabled},
		{Delivered, 4 * day, false, -1, WebhookEnabled},
		{RetryLater, 5 * day, false, 5 * day, WebhookEnabled},
		{RetryLater, 10*day - time.Second, true, 5 * day, WebhookEnabled},
		{RetryLater, 10 * day, false, 5 * day, WebhookDisabled},
		{RetryLater, 11 * day, true, 5 * day, WebhookDisabled},
		{Delivered, 11 * day, true, 5 * day, WebhookDisabled},
	}
	for i, s := range steps {
		next, err := e.AfterAttempt(s.v, t0.Add(s.at))
		if errors.Is(err, ErrUnchanged) != s.unchanged || (err != nil && !errors.Is(err, ErrUnchanged)) {
			t.Errorf("step %d: %v", i, err)
		}
		if (s.since < 0) != (next.FailingSince == nil) || (s.since >= 0 && !next.FailingSince.Equal(t0.Add(s.since))) || next.State != s.state {
			t.Errorf("step %d: %s failing since %v", i, next.State, next.FailingSince)
		}
		e = next
	}
	if e.StateReason != ReasonFailedTooLong || e.DisabledAt == nil || !e.DisabledAt.Equal(t0.Add(10*day)) {
		t.Errorf("disabled: %q at %v", e.StateReason, e.DisabledAt)
	}
	resumed, err := e.SetState(WebhookEnabled, "", t0.Add(12*day))
	if err != nil || resumed.FailingSince != nil || resumed.DisabledAt != nil || resumed.StateReason != "" {
		t.Errorf("resumed: %+v %v", resumed, err)
	}
}

func TestNewWebhookSecret(t *testing.T) {
	a, b := NewWebhookSecret(), NewWebhookSecret()
	if a == b || !strings.HasPrefix(a, "whsec_") || len(a) != len("whsec_")+44 {
		t.Errorf("secrets %q %q", a, b)
	}
}

func TestWebhookRetry(t *testing.T) {
	for _, c := range []struct {
		attempts   int
		retryAfter time.Duration
		jitter     float64
		want       time.Duration
		ok         bool
	}{
		{0, 0, 0, 0, false},
		{1, 0, 0, 5 * time.Second, true},
		{2, 0, 0, 5 * time.Minute, true},
		{2, 0, 1, 5*time.Minute + 30*time.Second, true},
		{2, 0, -1, 5*time.Minute - 30*time.Second, true},
		{2, 0, 7, 5*time.Minute + 30*time.Second, true},
		{3, 0, 0, 30 * time.Minute, true},
		{9, 0, 0, 24 * time.Hour, true},
		{10, 0, 0, 0, false},
		{1, time.Minute, 0, time.Minute, true},         // Retry-After longer than the wait
		{3, time.Minute, 0, 30 * time.Minute, true},    // shorter: the schedule's
		{1, 1000 * time.Hour, 0, 24 * time.Hour, true}, // capped
		{10, time.Minute, 0, 0, false},                 // the schedule is spent whatever it says
	} {
		got, ok := WebhookRetry(c.attempts, c.retryAfter, c.jitter)
		if got != c.want || ok != c.ok {
			t.Errorf("WebhookRetry(%d, %s, %v) = %s %v; want %s %v", c.attempts, c.retryAfter, c.jitter, got, ok, c.want, c.ok)
		}
	}
	var total time.Duration
	for _, d := range WebhookSchedule {
		total += d
	}
	if total <= 72*time.Hour {
		t.Errorf("the schedule spans %s; a receiver down 26 hours must still get its events", total)
	}
}

func TestClassifyDelivery(t *testing.T) {
	for status, want := range map[int]DeliveryVerdict{
		200: Delivered, 204: Delivered, 299: Delivered,
		0: RetryLater, 500: RetryLater, 502: RetryLater, 503: RetryLater, 429: RetryLater, 408: RetryLater,
		410: Gone,
		301: Rejected, 302: Rejected, 307: Rejected, 400: Rejected, 401: Rejected, 403: Rejected, 404: Rejected, 413: Rejected, 422: Rejected, 100: Rejected,
	} {
		if got := ClassifyDelivery(status); got != want {
			t.Errorf("ClassifyDelivery(%d) = %s; want %s", status, got, want)
		}
	}
}

// TestStoredChangeEvents: a revision's change is an event only when it
// enters deployed, failed or stopped; an account's only when a new version
// is stored failed (not the space count's updates, which keep it).
func TestStoredChangeEvents(t *testing.T) {
	rev := func(s RevisionState) RevisionSummary {
		return RevisionSummary{ID: "r1", OrgID: "acme", SpaceID: "s1", State: s, Reason: "why"}
	}
	for _, c := range []struct {
		from, to RevisionState
		want     EventType
	}{
		{RevisionPending, RevisionDeployed, EventRevisionDeployed},
		{RevisionPending, RevisionFailed, EventRevisionFailed},
		{RevisionPending, RevisionStopped, EventRevisionStopped},
		{RevisionStopped, RevisionPending, ""},
		{RevisionPending, RevisionDeadLettered, ""},
		{RevisionDeployed, RevisionDeployed, ""},
		{"", RevisionFailed, EventRevisionFailed},
	} {
		got, data, ok := RevisionEvent(rev(c.from), rev(c.to))
		if got != c.want || ok != (c.want != "") || (ok && (data.RevisionID != "r1" || data.State != c.to || data.Reason != "why")) {
			t.Errorf("%s -> %s: %q %+v %v; want %q", c.from, c.to, got, data, ok, c.want)
		}
	}
	acct := func(s AccountStatus, v int64) CloudAccount {
		return CloudAccount{ID: "a1", OrgID: "acme", Status: s, Version: v}
	}
	for _, c := range []struct {
		before, after CloudAccount
		want          bool
	}{
		{acct(AccountPending, 1), acct(AccountFailed, 2), true},
		{acct(AccountFailed, 2), acct(AccountFailed, 3), true},  // verified again, failed again
		{acct(AccountFailed, 2), acct(AccountFailed, 2), false}, // the space count changed
		{acct(AccountPending, 1), acct(AccountReady, 2), false},
		{acct(AccountReady, 2), acct(AccountPending, 3), false},
	} {
		if got := AccountVerificationFailed(c.before, c.after); got != c.want {
			t.Errorf("%+v -> %+v: %v; want %v", c.before, c.after, got, c.want)
		}
	}
}
