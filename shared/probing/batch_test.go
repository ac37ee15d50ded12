package probing_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"spaces"
	"spaces/infra/lambdarules"
	"spaces/infra/testcluster"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// A batch's spaces are probed at once and the invocation must end inside
// the prober's Timeout: the template's BatchSize messages of up to
// MaxSpaces spaces each must fit the prober's concurrency (one round of
// probes, not several), and the Timeout must hold that round: a mint and a
// probe of DefaultTimeout each, once more after a 401.
func TestBatchFitsTheProberTimeout(t *testing.T) {
	fns, err := lambdarules.Read(spaces.Template)
	if err != nil {
		t.Fatal(err)
	}
	fn := fns.Get("ProberFunction")
	src, ok := fn.Sources["Probes"]
	if !ok {
		t.Fatal("ProberFunction has no Probes event")
	}
	if n := src.BatchSize * probing.MaxSpaces; n > probing.DefaultConcurrency {
		t.Errorf("a batch of %d messages holds up to %d spaces, more than the %d the prober probes at once: its Timeout would hold several rounds", src.BatchSize, n, probing.DefaultConcurrency)
	}
	if round := 4 * probing.DefaultTimeout; fn.Timeout <= round {
		t.Errorf("prober Timeout %s does not hold one round of probes (%s)", fn.Timeout, round)
	}
}

// failFor fails the publication of the named spaces' transitions, each
// as many times as given.
type failFor struct {
	mu   sync.Mutex
	left map[string]int
	next probing.Publisher
}

func (f *failFor) PublishTransition(ctx context.Context, tr space.Transition) error {
	f.mu.Lock()
	n := f.left[tr.SpaceID]
	if n > 0 {
		f.left[tr.SpaceID] = n - 1
	}
	f.mu.Unlock()
	if n > 0 {
		return errors.New("event bus unavailable")
	}
	return f.next.PublishTransition(ctx, tr)
}

func targets(ss ...space.Space) []space.ProbeTarget {
	out := make([]space.ProbeTarget, len(ss))
	for i, s := range ss {
		out[i] = space.ProbeTarget{OrgID: s.OrgID, ID: s.ID}
	}
	return out
}

func multi(id string, ss ...space.Space) probing.Delivery {
	return probing.Delivery{MessageID: id, Body: probing.TickOf(targets(ss...)).Encode(), ReceiveCount: 1}
}

// A deregistered space inside a message of several is refused before any
// cloud call (no mint, no GET /version, nothing written) while its
// siblings are probed and stored; a duplicate delivery of the message
// writes nothing twice.
func TestMultiSpaceMessage(t *testing.T) {
	h := newHarness(t, 5*time.Second)
	c := testcluster.NewForTest(t)
	a, gone, b := h.register("multi-a", false), h.register("multi-gone", false), h.register("multi-b", false)
	for _, s := range []space.Space{a, gone, b} {
		h.minter.Set(s.ID, c.Credentials())
	}
	if err := h.svc.Deregister(t.Context(), h.org, gone.ID, 0, "test"); err != nil {
		t.Fatal(err)
	}
	d := multi("m1", a, gone, b)
	res, err := h.prober.Handle(t.Context(), d)
	if err != nil || len(res) != 3 {
		t.Fatalf("handle: %d results, %v", len(res), err)
	}
	if res[0].Action != probing.ActionProbed || res[1].Action != probing.ActionGone || res[2].Action != probing.ActionProbed ||
		!res[0].Written || res[1].Written || !res[2].Written {
		t.Errorf("results %+v: want a and b probed and written, the deregistered one gone", res)
	}
	if h.minter.Mints(gone.ID) != 0 || h.minter.Mints(a.ID) != 1 || h.minter.Mints(b.ID) != 1 {
		t.Errorf("mints: deregistered %d, siblings %d and %d; want 0, 1, 1", h.minter.Mints(gone.ID), h.minter.Mints(a.ID), h.minter.Mints(b.ID))
	}
	if n := c.Requests("/version"); n != 2 {
		t.Errorf("%d GET /version, want the two siblings'", n)
	}
	if raw := readRaw(t, h, gone.ID); raw.Version != 2 || raw.DeletedAt == nil || raw.Probe.LastProbeAt != nil {
		t.Errorf("deregistered space written: %+v", raw)
	}
	for _, s := range []space.Space{a, b} {
		if got := h.get(s.ID); got.Status != space.Active || got.Version != 2 {
			t.Errorf("%s: %s at version %d, want active at 2", s.ID, got.Status, got.Version)
		}
	}

	// The same message again (SQS delivers at least once): 5 s later each
	// sibling's tick is within MinGap (a read, no probe); 30 s later each
	// is probed again, and its unchanged success is not written. Nothing is written twice, no event is published twice.
	for i, step := range []time.Duration{5 * time.Second, 30 * time.Second} {
		h.clock.Advance(step)
		again := d
		again.ReceiveCount = 2 + i
		if failed := h.prober.HandleBatch(t.Context(), []probing.Delivery{again}); len(failed) != 0 {
			t.Fatalf("duplicate delivery failed: %v", failed)
		}
		for _, s := range []space.Space{a, b} {
			if got := h.get(s.ID); got.Version != 2 {
				t.Errorf("after duplicate %d: %s at version %d, want still 2", i+1, s.ID, got.Version)
			}
			if n := len(h.events.of(s.ID)); n != 1 {
				t.Errorf("after duplicate %d: %d events for %s", i+1, n, s.ID)
			}
			if n := historyItems(t, h, s.ID); n != 1 {
				t.Errorf("after duplicate %d: %d history items for %s", i+1, n, s.ID)
			}
		}
		if h.minter.Mints(gone.ID) != 0 {
			t.Error("the deregistered space was minted for on a duplicate")
		}
	}
	if n := c.Requests("/version"); n != 4 {
		t.Errorf("%d GET /version after both duplicates, want 2 + 2 (the second one, past MinGap)", n)
	}
	if h.queue.pending() != 0 {
		t.Errorf("%d spaces queued, want none", h.queue.pending())
	}
}

// When one space of a message fails (here: its transition cannot be
// published), the message is acknowledged and only that space is sent
// again (Retry, after ReprobeDelay), which republishes its transition
// without probing its siblings again. A message whose spaces all failed, a
// Retry that fails again, and a message whose failed space cannot be sent
// again are retried whole by SQS.
func TestOneSpaceFailure(t *testing.T) {
	h := newHarness(t, 5*time.Second)
	c := testcluster.NewForTest(t)
	reg := func(name string) space.Space {
		s := h.register(name, false)
		h.minter.Set(s.ID, c.Credentials())
		return s
	}
	a, bad, b := reg("one-a"), reg("one-bad"), reg("one-b")
	flaky := &failFor{left: map[string]int{bad.ID: 1}, next: h.events}
	h.prober.Events = flaky
	if failed := h.prober.HandleBatch(t.Context(), []probing.Delivery{multi("m1", a, bad, b)}); len(failed) != 0 {
		t.Fatalf("a message with one failed space was reported failed: %v", failed)
	}
	h.queue.mu.Lock()
	queued := slices.Clone(h.queue.msgs)
	h.queue.mu.Unlock()
	if len(queued) != 1 || queued[0].msg.ID != bad.ID || !queued[0].msg.Retry || queued[0].msg.Spaces != nil ||
		queued[0].due.Sub(h.clock.Now()) != probing.DefaultReprobeDelay {
		t.Fatalf("queued %+v: want one Retry of the failed space alone, after %s", queued, probing.DefaultReprobeDelay)
	}
	if got := h.get(bad.ID); got.Status != space.Active || len(h.events.of(bad.ID)) != 0 {
		t.Fatalf("failed space: %s, %d events; want its write stored and its event not published", got.Status, len(h.events.of(bad.ID)))
	}
	probes := c.Requests("/version")
	h.clock.Advance(probing.DefaultReprobeDelay)
	ds := h.queue.due()
	if failed := h.prober.HandleBatch(t.Context(), ds); len(ds) != 1 || len(failed) != 0 {
		t.Fatalf("retry: %d due, failed %v", len(ds), failed)
	}
	for _, s := range []space.Space{a, bad, b} {
		if evs := h.events.of(s.ID); len(evs) != 1 || evs[0].To != space.Active {
			t.Errorf("%s: events %+v, want unknown→active once", s.ID, evs)
		}
		if got := h.get(s.ID); got.Version != 2 {
			t.Errorf("%s at version %d, want 2: written once", s.ID, got.Version)
		}
	}
	if n := c.Requests("/version"); n != probes {
		t.Errorf("the retry probed %d more times; the siblings were not to be probed again, nor the failed space within MinGap", n-probes)
	}

	// Every space failed: the whole message is retried by SQS, nothing sent.
	x, y := reg("all-x"), reg("all-y")
	flaky.left = map[string]int{x.ID: 1, y.ID: 1}
	if failed := h.prober.HandleBatch(t.Context(), []probing.Delivery{multi("m2", x, y)}); !slices.Equal(failed, []string{"m2"}) {
		t.Errorf("every space failed: %v reported, want m2", failed)
	}
	// A Retry that fails again is not split again.
	z, w := reg("retry-z"), reg("retry-w")
	flaky.left = map[string]int{z.ID: 1}
	m := probing.TickOf(targets(z, w))
	m.Retry = true
	if failed := h.prober.HandleBatch(t.Context(), []probing.Delivery{{MessageID: "m3", Body: m.Encode(), ReceiveCount: 1}}); !slices.Equal(failed, []string{"m3"}) {
		t.Errorf("a failed Retry: %v reported, want m3", failed)
	}
	// The failed space cannot be sent again: the whole message is retried.
	u, v := reg("nosend-u"), reg("nosend-v")
	flaky.left = map[string]int{u.ID: 1}
	p := *h.prober
	p.Queue = failingQueue{errors.New("sqs unavailable")}
	if failed := p.HandleBatch(t.Context(), []probing.Delivery{multi("m4", u, v)}); !slices.Equal(failed, []string{"m4"}) {
		t.Errorf("re-send failed: %v reported, want m4", failed)
	}
	if h.queue.pending() != 0 {
		t.Errorf("%d spaces queued, want none: only a message whose spaces partly failed sends them again", h.queue.pending())
	}
}
