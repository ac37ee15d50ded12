package testwait

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestEventually: the condition is asked again until it holds, and Until
// gives up once its timeout has passed on the bubble's clock, with the
// condition asked along the way.
func TestEventually(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		Eventually(t, time.Minute, "the third call", func() bool { n++; return n == 3 })
		if n != 3 {
			t.Errorf("cond called %d times, want 3", n)
		}
		start, calls := time.Now(), 0
		if err := Until(time.Second, func() bool { calls++; return false }); err == nil {
			t.Fatal("Until of a condition that never holds returned no error")
		}
		if waited := time.Since(start); waited < time.Second || waited > time.Second+Poll {
			t.Errorf("Until gave up after %s on the bubble's clock, want its timeout of 1s", waited)
		}
		if want := int(time.Second/Poll) + 1; calls < want {
			t.Errorf("Until asked %d times in its second, want at least %d", calls, want)
		}
	})
}
