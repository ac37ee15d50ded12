package testwait

import (
	"fmt"
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

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper()                        {}
func (f *fatalTB) Fatalf(format string, a ...any) { f.msg = fmt.Sprintf(format, a...) }

// TestEventuallyNamesWhatItWaitedFor: a condition that never holds fails
// the test with what was awaited and the bound.
func TestEventuallyNamesWhatItWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fatalTB{TB: t}
		Eventually(f, time.Second, "the moon", func() bool { return false })
		if want := "waited 1s for the moon: it never happened"; f.msg != want {
			t.Errorf("Eventually failed with %q, want %q", f.msg, want)
		}
	})
}
