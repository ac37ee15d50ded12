package space

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"time"
)

// WebhookStore persists webhook endpoints, their secrets encrypted.
type WebhookStore interface {
	// CreateWebhook stores a new endpoint (only if its id is free).
	CreateWebhook(ctx context.Context, e WebhookEndpoint) error
	// GetWebhook returns org's endpoint, secrets included.
	GetWebhook(ctx context.Context, org, id string) (WebhookEndpoint, error)
	// ListWebhooks returns org's endpoints ordered by id, after page.After.
	ListWebhooks(ctx context.Context, org string, page Page) ([]WebhookEndpoint, string, error)
	// UpdateWebhook changes an endpoint the one way versioned items change.
	UpdateWebhook(ctx context.Context, org, id string, u Update[WebhookEndpoint]) (Updated[WebhookEndpoint], error)
	// DeleteWebhook removes an endpoint, if its version is still version
	// (0: any).
	DeleteWebhook(ctx context.Context, org, id string, version int64) error
	// Attempts returns a page of org's endpoint's delivery log, newest
	// first.
	Attempts(ctx context.Context, org, endpointID string, page Page) ([]DeliveryAttempt, string, error)
}

// HostChecker resolves an endpoint's host and says why one of its
// addresses may not be reached (AddressRefusal), or "" when none is
// refused; an error is a host that does not resolve.
type HostChecker interface {
	Refusal(ctx context.Context, host string) (string, error)
}

// WebhookQueue queues one event for one endpoint, to be delivered like
// any other (the delivery queue: same attempts, retries and log).
type WebhookQueue interface {
	Enqueue(ctx context.Context, endpointID string, e WebhookEvent) error
}

// TestEventData is the data of webhook.test.
type TestEventData struct {
	EndpointID string `json:"endpoint_id"`
}

// Webhooks is the endpoints' use cases.
type Webhooks struct {
	Store WebhookStore
	Rules WebhookRules
	// Hosts, when set, resolves a new or changed URL's host at once, so
	// that an endpoint that would be refused at every delivery is refused
	// at creation instead.
	Hosts     HostChecker
	Now       func() time.Time
	NewID     func() string
	NewSecret func() string
	// Queue sends test events and replays; nil: they answer unavailable.
	Queue WebhookQueue
	// Events are the delivered events replays read; nil: replays answer
	// unavailable.
	Events EventStore
}

// Created is a new endpoint with its secret, shown this once.
type Created struct {
	WebhookEndpoint
	Secret string `json:"secret"`
}

// Create validates and stores a new endpoint, enabled, with a new secret.
func (w *Webhooks) Create(ctx context.Context, org string, in WebhookInput) (Created, error) {
	e, err := w.Rules.Apply(WebhookEndpoint{}, in, true)
	if err != nil {
		return Created{}, err
	}
	if err := w.checkHost(ctx, e.URL); err != nil {
		return Created{}, err
	}
	now := w.Now().UTC()
	secret := w.NewSecret()
	e.ID, e.OrgID, e.State, e.CreatedAt, e.UpdatedAt, e.Version = w.NewID(), org, WebhookEnabled, now, now, 1
	e.Secrets = []WebhookSecret{{Value: secret}}
	if err := w.Store.CreateWebhook(ctx, e); err != nil {
		return Created{}, err
	}
	return Created{WebhookEndpoint: e, Secret: secret}, nil
}

func (w *Webhooks) checkHost(ctx context.Context, raw string) error {
	if w.Hosts == nil {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err // Apply parsed it already
	}
	reason, err := w.Hosts.Refusal(ctx, u.Hostname())
	if err != nil {
		return &Error{Kind: KindInvalid, Message: "the webhook endpoint is not valid",
			Fields: []FieldError{{Field: "url", Reason: "the host does not resolve"}}, Err: err}
	}
	if reason != "" {
		return &Error{Kind: KindInvalid, Message: "the webhook endpoint is not valid",
			Fields: []FieldError{{Field: "url", Reason: "resolves to " + reason}}}
	}
	return nil
}

// Get returns org's endpoint.
func (w *Webhooks) Get(ctx context.Context, org, id string) (WebhookEndpoint, error) {
	if !ValidID(id) {
		return WebhookEndpoint{}, ErrNotFound("webhook endpoint")
	}
	return w.Store.GetWebhook(ctx, org, id)
}

// List returns a page of org's endpoints.
func (w *Webhooks) List(ctx context.Context, org string, page Page) ([]WebhookEndpoint, string, error) {
	return w.Store.ListWebhooks(ctx, org, page)
}

// Update changes an endpoint's URL, description, event types or selector.
func (w *Webhooks) Update(ctx context.Context, org, id string, version int64, in WebhookInput) (WebhookEndpoint, error) {
	if !ValidID(id) {
		return WebhookEndpoint{}, ErrNotFound("webhook endpoint")
	}
	// Validated before anything is read: a bad request changes nothing.
	if _, err := w.Rules.Apply(WebhookEndpoint{}, in, false); err != nil {
		return WebhookEndpoint{}, err
	}
	if in.URL != nil {
		if err := w.checkHost(ctx, *in.URL); err != nil {
			return WebhookEndpoint{}, err
		}
	}
	return w.change(ctx, org, id, version, func(e WebhookEndpoint) (WebhookEndpoint, error) {
		return w.Rules.Apply(e, in, false)
	})
}

// SetState pauses or resumes an endpoint (resuming a disabled one too).
// Pausing a paused endpoint answers it unchanged.
func (w *Webhooks) SetState(ctx context.Context, org, id string, version int64, state WebhookState) (WebhookEndpoint, error) {
	if !ValidID(id) {
		return WebhookEndpoint{}, ErrNotFound("webhook endpoint")
	}
	now := w.Now()
	return w.change(ctx, org, id, version, func(e WebhookEndpoint) (WebhookEndpoint, error) {
		return e.SetState(state, "", now)
	})
}

// Disable stops deliveries to an endpoint for reason (Spaces' own
// decision: 410 Gone, or failing for too long).
func (w *Webhooks) Disable(ctx context.Context, org, id, reason string) (WebhookEndpoint, error) {
	now := w.Now()
	return w.change(ctx, org, id, 0, func(e WebhookEndpoint) (WebhookEndpoint, error) {
		if e.State != WebhookEnabled {
			return e, ErrUnchanged
		}
		return e.SetState(WebhookDisabled, reason, now)
	})
}

// AfterAttempt records an attempt's verdict v, made at at, on the
// endpoint's failing run (WebhookEndpoint.AfterAttempt): five days of
// failures disable it.
func (w *Webhooks) AfterAttempt(ctx context.Context, org, id string, v DeliveryVerdict, at time.Time) (WebhookEndpoint, error) {
	return w.change(ctx, org, id, 0, func(e WebhookEndpoint) (WebhookEndpoint, error) {
		return e.AfterAttempt(v, at)
	})
}

// Rotate gives an endpoint a new secret, shown this once; the replaced one
// keeps signing for WebhookRotationOverlap.
func (w *Webhooks) Rotate(ctx context.Context, org, id string, version int64) (Created, error) {
	if !ValidID(id) {
		return Created{}, ErrNotFound("webhook endpoint")
	}
	secret := w.NewSecret()
	now := w.Now()
	e, err := w.change(ctx, org, id, version, func(e WebhookEndpoint) (WebhookEndpoint, error) {
		return e.Rotate(secret, now, WebhookRotationOverlap), nil
	})
	if err != nil {
		return Created{}, err
	}
	return Created{WebhookEndpoint: e, Secret: secret}, nil
}

// SendTest queues a webhook.test event for org's endpoint alone and
// returns its webhook-id. A paused or disabled endpoint would drop it, so
// it is refused instead.
func (w *Webhooks) SendTest(ctx context.Context, org, id string) (string, error) {
	e, err := w.Get(ctx, org, id)
	if err != nil {
		return "", err
	}
	if w.Queue == nil {
		return "", Errorf(KindUnavailable, "test events are not configured")
	}
	if e.State != WebhookEnabled {
		return "", Errorf(KindConflict, "the webhook endpoint is %s: resume it to send a test event", e.State)
	}
	ev := WebhookEvent{ID: "msg_" + w.NewID(), OrgID: org, Type: EventWebhookTest, At: w.Now().UTC(),
		Data: TestEventData{EndpointID: e.ID}}
	if err := w.Queue.Enqueue(ctx, e.ID, ev); err != nil {
		return "", err
	}
	return ev.ID, nil
}

// Deliveries returns a page of org's endpoint's delivery log, newest
// first. The endpoint is read first, so an unknown one, or another org's,
// is not found rather than an empty log.
func (w *Webhooks) Deliveries(ctx context.Context, org, id string, page Page) ([]DeliveryAttempt, string, error) {
	if _, err := w.Get(ctx, org, id); err != nil {
		return nil, "", err
	}
	return w.Store.Attempts(ctx, org, id, page)
}

// Delete removes an endpoint; its pending deliveries find it gone and
// are dropped.
func (w *Webhooks) Delete(ctx context.Context, org, id string, version int64) error {
	if !ValidID(id) {
		return ErrNotFound("webhook endpoint")
	}
	return w.Store.DeleteWebhook(ctx, org, id, version)
}

func (w *Webhooks) change(ctx context.Context, org, id string, version int64, apply func(WebhookEndpoint) (WebhookEndpoint, error)) (WebhookEndpoint, error) {
	res, err := w.Store.UpdateWebhook(ctx, org, id, Update[WebhookEndpoint]{IfVersion: version, At: w.Now(), Apply: apply})
	if err != nil {
		return WebhookEndpoint{}, err
	}
	return res.After, nil
}

// StoredEvent is an event as it was delivered to one endpoint, kept with
// its delivery log (EventRetention) so that it can be replayed under its
// original webhook-id.
type StoredEvent struct {
	OrgID      string          `json:"org_id"`
	EndpointID string          `json:"endpoint_id"`
	WebhookID  string          `json:"webhook_id"`
	Type       EventType       `json:"type"`
	At         time.Time       `json:"at"`
	Data       json.RawMessage `json:"data"`
}

// EventRetention is how long a delivered event is kept for replay: as long
// as its delivery log.
const EventRetention = DeliveryLogTTL

// MaxReplay bounds the events one replay since a time queues; the answer
// says where to continue.
const MaxReplay = 100

// EventStore keeps delivered events for replay.
type EventStore interface {
	// DeliveredEvent returns org's endpoint's event webhookID, while kept.
	DeliveredEvent(ctx context.Context, org, endpointID, webhookID string) (StoredEvent, error)
	// DeliveredSince returns at most limit of org's endpoint's events
	// first attempted at or after since, oldest first, and, when more
	// follow, the time to continue since.
	DeliveredSince(ctx context.Context, org, endpointID string, since time.Time, limit int) ([]StoredEvent, *time.Time, error)
}

// Replayed is what a replay queued: the events' webhook-ids, and, when
// more remain, the time to replay since next.
type Replayed struct {
	WebhookIDs []string   `json:"webhook_ids"`
	NextSince  *time.Time `json:"next_since,omitempty"`
}

// Replay queues one delivered event for its endpoint again, under its
// original webhook-id (receivers that have it drop it: replaying twice is
// harmless). The endpoint must be enabled, as for a test event.
func (w *Webhooks) Replay(ctx context.Context, org, id, webhookID string) (Replayed, error) {
	if _, err := w.replayable(ctx, org, id); err != nil {
		return Replayed{}, err
	}
	if !validWebhookID(webhookID) {
		return Replayed{}, ErrNotFound("delivery")
	}
	ev, err := w.Events.DeliveredEvent(ctx, org, id, webhookID)
	if err != nil {
		return Replayed{}, err
	}
	return w.enqueue(ctx, id, []StoredEvent{ev}, nil)
}

// ReplaySince queues again every event delivered (first attempted) to the
// endpoint at or after since, oldest first, up to MaxReplay; Replayed's
// NextSince continues. since must not be in the future.
func (w *Webhooks) ReplaySince(ctx context.Context, org, id string, since time.Time) (Replayed, error) {
	if since.IsZero() {
		return Replayed{}, &Error{Kind: KindInvalid, Message: "the replay is not valid", Fields: []FieldError{{Field: "since", Reason: "is required"}}}
	}
	if since.After(w.Now()) {
		return Replayed{}, &Error{Kind: KindInvalid, Message: "the replay is not valid", Fields: []FieldError{{Field: "since", Reason: "must not be in the future"}}}
	}
	if _, err := w.replayable(ctx, org, id); err != nil {
		return Replayed{}, err
	}
	evs, next, err := w.Events.DeliveredSince(ctx, org, id, since, MaxReplay)
	if err != nil {
		return Replayed{}, err
	}
	return w.enqueue(ctx, id, evs, next)
}

func (w *Webhooks) replayable(ctx context.Context, org, id string) (WebhookEndpoint, error) {
	e, err := w.Get(ctx, org, id)
	if err != nil {
		return e, err
	}
	if w.Queue == nil || w.Events == nil {
		return e, Errorf(KindUnavailable, "replays are not configured")
	}
	if e.State != WebhookEnabled {
		return e, Errorf(KindConflict, "the webhook endpoint is %s: resume it to replay", e.State)
	}
	return e, nil
}

func (w *Webhooks) enqueue(ctx context.Context, id string, evs []StoredEvent, next *time.Time) (Replayed, error) {
	out := Replayed{WebhookIDs: make([]string, 0, len(evs)), NextSince: next}
	for _, ev := range evs {
		if err := w.Queue.Enqueue(ctx, id, WebhookEvent{ID: ev.WebhookID, OrgID: ev.OrgID, Type: ev.Type, At: ev.At, Data: ev.Data}); err != nil {
			return Replayed{}, err
		}
		out.WebhookIDs = append(out.WebhookIDs, ev.WebhookID)
	}
	return out, nil
}

// validWebhookID: "msg_" and at most 200 bytes of letters, digits and
// "-", "_", ":", "." (a stream record's id or a uuid).
func validWebhookID(s string) bool {
	if !strings.HasPrefix(s, "msg_") || len(s) > 200 || len(s) == len("msg_") {
		return false
	}
	for _, c := range s[len("msg_"):] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':' || c == '.') {
			return false
		}
	}
	return true
}
