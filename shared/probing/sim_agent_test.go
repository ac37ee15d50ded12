package probing_test

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// memLeases is the lease store in memory: what a successful renewal
// stores (dynamostore.RenewLease sets renewed_at).
type memLeases struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (m *memLeases) GetLease(_ context.Context, id string) (space.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.at[id]
	if !ok {
		return space.Lease{}, nil
	}
	return space.Lease{RenewedAt: &t, ServerVersion: &space.ServerVersion{GitVersion: "v1.37.2", Platform: "linux/amd64"}}, nil
}

// TestAgentSimulation runs 1,000 agent spaces for 6 simulated hours
// through the real scheduler and prober (in memory, fake clock, the
// template's batching window): each agent renews every space.LeaseInterval
// and, after a failed renewal, retries every 5 s. Outages (2-30 min, about
// one per space per 4 h: the agent or its network is down) must be
// detected (inactive) within 180 s at p99; blips (5-20 s in which the
// renewals fail, about one per space per 30 min, away from outages) must
// never make a space inactive.
func TestAgentSimulation(t *testing.T) {
	const (
		n     = 1000
		d     = 6 * time.Hour
		retry = 5 * time.Second
	)
	window := readTemplate(t).window
	rng := rand.New(rand.NewPCG(21, 7))
	c := newClock()
	start := c.Now()
	end := start.Add(d)
	store := newMemStore()
	leases := &memLeases{at: map[string]time.Time{}}
	type agentSim struct {
		id      string
		outages [][2]time.Time
		blips   [][2]time.Time
		next    time.Time
	}
	var agents []*agentSim
	blips := 0
	for i := range n {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", rng.Uint32(), i)
		s := space.Space{ID: id, OrgID: "org", Provider: space.AWS, Connectivity: space.ViaAgent, Status: space.Active, CreatedAt: start, UpdatedAt: start, Version: 2}
		at := start.Add(-time.Minute)
		s.Probe.LastProbeAt, s.Probe.LastSuccessAt = &at, &at
		store.add(s)
		a := &agentSim{id: id, next: start.Add(time.Duration(rng.Int64N(int64(space.LeaseInterval))))}
		leases.at[id] = a.next.Add(-space.LeaseInterval)
		for t := start.Add(time.Duration(rng.Int64N(int64(4 * time.Hour)))); t.Before(end); {
			dur := 2*time.Minute + time.Duration(rng.Int64N(int64(28*time.Minute)))
			a.outages = append(a.outages, [2]time.Time{t, t.Add(dur)})
			t = t.Add(dur + 10*time.Minute + time.Duration(rng.Int64N(int64(8*time.Hour))))
		}
		for t := start.Add(time.Duration(rng.Int64N(int64(time.Hour)))); t.Before(end); t = t.Add(10*time.Minute + time.Duration(rng.Int64N(int64(40*time.Minute)))) {
			clear := true
			for _, o := range a.outages {
				if t.After(o[0].Add(-10*time.Minute)) && t.Before(o[1].Add(10*time.Minute)) {
					clear = false
				}
			}
			if clear {
				dur := 5*time.Second + time.Duration(rng.Int64N(int64(15*time.Second)+1))
				a.blips = append(a.blips, [2]time.Time{t, t.Add(dur)})
				blips++
			}
		}
		agents = append(agents, a)
	}
	sort.Strings(store.order)
	byID := map[string]*agentSim{}
	for _, a := range agents {
		byID[a.id] = a
	}
	in := func(spans [][2]time.Time, at time.Time) (int, bool) {
		for i, o := range spans {
			if !at.Before(o[0]) && at.Before(o[1]) {
				return i, true
			}
		}
		return 0, false
	}
	var detect []time.Duration
	falseInactive := 0
	detected := map[string]map[int]bool{}
	store.onSave = func(old, next space.Space) {
		if old.Status == next.Status || next.Status != space.Inactive {
			return
		}
		at := *next.Probe.LastTransitionAt
		a := byID[next.ID]
		i, ok := in(a.outages, at)
		if !ok {
			falseInactive++
			return
		}
		if detected[a.id] == nil {
			detected[a.id] = map[int]bool{}
		}
		detected[a.id][i] = true
		detect = append(detect, at.Sub(a.outages[i][0]))
	}

	q := &heapQueue{clock: c}
	quiet := &metrics.Emitter{Log: discardLogger(), Now: c.Now}
	sched := probing.NewScheduler(probing.Scheduler{Targets: store, Queue: q, Now: c.Now, Metrics: quiet, Log: discardLogger()})
	prober := probing.NewProber(probing.Prober{Store: store, Leases: leases, Minter: simMinter{}, Checker: nil, Queue: q, Now: c.Now, Metrics: quiet, Log: discardLogger(),
		// One space at a time: the fake clock does not move while a message
		// is handled, so this changes no timing, and keeps the seeded run
		// the same every time (the checker and queue are not shared safely).
		Concurrency: 1})
	ctx := context.Background()
	nextTick := start
	for now := start; now.Before(end); now = now.Add(time.Second) {
		c.mu.Lock()
		c.now = now
		c.mu.Unlock()
		for _, a := range agents {
			if now.Before(a.next) {
				continue
			}
			_, down := in(a.outages, now)
			_, blip := in(a.blips, now)
			if down || blip {
				a.next = now.Add(retry)
				continue
			}
			leases.mu.Lock()
			leases.at[a.id] = now
			leases.mu.Unlock()
			a.next = now.Add(space.LeaseInterval)
		}
		if !now.Before(nextTick) {
			if _, err := sched.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			nextTick = nextTick.Add(time.Minute)
		}
		for len(q.h) > 0 && !q.h[0].due.Add(window).After(now) {
			m := heap.Pop(&q.h).(queued)
			if _, err := prober.Handle(ctx, probing.Delivery{MessageID: fmt.Sprint(m.seq), Body: m.msg.Encode(), ReceiveCount: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	outages, missed := 0, 0
	for _, a := range agents {
		for i, o := range a.outages {
			if o[1].After(end.Add(-4 * time.Minute)) {
				continue // cut off by the end of the run
			}
			outages++
			if !detected[a.id][i] && o[1].Sub(o[0]) > 3*time.Minute {
				missed++
			}
		}
	}
	t.Logf("agent simulation: %d agent spaces × %s, lease every %s (+%s grace), %d outages (2-30 min, ended 4 min before the run did), %d blips (5-20 s), batching window %s",
		n, d, space.LeaseInterval, space.LeaseGrace, outages, blips, window)
	t.Logf("| outages detected / missed (over 3 min) | %d / %d |", len(detect), missed)
	t.Logf("| time to detect, p50 / p99 / max | %s / %s / %s |", pct(detect, .5), pct(detect, .99), pct(detect, 1))
	t.Logf("| false inactive from blips | %d |", falseInactive)
	if falseInactive != 0 {
		t.Errorf("%d false inactive transitions", falseInactive)
	}
	if missed != 0 || len(detect) == 0 {
		t.Errorf("%d outages missed, %d detected", missed, len(detect))
	}
	if p := pct(detect, .99); p > 180*time.Second {
		t.Errorf("detection p99 %s, over 180 s", p)
	}
}
