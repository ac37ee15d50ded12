package dynamostore_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestAttemptsInFlightBounded: an endpoint gives at most max places, on
// its first hold too; a place given back is taken again; a hold whose
// holder died lapses at its time and is then cleared by the next taker;
// two endpoints' places are apart.
func TestAttemptsInFlightBounded(t *testing.T) {
	store, _, _, _ := webhookFixture(t)
	ctx := t.Context()
	ep, other := uuid.NewString(), uuid.NewString()
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	until := t0.Add(30 * time.Second)
	hold := func(ep, holder string, now time.Time) bool {
		t.Helper()
		ok, err := store.HoldAttempt(ctx, ep, holder, 2, now, now.Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !hold(ep, "a", t0) || !hold(ep, "b", t0) {
		t.Fatal("the first two holds were refused")
	}
	if hold(ep, "c", t0) {
		t.Fatal("a third hold was given with max 2")
	}
	if !hold(other, "c", t0) {
		t.Fatal("another endpoint's hold was refused")
	}
	if err := store.ReleaseAttempt(ctx, ep, "a"); err != nil {
		t.Fatal(err)
	}
	if !hold(ep, "c", t0) {
		t.Fatal("a place given back was not taken again")
	}
	// b and c die without giving back: refused until their holds lapse.
	if hold(ep, "d", until.Add(-time.Millisecond)) {
		t.Fatal("a hold was given before the others lapsed")
	}
	if !hold(ep, "d", until) || !hold(ep, "e", until) {
		t.Fatal("lapsed holds were not cleared")
	}
	if hold(ep, "f", until) {
		t.Fatal("a third hold was given after clearing")
	}
	// Giving back twice, or after lapsing, is no error.
	if err := store.ReleaseAttempt(ctx, ep, "b"); err != nil {
		t.Fatal(err)
	}
}

// TestAttemptsInFlightUnderRaces: 20 takers at once on a new endpoint get
// exactly max places.
func TestAttemptsInFlightUnderRaces(t *testing.T) {
	store, _, _, _ := webhookFixture(t)
	ctx := t.Context()
	ep := uuid.NewString()
	now := time.Now()
	var got atomic.Int64
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			ok, err := store.HoldAttempt(ctx, ep, "h"+string(rune('a'+i)), 3, now, now.Add(time.Minute))
			if err != nil {
				t.Error(err)
			}
			if ok {
				got.Add(1)
			}
		})
	}
	wg.Wait()
	if got.Load() != 3 {
		t.Fatalf("%d places given, want 3", got.Load())
	}
}
