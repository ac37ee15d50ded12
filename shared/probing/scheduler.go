package probing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"spaces/shared/metrics"
	"spaces/shared/space"
)

// TargetLister lists the spaces to probe, shard by shard (the store's
// sparse probe index).
type TargetLister interface {
	ProbeShards() int
	ProbeTargets(ctx context.Context, shard int, startAfter string, limit int) ([]space.ProbeTarget, string, error)
	// AgentProbeTargets lists the shard's agent spaces, which the index
	// keeps apart: a check of theirs reads a lease and calls no cluster,
	// so they are packed MaxSpaces a message with no spreading.
	AgentProbeTargets(ctx context.Context, shard int, startAfter string, limit int) ([]space.ProbeTarget, string, error)
}

// Queue sends probe messages. Implementations send every message or return
// an error naming those they could not send.
type Queue interface {
	Enqueue(ctx context.Context, msgs []Delayed) error
}

// Scheduler fans the probe index out into probe messages, each naming
// up to MaxSpaces spaces of one page (pageMessages). Build it
// with NewScheduler, which sets the defaults named below.
type Scheduler struct {
	Targets TargetLister
	Queue   Queue
	// Interval is the probe interval, over which messages are spread
	// (default space.DefaultProbeInterval).
	Interval time.Duration
	// PageSize is how many targets one index read returns (default 1000).
	PageSize int
	Metrics  *metrics.Emitter
	Log      *slog.Logger
	Now      func() time.Time
}

// NewScheduler returns s with every zero setting at its default.
func NewScheduler(s Scheduler) *Scheduler {
	s.Interval = cmp.Or(s.Interval, space.DefaultProbeInterval)
	s.PageSize = cmp.Or(s.PageSize, 1000)
	if s.Now == nil {
		s.Now = time.Now
	}
	s.Log = cmp.Or(s.Log, slog.Default())
	return &s
}

// FanOut is what one tick did.
type FanOut struct {
	Spaces int
	// Messages is how many probe messages carried them (see MaxSpaces).
	Messages int
	Pages    int
	Duration time.Duration
}

// Shards is a range of the probe index's shards, both ends included: the
// part of the fleet one invocation fans out. A fleet larger than one
// invocation can send inside its timeout is split across schedules, each
// with its own range as input (template.yaml, BENCHMARKS.md).
type Shards struct {
	First int `json:"first"`
	Last  int `json:"last"`
}

// Tick sends a probe of every space, every shard.
func (s *Scheduler) Tick(ctx context.Context) (FanOut, error) {
	return s.TickShards(ctx, Shards{First: 0, Last: s.Targets.ProbeShards() - 1})
}

// TickShards sends a probe of every space of the shards in r. Shards are
// read in parallel and each page is sent as soon as it is read. A shard
// that cannot be read or sent does not stop the others; the error names
// every shard that failed (the invocation fails and is not retried: the
// next minute's tick sends every shard again, see HandleSchedule).
func (s *Scheduler) TickShards(ctx context.Context, r Shards) (FanOut, error) {
	if n := s.Targets.ProbeShards(); r.First < 0 || r.Last >= n || r.First > r.Last {
		return FanOut{}, fmt.Errorf("shards %d-%d: the index has shards 0-%d", r.First, r.Last, n-1)
	}
	now, interval, pageSize := s.Now, s.Interval, s.PageSize
	start := now()
	var (
		mu     sync.Mutex
		out    FanOut
		errs   = make([]error, r.Last-r.First+2)
		wg     sync.WaitGroup
		agents = &packer{queue: s.Queue, interval: interval, readAt: start}
	)
	for shard := r.First; shard <= r.Last; shard++ {
		wg.Go(func() {
			n, msgs, pages, err := s.shard(ctx, shard, pageSize, interval, start, agents)
			mu.Lock()
			out.Spaces += n
			out.Messages += msgs
			out.Pages += pages
			mu.Unlock()
			if err != nil {
				errs[shard-r.First] = fmt.Errorf("shard %d: %w", shard, err)
			}
		})
	}
	wg.Wait()
	if err := agents.flush(ctx, &start); err != nil {
		errs[len(errs)-1] = fmt.Errorf("agent spaces: %w", err)
	}
	out.Spaces += agents.sent
	out.Messages += agents.messages
	out.Duration = now().Sub(start)
	err := errors.Join(errs...)
	if err != nil {
		s.Log.ErrorContext(ctx, "fan-out incomplete", "error", err, "spaces", out.Spaces)
	}
	if s.Metrics != nil {
		failed := 0.0
		if err != nil {
			failed = 1
		}
		s.Metrics.Emit(ctx, "fan-out", nil, []slog.Attr{slog.Int("pages", out.Pages), slog.Int("messages", out.Messages), slog.Int("first_shard", r.First), slog.Int("last_shard", r.Last)},
			metrics.Metric{Name: "FanOutSize", Unit: metrics.Count, Value: float64(out.Spaces)},
			metrics.Metric{Name: "FanOutDuration", Unit: metrics.Milliseconds, Value: float64(out.Duration.Milliseconds())},
			metrics.Metric{Name: "FanOutFailures", Unit: metrics.Count, Value: failed},
		)
	}
	return out, err
}

// shard sends the shard's direct spaces page by page, each carrying what
// the index holds of it, and hands its agent spaces (carrying theirs too:
// a lease check then reads no space) to agents, which packs them with
// every shard's.
// The last message of the shard's last page (the latest of its delays)
// carries the shard's beat for the tick.
func (s *Scheduler) shard(ctx context.Context, shard, pageSize int, interval time.Duration, tick time.Time, agents *packer) (sent, messages, pages int, err error) {
	sent, messages, pages, err = s.pages(ctx, shard, pageSize, s.Targets.ProbeTargets, func(targets []space.ProbeTarget, readAt time.Time, last bool) (int, error) {
		msgs := pageMessages(targets, interval, readAt)
		if len(msgs) == 0 {
			return 0, nil
		}
		if end := &msgs[len(msgs)-1].Message; last && end.ReadAt != nil {
			end.Beat, end.Tick = end.Spaces[0].Shard, &tick
		}
		return len(msgs), s.Queue.Enqueue(ctx, msgs)
	})
	if err != nil {
		return sent, messages, pages, err
	}
	_, _, p, err := s.pages(ctx, shard, pageSize, s.Targets.AgentProbeTargets, func(targets []space.ProbeTarget, _ time.Time, _ bool) (int, error) {
		return 0, agents.add(ctx, targets)
	})
	return sent, messages, pages + p, err
}

// pages reads every page of one list of the shard and hands it to send,
// with when it was read and whether it is the last, which answers how many
// messages it sent.
func (s *Scheduler) pages(ctx context.Context, shard, pageSize int,
	list func(context.Context, int, string, int) ([]space.ProbeTarget, string, error),
	send func(targets []space.ProbeTarget, readAt time.Time, last bool) (int, error)) (sent, messages, pages int, err error) {
	after := ""
	for {
		readAt := s.Now()
		targets, next, err := list(ctx, shard, after, pageSize)
		if err != nil {
			return sent, messages, pages, err
		}
		pages++
		n, err := send(targets, readAt, next == "")
		if err != nil {
			return sent, messages, pages, err
		}
		sent, messages = sent+len(targets), messages+n
		if next == "" {
			return sent, messages, pages, nil
		}
		after = next
	}
}

// AgentBeat is the beat of the agent spaces (dynamostore.AgentBeatShard),
// whose messages mix shards.
const AgentBeat = "a"

// packer gathers the agent spaces of every shard of a tick and sends them
// MaxSpaces a message, ten messages (one SQS batch) at a time as they
// fill and the rest when the tick's shards are read: a lease check calls
// no cluster, so it needs no spreading over the minute, and spaces of any
// shard can share a message (a small agent fleet spread over 16 shards
// would otherwise fill messages with a few each). Each space carries what
// the index holds of it, as a direct space does, so the prober reads only
// its lease; the prober reads no fence for them (Prober.fence says why).
type packer struct {
	queue    Queue
	interval time.Duration
	// readAt is the tick's start, before any of its index reads: the
	// messages' read_at, by which the prober drops one older than the
	// fence covers (as a page's own read time would, a little sooner).
	readAt time.Time

	mu             sync.Mutex
	buf            []space.ProbeTarget
	sent, messages int
}

func (p *packer) add(ctx context.Context, targets []space.ProbeTarget) error {
	p.mu.Lock()
	p.buf = append(p.buf, targets...)
	p.mu.Unlock()
	return p.flush(ctx, nil)
}

// flush sends the full batches gathered; at the tick's end (tick set), all
// that is gathered, its last message carrying the agent spaces' beat.
func (p *packer) flush(ctx context.Context, tick *time.Time) error {
	const batch = 10 * MaxSpaces
	last := tick != nil
	p.mu.Lock()
	n := len(p.buf) / batch * batch
	if last {
		n = len(p.buf)
	}
	ready := p.buf[:n:n]
	p.buf = slices.Clone(p.buf[n:])
	p.mu.Unlock()
	if n == 0 {
		return nil
	}
	msgs := packedMessages(ready, p.interval, p.readAt)
	if last {
		end := &msgs[len(msgs)-1].Message
		end.Beat, end.Tick = AgentBeat, tick
	}
	if err := p.queue.Enqueue(ctx, msgs); err != nil {
		return err
	}
	p.mu.Lock()
	p.sent, p.messages = p.sent+n, p.messages+len(msgs)
	p.mu.Unlock()
	return nil
}

// packedMessages are agent spaces' tick messages: MaxSpaces a message,
// each sent with the delay of its first space; those that carry their
// state (read at readAt or later) apart from those the index holds no
// digest of (ids only: the prober reads the space), as pageMessages.
func packedMessages(targets []space.ProbeTarget, interval time.Duration, readAt time.Time) []Delayed {
	var msgs []Delayed
	for _, carried := range []bool{true, false} {
		var part []space.ProbeTarget
		for _, t := range targets {
			if t.Carried() == carried {
				part = append(part, t)
			}
		}
		for group := range slices.Chunk(part, MaxSpaces) {
			m := CarriedTickOf(slices.Clone(group), readAt)
			if !carried {
				ids := make([]space.ProbeTarget, len(group))
				for i, t := range group {
					ids[i] = t.Ids()
				}
				m = TickOf(ids)
			}
			msgs = append(msgs, Delayed{Message: m, Delay: Jitter(group[0].ID, interval)})
		}
	}
	return msgs
}

// pageMessages are the tick messages of one index page: its spaces in
// order of delay (Jitter of the id), cut into as few messages as MaxSpaces
// allows, of even sizes, each sent with the delay of its first space. Full
// messages share the prober's one fence read of a message among up to
// MaxSpaces spaces (at 1,000 spaces a shard's page holds about 62: two
// messages, where grouping by equal delay made about 60 of one space
// each), and SQS's requests fall by the same factor
// (BenchmarkProbingCostAtScale). A space is probed at its message's delay,
// no later than its own, and at the same delay tick after tick while its
// page keeps its spaces. The messages go in order of delay, so that a
// SendMessageBatch of 10 holds messages that become visible together.
func pageMessages(targets []space.ProbeTarget, interval time.Duration, readAt time.Time) []Delayed {
	type delayed struct {
		t space.ProbeTarget
		d time.Duration
	}
	ts := make([]delayed, len(targets))
	for i, t := range targets {
		ts[i] = delayed{t, Jitter(t.ID, interval)}
	}
	slices.SortStableFunc(ts, func(a, b delayed) int { return cmp.Compare(a.d, b.d) })
	var msgs []Delayed
	// Spaces that carry their state and those that do not (read by the
	// prober) go in separate messages: only the former come with read_at.
	for _, carried := range []bool{true, false} {
		var part []delayed
		for _, t := range ts {
			if t.t.Carried() == carried {
				part = append(part, t)
			}
		}
		if len(part) == 0 {
			continue
		}
		k := (len(part) + MaxSpaces - 1) / MaxSpaces
		for i := range k {
			group := part[i*len(part)/k : (i+1)*len(part)/k]
			targets := make([]space.ProbeTarget, len(group))
			for j := range group {
				targets[j] = group[j].t
				if !carried {
					targets[j] = targets[j].Ids()
				}
			}
			m := TickOf(targets)
			if carried {
				m = CarriedTickOf(targets, readAt)
			}
			msgs = append(msgs, Delayed{Message: m, Delay: group[0].d})
		}
	}
	slices.SortStableFunc(msgs, func(a, b Delayed) int { return cmp.Compare(a.Delay, b.Delay) })
	return msgs
}
