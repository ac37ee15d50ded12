package probing_test

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"spaces/shared/kubecred"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// memStore is an in-memory probing.Store and TargetLister with the same
// conditions as the DynamoDB store, counting writes.
type memStore struct {
	mu          sync.Mutex
	spaces      map[string]space.Space
	order       []string
	writes      int
	transitions int
	beats       map[string]time.Time
	onSave      func(old, next space.Space)
}

func newMemStore() *memStore { return &memStore{spaces: map[string]space.Space{}} }

func (m *memStore) add(s space.Space) {
	m.spaces[s.ID] = s
	m.order = append(m.order, s.ID)
}

func (m *memStore) LiveSpace(_ context.Context, org, id string) (space.Space, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.spaces[id]
	if !ok || s.OrgID != org || s.Deleted() {
		return space.Space{}, space.ErrNotFound("space")
	}
	return s, nil
}

func (m *memStore) UpdateSpace(ctx context.Context, org, id string, u space.Update[space.Space]) (space.Updated[space.Space], error) {
	return space.Run(ctx, space.SpaceVersioned, u, func(ctx context.Context) (space.Space, error) { return m.LiveSpace(ctx, org, id) }, m.save)
}

func (m *memStore) save(_ context.Context, before, s space.Space) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.spaces[s.ID]
	if !ok || old.Deleted() {
		return space.ErrNotFound("space")
	}
	if old.Version != before.Version {
		return space.Errorf(space.KindPreconditionFailed, "version moved")
	}
	m.spaces[s.ID] = s
	m.writes++
	if space.TransitionOf(before, s) != nil {
		m.transitions++
	}
	if m.onSave != nil {
		m.onSave(old, s)
	}
	return nil
}

func (m *memStore) UnpublishedTransition(context.Context, string, string) (*space.Transition, error) {
	return nil, nil
}
func (m *memStore) MarkPublished(context.Context, space.Transition) error { return nil }

// Fenced is the deregistration fence: the spaces deleted at or after
// since.
func (m *memStore) Fenced(_ context.Context, _ string, since time.Time) (map[string]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for id, s := range m.spaces {
		if s.DeletedAt != nil && !s.DeletedAt.Before(since) {
			out[id] = true
		}
	}
	return out, nil
}

// Beat keeps the newest tick of each shard.
func (m *memStore) Beat(_ context.Context, shard string, tick time.Time) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.beats == nil {
		m.beats = map[string]time.Time{}
	}
	prev := m.beats[shard]
	if !tick.After(prev) {
		return time.Time{}, nil
	}
	m.beats[shard] = tick
	return prev, nil
}

func (m *memStore) ProbeShards() int { return 1 }

// ProbeTargets and AgentProbeTargets list the direct and the agent spaces
// apart, as the store's probe index does.
func (m *memStore) ProbeTargets(_ context.Context, _ int, after string, limit int) ([]space.ProbeTarget, string, error) {
	return m.targets(after, limit, false)
}

func (m *memStore) AgentProbeTargets(_ context.Context, _ int, after string, limit int) ([]space.ProbeTarget, string, error) {
	return m.targets(after, limit, true)
}

func (m *memStore) targets(after string, limit int, agents bool) ([]space.ProbeTarget, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.SearchStrings(m.order, after)
	if i < len(m.order) && m.order[i] == after {
		i++
	}
	var out []space.ProbeTarget
	for ; i < len(m.order) && len(out) < limit; i++ {
		s := m.spaces[m.order[i]]
		if !s.Synthetic && !s.Deleted() && (s.Connectivity == space.ViaAgent) == agents {
			// What the probe index carries of it.
			d := space.DigestOf(s)
			out = append(out, space.ProbeTarget{OrgID: s.OrgID, ID: s.ID, Shard: "00", Digest: &d})
		}
	}
	if i < len(m.order) && len(out) > 0 {
		return out, out[len(out)-1].ID, nil
	}
	return out, "", nil
}

// heapQueue is the probe queue on the fake clock, ordered by due time.
type heapQueue struct {
	clock *clock
	h     dueHeap
	seq   int
	sent  int
}

type dueHeap []queued

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(queued)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (q *heapQueue) Enqueue(_ context.Context, msgs []probing.Delayed) error {
	now := q.clock.Now()
	for _, m := range msgs {
		q.seq++
		q.sent++
		heap.Push(&q.h, queued{due: now.Add(m.Delay), seq: q.seq, msg: m.Message})
	}
	return nil
}

// simCluster is one simulated cluster: outages (intervals when it is
// down) and blips (a number of probes that fail while it is up).
type simCluster struct {
	outages [][2]time.Time
	blips   []blip
}

type blip struct {
	at    time.Time
	fails int
}

type simChecker struct {
	clock    *clock
	clusters map[string]*simCluster // by server URL
	blipLeft map[string]int
	nextBlip map[string]int
	probes   int
}

func (c *simChecker) Probe(_ context.Context, creds kubecred.Credentials) space.Outcome {
	c.probes++
	now := c.clock.Now()
	cl := c.clusters[creds.Server]
	o := space.Outcome{At: now, Latency: 40 * time.Millisecond}
	for _, out := range cl.outages {
		if !now.Before(out[0]) && now.Before(out[1]) {
			o.Reason, o.Message = space.ReasonUnreachable, "connection refused"
			return o
		}
	}
	// A blip fails the next probes once its time has come.
	if i := c.nextBlip[creds.Server]; i < len(cl.blips) && !now.Before(cl.blips[i].at) {
		c.blipLeft[creds.Server] = cl.blips[i].fails
		c.nextBlip[creds.Server] = i + 1
	}
	if c.blipLeft[creds.Server] > 0 {
		c.blipLeft[creds.Server]--
		o.Reason, o.Message = space.ReasonTimeout, "lost packet"
		return o
	}
	o.Version = &space.ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}
	return o
}

type simMinter struct{}

func (simMinter) Mint(_ context.Context, s space.Space) (kubecred.Credentials, error) {
	return kubecred.Credentials{Server: "https://" + s.ID, Token: "t"}, nil
}
func (simMinter) Invalidate(string) {}

type simReport struct {
	spaces, minutes                   int
	outages, detected, missed         int
	detect, recover                   []time.Duration
	falseInactive, blips              int
	probes, writes, transitions, msgs int
	// handled: messages delivered; handledSpaces: the spaces they named.
	handled, handledSpaces int
}

// simulate runs n spaces for d on the fake clock with the real scheduler
// and prober, delivering each message a batching window after it is due:
// the worst case of Lambda's SQS event source, where a batch is invoked
// when its window ends (or sooner, once full), and the window opens with
// its first message. (Batching on this whole-second clock instead would
// line re-probes, due 12 s after a delivery, up with the windows' ends and
// hide the delay.) Outages (2-30 min, about one per space per 4 h) and blips
// (one or two lost probes, about one per space per 30 min) are random
// with a fixed seed.
func simulate(t testing.TB, n int, d time.Duration, faults bool, window time.Duration) simReport {
	rng := rand.New(rand.NewPCG(42, 7))
	c := newClock()
	start := c.Now()
	end := start.Add(d)
	store := newMemStore()
	checker := &simChecker{clock: c, clusters: map[string]*simCluster{}, blipLeft: map[string]int{}, nextBlip: map[string]int{}}
	rep := simReport{spaces: n, minutes: int(d / time.Minute)}
	ids := make([]string, n)
	for i := range n {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", rng.Uint32(), i)
		ids[i] = id
		s := space.Space{ID: id, OrgID: "org", Provider: space.AWS, Status: space.Active, CreatedAt: start, UpdatedAt: start, Version: 2}
		at := start.Add(-time.Minute)
		s.Probe.LastProbeAt, s.Probe.LastSuccessAt = &at, &at
		s.Probe.ServerVersion = &space.ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}
		store.add(s)
		cl := &simCluster{}
		if faults {
			for t := start.Add(time.Duration(rng.Int64N(int64(4 * time.Hour)))); t.Before(end); {
				dur := 2*time.Minute + time.Duration(rng.Int64N(int64(28*time.Minute)))
				cl.outages = append(cl.outages, [2]time.Time{t, t.Add(dur)})
				t = t.Add(dur + 10*time.Minute + time.Duration(rng.Int64N(int64(8*time.Hour))))
			}
			for t := start.Add(time.Duration(rng.Int64N(int64(time.Hour)))); t.Before(end); t = t.Add(10*time.Minute + time.Duration(rng.Int64N(int64(40*time.Minute)))) {
				// Blips only while the cluster is up and far from an outage, so
				// that any inactive they cause would be false.
				clear := true
				for _, o := range cl.outages {
					if t.After(o[0].Add(-10*time.Minute)) && t.Before(o[1].Add(10*time.Minute)) {
						clear = false
					}
				}
				if clear {
					cl.blips = append(cl.blips, blip{at: t, fails: 1 + rng.IntN(2)})
				}
			}
		}
		checker.clusters["https://"+id] = cl
		rep.outages += len(cl.outages)
		rep.blips += len(cl.blips)
	}
	sort.Strings(store.order)

	// Watch transitions: time to detect each outage and to recover from it.
	inOutage := func(id string, at time.Time) (int, bool) {
		for i, o := range checker.clusters["https://"+id].outages {
			if !at.Before(o[0]) && at.Before(o[1]) {
				return i, true
			}
		}
		return 0, false
	}
	detected := map[string]map[int]bool{}
	store.onSave = func(old, next space.Space) {
		if old.Status == next.Status {
			return
		}
		at := *next.Probe.LastTransitionAt
		switch next.Status {
		case space.Inactive:
			i, ok := inOutage(next.ID, at)
			if !ok {
				rep.falseInactive++
				return
			}
			if detected[next.ID] == nil {
				detected[next.ID] = map[int]bool{}
			}
			detected[next.ID][i] = true
			rep.detect = append(rep.detect, at.Sub(checker.clusters["https://"+next.ID].outages[i][0]))
		case space.Active:
			// The outage that just ended (the latest one that began before at).
			outs := checker.clusters["https://"+next.ID].outages
			for i := len(outs) - 1; i >= 0; i-- {
				if outs[i][1].After(at) {
					continue
				}
				if detected[next.ID][i] {
					rep.recover = append(rep.recover, at.Sub(outs[i][1]))
				}
				break
			}
		}
	}

	q := &heapQueue{clock: c}
	quiet := &metrics.Emitter{Log: discardLogger(), Now: c.Now}
	sched := probing.NewScheduler(probing.Scheduler{Targets: store, Queue: q, Now: c.Now, Metrics: quiet, Log: discardLogger()})
	prober := probing.NewProber(probing.Prober{Store: store, Minter: simMinter{}, Checker: checker, Queue: q, Now: c.Now, Metrics: quiet, Log: discardLogger(),
		// One space at a time: the fake clock does not move while a message
		// is handled, so this changes no timing, and keeps the seeded run
		// the same every time (the checker and queue are not shared safely).
		Concurrency: 1})
	ctx := context.Background()
	nextTick := start
	for {
		next := nextTick
		// Every message waits the whole window (the worst case: it opened
		// its batch).
		if len(q.h) > 0 && q.h[0].due.Add(window).Before(next) {
			next = q.h[0].due.Add(window)
		}
		if next.After(end) {
			break
		}
		c.Set(next)
		if next.Equal(nextTick) {
			if _, err := sched.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			nextTick = nextTick.Add(time.Minute)
		}
		for len(q.h) > 0 && !q.h[0].due.Add(window).After(next) {
			m := heap.Pop(&q.h).(queued)
			rep.handled++
			rep.handledSpaces += len(m.msg.Each())
			if _, err := prober.Handle(ctx, probing.Delivery{MessageID: fmt.Sprint(m.seq), Body: m.msg.Encode(), ReceiveCount: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, cl := range checker.clusters {
		for i, o := range cl.outages {
			if o[1].After(end.Add(-3*time.Minute)) && !detected[strings.TrimPrefix(id, "https://")][i] {
				continue // cut off by the end of the run
			}
			if !detected[strings.TrimPrefix(id, "https://")][i] {
				rep.missed++
			}
		}
	}
	rep.detected = len(rep.detect)
	rep.probes, rep.writes, rep.transitions, rep.msgs = checker.probes, store.writes, store.transitions, q.sent
	return rep
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))].Round(100 * time.Millisecond)
}

// TestSimulation runs 1,000 spaces for 6 simulated hours with random
// outages and blips through the real scheduler and prober (in memory, fake
// clock), and a fault-free fleet for the steady-state write rate.
func TestSimulation(t *testing.T) {
	// The template's batching window delays every delivery by up to its
	// length, and a detection by the windows of its two re-probes.
	window := readTemplate(t).window
	r := simulate(t, 1000, 6*time.Hour, true, window)
	spaceMinutes := float64(r.spaces * r.minutes)
	t.Logf("simulation: %d spaces × %d min, %d outages (2-30 min), %d blips (1-2 lost probes), batching window %s", r.spaces, r.minutes, r.outages, r.blips, window)
	t.Logf("| metric | value |")
	t.Logf("|---|---|")
	t.Logf("| outages detected / missed (shorter than detection: none) | %d / %d |", r.detected, r.missed)
	t.Logf("| time to detect an outage, p50 / p99 / max | %s / %s / %s |", pct(r.detect, .5), pct(r.detect, .99), pct(r.detect, 1))
	t.Logf("| time to recover, p50 / p99 / max | %s / %s / %s |", pct(r.recover, .5), pct(r.recover, .99), pct(r.recover, 1))
	t.Logf("| false inactive transitions from 1-2 lost probes | %d |", r.falseInactive)
	t.Logf("| probes per space-minute | %.3f |", float64(r.probes)/spaceMinutes)
	t.Logf("| messages per space-minute (incl. dropped duplicates) | %.3f (%.2f spaces a message) |", float64(r.handled)/spaceMinutes, float64(r.handledSpaces)/float64(r.handled))
	t.Logf("| spaces handled per space-minute (incl. dropped duplicates) | %.3f |", float64(r.handledSpaces)/spaceMinutes)
	t.Logf("| status writes per probe | %.3f |", float64(r.writes)/float64(r.probes))
	if r.falseInactive != 0 {
		t.Errorf("%d false inactive transitions", r.falseInactive)
	}
	if r.missed != 0 || r.detected == 0 {
		t.Errorf("%d outages missed, %d detected", r.missed, r.detected)
	}
	if p := pct(r.detect, .99); p > 90*time.Second {
		t.Errorf("detection p99 %s on the simulated clock, over 90 s", p)
	}
	if p := pct(r.detect, 1); p > 2*time.Minute {
		t.Errorf("slowest detection %s on the simulated clock", p)
	}

	steady := simulate(t, 1000, 2*time.Hour, false, window)
	t.Logf("| steady state (no faults): status writes per probe | %.3f |", float64(steady.writes)/float64(steady.probes))
	t.Logf("| steady state: probes per space-minute | %.3f |", float64(steady.probes)/float64(steady.spaces*steady.minutes))
	if w := float64(steady.writes) / float64(steady.probes); w > 0.25 {
		t.Errorf("%.3f writes per probe at steady state", w)
	}
}
