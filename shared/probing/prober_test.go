package probing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"spaces/infra/testcluster"
	"spaces/shared/probing"
	"spaces/shared/space"
)

func tick(s space.Space) probing.Delivery {
	return probing.Delivery{MessageID: "m-" + s.ID, Body: probing.Message{OrgID: s.OrgID, ID: s.ID}.Encode(), ReceiveCount: 1}
}

// A space deregistered while its probe is in flight stays deregistered:
// the probe's write is conditional on the space not being deleted.
func TestDeregisteredDuringProbeStaysDeregistered(t *testing.T) {
	h := newHarness(t, 5*time.Second)
	c := testcluster.NewForTest(t)
	c.SetMode(testcluster.Slow(700 * time.Millisecond))
	s := h.register("inflight", false)
	h.minter.Set(s.ID, c.Credentials())

	type handled struct {
		res probing.Result
		err error
	}
	done := make(chan handled, 1)
	go func() {
		res, err := one(h.prober.Handle(context.Background(), tick(s)))
		done <- handled{res, err}
	}()
	for c.Requests("/version") == 0 { // the probe has reached the cluster
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.svc.Deregister(t.Context(), h.org, s.ID, 0, "test"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatalf("handle: %v", got.err)
	}
	if got.res.Action != probing.ActionGone || got.res.Written || !got.res.Outcome.OK() {
		t.Errorf("result %+v, want a successful probe acknowledged as gone, nothing written", got.res)
	}
	if _, err := h.store.GetSpace(t.Context(), h.org, s.ID); space.KindOf(err) != space.KindNotFound {
		t.Fatalf("space after the late probe: %v, want not found", err)
	}
	raw := readRaw(t, h, s.ID)
	if raw.Version != 2 || raw.DeletedAt == nil || raw.Status != space.Unknown || raw.Probe.LastProbeAt != nil {
		t.Errorf("stored space %+v: want the deregistration (version 2, deleted, unknown, never probed)", raw)
	}
	if n := len(h.events.of(s.ID)); n != 0 {
		t.Errorf("%d events published for a deregistered space", n)
	}
	if hist := historyItems(t, h, s.ID); hist != 0 {
		t.Errorf("%d history items", hist)
	}

	// A probe message for the deleted space is acknowledged, probes
	// nothing and writes nothing.
	before := c.Requests("/version")
	res, err := one(h.prober.Handle(t.Context(), tick(s)))
	if err != nil || res.Action != probing.ActionGone {
		t.Fatalf("message for a deleted space: %+v, %v", res, err)
	}
	if c.Requests("/version") != before {
		t.Error("a deleted space was probed")
	}
	if after := readRaw(t, h, s.ID); after.Version != raw.Version || !after.UpdatedAt.Equal(raw.UpdatedAt) {
		t.Errorf("deleted space written: version %d → %d", raw.Version, after.Version)
	}
	if failed := h.prober.HandleBatch(t.Context(), []probing.Delivery{tick(s)}); len(failed) != 0 {
		t.Errorf("a message for a deleted space was reported failed: %v", failed)
	}
}

// A message for a space that never existed, or a synthetic one, is
// acknowledged and writes nothing; a malformed message is reported failed
// (so that it ends in the dead-letter queue) and writes nothing.
func TestAbsentSyntheticAndMalformed(t *testing.T) {
	h := newHarness(t, time.Second)
	syn := h.register("synthetic", true)
	res, err := one(h.prober.Handle(t.Context(), tick(space.Space{OrgID: h.org, ID: "00000000-0000-4000-8000-000000000000"})))
	if err != nil || res.Action != probing.ActionGone {
		t.Errorf("absent: %+v %v", res, err)
	}
	res, err = one(h.prober.Handle(t.Context(), tick(syn)))
	if err != nil || res.Action != probing.ActionSynthetic || h.minter.Mints(syn.ID) != 0 {
		t.Errorf("synthetic: %+v %v, %d mints", res, err, h.minter.Mints(syn.ID))
	}
	if got := h.get(syn.ID); got.Version != 1 {
		t.Errorf("synthetic space written: version %d", got.Version)
	}
	bad := []probing.Delivery{
		{MessageID: "a", Body: "not json"},
		{MessageID: "b", Body: `{"org_id":"","id":"x"}`},
		{MessageID: "c", Body: `{"org_id":"o","id":"00000000-0000-4000-8000-000000000000","kind":"reprobe"}`},
		{MessageID: "d", Body: `{"org_id":"o","id":"00000000-0000-4000-8000-000000000000","kind":"nope"}`},
	}
	failed := h.prober.HandleBatch(t.Context(), bad)
	if len(failed) != len(bad) {
		t.Errorf("malformed messages reported failed: %v, want all of a b c d", failed)
	}
	_, err = one(h.prober.Handle(t.Context(), bad[1]))
	if err == nil || !contains(err.Error(), "org_id is empty") || !contains(err.Error(), "id is not a UUID") {
		t.Errorf("error %v does not name both problems", err)
	}
	if got := h.get(syn.ID); got.Version != 1 {
		t.Error("a malformed message changed a space")
	}
}

// Re-probes and ticks do not pile up: a re-probe overtaken by a later
// write is dropped, a tick right after another probe is dropped, and one
// failure yields exactly one re-probe.
func TestDuplicatesAreBounded(t *testing.T) {
	h := newHarness(t, time.Second)
	c := testcluster.NewForTest(t)
	s := h.register("dups", false)
	h.minter.Set(s.ID, c.Credentials())
	enq := probing.Enqueuer{Queue: h.queue}

	// Registration probe: probed at once, not subject to the gap.
	if err := enq.ProbeRegistered(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	ds := h.queue.due()
	if len(ds) != 1 {
		t.Fatalf("registration enqueued %d messages due now", len(ds))
	}
	res, err := one(h.prober.Handle(t.Context(), ds[0]))
	if err != nil || res.Action != probing.ActionProbed || res.Space.Status != space.Active {
		t.Fatalf("registration probe: %+v %v", res, err)
	}
	if err := enq.ProbeRegistered(t.Context(), h.register("syn", true)); err != nil || h.queue.pending() != 0 {
		t.Errorf("a synthetic registration was enqueued (%v)", err)
	}

	// A tick 10 s later is dropped without a probe.
	h.clock.Advance(10 * time.Second)
	before := c.Requests("/version")
	if res, err := one(h.prober.Handle(t.Context(), tick(s))); err != nil || res.Action != probing.ActionRecent {
		t.Errorf("tick after 10 s: %+v %v", res, err)
	}
	if c.Requests("/version") != before {
		t.Error("the dropped tick probed")
	}

	// A failure 30 s later enqueues exactly one re-probe for its version.
	h.clock.Advance(30 * time.Second)
	c.SetMode(testcluster.Down())
	res, err = one(h.prober.Handle(t.Context(), tick(s)))
	if err != nil || !res.Reprobe || res.Space.Probe.ConsecutiveFailures != 1 {
		t.Fatalf("failed tick: %+v %v", res, err)
	}
	if h.queue.pending() != 1 {
		t.Fatalf("%d messages pending, want one re-probe", h.queue.pending())
	}
	// Another tick lands before the re-probe (say a redelivered tick message
	// 25 s later): it probes, and the re-probe it overtook is dropped.
	h.clock.Advance(25 * time.Second)
	res, err = one(h.prober.Handle(t.Context(), tick(s)))
	if err != nil || res.Space.Probe.ConsecutiveFailures != 2 {
		t.Fatalf("second tick: %+v %v", res, err)
	}
	ds = h.queue.due()
	if len(ds) != 1 {
		t.Fatalf("%d due, want the first re-probe", len(ds))
	}
	if res, err := one(h.prober.Handle(t.Context(), ds[0])); err != nil || res.Action != probing.ActionSuperseded {
		t.Errorf("overtaken re-probe: %+v %v", res, err)
	}
	// The chain goes on from the second tick's re-probe and stops at the
	// threshold: in all, one re-probe per failure below the threshold.
	h.clock.Advance(12 * time.Second)
	ds = h.queue.due()
	if len(ds) != 1 {
		t.Fatalf("%d due, want the second re-probe", len(ds))
	}
	res, err = one(h.prober.Handle(t.Context(), ds[0]))
	if err != nil || res.Space.Status != space.Inactive || res.Reprobe {
		t.Fatalf("third failure: %+v %v", res, err)
	}
	if h.queue.pending() != 0 || h.queue.sent != 3 {
		t.Errorf("%d pending, %d sent; want 0 and 3 (registration + 2 re-probes)", h.queue.pending(), h.queue.sent)
	}
}

// A probe whose write meets a moved version re-reads and re-applies once.
func TestConflictReappliesOnce(t *testing.T) {
	h := newHarness(t, time.Second)
	c := testcluster.NewForTest(t)
	c.SetMode(testcluster.Slow(400 * time.Millisecond))
	s := h.register("conflict", false)
	h.minter.Set(s.ID, c.Credentials())
	done := make(chan error, 1)
	var res probing.Result
	go func() {
		var err error
		res, err = one(h.prober.Handle(context.Background(), tick(s)))
		done <- err
	}()
	for c.Requests("/version") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// An internal caller moves the version while the probe is in flight.
	if _, err := h.svc.SetStatus(t.Context(), h.org, s.ID, 1, space.Inactive, "maintenance"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := h.get(s.ID)
	if !res.Written || got.Version != 3 || got.Status != space.Active {
		t.Errorf("after conflict: written %t, version %d, status %s; want the probe re-applied at version 3, active", res.Written, got.Version, got.Status)
	}
	// The manual unknown→inactive and the probe's inactive→active, each
	// recorded once (both at the same instant of the fake clock, so in
	// either order).
	hist := h.history(s.ID)
	seen := map[string]bool{}
	for _, tr := range hist {
		seen[string(tr.From)+"→"+string(tr.To)+":"+tr.Reason] = true
	}
	if len(hist) != 2 || !seen["unknown→inactive:maintenance"] || !seen["inactive→active:"] {
		t.Errorf("history %+v: want unknown→inactive (maintenance) and inactive→active", hist)
	}
}

// A redelivered message republishes a transition whose publish failed.
func TestRepublishAfterFailedPublish(t *testing.T) {
	h := newHarness(t, time.Second)
	c := testcluster.NewForTest(t)
	s := h.register("republish", false)
	h.minter.Set(s.ID, c.Credentials())
	flaky := &failingEvents{fail: 1, next: h.events}
	h.prober.Events = flaky
	d := tick(s)
	if failed := h.prober.HandleBatch(t.Context(), []probing.Delivery{d}); len(failed) != 1 {
		t.Fatalf("a failed publish was not reported: %v", failed)
	}
	if got := h.get(s.ID); got.Status != space.Active {
		t.Fatalf("status %s: the write must stand", got.Status)
	}
	h.clock.Advance(3 * time.Minute) // the visibility timeout
	d.ReceiveCount = 2
	if failed := h.prober.HandleBatch(t.Context(), []probing.Delivery{d}); len(failed) != 0 {
		t.Fatalf("redelivery failed: %v", failed)
	}
	evs := h.events.of(s.ID)
	if len(evs) != 1 || evs[0].From != space.Unknown || evs[0].To != space.Active {
		t.Errorf("events %+v, want unknown→active once", evs)
	}
	// A third delivery finds nothing unpublished.
	d.ReceiveCount = 3
	h.clock.Advance(3 * time.Minute)
	h.prober.HandleBatch(t.Context(), []probing.Delivery{d})
	if n := len(h.events.of(s.ID)); n != 1 {
		t.Errorf("%d events after a third delivery", n)
	}
}

type failingEvents struct {
	fail int
	next probing.Publisher
}

func (f *failingEvents) PublishTransition(ctx context.Context, tr space.Transition) error {
	if f.fail > 0 {
		f.fail--
		return errors.New("event bus unavailable")
	}
	return f.next.PublishTransition(ctx, tr)
}
