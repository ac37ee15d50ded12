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
//     at once beside the others, so a slow endpoint (up to the 10 s
//     timeout) holds up no other delivery.
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
	Log    *slog.Logger
}

// maxQueueDelay is SQS's longest DelaySeconds.
const maxQueueDelay = 15 * time.Minute

// HandleSQS handles a batch's messages side by side; a message whose
// handling failed (the store or the queue, not the receiver) is reported
// for SQS to deliver again.
func (d *Deliverer) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range ev.Records {
		wg.Go(func() {
			var del Delivery
			err := json.Unmarshal([]byte(r.Body), &del)
			if err != nil {
				d.Log.ErrorContext(ctx, "unreadable webhook delivery dropped", "message_id", r.MessageId, "error", err.Error())
				return
			}
			if err = d.Deliver(ctx, del); err != nil {
				d.Log.ErrorContext(ctx, "webhook delivery failed; SQS delivers it again", "webhook_id", del.ID, "endpoint_id", del.EndpointID, "error", err.Error())
				mu.Lock()
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return resp, nil
}

// Deliver makes del's next attempt, if it is due.
func (d *Deliverer) Deliver(ctx context.Context, del Delivery) error {
	now := d.Now()
	// SQS delays in whole seconds: a message less than one early is due.
	if del.Due != nil && del.Due.Sub(now) >= time.Second {
		return d.Queue.SendDeliveries(ctx, []Delivery{del}, min(del.Due.Sub(now), maxQueueDelay))
	}
	ep, err := d.Store.GetWebhook(ctx, del.OrgID, del.EndpointID)
	if space.KindOf(err) == space.KindNotFound {
		d.Log.InfoContext(ctx, "webhook endpoint gone; delivery dropped", "webhook_id", del.ID, "endpoint_id", del.EndpointID)
		return nil
	}
	if err != nil {
		return err
	}
	if ep.State != space.WebhookEnabled {
		d.Log.InfoContext(ctx, "webhook endpoint not enabled; delivery dropped", "webhook_id", del.ID, "endpoint_id", del.EndpointID, "state", string(ep.State))
		return nil
	}
	body, err := webhook.Body(del.Type, del.At, del.Data)
	if err != nil {
		return fmt.Errorf("encode the body: %w", err)
	}
	if del.Attempts == 0 {
		// Kept before the first attempt, so that whatever the log shows
		// can be replayed; failing here sends nothing yet (SQS retries).
		if err := d.Store.SaveEvent(ctx, space.StoredEvent{OrgID: del.OrgID, EndpointID: del.EndpointID, WebhookID: del.ID,
			Type: del.Type, At: del.At, Data: del.Data}, now); err != nil {
			return err
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
			next.Attempts, next.Due = rec.Attempt, &due
			if err := d.Queue.SendDeliveries(ctx, []Delivery{next}, min(wait, maxQueueDelay)); err != nil {
				return err
			}
			rec.NextAt = &due
		}
	case space.Gone:
		if _, err := d.Endpoints.Disable(ctx, del.OrgID, del.EndpointID, space.ReasonReceiverGone); err != nil {
			return err
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
	return nil
}
