package probing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"

	"spaces/shared/kubecred"
	"spaces/shared/metrics"
	"spaces/shared/space"
	"spaces/shared/tracing"
)

// Defaults of the prober's timing.
const (
	DefaultReprobeDelay = 12 * time.Second
	DefaultMinGap       = 20 * time.Second
	DefaultTimeout      = 5 * time.Second
	// DefaultConcurrency is the template's BatchSize (1 message) times
	// MaxSpaces: every space of a batch is probed at once, so an invocation
	// lasts about one probe, and the prober's Timeout holds one round
	// (TestBatchFitsTheProberTimeout).
	DefaultConcurrency = 50
)

// Store is what the prober reads and writes.
type Store interface {
	// LiveSpace returns a live space as stored (KindNotFound once
	// deregistered), read strongly consistent: the liveness fact checked
	// before any cloud call for a space whose message carries only its ids
	// (see LiveMinter).
	LiveSpace(ctx context.Context, org, id string) (space.Space, error)
	// Fenced returns the ids of the spaces of probe shard shard
	// deregistered at or after since, read strongly consistent: the
	// liveness fact of a message whose spaces carry their state
	// (space.FenceRetention says why it suffices).
	Fenced(ctx context.Context, shard string, since time.Time) (map[string]bool, error)
	// Beat records that the tick of shard at tick was handled, if newer
	// than the one stored, and returns the one it replaced (zero: none or
	// not newer).
	Beat(ctx context.Context, shard string, tick time.Time) (time.Time, error)
	// UpdateSpace changes a live space, with the transition it makes in
	// its history, atomically (space.Store).
	UpdateSpace(ctx context.Context, org, id string, u space.Update[space.Space]) (space.Updated[space.Space], error)
	// UnpublishedTransition is the space's newest transition if its event
	// was not marked published.
	UnpublishedTransition(ctx context.Context, org, id string) (*space.Transition, error)
	MarkPublished(ctx context.Context, tr space.Transition) error
}

// LiveMinter is a Minter that can take the prober's own strongly
// consistent liveness read (of the space, or of its message's fence) as the
// proof that it is registered, instead of reading its kubeauth grant again
// (mint.Minter.MintLive): none of the minter's cloud calls for a space
// deregistered before that read, and no read of the space's items.
type LiveMinter interface {
	MintLive(ctx context.Context, s space.Space) (kubecred.Credentials, error)
}

// Checker probes one API server (kubeprobe.Prober).
type Checker interface {
	Probe(ctx context.Context, creds kubecred.Credentials) space.Outcome
}

// Publisher publishes status transitions (eventbus.Publisher).
type Publisher interface {
	PublishTransition(ctx context.Context, tr space.Transition) error
}

// Leases reads agent spaces' leases (dynamostore.Store).
type Leases interface {
	// GetLease reads strongly consistent (a read unit).
	GetLease(ctx context.Context, spaceID string) (space.Lease, error)
	// GetLeaseEventually reads eventually consistent (half a unit): the
	// minute check's read, confirmed by GetLease before any write
	// (Prober.lease).
	GetLeaseEventually(ctx context.Context, spaceID string) (space.Lease, error)
}

// Prober handles probe messages. Build it with NewProber, which sets the
// defaults named below.
type Prober struct {
	Store   Store
	Minter  kubecred.Minter
	Checker Checker
	Events  Publisher
	// Leases is read instead of probing for agent spaces, whose API
	// server Spaces may not reach: no mint, no GET /version; the lease is
	// the outcome (space.LeaseCadence.Outcome). Nil: agent spaces read as
	// AgentNotConnected.
	Leases Leases
	// LeaseCadence judges the leases (zero: space.LeaseInterval); the API
	// tells the agents the same one (wiring: parts.Common).
	LeaseCadence space.LeaseCadence
	// Queue receives re-probes; nil disables them.
	Queue Queue
	Now   func() time.Time
	// ReprobeDelay is how soon a failed probe is repeated
	// (default DefaultReprobeDelay).
	ReprobeDelay time.Duration
	// MinGap drops a tick whose space was probed this recently
	// (default DefaultMinGap).
	MinGap time.Duration
	// Timeout bounds minting and probing one space (default DefaultTimeout
	// each).
	Timeout time.Duration
	// Concurrency bounds the spaces of a batch handled at once
	// (default DefaultConcurrency).
	Concurrency int
	// StaleAfter is how old a space's last probe (its shard's beat) may be
	// before the space reads as ProbeStale (space.Observed); each beat
	// reports whether its shard's spaces did until it (the
	// StaleStatusAlarm's StaleTicks / Ticks).
	StaleAfter time.Duration
	Metrics    *metrics.Emitter
	Log        *slog.Logger
}

// Delivery is one received message.
type Delivery struct {
	MessageID    string
	Body         string
	ReceiveCount int
	// Attributes carry the sender's trace (tracing.SQSAttributes).
	Attributes map[string]events.SQSMessageAttribute
}

// Result is what handling one space of a message did.
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
	// MintLatency is the time spent minting credentials for the probe.
	MintLatency time.Duration
}

// Actions.
const (
	ActionProbed     = "probed"
	ActionGone       = "gone"       // absent or deregistered: acknowledged, nothing written
	ActionSynthetic  = "synthetic"  // never probed
	ActionSuperseded = "superseded" // a re-probe overtaken by a later write
	ActionRecent     = "recent"     // a tick right after another probe
	ActionExpired    = "expired"    // a tick older than the fence covers: dropped, the next tick sends its spaces again
)

// HandleBatch handles a batch of deliveries (an invocation of the SQS
// trigger) and returns the message ids SQS must deliver again. Every space
// of every message is handled at once (up to Concurrency). A failed probe
// is a result, not a failure; a space fails only on an infrastructure error
// (the store or the event bus unreachable), a message on being malformed
// (SQS then moves it to the dead-letter queue).
//
// A message whose spaces all succeeded is acknowledged. One whose spaces
// all failed, a message of one space and a message the prober already
// sent again (Retry) are named for SQS to deliver again, whole: a
// redelivery republishes, then the queue's redrive policy
// dead-letters what keeps failing. A message of several spaces of which
// only some failed is acknowledged, and those spaces are sent again as one
// message (Retry, after ReprobeDelay), so that their siblings, already
// probed and stored, are neither probed again nor dragged into the
// dead-letter queue by one failing space; if that send fails too, the
// message is named for SQS instead (its siblings are then probed again
// when it comes back, as for any tick delivered twice).
func (p *Prober) HandleBatch(ctx context.Context, ds []Delivery) []string {
	var (
		failed []string
		jobs   []job
		retry  = make([]bool, len(ds))
	)
	msgs := make([]*Message, len(ds))
	for i, d := range ds {
		m, err := DecodeMessage(d.Body)
		if err != nil {
			p.Log.ErrorContext(ctx, "probe message failed", "message_id", d.MessageID, "error", err)
			failed = append(failed, d.MessageID)
			continue
		}
		msgs[i] = &m
		retry[i] = m.Retry
		js := jobsOf(i, m)
		p.fence(ctx, m, js)
		jobs = append(jobs, js...)
	}
	p.run(ctx, ds, jobs)
	byDelivery := make([][]job, len(ds))
	for _, j := range jobs {
		byDelivery[j.delivery] = append(byDelivery[j.delivery], j)
	}
	for i, js := range byDelivery {
		var bad []space.ProbeTarget
		for _, j := range js {
			if j.err != nil {
				bad = append(bad, targetOf(j.m))
			}
		}
		switch {
		case len(bad) == 0:
			if msgs[i] != nil {
				p.beat(ctx, *msgs[i], js)
			}
		case len(bad) == len(js) || retry[i] || p.Queue == nil:
			failed = append(failed, ds[i].MessageID)
		default:
			again := TickOf(bad)
			if msgs[i] != nil && msgs[i].ReadAt != nil {
				// Under the same fence bound as the message they came in.
				again = CarriedTickOf(bad, *msgs[i].ReadAt)
			}
			again.Retry = true
			if err := p.Queue.Enqueue(ctx, []Delayed{{Message: again, Delay: p.ReprobeDelay}}); err != nil {
				p.Log.ErrorContext(ctx, "cannot send failed spaces again: the whole message is retried", "message_id", ds[i].MessageID, "error", err)
				failed = append(failed, ds[i].MessageID)
				continue
			}
			p.Log.WarnContext(ctx, "failed spaces sent again", "message_id", ds[i].MessageID, "spaces", len(bad), "of", len(js))
			if msgs[i] != nil {
				p.beat(ctx, *msgs[i], js)
			}
		}
	}
	return failed
}

// targetOf is the target a one-space message names, with its carried
// state if any.
func targetOf(m Message) space.ProbeTarget {
	if m.Target != nil {
		return *m.Target
	}
	return space.ProbeTarget{OrgID: m.OrgID, ID: m.ID}
}

// fence is the liveness check of a message whose spaces carry their
// state, before any of them is probed: one strongly consistent read of each
// shard's deregistrations since the message's spaces were last known
// listed (space.LiveAt of its index read). A space deregistered since is
// gone; a message older than the fence covers is dropped whole (the next
// tick sends its spaces again); a fence that cannot be read fails the
// spaces it covers, so that the message is retried.
//
// An agent space (leaseChecked) is not fenced: its check calls no cloud
// and no cluster, and its only effects follow a write that refuses a
// deregistered space (store: the write reads the space, and its condition
// is that the space is not deregistered), so the fence would guard
// nothing; an agent message mixes the 16 shards, whose fences would cost
// up to 16 Queries a message (TestAgentDeregisteredAtEveryInstant).
func (p *Prober) fence(ctx context.Context, m Message, jobs []job) {
	if m.ReadAt == nil {
		return
	}
	since := space.LiveAt(*m.ReadAt)
	if !space.FenceCovers(since, p.Now()) {
		p.Log.WarnContext(ctx, "probe message older than the deregistration fence covers: dropped", "read_at", m.ReadAt.Format(time.RFC3339), "spaces", len(jobs))
		for k := range jobs {
			jobs[k].done, jobs[k].res = true, Result{Action: ActionExpired}
		}
		return
	}
	fenced := map[string]map[string]bool{}
	errs := map[string]error{}
	for k := range jobs {
		t := jobs[k].m.Target
		if t == nil || leaseChecked(t.Space()) {
			continue
		}
		if _, read := fenced[t.Shard]; !read && errs[t.Shard] == nil {
			ids, err := p.Store.Fenced(ctx, t.Shard, since)
			if err != nil {
				errs[t.Shard] = fmt.Errorf("read the deregistration fence of shard %s: %w", t.Shard, err)
			} else {
				fenced[t.Shard] = ids
			}
		}
		switch {
		case errs[t.Shard] != nil:
			jobs[k].done, jobs[k].err = true, errs[t.Shard]
		case fenced[t.Shard][t.ID]:
			jobs[k].done, jobs[k].res = true, Result{Action: ActionGone}
		}
	}
}

// beat records, once a message that closes its shard's tick is handled,
// that the shard was probed for that tick (readers' last probe of its
// spaces, space.Space.WithBeat), and reports whether the shard had read
// ProbeStale until now (the StaleStatusAlarm's StaleTicks / Ticks, one a
// shard and tick). A message dropped as too old records nothing. A beat
// that cannot be written is logged: the next tick writes one again, and
// until then its spaces only age.
func (p *Prober) beat(ctx context.Context, m Message, jobs []job) {
	if m.Beat == "" {
		return
	}
	for _, j := range jobs {
		if j.res.Action == ActionExpired {
			return
		}
	}
	prev, err := p.Store.Beat(ctx, m.Beat, *m.Tick)
	if err != nil {
		p.Log.WarnContext(ctx, "cannot record the probe beat", "shard", m.Beat, "error", err)
		return
	}
	stale := 0.0
	if !prev.IsZero() && p.StaleAfter > 0 && p.Now().Sub(prev) > p.StaleAfter {
		stale = 1
	}
	p.Metrics.Emit(ctx, "beat", nil, []slog.Attr{slog.String("shard", m.Beat), slog.Time("tick", *m.Tick)},
		metrics.Metric{Name: "Ticks", Unit: metrics.Count, Value: 1},
		metrics.Metric{Name: "StaleTicks", Unit: metrics.Count, Value: stale})
}

// Handle handles one delivery: each space it names, at once. It returns
// their results in the message's order and the errors of those that
// failed, joined; what SQS retries is HandleBatch's decision.
func (p *Prober) Handle(ctx context.Context, d Delivery) ([]Result, error) {
	m, err := DecodeMessage(d.Body)
	if err != nil {
		return nil, err
	}
	jobs := jobsOf(0, m)
	p.fence(ctx, m, jobs)
	p.run(ctx, []Delivery{d}, jobs)
	out := make([]Result, len(jobs))
	errs := make([]error, len(jobs))
	for k, j := range jobs {
		out[k], errs[k] = j.res, j.err
	}
	err = errors.Join(errs...)
	if err == nil {
		p.beat(ctx, m, jobs)
	}
	return out, err
}

// job is one space of a delivery, and what handling it did.
type job struct {
	delivery int
	m        Message
	// done: decided before probing (by the fence).
	done bool
	res  Result
	err  error
}

func jobsOf(delivery int, m Message) []job {
	ms := m.Each()
	out := make([]job, len(ms))
	for k, one := range ms {
		out[k] = job{delivery: delivery, m: one}
	}
	return out
}

// run handles the jobs at once (up to Concurrency), each space on its own.
func (p *Prober) run(ctx context.Context, ds []Delivery, jobs []job) {
	var (
		wg  sync.WaitGroup
		sem = make(chan struct{}, max(1, p.Concurrency))
		t   tally
	)
	defer t.emit(ctx, p.Metrics)
	for k := range jobs {
		if jobs[k].done {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			j := &jobs[k]
			d := ds[j.delivery]
			ctx, end := tracing.Message(ctx, "probe", d.Attributes)
			// A message SQS delivers again, or one the prober sent again,
			// may follow a transition stored but not published.
			j.res, j.err = p.handle(ctx, &t, j.m, d.ReceiveCount > 1 || j.m.Retry)
			end(j.err)
			if j.err != nil {
				p.Log.ErrorContext(ctx, "a space of a probe message failed", "message_id", d.MessageID, "space_id", j.m.ID, "error", j.err)
			}
		})
	}
	wg.Wait()
}

// handle handles one space's message (m names one space).
func (p *Prober) handle(ctx context.Context, t *tally, m Message, redelivered bool) (Result, error) {
	if redelivered {
		if err := p.republish(ctx, m); err != nil {
			return Result{}, err
		}
	}
	var (
		s      space.Space
		digest *space.ProbeDigest
	)
	if m.Target != nil {
		// Carried by the index and cleared by the message's fence read
		// (an agent space's by its write's condition, see fence): nothing
		// of the space is read unless the result changes it.
		s, digest = m.Target.Space(), m.Target.Digest
	} else {
		var err error
		s, err = p.Store.LiveSpace(ctx, m.OrgID, m.ID)
		if space.KindOf(err) == space.KindNotFound {
			return Result{Action: ActionGone}, nil
		}
		if err != nil {
			return Result{}, fmt.Errorf("read space %s: %w", m.ID, err)
		}
	}
	if s.Synthetic {
		return Result{Action: ActionSynthetic, Space: s}, nil
	}
	now := p.Now()
	switch {
	case m.Kind == KindReprobe && s.Version != m.Version:
		return Result{Action: ActionSuperseded, Space: s}, nil
	case m.Kind == KindTick && s.Probe.LastProbeAt != nil && now.Sub(*s.Probe.LastProbeAt) < p.MinGap:
		// Probed moments ago (a re-probe or a registration probe stored
		// it).
		return Result{Action: ActionRecent, Space: s}, nil
	}

	var o space.Outcome
	var mintTime time.Duration
	if leaseChecked(s) {
		var err error
		if o, err = p.lease(ctx, s, digest); err != nil {
			return Result{}, err
		}
	} else {
		o, mintTime = p.probe(ctx, s)
	}
	res := Result{Action: ActionProbed, Outcome: o, MintLatency: mintTime}
	res, err := p.store(ctx, s, digest, o, res)
	p.record(ctx, t, s, m, res)
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
			p.Log.WarnContext(ctx, "cannot mark a transition published", "space_id", s.ID, "error", err)
		}
	}
	if res.Reprobe {
		next := Delayed{Message: Message{OrgID: s.OrgID, ID: s.ID, Kind: KindReprobe, Version: res.Space.Version}, Delay: p.ReprobeDelay}
		if err := p.Queue.Enqueue(ctx, []Delayed{next}); err != nil {
			// The result is stored; the next tick probes again anyway.
			// Failing the message would probe twice for one failure.
			p.Log.WarnContext(ctx, "cannot enqueue a re-probe", "space_id", s.ID, "error", err)
		}
	}
	return res, nil
}

// errSuperseded stops an update whose result a later probe has overtaken.
var errSuperseded = errors.New("a later probe is stored")

// store applies o to s and writes what must be written. s is the space
// as read, or as its digest says (digest set): then a result that changes
// nothing (the digest's NeedsWrite) reads and writes nothing, and one that
// changes something reads the space (strongly consistent) and applies the
// result to it, since a write stores what the digest does not hold. A
// lost race (the version moved under the probe) re-reads and re-applies; a
// space deregistered meanwhile is left alone, and a result older than the
// stored probe is dropped.
func (p *Prober) store(ctx context.Context, s space.Space, digest *space.ProbeDigest, o space.Outcome, res Result) (Result, error) {
	read := &s
	if digest != nil {
		if !digest.NeedsWrite(o) {
			res.Space = s
			return res, nil
		}
		read = nil
	}
	upd, err := p.Store.UpdateSpace(ctx, s.OrgID, s.ID, space.Update[space.Space]{At: o.At, Read: read,
		Apply: func(cur space.Space) (space.Space, error) {
			if cur.Version != s.Version && cur.Probe.LastProbeAt != nil && !cur.Probe.LastProbeAt.Before(o.At) {
				res.Space = cur
				return cur, errSuperseded
			}
			next, _ := space.ApplyProbe(cur, o)
			if !space.NeedsWrite(cur, next) {
				return cur, space.ErrUnchanged
			}
			return next, nil
		}})
	switch {
	case errors.Is(err, errSuperseded):
		res.Action = ActionSuperseded
		return res, nil
	case space.KindOf(err) == space.KindNotFound:
		res.Action, res.Space = ActionGone, s
		return res, nil
	case err != nil:
		res.Space = s
		return res, fmt.Errorf("save probe of %s: %w", s.ID, err)
	}
	res.Space = upd.After
	if !upd.Written {
		return res, nil
	}
	res.Written, res.Transition = true, space.TransitionOf(upd.Before, upd.After)
	res.Reprobe = p.Queue != nil && !o.OK() && upd.After.Probe.ConsecutiveFailures < space.FailureThreshold
	return res, nil
}

// leaseChecked reports whether s is checked by reading its lease (an
// agent space) rather than probed: the one test of both what the check
// does (handle) and whether its message's fence guards it (fence).
func leaseChecked(s space.Space) bool { return s.Connectivity == space.ViaAgent }

// lease is an agent space's probe: its lease as an outcome. A store that
// cannot be read fails the message (retried), as for the space's read.
//
// A carried tick (digest set) reads the lease eventually consistent, half
// a unit, and keeps its outcome only if it changes nothing
// (digest.NeedsWrite, store's own test): then nothing is written,
// published or re-probed, and a read a moment stale can at worst leave a
// change (a recovery, a lapse) to the next tick's read, as if the check
// had come that moment earlier in its minute. An outcome
// that would be written is decided again on a strongly consistent read,
// so a stale read can cause no write: it cannot make a space inactive
// (Outcome judges a renewal's age at now, so a read missing a renewal of
// the last moment would count one missed interval too many) nor hold back
// a transition it would store. Every other message reads strongly
// consistent, as it names a space read just now: a registration probe, a
// lapsed lease's check (sent right after the renewal it must see), a
// re-probe, an old tick of ids only.
func (p *Prober) lease(ctx context.Context, s space.Space, digest *space.ProbeDigest) (space.Outcome, error) {
	if p.Leases == nil {
		return p.LeaseCadence.Outcome(space.Lease{}, p.Now()), nil
	}
	if digest != nil {
		l, err := p.Leases.GetLeaseEventually(ctx, s.ID)
		if err != nil {
			return space.Outcome{}, fmt.Errorf("read lease of %s: %w", s.ID, err)
		}
		if o := p.LeaseCadence.Outcome(l, p.Now()); !digest.NeedsWrite(o) {
			return o, nil
		}
	}
	l, err := p.Leases.GetLease(ctx, s.ID)
	if err != nil {
		return space.Outcome{}, fmt.Errorf("read lease of %s: %w", s.ID, err)
	}
	return p.LeaseCadence.Outcome(l, p.Now()), nil
}

// probe mints credentials and sends GET /version, once more with fresh
// credentials when the cluster refuses them. A mint failure is a failed
// outcome with the minter's reason. It also returns the time spent
// minting.
func (p *Prober) probe(ctx context.Context, s space.Space) (space.Outcome, time.Duration) {
	at := p.Now().UTC()
	o, minting := p.probeOnce(ctx, s, at)
	if o.Reason == space.ReasonUnauthorized {
		// A 401 means "mint fresh credentials and try again now".
		p.Minter.Invalidate(s.ID)
		var again time.Duration
		o, again = p.probeOnce(ctx, s, at)
		minting += again
	}
	return o, minting
}

func (p *Prober) probeOnce(ctx context.Context, s space.Space, at time.Time) (space.Outcome, time.Duration) {
	mctx, cancel := context.WithTimeout(ctx, p.Timeout)
	mctx, end := tracing.Start(mctx, "mint", attribute.String("provider", string(s.Provider)))
	start := time.Now()
	var creds kubecred.Credentials
	var err error
	if lm, ok := p.Minter.(LiveMinter); ok {
		// s was read just now by Handle (Store.GetSpace).
		creds, err = lm.MintLive(mctx, s)
	} else {
		creds, err = p.Minter.Mint(mctx, s)
	}
	minting := time.Since(start)
	end(err)
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
		return space.Outcome{At: at, Reason: reason, Message: msg}, minting
	}
	pctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	o := p.Checker.Probe(pctx, creds)
	o.At = at
	return o, minting
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
		p.Log.WarnContext(ctx, "cannot mark a transition published", "space_id", m.ID, "error", err)
	}
	return nil
}

// record counts the probe in t, whose metrics the batch writes at its
// end, and writes the probe's own line: at info for a failure that
// changed what is stored or a transition, at debug otherwise (Lambda's ApplicationLogLevel keeps debug
// lines out of the log unless an operator asks for them).
//
// Why not one line a probe with its metrics, as a probe's line once was:
// CloudWatch Logs bills every byte a function writes, and that line
// (about 790 bytes, EMF directives included) cost $17.55 per 1,000
// spaces a month (BenchmarkProbingCost, "logs"), more than all else a
// probe costs.
func (p *Prober) record(ctx context.Context, t *tally, s space.Space, m Message, res Result) {
	o := res.Outcome
	reason := o.Reason
	outcome := "success"
	if !o.OK() {
		outcome = "failure"
	} else {
		reason = "OK"
	}
	t.add(reason, s.Provider, o, res)
	// A failure that stored nothing (an inactive space failing as it did a
	// minute ago: space.NeedsWrite) is news to nobody: the batch's
	// ProbeFailures count it, and the space's stored reason and message say
	// why.
	level := slog.LevelDebug
	if !o.OK() && res.Written || res.Transition != nil {
		level = slog.LevelInfo
	}
	if !p.Log.Enabled(ctx, level) {
		return
	}
	props := []slog.Attr{
		slog.String("space_id", s.ID), slog.String("org_id", s.OrgID),
		slog.String("kind", kindName(m.Kind)), slog.String("outcome", outcome),
		slog.String("reason", reason), slog.Int64("latency_ms", o.Latency.Milliseconds()),
		slog.Int64("mint_ms", res.MintLatency.Milliseconds()),
		slog.String("status", string(res.Space.Status)), slog.Bool("written", res.Written),
		slog.String("provider", string(s.Provider)),
	}
	if o.Message != "" {
		props = append(props, slog.String("message", o.Message))
	}
	if res.Transition != nil {
		props = append(props, slog.String("from", string(res.Transition.From)), slog.String("to", string(res.Transition.To)))
	}
	p.Log.LogAttrs(ctx, level, "probe", props...)
}

// tally is a batch's probe metrics, by reason.
type tally struct {
	mu     sync.Mutex
	groups map[string]*probeGroup
	order  []string
}

type probeGroup struct {
	probes, failures, transitions, writes float64
	latency                               []float64
	mint                                  map[space.Provider][]float64
}

// MintLatencyMetric names a cloud's mint latency metric: a metric a
// cloud, not one metric by a Provider dimension, because EMF takes one
// value of a dimension a line, and a line a cloud and batch is what the
// batch lines save (tally.emit).
func MintLatencyMetric(p space.Provider) string {
	switch p {
	case space.AWS:
		return "MintLatencyAWS"
	case space.GCP:
		return "MintLatencyGCP"
	case space.Azure:
		return "MintLatencyAzure"
	}
	return "MintLatencyOther"
}

func (t *tally) add(reason string, provider space.Provider, o space.Outcome, res Result) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[reason]
	if g == nil {
		if t.groups == nil {
			t.groups = map[string]*probeGroup{}
		}
		g = &probeGroup{mint: map[space.Provider][]float64{}}
		t.groups[reason] = g
		t.order = append(t.order, reason)
	}
	g.probes++
	g.failures += b(!o.OK())
	g.transitions += b(res.Transition != nil)
	g.writes += b(res.Written)
	g.latency = append(g.latency, float64(o.Latency.Milliseconds()))
	// A credential from the minter's cache takes microseconds: only mints
	// that took a millisecond or more, the clouds' own, are samples.
	if ms := res.MintLatency.Milliseconds(); ms > 0 {
		g.mint[provider] = append(g.mint[provider], float64(ms))
	}
}

// emit writes the batch's metrics: an EMF line a reason (one, "OK", in a
// healthy fleet), the counts summed (the dashboard reads their Sum) and
// the latencies as arrays of every probe's value, which CloudWatch takes
// as that many samples, so their percentiles are the probes' own (at most
// metrics.MaxValues a metric and line: more take more lines). Only
// ProbeFailures is published by Reason as well as in total: every
// dimension value is a custom metric billed by the month ($0.30), so the
// other four by Reason cost $1.20 a month for each reason a fleet shows,
// and "probes by reason" reads as failures by reason beside the total.
func (t *tally) emit(ctx context.Context, m *metrics.Emitter) {
	total := [][]string{{}}
	for _, reason := range t.order {
		g := t.groups[reason]
		for first := true; first || len(g.latency) > 0 || len(g.mint) > 0; first = false {
			var ms []metrics.Metric
			if first {
				ms = append(ms,
					metrics.Metric{Name: "Probes", Unit: metrics.Count, Value: g.probes, Dimensions: total},
					metrics.Metric{Name: "Transitions", Unit: metrics.Count, Value: g.transitions, Dimensions: total},
					metrics.Metric{Name: "StatusWrites", Unit: metrics.Count, Value: g.writes, Dimensions: total})
				if g.failures > 0 {
					ms = append(ms, metrics.Metric{Name: "ProbeFailures", Unit: metrics.Count, Value: g.failures})
				}
			}
			if n := min(len(g.latency), metrics.MaxValues); n > 0 {
				ms = append(ms, metrics.Metric{Name: "ProbeLatency", Unit: metrics.Milliseconds, Values: g.latency[:n], Dimensions: total})
				g.latency = g.latency[n:]
			}
			// By cloud: the dashboard's mint latency per cloud, over all
			// reasons, of the mints that called the cloud (tally.add).
			for _, p := range slices.Sorted(maps.Keys(g.mint)) {
				vs := g.mint[p]
				n := min(len(vs), metrics.MaxValues)
				ms = append(ms, metrics.Metric{Name: MintLatencyMetric(p), Unit: metrics.Milliseconds, Values: vs[:n], Dimensions: total})
				if g.mint[p] = vs[n:]; len(g.mint[p]) == 0 {
					delete(g.mint, p)
				}
			}
			m.Emit(ctx, "probes", []string{"Reason"}, []slog.Attr{slog.String("Reason", reason)}, ms...)
		}
	}
}

func kindName(k string) string {
	if k == KindTick {
		return "tick"
	}
	return k
}

// NewProber returns p with every zero setting at its default.
func NewProber(p Prober) *Prober {
	if p.Now == nil {
		p.Now = time.Now
	}
	p.Log = cmp.Or(p.Log, slog.Default())
	p.ReprobeDelay = cmp.Or(p.ReprobeDelay, DefaultReprobeDelay)
	p.MinGap = cmp.Or(p.MinGap, DefaultMinGap)
	p.Timeout = cmp.Or(p.Timeout, DefaultTimeout)
	p.Concurrency = cmp.Or(p.Concurrency, DefaultConcurrency)
	if p.Metrics == nil {
		p.Metrics = &metrics.Emitter{Log: p.Log, Now: p.Now}
	}
	return &p
}

// CheckStaleAfter refuses a StaleAfter that would let a healthy space read
// as stale: its shard's beat is the tick before's while that tick's last
// message waits (up to an interval), so up to two intervals old.
func CheckStaleAfter(interval, staleAfter time.Duration) error {
	if staleAfter <= 2*interval {
		return fmt.Errorf("configuration: STALE_AFTER=%s must exceed twice the probe interval %s, or healthy spaces would read as stale", staleAfter, interval)
	}
	return nil
}
