package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"spaces/infra/emulator/emulatortest"
	"spaces/infra/lambdarules"
	"spaces/infra/testclock"
	"spaces/infra/testwait"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
	"spaces/shared/webhook"
	"spaces/shared/webhooks"
	"spaces/shared/wiring/parts"
)

type fixture struct {
	store    *dynamostore.Store
	sqs      *sqs.Client
	queueURL string
	d        *webhooks.Deliverer
	f        *webhooks.Fanout
	eps      *space.Webhooks
	org      string
	status   atomic.Int64
	hits     atomic.Int64
	url      string
}

// newFixture: the store, KMS and the delivery queue on the emulator, and
// a loopback HTTPS receiver answering f.status.
func newFixture(t *testing.T) *fixture {
	env := emulatortest.Start(t)
	a := parts.AWS{Config: env.Config, Endpoint: env.Endpoint}
	f := &fixture{org: uuid.NewString(), queueURL: env.Resources["WebhooksQueue"].URL, sqs: awsclient.SQS(env.Config, env.Endpoint)}
	f.store = a.Store(env.Name(t, "SpacesTable"), a.Sealer(env.Resources["WebhookSecretsKey"].Name)...)
	f.status.Store(204)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f.hits.Add(1)
		w.WriteHeader(int(f.status.Load()))
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	q := parts.DeliveryQueue{Q: a.Queue(f.queueURL)}
	f.eps = &space.Webhooks{Store: f.store, Rules: space.WebhookRules{AllowLoopback: true}, Now: time.Now,
		NewID: uuid.NewString, NewSecret: space.NewWebhookSecret}
	client := webhook.NewClient(webhook.Guard{AllowLoopback: true}, srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone())
	log := slog.New(slog.DiscardHandler)
	f.d = &webhooks.Deliverer{Store: f.store, Sender: client, Queue: q, Endpoints: f.eps, Now: time.Now, Jitter: func() float64 { return 0 }, Log: log}
	f.f = &webhooks.Fanout{Store: f.store, Queue: q, Log: log}
	return f
}

func (f *fixture) endpoint(t *testing.T, selector string, types ...space.EventType) space.WebhookEndpoint {
	u, sel := f.url, selector
	c, err := f.eps.Create(t.Context(), f.org, space.WebhookInput{URL: &u, EventTypes: types, LabelSelector: &sel})
	if err != nil {
		t.Fatal(err)
	}
	return c.WebhookEndpoint
}

// queued drains the delivery queue (delayed messages included: the
// emulator is asked until nothing more comes within the wait).
func (f *fixture) queued(t *testing.T, wait time.Duration) []webhooks.Delivery {
	var out []webhooks.Delivery
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		res, err := f.sqs.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			var d webhooks.Delivery
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
			_, _ = f.sqs.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(f.queueURL), ReceiptHandle: m.ReceiptHandle})
		}
	}
	return out
}

func delivery(org string, ep space.WebhookEndpoint) webhooks.Delivery {
	return webhooks.Delivery{OrgID: org, EndpointID: ep.ID, ID: "msg_" + uuid.NewString(), Type: space.EventSpaceRegistered,
		At: time.Now().UTC(), Data: json.RawMessage(`{"space_id":"x"}`)}
}

// TestAttemptOutcomes: a 503 queues the next attempt (attempts 1, due in
// the schedule's 5 s) and logs when; a 404 is logged and not retried; a
// 410 disables the endpoint (ReceiverGone) and is not retried; a paused or
// deleted endpoint gets nothing.
func TestAttemptOutcomes(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	ep := f.endpoint(t, "", space.EventSpaceRegistered)

	f.status.Store(503)
	del := delivery(f.org, ep)
	if err := f.d.Deliver(ctx, del); err != nil {
		t.Fatal(err)
	}
	next := f.queued(t, 8*time.Second)
	if len(next) != 1 || next[0].ID != del.ID || next[0].Attempts != 1 || next[0].Due == nil {
		t.Fatalf("after a 503: %+v", next)
	}
	if wait := time.Until(*next[0].Due); wait > 5*time.Second {
		t.Errorf("next attempt due in %s; the schedule says 5 s", wait)
	}
	log, _, err := f.store.Attempts(ctx, f.org, ep.ID, space.Page{Limit: 10})
	if err != nil || len(log) != 1 || log[0].Status != 503 || log[0].NextAt == nil || log[0].Verdict != space.RetryLater {
		t.Fatalf("log after a 503: %+v %v", log, err)
	}

	f.status.Store(404)
	if err := f.d.Deliver(ctx, delivery(f.org, ep)); err != nil {
		t.Fatal(err)
	}
	f.status.Store(410)
	if err := f.d.Deliver(ctx, delivery(f.org, ep)); err != nil {
		t.Fatal(err)
	}
	if q := f.queued(t, 2*time.Second); len(q) != 0 {
		t.Errorf("a 404 or a 410 was retried: %+v", q)
	}
	got, err := f.store.GetWebhook(ctx, f.org, ep.ID)
	if err != nil || got.State != space.WebhookDisabled || got.StateReason != space.ReasonReceiverGone {
		t.Fatalf("after a 410: %s %s %v", got.State, got.StateReason, err)
	}
	if len(got.Secrets) != 1 {
		t.Errorf("disabling lost the secrets: %d", len(got.Secrets))
	}
	hits := f.hits.Load()
	if err := f.d.Deliver(ctx, delivery(f.org, ep)); err != nil || f.hits.Load() != hits {
		t.Errorf("a disabled endpoint was called: %v", err)
	}
	if err := f.eps.Delete(ctx, f.org, ep.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Deliver(ctx, delivery(f.org, ep)); err != nil || f.hits.Load() != hits {
		t.Errorf("a deleted endpoint was called: %v", err)
	}
	log, _, _ = f.store.Attempts(ctx, f.org, ep.ID, space.Page{Limit: 10})
	if len(log) != 3 || log[0].Verdict != space.Gone || log[1].Verdict != space.Rejected || log[1].NextAt != nil {
		t.Errorf("log: %+v", log)
	}
}

// TestEarlyMessageWaits: a message whose attempt is not due (a wait longer
// than SQS's 15-minute delay) is sent on, and the receiver is not called.
func TestEarlyMessageWaits(t *testing.T) {
	f := newFixture(t)
	ep := f.endpoint(t, "", space.EventSpaceRegistered)
	del := delivery(f.org, ep)
	due := time.Now().Add(2 * time.Second)
	del.Attempts, del.Due = 4, &due
	if err := f.d.Deliver(t.Context(), del); err != nil {
		t.Fatal(err)
	}
	q := f.queued(t, 5*time.Second)
	if f.hits.Load() != 0 || len(q) != 1 || q[0].Attempts != 4 || q[0].ID != del.ID {
		t.Fatalf("early message: %d calls, queued %+v", f.hits.Load(), q)
	}
}

// TestFanOutChoosesEndpoints: an event goes to each enabled endpoint of
// its org that subscribes to its type and whose selector matches the
// space's labels, once each, under the event's webhook-id.
func TestFanOutChoosesEndpoints(t *testing.T) {
	f := newFixture(t)
	all := f.endpoint(t, "", space.EventSpaceRegistered)
	prod := f.endpoint(t, "env=prod", space.EventSpaceRegistered)
	f.endpoint(t, "env=dev", space.EventSpaceRegistered)
	f.endpoint(t, "", space.EventSpaceDeregistered)
	paused := f.endpoint(t, "", space.EventSpaceRegistered)
	if _, err := f.eps.SetState(t.Context(), f.org, paused.ID, 0, space.WebhookPaused); err != nil {
		t.Fatal(err)
	}
	n, err := f.f.Fan(t.Context(), space.WebhookEvent{ID: "msg_e1", OrgID: f.org, Type: space.EventSpaceRegistered, At: time.Now(),
		SpaceID: "s1", Labels: map[string]string{"env": "prod"}, HasLabels: true, Data: space.SpaceEventData{SpaceID: "s1"}})
	if err != nil || n != 2 {
		t.Fatalf("fanned to %d: %v", n, err)
	}
	got := map[string]bool{}
	for _, d := range f.queued(t, 2*time.Second) {
		if d.ID != "msg_e1" || d.Attempts != 0 || d.Due != nil {
			t.Errorf("delivery %+v", d)
		}
		got[d.EndpointID] = true
	}
	if len(got) != 2 || !got[all.ID] || !got[prod.ID] {
		t.Errorf("delivered to %v; want %s and %s", got, all.ID, prod.ID)
	}
}

// useClock puts the deliverer, the endpoints and the client on c.
func (f *fixture) useClock(c *testclock.Clock) {
	f.d.Now, f.eps.Now = c.Now, c.Now
	f.d.Sender.(*webhook.Client).SetClock(c.Now)
}

// TestFailingFiveDaysDisables, on a virtual clock: a 503 starts the
// endpoint's failing run, a 2xx ends it, and five days of failures
// disable it (FailedTooLong, with when, as GET answers it); a disabled
// endpoint is called no more, and resuming it starts afresh.
func TestFailingFiveDaysDisables(t *testing.T) {
	f := newFixture(t)
	clock := testclock.New(time.Now().UTC().Truncate(time.Second))
	f.useClock(clock)
	ctx := t.Context()
	ep := f.endpoint(t, "", space.EventSpaceRegistered)
	get := func() space.WebhookEndpoint {
		got, err := f.eps.Get(ctx, f.org, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	deliver := func(status int) {
		f.status.Store(int64(status))
		if err := f.d.Deliver(ctx, delivery(f.org, ep)); err != nil {
			t.Fatal(err)
		}
	}
	start := clock.Now()
	deliver(503)
	if got := get(); got.FailingSince == nil || !got.FailingSince.Equal(start) || got.State != space.WebhookEnabled {
		t.Fatalf("after a 503: %s since %v", got.State, got.FailingSince)
	}
	v := get().Version
	clock.Advance(3 * 24 * time.Hour)
	deliver(500)
	if got := get(); got.Version != v || !got.FailingSince.Equal(start) {
		t.Errorf("a failure within the run wrote the endpoint: version %d, since %v", got.Version, got.FailingSince)
	}
	deliver(204)
	if got := get(); got.FailingSince != nil || got.State != space.WebhookEnabled {
		t.Fatalf("after a 2xx: %s since %v", got.State, got.FailingSince)
	}
	clock.Advance(time.Hour)
	restart := clock.Now()
	deliver(503)
	clock.Advance(space.WebhookFailingLimit - time.Second)
	deliver(503)
	if got := get(); got.State != space.WebhookEnabled || !got.FailingSince.Equal(restart) {
		t.Fatalf("a second short of five days: %s since %v", got.State, got.FailingSince)
	}
	clock.Advance(time.Second)
	deliver(503)
	got := get()
	if got.State != space.WebhookDisabled || got.StateReason != space.ReasonFailedTooLong || got.DisabledAt == nil || !got.DisabledAt.Equal(clock.Now()) {
		t.Fatalf("after five days: %s %q at %v", got.State, got.StateReason, got.DisabledAt)
	}
	body, _ := json.Marshal(got)
	for _, want := range []string{`"state":"disabled"`, `"state_reason":"FailedTooLong"`, `"disabled_at":"`, `"failing_since":"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the endpoint's body lacks %s: %s", want, body)
		}
	}
	hits := f.hits.Load()
	deliver(204)
	if f.hits.Load() != hits {
		t.Error("a disabled endpoint was called")
	}
	resumed, err := f.eps.SetState(ctx, f.org, ep.ID, 0, space.WebhookEnabled)
	if err != nil || resumed.FailingSince != nil || resumed.DisabledAt != nil || resumed.StateReason != "" {
		t.Fatalf("resumed: %+v %v", resumed, err)
	}
}

// simQueue is the delivery queue on a virtual clock: each message becomes
// visible after its delay, as SQS's DelaySeconds would make it (at most 15
// minutes, which the deliverer's hops respect).
type simQueue struct {
	clock *testclock.Clock
	mu    sync.Mutex
	msgs  []simMsg
}

type simMsg struct {
	visible time.Time
	d       webhooks.Delivery
}

func (q *simQueue) SendDeliveries(_ context.Context, ds []webhooks.Delivery, delay time.Duration) error {
	if delay > 15*time.Minute {
		return fmt.Errorf("delay %s: SQS refuses more than 15 minutes", delay)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, d := range ds {
		q.msgs = append(q.msgs, simMsg{q.clock.Now().Add(delay), d})
	}
	return nil
}

// next takes the message that becomes visible first.
func (q *simQueue) next() (simMsg, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 {
		return simMsg{}, false
	}
	i := 0
	for j, m := range q.msgs {
		if m.visible.Before(q.msgs[i].visible) {
			i = j
		}
	}
	m := q.msgs[i]
	q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
	return m, true
}

// TestReceiverDown26Hours, on a virtual clock: events fanned out while
// the receiver answers 503 for 26 hours all reach it once it is back, by
// the schedule's retries (each wait longer than SQS's delay made of
// 15-minute hops), each with its original webhook-id and a signature the
// reference library verifies, with webhook-timestamp the attempt's
// (virtual) time; each is delivered once, and the endpoint stays enabled
// (26 hours is short of five days).
func TestReceiverDown26Hours(t *testing.T) {
	env := emulatortest.Start(t)
	a := parts.AWS{Config: env.Config, Endpoint: env.Endpoint}
	store := a.Store(env.Name(t, "SpacesTable"), a.Sealer(env.Resources["WebhookSecretsKey"].Name)...)
	t0 := time.Now().UTC().Truncate(time.Second)
	clock := testclock.New(t0)
	back := t0.Add(26 * time.Hour)
	type got struct {
		header http.Header
		body   []byte
		at     time.Time
	}
	var mu sync.Mutex
	var delivered []got
	var refused int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if clock.Now().Before(back) {
			refused++
			w.WriteHeader(503)
			return
		}
		delivered = append(delivered, got{r.Header.Clone(), b, clock.Now()})
		w.WriteHeader(204)
	}))
	t.Cleanup(srv.Close)
	q := &simQueue{clock: clock}
	org := uuid.NewString()
	eps := &space.Webhooks{Store: store, Rules: space.WebhookRules{AllowLoopback: true}, Now: clock.Now,
		NewID: uuid.NewString, NewSecret: space.NewWebhookSecret}
	client := webhook.NewClient(webhook.Guard{AllowLoopback: true}, srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone())
	client.SetClock(clock.Now)
	log := slog.New(slog.DiscardHandler)
	jitter := rand.New(rand.NewPCG(1, 2))
	d := &webhooks.Deliverer{Store: store, Sender: client, Queue: q, Endpoints: eps, Now: clock.Now,
		Jitter: func() float64 { return jitter.Float64()*2 - 1 }, Log: log}
	fan := &webhooks.Fanout{Store: store, Queue: q, Log: log}
	u := srv.URL
	created, err := eps.Create(t.Context(), org, space.WebhookInput{URL: &u, EventTypes: []space.EventType{space.EventSpaceStatusChanged}})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := standardwebhooks.NewWebhook(created.Secret)
	if err != nil {
		t.Fatal(err)
	}

	// One event at the outage's start, then one every 5 hours within it.
	sent := map[string]bool{}
	var fanAt []time.Time
	for h := 0; h < 26; h += 5 {
		fanAt = append(fanAt, t0.Add(time.Duration(h)*time.Hour))
	}
	step := func() bool {
		m, ok := q.next()
		if len(fanAt) > 0 && (!ok || !m.visible.Before(fanAt[0])) {
			if ok {
				q.mu.Lock()
				q.msgs = append(q.msgs, m)
				q.mu.Unlock()
			}
			clock.Set(fanAt[0])
			fanAt = fanAt[1:]
			id := "msg_" + uuid.NewString()
			sent[id] = true
			sid := uuid.NewString()
			if _, err := fan.Fan(t.Context(), space.WebhookEvent{ID: id, OrgID: org, Type: space.EventSpaceStatusChanged, At: clock.Now(), SpaceID: sid,
				Data: space.StatusChangedData{SpaceID: sid, From: space.Active, To: space.Inactive, Reason: "Unreachable", At: clock.Now()}}); err != nil {
				t.Fatal(err)
			}
			return true
		}
		if !ok {
			return false
		}
		if m.visible.After(clock.Now()) {
			clock.Set(m.visible)
		}
		if err := d.Deliver(t.Context(), m.d); err != nil {
			t.Fatal(err)
		}
		return true
	}
	for step() {
		if clock.Now().After(t0.Add(80 * time.Hour)) {
			t.Fatal("still delivering 80 virtual hours on")
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if refused == 0 || len(sent) != 6 {
		t.Fatalf("%d refused attempts, %d events sent", refused, len(sent))
	}
	ids := map[string]int{}
	for _, g := range delivered {
		id := g.header.Get("webhook-id")
		ids[id]++
		if err := verifier.VerifyIgnoringTimestamp(g.body, g.header); err != nil {
			t.Errorf("%s does not verify: %v", id, err)
		}
		// The reference library's own timestamp check reads the wall clock;
		// the attempt's virtual time is checked here instead.
		if ts, err := strconv.ParseInt(g.header.Get("webhook-timestamp"), 10, 64); err != nil || ts != g.at.Unix() {
			t.Errorf("%s: webhook-timestamp %q; the attempt was at %d", id, g.header.Get("webhook-timestamp"), g.at.Unix())
		}
		if g.at.Before(back) {
			t.Errorf("%s delivered at %s, before the receiver was back", id, g.at)
		}
	}
	for id := range sent {
		if ids[id] != 1 {
			t.Errorf("event %s delivered %d times; want once", id, ids[id])
		}
	}
	if len(ids) != len(sent) {
		t.Errorf("delivered ids %v; sent %v", ids, sent)
	}
	ep, err := eps.Get(t.Context(), org, created.ID)
	if err != nil || ep.State != space.WebhookEnabled || ep.FailingSince != nil {
		t.Errorf("endpoint after the outage: %s failing since %v (%v)", ep.State, ep.FailingSince, err)
	}
	last := delivered[len(delivered)-1].at
	t.Logf("%d events, %d refused attempts; the last delivered %s after the outage began", len(sent), refused, last.Sub(t0))
}

// TestStreamKeepsActivity: the stream's consumer puts each record's
// audit-trail entry before its fan-out, a batch delivered again writes the
// same entries, and a record whose entry cannot be written is reported (the
// stream delivers it and the rest again) with nothing after it handled.
func TestStreamKeepsActivity(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	record := func(n int) events.DynamoDBEventRecord {
		id := uuid.NewString()
		return events.DynamoDBEventRecord{EventID: "ev" + strconv.Itoa(n), EventName: "INSERT", EventSource: "aws:dynamodb",
			Change: events.DynamoDBStreamRecord{SequenceNumber: strconv.Itoa(100 + n),
				Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("ORG#" + f.org),
					"sk": events.NewStringAttribute("ACCOUNT#" + id)},
				NewImage: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("ORG#" + f.org),
					"sk": events.NewStringAttribute("ACCOUNT#" + id), "id": events.NewStringAttribute(id),
					"org_id": events.NewStringAttribute(f.org), "provider": events.NewStringAttribute("aws"),
					"name": events.NewStringAttribute("acct" + strconv.Itoa(n)), "status": events.NewStringAttribute("pending"),
					"created_at": events.NewStringAttribute(at.Add(time.Duration(n) * time.Second).Format(time.RFC3339Nano)),
					"version":    events.NewNumberAttribute("1"), "changed_by": events.NewStringAttribute("alice"),
					"request_id": events.NewStringAttribute("req-" + strconv.Itoa(n))}}}
	}
	batch := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{record(1), record(2)}}
	f.f.Activity = f.store
	for range 2 {
		resp, err := f.f.HandleStream(ctx, batch)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("HandleStream: %v %+v", err, resp)
		}
	}
	got, _, err := f.store.ListActivity(ctx, f.org, space.ActivityQuery{Page: space.Page{Limit: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].RequestID != "req-2" || got[1].RequestID != "req-1" || got[0].Kind != space.ActivityAccountConnected {
		t.Errorf("entries %+v", got)
	}

	// A table that is not there: the first record is reported.
	env := emulatortest.Start(t)
	broken := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), "no-such-table")
	fan := &webhooks.Fanout{Store: f.store, Queue: f.f.Queue, Activity: broken, Log: slog.New(slog.DiscardHandler)}
	resp, err := fan.HandleStream(ctx, batch)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "101" {
		t.Errorf("with the trail unwritable: %v %+v", err, resp)
	}
}

// TestSlowEndpointHoldsUpNoOther: forty deliveries, half to an endpoint
// whose receiver holds every request and half to one that answers at once,
// are queued together and consumed by the queue's event source mapping
// (lambdarules.Poller: batches of 10, pollers up to the template's 16).
// Every delivery to the answering endpoint arrives while the other's
// receiver still holds its requests, and neither receiver ever has more
// than InFlight requests open: the rest wait in the queue (Busy). Once the
// held receiver answers again, it gets each of its deliveries.
func TestSlowEndpointHoldsUpNoOther(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	const inFlight, each = 2, 20
	f.d.InFlight = inFlight

	type receiver struct {
		mu            sync.Mutex
		open, maxOpen int
		got           map[string]bool
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	serve := func(r *receiver, hold bool) string {
		r.got = map[string]bool{}
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.mu.Lock()
			r.open++
			r.maxOpen = max(r.maxOpen, r.open)
			r.mu.Unlock()
			if hold {
				select {
				case <-release:
				case <-req.Context().Done():
				}
			}
			r.mu.Lock()
			r.open--
			if req.Context().Err() == nil {
				r.got[req.Header.Get("webhook-id")] = true
			}
			r.mu.Unlock()
			w.WriteHeader(204)
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(let) // runs first: the server's Close waits for its handlers
		return srv.URL
	}
	var slow, fast receiver
	create := func(url string) space.WebhookEndpoint {
		c, err := f.eps.Create(ctx, f.org, space.WebhookInput{URL: &url, EventTypes: []space.EventType{space.EventSpaceRegistered}})
		if err != nil {
			t.Fatal(err)
		}
		return c.WebhookEndpoint
	}
	slowEP, fastEP := create(serve(&slow, true)), create(serve(&fast, false))
	count := func(r *receiver) (int, int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.got), r.maxOpen
	}

	var ds []webhooks.Delivery
	for range each {
		ds = append(ds, delivery(f.org, slowEP), delivery(f.org, fastEP))
	}
	for i := 0; i < len(ds); i += 10 {
		if err := f.d.Queue.SendDeliveries(ctx, ds[i:i+10], 0); err != nil {
			t.Fatal(err)
		}
	}
	pollCtx, stop := context.WithCancel(ctx)
	p := &lambdarules.Poller{SQS: f.sqs, QueueURL: f.queueURL, Handler: f.d.HandleSQS, Pollers: 4, Wait: time.Second,
		Source: lambdarules.SQSSource{BatchSize: 10, MaximumConcurrency: 16}, Log: slog.New(slog.DiscardHandler)}
	var polling sync.WaitGroup
	polling.Go(func() { p.Run(pollCtx) })
	testwait.Eventually(t, 2*time.Minute, "every delivery to the answering endpoint", func() bool {
		n, _ := count(&fast)
		return n == each
	})
	n, open := count(&slow)
	if n != 0 {
		t.Fatalf("the held receiver answered %d before it was let go", n)
	}
	if open == 0 {
		t.Fatal("the held receiver was never called")
	}
	let()
	testwait.Eventually(t, 2*time.Minute, "every delivery to the held endpoint", func() bool {
		n, _ := count(&slow)
		return n == each
	})
	stop()
	polling.Wait()
	for name, r := range map[string]*receiver{"held": &slow, "answering": &fast} {
		if _, open := count(r); open > inFlight {
			t.Errorf("the %s receiver had %d requests open at once, want at most %d", name, open, inFlight)
		}
	}
}
