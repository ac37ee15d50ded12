package probing_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"spaces/infra/awscost"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// agentFleet is a harness's agent spaces and their agents, renewing
// through space.Agents as the API does (on the unmetered store).
type agentFleet struct {
	h      *harness
	agents *space.Agents
	mu     sync.Mutex
	creds  map[string]string
}

func newAgentFleet(h *harness) *agentFleet {
	return &agentFleet{h: h, agents: &space.Agents{Store: h.store, Spaces: h.store, Now: h.clock.Now}, creds: map[string]string{}}
}

// add registers an agent space; connected, its agent exchanges its
// bootstrap and renews its lease once.
func (f *agentFleet) add(name string, connected bool) space.Space {
	f.h.t.Helper()
	s, _, err := f.h.svc.Register(context.Background(), f.h.org, space.RegisterInput{
		Provider: space.AWS, SpaceType: space.TypeKubernetes, CloudAccountID: f.h.account.ID,
		Config: space.Config{"clusterName": clusterName(name), "region": "us-east-1"}, Connectivity: space.ViaAgent,
	}, "")
	if err != nil {
		f.h.t.Fatal(err)
	}
	if !connected {
		return s
	}
	b, err := f.agents.IssueBootstrap(context.Background(), s)
	if err != nil {
		f.h.t.Fatal(err)
	}
	cred, err := f.agents.Exchange(context.Background(), b.Token)
	if err != nil {
		f.h.t.Fatal(err)
	}
	f.mu.Lock()
	f.creds[s.ID] = cred.Credential
	f.mu.Unlock()
	f.renew()
	return s
}

// stop stops the space's agent (its space deregistered).
func (f *agentFleet) stop(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.creds, id)
}

// clusterName is name with every character a cluster name refuses
// replaced by "-".
func clusterName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
}

// renew renews every connected agent's lease now.
func (f *agentFleet) renew() {
	f.h.t.Helper()
	rep := space.LeaseReport{AgentVersion: "0.1.0", ServerVersion: space.ServerVersion{GitVersion: "v1.37.2", Platform: "linux/amd64"}}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, cred := range f.creds {
		if _, err := f.agents.RenewLease(context.Background(), cred, id, rep); err != nil {
			f.h.t.Fatal(err)
		}
	}
}

// meterProber has the harness's prober read and write through a store
// whose every request m counts.
func meterProber(h *harness) *awscost.Meter {
	m := awscost.New()
	metered := dynamostore.New(awsclient.DynamoDB(m.Instrument(h.env.Config), h.env.Endpoint), h.table, dynamostore.WithClock(h.clock.Now))
	h.prober.Store, h.prober.Leases = metered, metered
	return m
}

// tickAgents runs a scheduler tick and hands back its messages, due a
// minute later (every agent renewing just before they are delivered).
func tickAgents(h *harness, f *agentFleet) []probing.Delivery {
	h.t.Helper()
	if _, err := h.scheduler.Tick(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	f.renew()
	return h.queue.due()
}

// TestSteadyAgentCheckReadsHalfAUnit counts the read units of an agent
// space's steady minute check (its lease fresh, its status active and
// unchanged) on the production path (scheduler, index and prober on the
// emulator, awscost.Meter counting the prober's requests): one eventually
// consistent GetItem of its lease, half a unit, and nothing else of it
// (no read of the space, no fence Query); the tick's beat is its one
// write. The old form of the same tick (ids only, as a prober before this
// one was sent) is still read: the space and its lease, strongly
// consistent, 2 units a space.
func TestSteadyAgentCheckReadsHalfAUnit(t *testing.T) {
	h := newHarness(t, time.Second)
	h.prober.Leases = h.store
	f := newAgentFleet(h)
	const n = 3
	var ids []space.ProbeTarget
	for i := range n {
		s := f.add("agent-"+string(rune('a'+i)), true)
		ids = append(ids, space.ProbeTarget{OrgID: s.OrgID, ID: s.ID})
	}
	// Two ticks: the first makes them active (a write each), the second
	// finds them unchanged.
	for range 2 {
		for _, d := range tickAgents(h, f) {
			if _, err := h.prober.Handle(t.Context(), d); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, id := range ids {
		if s := h.get(id.ID); s.Status != space.Active {
			t.Fatalf("%s is %s before the measured tick", id.ID, s.Status)
		}
	}

	meter := meterProber(h)
	check := func(form string, ds []probing.Delivery) awscost.Usage {
		t.Helper()
		meter.Take()
		checked := 0
		for _, d := range ds {
			rs, err := h.prober.Handle(t.Context(), d)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.Action != probing.ActionProbed || r.Written || r.Outcome.Reason != "" {
					t.Errorf("%s: %s: %s, written %t, reason %q; want checked, unchanged, fresh", form, r.Space.ID, r.Action, r.Written, r.Outcome.Reason)
				}
				checked++
			}
		}
		if checked != n {
			t.Fatalf("%s: %d spaces checked, want %d", form, checked, n)
		}
		u := meter.Take()
		for _, op := range u.Ops() {
			t.Logf("%s: %-30s %3.0f requests, RRU %4.1f, WRU %4.1f", form, op, u.Requests[op], u.RRU[op], u.WRU[op])
		}
		return u
	}

	ds := tickAgents(h, f)
	for _, d := range ds {
		if !strings.Contains(d.Body, `"digest"`) {
			t.Fatalf("an agent tick carries no digest: %s", d.Body)
		}
	}
	u := check("carried", ds)
	if got := u.Requests["DynamoDB GetItem"]; got != n {
		t.Errorf("carried: %.0f GetItem, want %d (a lease each)", got, n)
	}
	if got, want := u.TotalRRU(), 0.5*n; got != want {
		t.Errorf("carried: %.1f read units for %d agent spaces, want %.1f (half a unit a check)", got, n, want)
	}
	if got := u.Requests["DynamoDB Query"]; got != 0 {
		t.Errorf("carried: %.0f Query (a fence read): an agent check needs none", got)
	}

	// The old form: the same spaces by ids only, a minute later.
	h.clock.Advance(time.Minute)
	f.renew()
	old := probing.Delivery{MessageID: "old", Body: probing.TickOf(ids).Encode(), ReceiveCount: 1}
	u = check("ids only", []probing.Delivery{old})
	if got, want := u.TotalRRU(), 2.0*n; got != want {
		t.Errorf("ids only: %.1f read units for %d agent spaces, want %.1f (the space and the lease, strongly consistent)", got, n, want)
	}
}

// staleLeases answers GetLeaseEventually with a lease of its own (one
// an eventually consistent read could return: older than the stored one)
// and GetLease with the store's, counting both.
type staleLeases struct {
	probing.Leases
	stale              space.Lease
	eventually, strong int
}

func (s *staleLeases) GetLeaseEventually(context.Context, string) (space.Lease, error) {
	s.eventually++
	return s.stale, nil
}

func (s *staleLeases) GetLease(ctx context.Context, id string) (space.Lease, error) {
	s.strong++
	return s.Leases.GetLease(ctx, id)
}

// TestStaleLeaseReadWritesNothing: an eventually consistent lease read
// that missed the latest renewal (here, by three intervals: a lease that
// says the space must turn inactive) does not make the space inactive;
// the result, which would be written, is decided again on a strongly
// consistent read, which sees the renewal. A fresh stale read is kept:
// one read, no other.
func TestStaleLeaseReadWritesNothing(t *testing.T) {
	c := newClock()
	store := newMemStore()
	now := c.Now()
	probed := now.Add(-time.Minute)
	s := space.Space{ID: "6f1c3a52-4c1e-4a8b-9d6e-0c2f5b7a9e10", OrgID: "o", Provider: space.AWS, SpaceType: space.TypeKubernetes,
		Connectivity: space.ViaAgent, Status: space.Active, Version: 4, CreatedAt: now.Add(-time.Hour),
		Probe: space.Probe{LastProbeAt: &probed, LastSuccessAt: &probed, ServerVersion: &space.ServerVersion{GitVersion: "v1.37.2", Platform: "linux/amd64"}}}
	store.add(s)
	renewed := now.Add(-time.Second)
	leases := &memLeases{at: map[string]time.Time{s.ID: renewed}, presence: map[string]space.Presence{}}
	old := now.Add(-3*space.LeaseInterval - space.LeaseGrace - time.Second)
	stale := &staleLeases{Leases: leases, stale: space.Lease{RenewedAt: &old, ServerVersion: &space.ServerVersion{GitVersion: "v1.37.2", Platform: "linux/amd64"}}}
	if o := (space.LeaseCadence(0)).Outcome(stale.stale, now); o.Missed < space.FailureThreshold {
		t.Fatalf("the stale lease misses %d intervals: the test needs one that would make the space inactive", o.Missed)
	}
	evs := &events{}
	q := &captureQueue{}
	p := probing.NewProber(probing.Prober{Store: store, Leases: stale, Events: evs, Queue: q, Now: c.Now, Log: discardLogger()})
	d := space.DigestOf(s)
	msg := probing.CarriedTickOf([]space.ProbeTarget{{OrgID: s.OrgID, ID: s.ID, Shard: "a00", Digest: &d}}, now)
	deliver := func() probing.Result {
		t.Helper()
		r, err := one(p.Handle(t.Context(), probing.Delivery{MessageID: "1", Body: msg.Encode(), ReceiveCount: 1}))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	r := deliver()
	if got := store.spaces[s.ID]; got.Status != space.Active || r.Outcome.Reason != "" || store.writes != 0 || len(evs.got) != 0 || len(q.msgs) != 0 {
		t.Errorf("a stale lease read: stored %s, outcome %q, %d writes, %d events, %d messages; want active, fresh, nothing written", got.Status, r.Outcome.Reason, store.writes, len(evs.got), len(q.msgs))
	}
	if stale.eventually != 1 || stale.strong != 1 {
		t.Errorf("%d eventually consistent reads, %d strongly consistent; want 1 and 1 (the failure confirmed)", stale.eventually, stale.strong)
	}

	// A fresh read that changes nothing is kept.
	stale.eventually, stale.strong = 0, 0
	c.Advance(time.Minute)
	fresh := c.Now().Add(-time.Second)
	stale.stale.RenewedAt = &fresh
	if deliver(); stale.eventually != 1 || stale.strong != 0 || store.writes != 0 {
		t.Errorf("a fresh, unchanged lease: %d eventually consistent reads, %d strongly consistent, %d writes; want 1, 0, 0", stale.eventually, stale.strong, store.writes)
	}
}

// hookedLeases calls after (if set) once a lease read returned, before
// its answer is used.
type hookedLeases struct {
	probing.Leases
	mu                      sync.Mutex
	afterEventual, afterGet func(id string)
}

func (l *hookedLeases) hook(f *func(string), id string) {
	l.mu.Lock()
	h := *f
	l.mu.Unlock()
	if h != nil {
		h(id)
	}
}

func (l *hookedLeases) GetLeaseEventually(ctx context.Context, id string) (space.Lease, error) {
	out, err := l.Leases.GetLeaseEventually(ctx, id)
	l.hook(&l.afterEventual, id)
	return out, err
}

func (l *hookedLeases) GetLease(ctx context.Context, id string) (space.Lease, error) {
	out, err := l.Leases.GetLease(ctx, id)
	l.hook(&l.afterGet, id)
	return out, err
}

// hookedStore calls beforeWrite (if set) once an update has read the space
// and applied the result, before its conditional write.
type hookedStore struct {
	probing.Store
	mu          sync.Mutex
	beforeWrite func(id string)
}

func (s *hookedStore) UpdateSpace(ctx context.Context, org, id string, u space.Update[space.Space]) (space.Updated[space.Space], error) {
	apply := u.Apply
	u.Apply = func(cur space.Space) (space.Space, error) {
		next, err := apply(cur)
		s.mu.Lock()
		h := s.beforeWrite
		s.mu.Unlock()
		if err == nil && h != nil {
			h(id)
		}
		return next, err
	}
	return s.Store.UpdateSpace(ctx, org, id, u)
}

// TestAgentDeregisteredAtEveryInstant deregisters an agent space at each
// instant of its check's life, on the production path (the scheduler, the
// probe index, the prober and the store on the emulator), its agent
// connected (so its check, were it stored, would be the space's first, and
// a transition to active with an event), with a connected sibling in the
// same messages: before the index read, between the read and the send,
// while the message waits, during the eventually consistent lease read,
// during the strongly consistent one, and between the update's read of
// the space and its conditional write; and, for a message of the old form
// (ids only: the space read first), after that read. An agent message
// has no fence read (Prober.fence); what holds at every instant is that
// nothing is written for the space (its item is the tombstone, its
// history empty), no event is published, no re-probe is queued, and the
// message is acknowledged (no error, so SQS does not deliver it again and
// again), as it is when delivered again; while the sibling is checked.
func TestAgentDeregisteredAtEveryInstant(t *testing.T) {
	h := newHarness(t, time.Second)
	leases := &hookedLeases{Leases: h.store}
	store := &hookedStore{Store: h.store}
	h.prober.Leases, h.prober.Store = leases, store
	lister := &hookedLister{TargetLister: h.store}
	h.scheduler.Targets = lister
	f := newAgentFleet(h)
	sibling := f.add("sibling", true)

	deregister := func(id string) {
		f.stop(id)
		if err := h.svc.Deregister(context.Background(), h.org, id, 0, "test"); err != nil {
			t.Error(err)
		}
	}
	deliver := func(stage string, ds []probing.Delivery) {
		t.Helper()
		if failed := h.prober.HandleBatch(t.Context(), ds); len(failed) != 0 {
			t.Fatalf("%s: messages failed (SQS would deliver them again): %v", stage, failed)
		}
	}
	queued := func(id string) bool {
		h.queue.mu.Lock()
		defer h.queue.mu.Unlock()
		for _, m := range h.queue.msgs {
			for _, one := range m.msg.Each() {
				if one.ID == id {
					return true
				}
			}
		}
		return false
	}
	untouched := func(stage string, v space.Space) {
		t.Helper()
		raw := readRaw(t, h, v.ID)
		if !raw.Deleted() || raw.Probe.LastProbeAt != nil || raw.Status != space.Unknown {
			t.Errorf("%s: the deregistered space was written: %s, last probe %v", stage, raw.Status, raw.Probe.LastProbeAt)
		}
		if n := historyItems(t, h, v.ID); n != 0 {
			t.Errorf("%s: %d history items for the deregistered space", stage, n)
		}
		if n := len(h.events.of(v.ID)); n != 0 {
			t.Errorf("%s: %d transitions of the deregistered space published", stage, n)
		}
		if queued(v.ID) {
			t.Errorf("%s: a message for the deregistered space is queued (a re-probe)", stage)
		}
	}
	// waiting, if set, deregisters the victim once its message is sent,
	// before it is delivered.
	var waiting func(v space.Space, fired *bool)
	// stage runs a tick whose messages are delivered a minute later,
	// with the victim deregistered by arm's hook; it checks that the
	// victim was named (or not, for the index read), that it is untouched
	// after the delivery and after a redelivery, and that the sibling was
	// checked.
	stage := func(name string, wantNamed bool, arm func(victim space.Space, fired *bool), disarm func()) {
		t.Helper()
		v := f.add(name, true)
		fired := false
		arm(v, &fired)
		ds := tickAgents(h, f)
		if got := named(ds, v.ID); got != wantNamed {
			t.Fatalf("%s: the victim named in the tick's messages: %t, want %t", name, got, wantNamed)
		}
		if waiting != nil {
			waiting(v, &fired)
		}
		deliver(name, ds)
		disarm()
		if !fired {
			t.Fatalf("%s: the victim was never deregistered: the instant was not reached", name)
		}
		untouched(name, v)
		for i := range ds {
			ds[i].ReceiveCount = 2
		}
		deliver(name+", delivered again", ds)
		untouched(name+", delivered again", v)
		if after := h.get(sibling.ID); after.Status != space.Active {
			t.Errorf("%s: the sibling is %s, not checked", name, after.Status)
		}
	}
	none := func() {}
	once := func(fired *bool, id string) func(string) {
		var o sync.Once
		return func(got string) {
			if got == id {
				o.Do(func() { deregister(id); *fired = true })
			}
		}
	}

	stage("before the index read", false, func(v space.Space, fired *bool) { deregister(v.ID); *fired = true }, none)
	stage("between the read and the send", true, func(v space.Space, fired *bool) {
		var o sync.Once
		lister.afterAgentRead = func(page []space.ProbeTarget) {
			for _, tg := range page {
				if tg.ID == v.ID {
					o.Do(func() { deregister(v.ID); *fired = true })
				}
			}
		}
	}, func() { lister.afterAgentRead = nil })
	waiting = func(v space.Space, fired *bool) { deregister(v.ID); *fired = true }
	stage("while the message waits", true, func(space.Space, *bool) {}, none)
	waiting = nil
	stage("during the eventually consistent lease read", true, func(v space.Space, fired *bool) {
		leases.mu.Lock()
		leases.afterEventual = once(fired, v.ID)
		leases.mu.Unlock()
	}, func() { leases.mu.Lock(); leases.afterEventual = nil; leases.mu.Unlock() })
	stage("during the strongly consistent lease read", true, func(v space.Space, fired *bool) {
		leases.mu.Lock()
		leases.afterGet = once(fired, v.ID)
		leases.mu.Unlock()
	}, func() { leases.mu.Lock(); leases.afterGet = nil; leases.mu.Unlock() })
	stage("between the space's read and its write", true, func(v space.Space, fired *bool) {
		store.mu.Lock()
		store.beforeWrite = once(fired, v.ID)
		store.mu.Unlock()
	}, func() { store.mu.Lock(); store.beforeWrite = nil; store.mu.Unlock() })

	// The old form, ids only: the prober reads the space (live), then its
	// lease; deregistered after that read, its update writes on the space
	// as read, and the write's condition refuses it (the space is read
	// again: gone).
	v := f.add("ids only", true)
	fired := false
	leases.mu.Lock()
	leases.afterGet = once(&fired, v.ID)
	leases.mu.Unlock()
	h.clock.Advance(time.Minute)
	f.renew()
	ds := []probing.Delivery{{MessageID: "old", Body: probing.TickOf([]space.ProbeTarget{{OrgID: v.OrgID, ID: v.ID}, {OrgID: sibling.OrgID, ID: sibling.ID}}).Encode(), ReceiveCount: 1}}
	deliver("ids only", ds)
	leases.mu.Lock()
	leases.afterGet = nil
	leases.mu.Unlock()
	if !fired {
		t.Fatal("ids only: the victim was never deregistered")
	}
	untouched("ids only", v)
	ds[0].ReceiveCount = 2
	deliver("ids only, delivered again", ds)
	untouched("ids only, delivered again", v)

	// The next tick names none of the victims.
	if _, err := h.scheduler.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	ds = h.queue.due()
	for _, d := range ds {
		if strings.Count(d.Body, `"id"`) != 1 || !strings.Contains(d.Body, sibling.ID) {
			t.Errorf("the next tick names more than the sibling: %s", d.Body)
		}
	}
	deliver("the next tick", ds)
}
