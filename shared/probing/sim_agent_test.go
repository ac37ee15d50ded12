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
// stores (dynamostore.RenewLease sets renewed_at), and the presence
// channel's last lifecycle event (dynamostore.RecordPresence).
type memLeases struct {
	mu       sync.Mutex
	at       map[string]time.Time
	presence map[string]space.Presence
}

func (m *memLeases) GetLease(_ context.Context, id string) (space.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.at[id]
	if !ok {
		return space.Lease{}, nil
	}
	l := space.Lease{RenewedAt: &t, ServerVersion: &space.ServerVersion{GitVersion: "v1.37.2", Platform: "linux/amd64"}}
	if p, ok := m.presence[id]; ok {
		l.Presence = &p
	}
	return l, nil
}

// GetLeaseEventually reads as GetLease: the simulation's store is never
// behind.
func (m *memLeases) GetLeaseEventually(ctx context.Context, id string) (space.Lease, error) {
	return m.GetLease(ctx, id)
}

// record stores p if it is newer, as RecordPresence's condition does.
func (m *memLeases) record(id string, p space.Presence) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.presence[id]; !ok || p.Newer(&old) {
		m.presence[id] = p
	}
}

// TestAgentSimulation runs 1,000 agent spaces for 6 simulated hours
// through the real scheduler and prober (in memory, fake clock, the
// template's batching window): each agent renews every space.LeaseInterval
// and, after a failed renewal, retries every 5 s. Outages (2-30 min, about
// one per space per 4 h: the agent or its network is down) must be
// detected (inactive) within 180 s at p99; blips (5-20 s in which the
// renewals fail, about one per space per 30 min, away from outages) must
// never make a space inactive.
func TestAgentSimulation(t *testing.T) { simulateAgents(t, false) }

// TestAgentPresenceSimulation is TestAgentSimulation with the presence
// channel: each agent holds an MQTT connection (keep-alive
// space.PresenceKeepAlive) and renews over HTTP every
// space.PresenceFallback; IoT Core's lifecycle events (delivered 2 s after
// the fact: the rule, the queue, the agent function) are the lease. An
// outage or a blip cuts the connection in one of two ways, at random: a
// reset IoT Core sees at once (CONNECTION_LOST), or a silent network it
// sees only 1.5 keep-alives after the agent's last ping
// (MQTT_KEEP_ALIVE_TIMEOUT), if the cut lasts that long; when the network
// is back the agent reconnects within 1-5 s (a connected event of the
// next version) and renews over HTTP, as agent/client does.
func TestAgentPresenceSimulation(t *testing.T) { simulateAgents(t, true) }

func simulateAgents(t *testing.T, presence bool) {
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
	leases := &memLeases{at: map[string]time.Time{}, presence: map[string]space.Presence{}}
	type agentSim struct {
		id      string
		outages [][2]time.Time
		blips   [][2]time.Time
		next    time.Time
		// The presence channel: the connection's version, whether the
		// agent is connected, and the lifecycle events on their way.
		version   int64
		connected bool
		events    []space.Presence
	}
	renewEvery := space.LeaseInterval
	if presence {
		renewEvery = space.PresenceFallback
	}
	var agents []*agentSim
	blips := 0
	for i := range n {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", rng.Uint32(), i)
		s := space.Space{ID: id, OrgID: "org", Provider: space.AWS, Connectivity: space.ViaAgent, Status: space.Active, CreatedAt: start, UpdatedAt: start, Version: 2}
		at := start.Add(-time.Minute)
		s.Probe.LastProbeAt, s.Probe.LastSuccessAt = &at, &at
		store.add(s)
		a := &agentSim{id: id, next: start.Add(time.Duration(rng.Int64N(int64(renewEvery))))}
		leases.at[id] = a.next.Add(-renewEvery)
		if presence {
			a.version, a.connected = 1, true
			leases.presence[id] = space.Presence{Connected: true, At: start.Add(-time.Minute), Version: 1}
		}
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
		// An outage's detection may land just after it ended, before the
		// agent is back: its retry (5 s), or its reconnect (1-5 s) and the
		// lifecycle event's delivery (2 s). Anything else is false.
		i, ok := in(extend(a.outages, 10*time.Second), at)
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
		c.Set(now)
		for _, a := range agents {
			_, down := in(a.outages, now)
			_, blip := in(a.blips, now)
			if presence {
				presenceStep(rng, a.id, &a.version, &a.connected, &a.events, &a.next, a.outages, a.blips, now, leases)
			}
			if now.Before(a.next) {
				continue
			}
			if down || blip {
				a.next = now.Add(retry)
				continue
			}
			leases.mu.Lock()
			leases.at[a.id] = now
			leases.mu.Unlock()
			a.next = now.Add(renewEvery)
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
	channel := "HTTP renewals only"
	if presence {
		channel = fmt.Sprintf("presence channel (keep-alive %s, HTTP every %s)", space.PresenceKeepAlive, space.PresenceFallback)
	}
	t.Logf("agent simulation: %d agent spaces × %s, %s, lease every %s (+%s grace), %d outages (2-30 min, ended 4 min before the run did), %d blips (5-20 s), batching window %s",
		n, d, channel, space.LeaseInterval, space.LeaseGrace, outages, blips, window)
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

// extend lengthens every span by d.
func extend(spans [][2]time.Time, d time.Duration) [][2]time.Time {
	out := make([][2]time.Time, len(spans))
	for i, o := range spans {
		out[i] = [2]time.Time{o[0], o[1].Add(d)}
	}
	return out
}

// presenceStep moves one agent's MQTT connection at now: a cut starting
// now (an outage or a blip) is, at random, a reset IoT Core sees at once
// or a silence it sees 1.5 keep-alives after the agent's last ping (if
// still cut then); the network back, the agent reconnects within 1-5 s
// and renews over HTTP at once. Lifecycle events reach the lease 2 s
// after IoT Core publishes them.
func presenceStep(rng *rand.Rand, id string, version *int64, connected *bool, pending *[]space.Presence, next *time.Time,
	outages, blips [][2]time.Time, now time.Time, leases *memLeases) {
	const delivery = 2 * time.Second
	cut := func(spans [][2]time.Time) ([2]time.Time, bool) {
		for _, o := range spans {
			if !now.Before(o[0]) && now.Before(o[1]) {
				return o, true
			}
		}
		return [2]time.Time{}, false
	}
	o, down := cut(outages)
	if !down {
		o, down = cut(blips)
	}
	switch {
	case down && *connected: // the first step of the cut, which began at o[0]
		*connected = false
		if rng.IntN(2) == 0 {
			*pending = append(*pending, space.Presence{At: o[0], Version: *version, Reason: "CONNECTION_LOST"})
			break
		}
		lastPing := o[0].Add(-time.Duration(rng.Int64N(int64(space.PresenceKeepAlive))))
		seen := lastPing.Add(space.PresenceKeepAlive * 3 / 2)
		if seen.Before(o[1]) {
			*pending = append(*pending, space.Presence{At: seen, Version: *version, Reason: space.ReasonKeepAliveTimeout})
		}
	case !down && !*connected:
		at := now.Add(time.Second + time.Duration(rng.Int64N(int64(4*time.Second))))
		*version++
		*connected = true
		*pending = append(*pending, space.Presence{Connected: true, At: at, Version: *version})
		*next = at // the renewal a connection asks for
	}
	kept := (*pending)[:0]
	for _, p := range *pending {
		if now.Before(p.At.Add(delivery)) {
			kept = append(kept, p)
			continue
		}
		leases.record(id, p)
	}
	*pending = kept
}
