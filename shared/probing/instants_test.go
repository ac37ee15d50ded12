package probing_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"spaces/infra/minttest"
	"spaces/infra/testclock"
	"spaces/infra/testcluster"
	"spaces/shared/kubecred"
	"spaces/shared/kubeprobe"
	"spaces/shared/metrics"
	"spaces/shared/mint"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// countingMinter is the production minter, counting the mints asked for
// each space and calling onMint first.
type countingMinter struct {
	*mint.Minter
	mu     sync.Mutex
	mints  map[string]int
	onMint func(s space.Space)
}

func (c *countingMinter) count(s space.Space) {
	c.mu.Lock()
	c.mints[s.ID]++
	hook := c.onMint
	c.mu.Unlock()
	if hook != nil {
		hook(s)
	}
}

func (c *countingMinter) Mint(ctx context.Context, s space.Space) (kubecred.Credentials, error) {
	c.count(s)
	return c.Minter.Mint(ctx, s)
}

func (c *countingMinter) MintLive(ctx context.Context, s space.Space) (kubecred.Credentials, error) {
	c.count(s)
	return c.Minter.MintLive(ctx, s)
}

func (c *countingMinter) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mints[id]
}

// hookedLister is the store's probe index, calling afterRead with each
// page of direct spaces read and afterAgentRead with each page of agent
// spaces (before the scheduler sends or packs it).
type hookedLister struct {
	probing.TargetLister
	afterRead, afterAgentRead func([]space.ProbeTarget)
}

func (l *hookedLister) ProbeTargets(ctx context.Context, shard int, after string, limit int) ([]space.ProbeTarget, string, error) {
	out, next, err := l.TargetLister.ProbeTargets(ctx, shard, after, limit)
	call(l.afterRead, out)
	return out, next, err
}

func (l *hookedLister) AgentProbeTargets(ctx context.Context, shard int, after string, limit int) ([]space.ProbeTarget, string, error) {
	out, next, err := l.TargetLister.AgentProbeTargets(ctx, shard, after, limit)
	call(l.afterAgentRead, out)
	return out, next, err
}

// named reports whether one of ds names the space id.
func named(ds []probing.Delivery, id string) bool {
	for _, d := range ds {
		if strings.Contains(d.Body, id) {
			return true
		}
	}
	return false
}

func call(hook func([]space.ProbeTarget), page []space.ProbeTarget) {
	if hook != nil {
		hook(page)
	}
}

// captureQueue keeps what is sent, delays ignored (the test delivers when
// it chooses).
type captureQueue struct {
	mu   sync.Mutex
	msgs []probing.Delayed
}

func (q *captureQueue) Enqueue(_ context.Context, msgs []probing.Delayed) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, msgs...)
	return nil
}

func (q *captureQueue) take() []probing.Delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]probing.Delivery, len(q.msgs))
	for i, m := range q.msgs {
		out[i] = probing.Delivery{MessageID: "m" + string(rune('a'+i%26)), Body: m.Message.Encode(), ReceiveCount: 1}
	}
	q.msgs = nil
	return out
}

// TestDeregisteredAtEveryInstantOfAMessage deregisters a space at each
// instant of a tick message's life, on the production path (the store's
// probe index and deregistration fence on the emulator, the production
// minter against the simulated cloud, TLS test clusters), with a sibling
// registered beside it that is probed all along:
//
//   - before the index read: it is not listed, so no message names it;
//   - between the read and the send: its message names it, carrying its
//     state, and the message's fence read refuses it;
//   - while the message waits: likewise;
//
// each with no mint and no GET /version for it, and nothing written. A
// deregistration during the probe (after the fence read: here, while its
// credential is minted) cannot be refused by any read; what holds is that
// the probe's result is not stored (the write's condition: no
// resurrection, no transition), and that the message delivered again, and
// the next tick, reach neither the cloud nor the cluster for it.
func TestDeregisteredAtEveryInstantOfAMessage(t *testing.T) {
	env := minttest.Start(t)
	checker := &kubeprobe.Prober{}
	t.Cleanup(checker.Close)
	cm := &countingMinter{Minter: env.Minter, mints: map[string]int{}}
	evs := &events{}
	q := &captureQueue{}
	// Each stage's tick comes 30 s after the last, so that the sibling's
	// last probe is older than MinGap and it is probed again.
	clock := testclock.New(time.Now())
	p := probing.NewProber(probing.Prober{Store: env.Store, Minter: cm, Checker: checker, Events: evs, Queue: q, Now: clock.Now,
		Metrics: &metrics.Emitter{Log: discardLogger()}, Log: discardLogger()})
	lister := &hookedLister{TargetLister: env.Store}
	sched := probing.NewScheduler(probing.Scheduler{Targets: lister, Queue: q, Now: clock.Now,
		Metrics: &metrics.Emitter{Log: discardLogger()}, Log: discardLogger()})
	tick := func() {
		t.Helper()
		clock.Advance(30 * time.Second)
		if _, err := sched.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	type member struct {
		s  space.Space
		tc *testcluster.Cluster
	}
	register := func(name string) member {
		tc := testcluster.NewForTest(t)
		tc.SetTokens()
		cl := minttest.Cluster(space.GCP, name, tc.URL(), tc.CAPEM())
		cl.Sink = tc
		env.Cloud.AddCluster(cl)
		return member{env.Register(t, space.GCP, name, false), tc}
	}
	deregister := func(s space.Space) {
		if err := env.Service.Deregister(context.Background(), env.Org, s.ID, 0, "test"); err != nil {
			t.Error(err)
		}
	}
	deliver := func(ds []probing.Delivery) {
		t.Helper()
		if failed := p.HandleBatch(t.Context(), ds); len(failed) != 0 {
			t.Fatalf("messages failed: %v", failed)
		}
	}
	// untouched: the victim got no mint, no GET /version, and its item is
	// the tombstone Deregister wrote.
	untouched := func(stage string, v member, mints, gets int) {
		t.Helper()
		if n := cm.of(v.s.ID); n != mints {
			t.Errorf("%s: %d mints for the deregistered space, want %d", stage, n, mints)
		}
		if n := v.tc.Requests("/version"); n != gets {
			t.Errorf("%s: %d GET /version for the deregistered space, want %d", stage, n, gets)
		}
		raw, _, err := env.Store.SpaceAsClaimed(t.Context(), env.Org, v.s.ID)
		if err != nil || !raw.Deleted() || raw.Probe.LastProbeAt != nil || raw.Status != space.Unknown || raw.Version != v.s.Version+1 {
			t.Errorf("%s: the deregistered space was written: %+v (%v)", stage, raw, err)
		}
		if len(evs.of(v.s.ID)) != 0 {
			t.Errorf("%s: a transition of the deregistered space was published", stage)
		}
	}

	sibling := register("sibling")
	sibGets := func() int { return sibling.tc.Requests("/version") }

	// Before the index read.
	v := register("before-read")
	deregister(v.s)
	before := sibGets()
	tick()
	ds := q.take()
	if named(ds, v.s.ID) {
		t.Error("before the index read: the deregistered space was sent")
	}
	deliver(ds)
	untouched("before the index read", v, 0, 0)
	if sibGets() == before {
		t.Fatal("the sibling was not probed: the tick delivered nothing")
	}

	// Between the read and the send.
	v = register("read-send")
	var once sync.Once
	lister.afterRead = func(page []space.ProbeTarget) {
		for _, tg := range page {
			if tg.ID == v.s.ID {
				once.Do(func() { deregister(v.s) })
			}
		}
	}
	tick()
	lister.afterRead = nil
	ds = q.take()
	if !named(ds, v.s.ID) {
		t.Fatal("between the read and the send: the space is not in the tick's messages, so the fence is not what refused it")
	}
	before = sibGets()
	deliver(ds)
	untouched("between the read and the send", v, 0, 0)
	if sibGets() == before {
		t.Error("the sibling was not probed")
	}

	// While the message waits.
	v = register("waiting")
	tick()
	ds = q.take()
	if !named(ds, v.s.ID) {
		t.Fatal("while the message waits: the space is not in the tick's messages")
	}
	deregister(v.s)
	before = sibGets()
	deliver(ds)
	untouched("while the message waits", v, 0, 0)
	if sibGets() == before {
		t.Error("the sibling was not probed")
	}

	// During the probe: deregistered while its credential is minted, after
	// the message's fence read.
	v = register("during")
	tick()
	ds = q.take()
	if !named(ds, v.s.ID) {
		t.Fatal("during the probe: the space is not in the tick's messages")
	}
	victim := v.s.ID
	var during sync.Once
	cm.mu.Lock()
	cm.onMint = func(s space.Space) {
		if s.ID == victim {
			during.Do(func() { deregister(s) })
		}
	}
	cm.mu.Unlock()
	deliver(ds)
	cm.mu.Lock()
	cm.onMint = nil
	cm.mu.Unlock()
	mints, gets := cm.of(victim), v.tc.Requests("/version")
	if mints != 1 {
		t.Fatalf("during the probe: %d mints, want the one under way", mints)
	}
	untouched("during the probe", v, mints, gets)
	// Delivered again (at least once), the next tick, and whatever the
	// prober queued (a re-probe): no further call for it.
	for i := range ds {
		ds[i].ReceiveCount = 2
	}
	deliver(ds)
	tick()
	deliver(q.take())
	untouched("during the probe, afterwards", v, mints, gets)
}

// TestTickOlderThanTheFenceIsDropped: a tick message handled after the
// deregistration fence stopped covering its index read (space.FenceCovers)
// is dropped before any cloud call, records no beat, and is not retried;
// the next tick sends its spaces again and they are probed.
func TestTickOlderThanTheFenceIsDropped(t *testing.T) {
	h := newHarness(t, time.Second)
	c := testcluster.NewForTest(t)
	s := h.register("late", false)
	h.minter.Set(s.ID, c.Credentials())
	if _, err := h.scheduler.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	readAt := h.clock.Now()
	h.clock.Advance(space.FenceRetention - space.ProbeIndexLag + time.Second)
	if space.FenceCovers(space.LiveAt(readAt), h.clock.Now()) {
		t.Fatal("the test's message is still covered")
	}
	ds := h.queue.due()
	if len(ds) != 1 {
		t.Fatalf("%d messages due, want 1", len(ds))
	}
	res, err := h.prober.Handle(t.Context(), ds[0])
	if err != nil || len(res) != 1 || res[0].Action != probing.ActionExpired {
		t.Fatalf("late tick: %+v, %v; want expired", res, err)
	}
	if failed := h.prober.HandleBatch(t.Context(), ds); len(failed) != 0 {
		t.Errorf("a late tick is acknowledged, not retried: %v", failed)
	}
	if h.minter.Mints(s.ID) != 0 || c.Requests("/version") != 0 {
		t.Errorf("late tick: %d mints, %d GET /version; want none", h.minter.Mints(s.ID), c.Requests("/version"))
	}
	if beats, err := h.store.ProbeBeats(t.Context()); err != nil || len(beats) != 0 {
		t.Errorf("beats %v (%v): a dropped tick records none", beats, err)
	}
	if _, err := h.scheduler.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	for _, d := range h.queue.due() {
		if _, err := h.prober.Handle(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	if h.minter.Mints(s.ID) != 1 || h.get(s.ID).Status != space.Active {
		t.Errorf("the next tick: %d mints, status %s; want it probed", h.minter.Mints(s.ID), h.get(s.ID).Status)
	}
}
