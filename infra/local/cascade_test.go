package local

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"spaces/infra/emulator"
	"spaces/infra/testwait"
	"spaces/shared/awsclient"
	"spaces/shared/cascade"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// countingPublisher counts the "Space Deregistered" events published
// through it (to the emulator's bus).
type countingPublisher struct {
	next cascade.Publisher
	mu   sync.Mutex
	got  []space.Deregistered
}

func (c *countingPublisher) PublishDeregistered(ctx context.Context, d space.Deregistered) error {
	if err := c.next.PublishDeregistered(ctx, d); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, d)
	return nil
}

func (c *countingPublisher) events() []space.Deregistered {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]space.Deregistered(nil), c.got...)
}

// startCascadeStack starts a stack whose stream poller drives the cascade
// every pollInterval, publishing through a counter.
func startCascadeStack(t testing.TB, pollInterval time.Duration) (*Stack, *countingPublisher) {
	t.Helper()
	pub := &countingPublisher{}
	prefix := fmt.Sprintf("c%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log:     slog.New(slog.DiscardHandler),
		Probing: ProbingConfig{Disabled: true},
		Cascade: CascadeConfig{Interval: pollInterval, WrapEvents: func(p cascade.Publisher) cascade.Publisher {
			pub.next = p
			return pub
		}},
		Names: func(id string) string { return prefix + id },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st, pub
}

// eventually waits for cond with the stack-level bound (testwait: a
// liveness bound, not a timing goal; see BENCHMARKS.md).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, testwait.Timeout, what, cond)
}

// TestDeregistrationCascades: a space with three environments, two
// autoscaler policies and its grant is deregistered over HTTP; the stream
// drives the cascade, which gates, detaches, revokes and publishes once.
// Replaying the stream twice changes nothing; re-registering gives a new id
// and the environments stay gated until re-bound.
func TestDeregistrationCascades(t *testing.T) {
	st, pub := startCascadeStack(t, 100*time.Millisecond)
	c := newClient(t, st, "acme")
	store := dynamostore.New(awsclient.DynamoDB(st.AWS, st.EmulatorURL), st.Table)
	ctx := t.Context()

	acct := c.account("aws")
	sp := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "doomed")))
	spaceID := sp["id"].(string)
	other := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "survivor")))["id"].(string)

	var envs, policies []string
	for i := range 3 {
		e := c.must(201, c.do("POST", "/environments", map[string]any{"name": fmt.Sprintf("env-%d", i), "space_id": spaceID}))
		if e["space_id"] != spaceID || e["gate"] != nil || e["version"] != float64(1) {
			t.Fatalf("created %v", e)
		}
		envs = append(envs, e["id"].(string))
	}
	// An environment on another space is left alone by the cascade.
	bystander := c.must(201, c.do("POST", "/environments", map[string]any{"name": "bystander", "space_id": other}))["id"].(string)
	for i := range 2 {
		p := c.must(201, c.do("POST", "/autoscaler-policies", map[string]any{
			"space_id": spaceID, "target": map[string]any{"namespace": "web", "kind": "Deployment", "name": fmt.Sprintf("api-%d", i)},
			"min_replicas": 1, "max_replicas": 5,
		}))
		if p["state"] != "applied" {
			t.Fatalf("created %v", p)
		}
		policies = append(policies, p["id"].(string))
	}
	if ok, err := store.HasGrant(ctx, "acme", spaceID); err != nil || !ok {
		t.Fatalf("grant before: %v %v", ok, err)
	}

	c.must(204, c.do("DELETE", "/spaces/"+spaceID, nil))

	// Without the kumo overlay (infra/emulator/kumo) the deregistration's
	// transaction writes no stream record and this never happens.
	eventually(t, "one Space Deregistered event (run through `make test`: the kumo overlay must be in place)",
		func() bool { return len(pub.events()) == 1 })
	// The event is published after the writes, so all of them are visible.
	if ev := pub.events()[0]; ev.SpaceID != spaceID || ev.OrgID != "acme" || ev.Name != "doomed" || ev.Provider != "aws" || ev.DeletedAt.IsZero() {
		t.Errorf("event %+v", ev)
	}
	versions := map[string]float64{}
	for _, id := range envs {
		e := c.must(200, c.do("GET", "/environments/"+id, nil))
		gate, _ := e["gate"].(map[string]any)
		if gate == nil || gate["reason"] != "Space deregistered" || gate["since"] == nil {
			t.Errorf("environment %s not gated: %v", id, e)
		}
		if e["version"] != float64(2) {
			t.Errorf("environment %s version %v, want 2", id, e["version"])
		}
		versions[id] = e["version"].(float64)
	}
	if e := c.must(200, c.do("GET", "/environments/"+bystander, nil)); e["gate"] != nil {
		t.Errorf("bystander gated: %v", e)
	}
	for _, id := range policies {
		p := c.must(200, c.do("GET", "/autoscaler-policies/"+id, nil))
		if p["state"] != "detached" || p["state_reason"] != "Space deregistered" {
			t.Errorf("policy %s not detached: %v", id, p)
		}
	}
	if ok, err := store.HasGrant(ctx, "acme", spaceID); err != nil || ok {
		t.Fatalf("grant after: %v %v", ok, err)
	}
	items := itemCount(t, st)

	// Replay the whole stream twice through the same handler, as Lambda may
	// after a lost checkpoint: nothing changes, nothing is published.
	var delivered atomic.Int64
	for range 2 {
		replay := &StreamPoller{
			Streams: emulator.Streams(st.AWS, st.EmulatorURL), StreamARN: st.Resources["SpacesTable"].StreamARN,
			Source: st.CascadeSource,
			Handler: func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				delivered.Add(int64(len(ev.Records)))
				return st.Cascade.HandleStream(ctx, ev)
			},
			Log: slog.New(slog.DiscardHandler),
		}
		replay.Source.StartingPosition = "TRIM_HORIZON"
		if err := replay.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := replay.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if delivered.Load() != 2 {
		t.Errorf("the replays delivered %d records, want the one deregistration twice", delivered.Load())
	}
	if n := len(pub.events()); n != 1 {
		t.Errorf("%d events after the replays, want 1", n)
	}
	for _, id := range envs {
		if e := c.must(200, c.do("GET", "/environments/"+id, nil)); e["version"] != versions[id] {
			t.Errorf("replay changed environment %s: %v", id, e)
		}
	}
	if got := itemCount(t, st); got != items {
		t.Errorf("replay changed the table: %d items, was %d", got, items)
	}

	// Binding to the deregistered space is refused.
	r := c.do("POST", "/environments", map[string]any{"name": "late", "space_id": spaceID})
	if r.status != 422 || fieldOf(t, r) != "space_id" {
		t.Errorf("bind to a deregistered space: %d %s", r.status, r.body)
	}

	// Re-registering the cluster gives a new id; the environments stay gated.
	again := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "doomed")))["id"].(string)
	if again == spaceID {
		t.Fatal("re-registration reused the id")
	}
	for _, id := range envs {
		if e := c.must(200, c.do("GET", "/environments/"+id, nil)); e["gate"] == nil || e["space_id"] != spaceID {
			t.Errorf("environment %s changed by the re-registration: %v", id, e)
		}
	}
	// Re-binding clears the gate; a stale If-Match is refused.
	r = c.do("PUT", "/environments/"+envs[0]+"/space", map[string]any{"space_id": again}, `If-Match: "1"`)
	if r.status != 412 {
		t.Errorf("stale If-Match: %d %s", r.status, r.body)
	}
	r = c.do("PUT", "/environments/"+envs[0]+"/space", map[string]any{"space_id": again}, `If-Match: "2"`)
	e := c.must(200, r)
	if e["gate"] != nil || e["space_id"] != again || e["version"] != float64(3) || r.header.Get("ETag") != `"3"` {
		t.Errorf("re-bound %v %v", e, r.header)
	}
	e = c.must(200, c.do("PUT", "/environments/"+envs[1]+"/space", map[string]any{"space_id": other}))
	if e["gate"] != nil || e["space_id"] != other {
		t.Errorf("re-bound without If-Match %v", e)
	}
	if e := c.must(200, c.do("GET", "/environments/"+envs[2], nil)); e["gate"] == nil {
		t.Errorf("an environment not re-bound lost its gate: %v", e)
	}
	// Deregistering the new space cascades to the re-bound environment only.
	c.must(204, c.do("DELETE", "/spaces/"+again, nil))
	eventually(t, "a second event, for the new space", func() bool { return len(pub.events()) == 2 })
	if e := c.must(200, c.do("GET", "/environments/"+envs[0], nil)); e["gate"] == nil {
		t.Errorf("re-bound environment not gated by its new space's deregistration: %v", e)
	}
	if e := c.must(200, c.do("GET", "/environments/"+envs[1], nil)); e["gate"] != nil {
		t.Errorf("environment on the surviving space gated: %v", e)
	}
}

// fieldOf returns the first field a problem names.
func fieldOf(t testing.TB, r resp) string {
	t.Helper()
	m := r.json(t)
	fields, _ := m["errors"].([]any)
	if len(fields) == 0 {
		return ""
	}
	f, _ := fields[0].(map[string]any)
	s, _ := f["field"].(string)
	return s
}
