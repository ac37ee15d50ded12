package testclock_test

import (
	"sync"
	"testing"
	"time"

	"spaces/infra/testclock"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	at := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	c := testclock.New(at)
	first, second := c.Now(), c.Now()
	if !first.Equal(at) || !second.Equal(at) {
		t.Fatalf("Now = %v then %v, want %v until advanced", first, second, at)
	}
	c.Set(at.Add(time.Hour))
	if want := at.Add(time.Hour); !c.Now().Equal(want) {
		t.Fatalf("after Set: %v, want %v", c.Now(), want)
	}
	c.Set(at)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Minute) })
	}
	wg.Wait()
	if want := at.Add(10 * time.Minute); !c.Now().Equal(want) {
		t.Fatalf("after ten concurrent advances of a minute: %v, want %v", c.Now(), want)
	}
}
