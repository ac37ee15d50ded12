// Package webhooks delivers the org's events to its webhook endpoints, at
// least once, from the stored change: the table's stream, never the code
// path that made the change, so a function that dies after its write loses
// no event.
//
//   - Fanout (the stream's consumer) turns each record the store reads as
//     an event (space.WebhookEvent) into one delivery per endpoint that
//     wants it, sent to the delivery queue; a failed send fails the record,
//     which the stream delivers again (same webhook-id: receivers drop the
//     duplicate).
//   - The same stream consumer keeps the org's audit trail (Fanout.Activity:
//     GET /activity): each record the store reads as an entry is put in it
//     before the record's fan-out, under an id the record fixes, so a record
//     delivered again writes the same entry and one that failed is retried.
//   - Deliverer (the queue's consumer) makes one attempt per message,
//     signed with the endpoint's current secrets, logs it, and on a
//     retryable failure sends the next attempt to the queue with the
//     schedule's wait (space.WebhookRetry); SQS delays at most 15 minutes,
//     so a longer wait is several hops (Due). 410 disables the endpoint;
//     other refusals end the delivery; five days of failures disable it
//     too (space.WebhookEndpoint.AfterAttempt). Before the first attempt
//     the event is kept for replay (Store.SaveEvent). Each message of a batch is handled
//     at once beside the others; and at most Deliverer.InFlight attempts
//     of one endpoint are under way at once (Store.HoldAttempt), a message
//     that finds them all taken waiting in the queue. So a slow endpoint
//     (up to the 10 s timeout) holds at most that many of the queue's
//     pollers, and every other endpoint's deliveries go on beside it
//     (TestSlowEndpointHoldsUpNoOther).
package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"spaces/shared/space"
	"spaces/shared/webhook"
)

// Delivery is one event for one endpoint: the delivery queue's message.
type Delivery struct {
	OrgID      string          `json:"org_id"`
	EndpointID string          `json:"endpoint_id"`
	ID         string          `json:"id"`
	Type       space.EventType `json:"type"`
	At         time.Time       `json:"at"`
	Data       json.RawMessage `json:"data"`
	// Attempts made so far.
	Attempts int `json:"attempts,omitempty"`
	// Due is when the next attempt may be made: a message that arrives
	// earlier (a wait longer than SQS's delay) is sent on again.
	Due *time.Time `json:"due,omitempty"`
	// Busy counts the times it found its endpoint's attempts all under
	// way and waited; it lengthens the next wait.
	Busy int `json:"busy,omitempty"`
}

// Queue sends deliveries, each after its delay (at most 15 minutes).
type Queue interface {
	SendDeliveries(ctx context.Context, ds []Delivery, delay time.Duration) error
}

// EventStore is what the fan-out reads.
type EventStore interface {
	WebhookEvent(r events.DynamoDBEventRecord) (space.WebhookEvent, bool)
	ListWebhooks(ctx context.Context, org string, page space.Page) ([]space.WebhookEndpoint, string, error)
	GetSpace(ctx context.Context, org, id string) (space.Space, error)
}

// ActivityStore keeps the org's audit trail.
type ActivityStore interface {
	ActivityOf(r events.DynamoDBEventRecord) (space.Activity, bool)
	RecordActivity(ctx context.Context, a space.Activity) error
}

// Fanout is the stream's consumer.
type Fanout struct {
	Store EventStore
	Queue Queue
	// Activity, when set, keeps the audit trail from the same records.
	Activity ActivityStore
	Log      *slog.Logger
}

// HandleStream fans each event out; at the first failure it reports that
// record, from which the stream delivers again (records of a shard stay in
// order).
func (f *Fanout) HandleStream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		if f.Activity != nil {
			if a, ok := f.Activity.ActivityOf(r); ok {
				if err := f.Activity.RecordActivity(ctx, a); err != nil {
					f.Log.ErrorContext(ctx, "activity not kept; the record will be retried", "event_id", r.EventID, "org_id", a.OrgID, "error", err.Error())
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
					return resp, nil
				}
			}
		}
		e, ok := f.Store.WebhookEvent(r)
		if !ok {
			continue
		}
		n, err := f.Fan(ctx, e)
		if err != nil {
			f.Log.ErrorContext(ctx, "webhook fan-out failed; the record will be retried", "event_id", r.EventID, "org_id", e.OrgID, "error", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
			return resp, nil
		}
		f.Log.InfoContext(ctx, "webhook event", "type", string(e.Type), "webhook_id", e.ID, "org_id", e.OrgID, "endpoints", n)
	}
	return resp, nil
}

// Fan sends e to every endpoint of its org that wants it; it returns how
// many.
func (f *Fanout) Fan(ctx context.Context, e space.WebhookEvent) (int, error) {
	var wanting []space.WebhookEndpoint
	page := space.Page{Limit: 100}
	for {
		eps, after, err := f.Store.ListWebhooks(ctx, e.OrgID, page)
		if err != nil {
			return 0, err
		}
		for _, ep := range eps {
			if ep.State != space.WebhookEnabled {
				continue
			}
			if ep.LabelSelector != "" && e.SpaceID != "" && !e.HasLabels {
				// The labels are read once, and only when a selector asks.
				sp, err := f.Store.GetSpace(ctx, e.OrgID, e.SpaceID)
				if err == nil {
					e.Labels = sp.Labels
				} else if space.KindOf(err) != space.KindNotFound {
					return 0, err
				}
				e.HasLabels = true
			}
			if ep.Wants(e.Type, e.SpaceID != "", e.Labels) {
				wanting = append(wanting, ep)
			}
		}
		if after == "" {
			break
		}
		page.After = after
	}
	if len(wanting) == 0 {
		return 0, nil
	}
	data, err := json.Marshal(e.Data)
	if err != nil {
		return 0, err
	}
	ds := make([]Delivery, len(wanting))
	for i, ep := range wanting {
		ds[i] = Delivery{OrgID: e.OrgID, EndpointID: ep.ID, ID: e.ID, Type: e.Type, At: e.At.UTC(), Data: data}
	}
	return len(ds), f.Queue.SendDeliveries(ctx, ds, 0)
}

// Enqueuer sends one event to one endpoint's delivery (space.WebhookQueue).
type Enqueuer struct{ Queue Queue }

// Enqueue queues e for endpointID alone.
func (q Enqueuer) Enqueue(ctx context.Context, endpointID string, e space.WebhookEvent) error {
	data, err := json.Marshal(e.Data)
	if err != nil {
		return err
	}
	return q.Queue.SendDeliveries(ctx, []Delivery{{OrgID: e.OrgID, EndpointID: endpointID, ID: e.ID, Type: e.Type, At: e.At.UTC(), Data: data}}, 0)
}

// Store is what the deliverer reads and writes.
type Store interface {
	GetWebhook(ctx context.Context, org, id string) (space.WebhookEndpoint, error)
	RecordAttempt(ctx context.Context, a space.DeliveryAttempt) error
	// SaveEvent keeps the event as delivered, for replay.
	SaveEvent(ctx context.Context, e space.StoredEvent, at time.Time) error
	// HoldAttempt takes one of an endpoint's max places for an attempt
	// until until; false when all are taken. ReleaseAttempt gives it back.
	HoldAttempt(ctx context.Context, endpointID, holder string, max int, now, until time.Time) (bool, error)
	ReleaseAttempt(ctx context.Context, endpointID, holder string) error
}

// Sender makes one attempt (webhook.Client).
type Sender interface {
	Send(ctx context.Context, url, id string, body []byte, secrets []string) webhook.Attempt
}

// Disabler disables an endpoint and keeps its failing run (space.Webhooks).
type Disabler interface {
	Disable(ctx context.Context, org, id, reason string) (space.WebhookEndpoint, error)
	AfterAttempt(ctx context.Context, org, id string, v space.DeliveryVerdict, at time.Time) (space.WebhookEndpoint, error)
}

// Deliverer is the delivery queue's consumer.
type Deliverer struct {
	Store     Store
	Sender    Sender
	Queue     Queue
	Endpoints Disabler
	Now       func() time.Time
	// Jitter returns a value in [-1, 1] (default: uniform random).
	Jitter func() float64
	// InFlight bounds one endpoint's attempts under way at once (default
	// DefaultInFlight).
	InFlight int
	// NewHolder names one attempt's hold (default: a random UUID).
	NewHolder func() string
	Log       *slog.Logger
}

const (
	// maxQueueDelay is SQS's longest DelaySeconds.
	maxQueueDelay = 15 * time.Minute
	// DefaultInFlight: four attempts of one endpoint at once. A receiver
	// answering in 50 ms takes 80 events a second that way; a slow one
	// holds at most 4 of the queue's 16 pollers.
	DefaultInFlight = 4
	// holdFor outlasts any attempt: the function's 30 s timeout ends it
	// first (template.yaml), so a hold never lapses under a live attempt.
	holdFor = 30 * time.Second
	// busyWait is the first wait of a message whose endpoint is busy;
	// each further one doubles it, up to busyWaitMax.
	busyWait    = 2 * time.Second
	busyWaitMax = 2 * time.Minute
)

// BusyWait is how long a delivery that found its endpoint busy for the
// busy-th time waits before it asks again.
func BusyWait(busy int) time.Duration {
	return min(busyWait<<min(max(busy-1, 0), 10), busyWaitMax)
}

// HandleSQS groups a batch's messages by endpoint and handles the groups
// side by side, each under one place among its endpoint's attempts in
// flight; a message whose handling failed (the store or the queue, not the
// receiver) is reported for SQS to deliver again.
func (d *Deliverer) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	groups := map[string][]Delivery{}
	ids := map[string][]string{}
	var order []string
	for _, r := range ev.Records {
		var del Delivery
		if err := json.Unmarshal([]byte(r.Body), &del); err != nil {
			d.Log.ErrorContext(ctx, "unreadable webhook delivery dropped", "message_id", r.MessageId, "error", err.Error())
			continue
		}
		k := del.OrgID + "/" + del.EndpointID
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], del)
		ids[k] = append(ids[k], r.MessageId)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range order {
		wg.Go(func() {
			for i, err := range d.deliverGroup(ctx, groups[k]) {
				if err == nil {
					continue
				}
				del := groups[k][i]
				d.Log.ErrorContext(ctx, "webhook delivery failed; SQS delivers it again", "webhook_id", del.ID, "endpoint_id", del.EndpointID, "error", err.Error())
				mu.Lock()
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ids[k][i]})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return resp, nil
}

// Deliver makes del's next attempt, if it is due.
func (d *Deliverer) Deliver(ctx context.Context, del Delivery) error {
	return d.deliverGroup(ctx, []Delivery{del})[0]
}

// groupBudget: a group starts no attempt after this long, so that its last
// (10 s at most) ends within the function's 30 s timeout; the rest wait.
const groupBudget = 15 * time.Second

// deliverGroup makes the next attempt of each of one endpoint's deliveries
// that is due, one after another under one place; it returns each one's
// error.
func (d *Deliverer) deliverGroup(ctx context.Context, ds []Delivery) []error {
	errs := make([]error, len(ds))
	start, now := time.Now(), d.Now()
	var due []int
	for i, del := range ds {
		// SQS delays in whole seconds: a message less than one early is due.
		if del.Due != nil && del.Due.Sub(now) >= time.Second {
			errs[i] = d.Queue.SendDeliveries(ctx, []Delivery{del}, min(del.Due.Sub(now), maxQueueDelay))
			continue
		}
		due = append(due, i)
	}
	if len(due) == 0 {
		return errs
	}
	first := ds[due[0]]
	all := func(err error) []error {
		for _, i := range due {
			errs[i] = err
		}
		return errs
	}
	ep, err := d.Store.GetWebhook(ctx, first.OrgID, first.EndpointID)
	if space.KindOf(err) == space.KindNotFound {
		d.Log.InfoContext(ctx, "webhook endpoint gone; deliveries dropped", "endpoint_id", first.EndpointID, "deliveries", len(due))
		return errs
	}
	if err != nil {
		return all(err)
	}
	if ep.State != space.WebhookEnabled {
		d.Log.InfoContext(ctx, "webhook endpoint not enabled; deliveries dropped", "endpoint_id", first.EndpointID, "deliveries", len(due), "state", string(ep.State))
		return errs
	}
	holder, held, err := d.hold(ctx, first.EndpointID, now)
	if err != nil {
		return all(err)
	}
	if !held {
		for _, i := range due {
			errs[i] = d.wait(ctx, ds[i])
		}
		return errs
	}
	defer func() {
		// A place not given back lapses after holdFor; nothing is lost.
		if err := d.Store.ReleaseAttempt(context.WithoutCancel(ctx), first.EndpointID, holder); err != nil {
			d.Log.WarnContext(ctx, "webhook attempts' place not given back", "endpoint_id", first.EndpointID, "error", err.Error())
		}
	}()
	for k, i := range due {
		if k > 0 && time.Since(start) > groupBudget {
			for _, j := range due[k:] {
				errs[j] = d.wait(ctx, ds[j])
			}
			break
		}
		var gone bool
		gone, errs[i] = d.attempt(ctx, ep, ds[i])
		if gone {
			// Disabled by a 410: the rest are dropped, as they would be
			// on their own.
			break
		}
	}
	return errs
}

// hold takes a place among the endpoint's attempts in flight; false when
// all are taken.
func (d *Deliverer) hold(ctx context.Context, endpointID string, now time.Time) (string, bool, error) {
	newHolder, inFlight := d.NewHolder, d.InFlight
	if newHolder == nil {
		newHolder = uuid.NewString
	}
	if inFlight <= 0 {
		inFlight = DefaultInFlight
	}
	holder := newHolder()
	held, err := d.Store.HoldAttempt(ctx, endpointID, holder, inFlight, now, now.Add(holdFor))
	return holder, held, err
}

// wait sends del back to the queue to wait for a place (Busy).
func (d *Deliverer) wait(ctx context.Context, del Delivery) error {
	next := del
	next.Busy++
	wait := BusyWait(next.Busy)
	d.Log.InfoContext(ctx, "webhook endpoint busy; delivery waits", "webhook_id", del.ID, "endpoint_id", del.EndpointID, "wait", wait.String())
	return d.Queue.SendDeliveries(ctx, []Delivery{next}, wait)
}

// attempt makes del's next attempt to ep; it reports whether a 410
// disabled the endpoint.
func (d *Deliverer) attempt(ctx context.Context, ep space.WebhookEndpoint, del Delivery) (bool, error) {
	now := d.Now()
	body, err := webhook.Body(del.Type, del.At, del.Data)
	if err != nil {
		return false, fmt.Errorf("encode the body: %w", err)
	}
	if del.Attempts == 0 {
		// Kept before the first attempt, so that whatever the log shows
		// can be replayed; failing here sends nothing yet (SQS retries).
		if err := d.Store.SaveEvent(ctx, space.StoredEvent{OrgID: del.OrgID, EndpointID: del.EndpointID, WebhookID: del.ID,
			Type: del.Type, At: del.At, Data: del.Data}, now); err != nil {
			return false, err
		}
	}
	a := d.Sender.Send(ctx, ep.URL, del.ID, body, ep.SigningSecrets(now))
	rec := space.DeliveryAttempt{OrgID: del.OrgID, EndpointID: del.EndpointID, WebhookID: del.ID, Type: del.Type,
		Attempt: del.Attempts + 1, At: a.At, Status: a.Status, LatencyMS: a.LatencyMS, Verdict: a.Verdict, Error: a.Error}
	switch a.Verdict {
	case space.RetryLater:
		jitter := d.Jitter
		if jitter == nil {
			jitter = func() float64 { return rand.Float64()*2 - 1 }
		}
		if wait, ok := space.WebhookRetry(rec.Attempt, a.RetryAfter, jitter()); ok {
			due := a.At.Add(wait)
			next := del
			next.Attempts, next.Due, next.Busy = rec.Attempt, &due, 0
			if err := d.Queue.SendDeliveries(ctx, []Delivery{next}, min(wait, maxQueueDelay)); err != nil {
				return false, err
			}
			rec.NextAt = &due
		}
	case space.Gone:
		if _, err := d.Endpoints.Disable(ctx, del.OrgID, del.EndpointID, space.ReasonReceiverGone); err != nil {
			return false, err
		}
	}
	// The endpoint is written only when its failing run starts, ends or
	// has lasted five days (judged on the endpoint just read; the write
	// judges again on a fresh read). Not repeated on failure: the next
	// attempt judges again, and the receiver must not get this one twice.
	if _, err := ep.AfterAttempt(a.Verdict, now); err == nil {
		if _, err := d.Endpoints.AfterAttempt(ctx, del.OrgID, del.EndpointID, a.Verdict, now); err != nil {
			d.Log.WarnContext(ctx, "webhook endpoint's failing run not kept", "webhook_id", del.ID, "endpoint_id", del.EndpointID, "error", err.Error())
		}
	}
	// The log is what the org reads; losing one line must not repeat a
	// delivery the receiver has.
	if err := d.Store.RecordAttempt(ctx, rec); err != nil {
		d.Log.WarnContext(ctx, "webhook attempt not logged", "webhook_id", del.ID, "endpoint_id", del.EndpointID, "error", err.Error())
	}
	d.Log.InfoContext(ctx, "webhook attempt", "webhook_id", del.ID, "endpoint_id", del.EndpointID, "attempt", rec.Attempt,
		"status", a.Status, "verdict", string(a.Verdict), "latency_ms", a.LatencyMS)
	return a.Verdict == space.Gone, nil
}
