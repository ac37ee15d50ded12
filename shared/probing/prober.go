package probing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"spaces/shared/kubecred"
	"spaces/shared/metrics"
	"spaces/shared/space"
)

// Defaults of the prober's timing.
const (
	DefaultReprobeDelay = 12 * time.Second
	DefaultMinGap       = 20 * time.Second
	DefaultTimeout      = 5 * time.Second
	DefaultConcurrency  = 10
)

// Store is what the prober reads and writes.
type Store interface {
	// GetSpace returns a live space (KindNotFound once deregistered).
	GetSpace(ctx context.Context, org, id string) (space.Space, error)
	// SaveProbe stores s if the stored version is s.Version-1 and the
	// space is live, with tr (when not nil) in its history, atomically.
	SaveProbe(ctx context.Context, s space.Space, tr *space.Transition) error
	// UnpublishedTransition is the space's newest transition if its event
	// was not marked published.
	UnpublishedTransition(ctx context.Context, org, id string) (*space.Transition, error)
	MarkPublished(ctx context.Context, tr space.Transition) error
}

// Checker probes one API server (kubeprobe.Prober).
type Checker interface {
	Probe(ctx context.Context, creds kubecred.Credentials) space.Outcome
}

// Publisher publishes status transitions (eventbus.Publisher).
type Publisher interface {
	PublishTransition(ctx context.Context, tr space.Transition) error
}

// Prober handles probe messages.
type Prober struct {
	Store   Store
	Minter  kubecred.Minter
	Checker Checker
	Events  Publisher
	// Queue receives re-probes; nil disables them.
	Queue Queue
	Now   func() time.Time
	// Heartbeat is how often an unchanged success is stored
	// (default space.DefaultHeartbeat).
	Heartbeat time.Duration
	// ReprobeDelay is how soon a failed probe is repeated
	// (default DefaultReprobeDelay).
	ReprobeDelay time.Duration
	// MinGap drops a tick whose space was probed this recently
	// (default DefaultMinGap).
	MinGap time.Duration
	// Timeout bounds minting and probing one space (default DefaultTimeout
	// each).
	Timeout time.Duration
	// Concurrency bounds the messages of a batch handled at once
	// (default DefaultConcurrency).
	Concurrency int
	Metrics     *metrics.Emitter
	Log         *slog.Logger
}

// Delivery is one received message.
type Delivery struct {
	MessageID    string
	Body         string
	ReceiveCount int
}

// Result is what handling one message did.
type Result struct {
	// Action is one of: probed, gone, synthetic, superseded, recent.
	Action  string
	Outcome space.Outcome
	// Written reports a write of the space; Transition is set when the
	// status changed.
	Written    bool
	Transition *space.Transition
	Reprobe    bool
	Space      space.Space
}

// Actions.
const (
	ActionProbed     = "probed"
	ActionGone       = "gone"       // absent or deregistered: acknowledged, nothing written
	ActionSynthetic  = "synthetic"  // never probed
	ActionSuperseded = "superseded" // a re-probe overtaken by a later write
	ActionRecent     = "recent"     // a tick right after another probe
)

// HandleBatch handles deliveries concurrently and returns the message ids
// that must be retried: only infrastructure errors (the store or the event
// bus unreachable) and malformed messages, which SQS then moves to the
// dead-letter queue. A failed probe is a result, not a failure.
func (p *Prober) HandleBatch(ctx context.Context, ds []Delivery) []string {
	conc := p.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	var (
		mu     sync.Mutex
		failed []string
		wg     sync.WaitGroup
		sem    = make(chan struct{}, conc)
	)
	for _, d := range ds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := p.Handle(ctx, d); err != nil {
				p.log().ErrorContext(ctx, "probe message failed", "message_id", d.MessageID, "error", err)
				mu.Lock()
				failed = append(failed, d.MessageID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// Handle handles one message.
func (p *Prober) Handle(ctx context.Context, d Delivery) (Result, error) {
	m, err := DecodeMessage(d.Body)
	if err != nil {
		return Result{}, err
	}
	if d.ReceiveCount > 1 {
		if err := p.republish(ctx, m); err != nil {
			return Result{}, err
		}
	}
	s, err := p.Store.GetSpace(ctx, m.OrgID, m.ID)
	if space.KindOf(err) == space.KindNotFound {
		return Result{Action: ActionGone}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("read space %s: %w", m.ID, err)
	}
	if s.Synthetic {
		return Result{Action: ActionSynthetic, Space: s}, nil
	}
	now := p.now()
	switch {
	case m.Kind == KindReprobe && s.Version != m.Version:
		return Result{Action: ActionSuperseded, Space: s}, nil
	case m.Kind == KindTick && s.Probe.LastProbeAt != nil && now.Sub(*s.Probe.LastProbeAt) < p.minGap():
		return Result{Action: ActionRecent, Space: s}, nil
	}

	o := p.probe(ctx, s)
	res := Result{Action: ActionProbed, Outcome: o}
	res, err = p.store(ctx, s, o, res)
	p.record(ctx, s, m, res)
	if err != nil {
		return res, err
	}
	if res.Transition != nil && p.Events != nil {
		if err := p.Events.PublishTransition(ctx, *res.Transition); err != nil {
			return res, fmt.Errorf("publish transition of %s: %w", s.ID, err)
		}
		if err := p.Store.MarkPublished(ctx, *res.Transition); err != nil {
			// Published but not marked: a redelivery would publish it
			// again, which at-least-once allows.
			p.log().WarnContext(ctx, "cannot mark a transition published", "space_id", s.ID, "error", err)
		}
	}
	if res.Reprobe {
		next := Delayed{Message: Message{OrgID: s.OrgID, ID: s.ID, Kind: KindReprobe, Version: res.Space.Version}, Delay: p.reprobeDelay()}
		if err := p.Queue.Enqueue(ctx, []Delayed{next}); err != nil {
			// The result is stored; the next tick probes again anyway.
			// Failing the message would probe twice for one failure.
			p.log().WarnContext(ctx, "cannot enqueue a re-probe", "space_id", s.ID, "error", err)
		}
	}
	return res, nil
}

// store applies o to s and writes what must be written. A conflict (the
// version moved under the probe) re-reads and re-applies once; a space
// deregistered meanwhile is left alone.
func (p *Prober) store(ctx context.Context, s space.Space, o space.Outcome, res Result) (Result, error) {
	for attempt := 1; ; attempt++ {
		next, _ := space.ApplyProbe(s, o)
		res.Space = s
		if !space.NeedsWrite(s, next, p.heartbeat()) {
			return res, nil
		}
		next.Version = s.Version + 1
		next.UpdatedAt = o.At
		tr := space.TransitionOf(s, next)
		err := p.Store.SaveProbe(ctx, next, tr)
		switch space.KindOf(err) {
		case space.KindNotFound:
			res.Action = ActionGone
			return res, nil
		case space.KindPreconditionFailed:
			if attempt == 2 {
				return res, fmt.Errorf("save probe of %s: %w", s.ID, err)
			}
			s, err = p.Store.GetSpace(ctx, s.OrgID, s.ID)
			if space.KindOf(err) == space.KindNotFound {
				res.Action = ActionGone
				return res, nil
			}
			if err != nil {
				return res, fmt.Errorf("re-read space %s: %w", s.ID, err)
			}
			if s.Probe.LastProbeAt != nil && !s.Probe.LastProbeAt.Before(o.At) {
				// A later probe is stored already: this result is older news.
				res.Action, res.Space = ActionSuperseded, s
				return res, nil
			}
			continue
		}
		if err != nil {
			return res, fmt.Errorf("save probe of %s: %w", s.ID, err)
		}
		res.Written, res.Transition, res.Space = true, tr, next
		res.Reprobe = p.Queue != nil && !o.OK() && next.Probe.ConsecutiveFailures < space.FailureThreshold
		return res, nil
	}
}

// probe mints credentials and sends GET /version, once more with fresh
// credentials when the cluster refuses them. A mint failure is a failed
// outcome with the minter's reason.
func (p *Prober) probe(ctx context.Context, s space.Space) space.Outcome {
	at := p.now().UTC()
	o := p.probeOnce(ctx, s, at)
	if o.Reason == space.ReasonUnauthorized {
		// A 401 means "mint fresh credentials and try again now".
		p.Minter.Invalidate(s.ID)
		o = p.probeOnce(ctx, s, at)
	}
	return o
}

func (p *Prober) probeOnce(ctx context.Context, s space.Space, at time.Time) space.Outcome {
	mctx, cancel := context.WithTimeout(ctx, p.timeout())
	creds, err := p.Minter.Mint(mctx, s)
	cancel()
	if err != nil {
		reason, msg := space.ReasonCredentialsUnavailable, err.Error()
		var de *space.Error
		if errors.As(err, &de) {
			msg = de.Message
			if de.Reason != "" {
				reason = de.Reason
			}
		}
		return space.Outcome{At: at, Reason: reason, Message: msg}
	}
	pctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	o := p.Checker.Probe(pctx, creds)
	o.At = at
	return o
}

// republish publishes the space's newest transition if a previous attempt
// did not.
func (p *Prober) republish(ctx context.Context, m Message) error {
	if p.Events == nil {
		return nil
	}
	tr, err := p.Store.UnpublishedTransition(ctx, m.OrgID, m.ID)
	if err != nil {
		return fmt.Errorf("read history of %s: %w", m.ID, err)
	}
	if tr == nil {
		return nil
	}
	if err := p.Events.PublishTransition(ctx, *tr); err != nil {
		return fmt.Errorf("republish transition of %s: %w", m.ID, err)
	}
	if err := p.Store.MarkPublished(ctx, *tr); err != nil {
		p.log().WarnContext(ctx, "cannot mark a transition published", "space_id", m.ID, "error", err)
	}
	return nil
}

// record writes the probe's log line, which carries its metrics (EMF).
func (p *Prober) record(ctx context.Context, s space.Space, m Message, res Result) {
	o := res.Outcome
	reason := o.Reason
	outcome := "success"
	if !o.OK() {
		outcome = "failure"
	} else {
		reason = "OK"
	}
	props := []slog.Attr{
		slog.String("space_id", s.ID), slog.String("org_id", s.OrgID),
		slog.String("kind", kindName(m.Kind)), slog.String("outcome", outcome),
		slog.String("Reason", reason), slog.Int64("latency_ms", o.Latency.Milliseconds()),
		slog.String("status", string(res.Space.Status)), slog.Bool("written", res.Written),
	}
	if o.Message != "" {
		props = append(props, slog.String("message", o.Message))
	}
	if res.Transition != nil {
		props = append(props, slog.String("from", string(res.Transition.From)), slog.String("to", string(res.Transition.To)))
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	em := p.Metrics
	if em == nil {
		em = &metrics.Emitter{Log: p.log(), Now: p.Now}
	}
	em.Emit(ctx, "probe", []string{"Reason"}, props,
		metrics.Metric{Name: "Probes", Unit: metrics.Count, Value: 1},
		metrics.Metric{Name: "ProbeFailures", Unit: metrics.Count, Value: b(!o.OK())},
		metrics.Metric{Name: "ProbeLatency", Unit: metrics.Milliseconds, Value: float64(o.Latency.Milliseconds())},
		metrics.Metric{Name: "Transitions", Unit: metrics.Count, Value: b(res.Transition != nil)},
		metrics.Metric{Name: "StatusWrites", Unit: metrics.Count, Value: b(res.Written)},
	)
}

func kindName(k string) string {
	if k == KindTick {
		return "tick"
	}
	return k
}

func (p *Prober) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Prober) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

func (p *Prober) heartbeat() time.Duration {
	if p.Heartbeat > 0 {
		return p.Heartbeat
	}
	return space.DefaultHeartbeat
}

func (p *Prober) reprobeDelay() time.Duration {
	if p.ReprobeDelay > 0 {
		return p.ReprobeDelay
	}
	return DefaultReprobeDelay
}

func (p *Prober) minGap() time.Duration {
	if p.MinGap > 0 {
		return p.MinGap
	}
	return DefaultMinGap
}

func (p *Prober) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

// CheckHeartbeat refuses a heartbeat that would let a healthy space read as
// stale: the stored probe of a healthy space is up to heartbeat + interval
// old, which must stay below staleAfter.
func CheckHeartbeat(heartbeat, interval, staleAfter time.Duration) error {
	if heartbeat+interval >= staleAfter {
		return fmt.Errorf("configuration: HEARTBEAT=%s plus the probe interval %s must stay below STALE_AFTER=%s, or healthy spaces would read as stale", heartbeat, interval, staleAfter)
	}
	return nil
}
