// Package testwait waits in tests for a condition to hold. Its timeout
// bounds a hang; it measures nothing, so a test that uses it passes on a
// busy machine as on an idle one. A test that needs time to pass should
// take it from a clock it controls (the subject's clock, or
// testing/synctest), not from the machine's speed.
package testwait

import (
	"fmt"
	"testing"
	"time"
)

const (
	// Poll is how often Eventually asks its condition again.
	Poll = 20 * time.Millisecond
	// Timeout is the bound of a wait that has no reason for another: long
	// enough that only a hang reaches it on a machine whose every core is
	// busy.
	Timeout = time.Minute
)

// Eventually calls cond every Poll until it reports true and fails the test
// (t.Fatalf, naming what it waited for) if it has not after timeout. A
// stack-level wait wants a timeout of 30 s or more: the bound must hold on a
// machine whose every core is busy.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Until(timeout, cond); err != nil {
		t.Fatalf("waited %s for %s: it never happened", timeout, what)
	}
}

// Until calls cond every Poll until it reports true, or returns an error
// after timeout: Eventually for code that is not the test's goroutine or
// that reports more than the condition's name on failure.
func Until(timeout time.Duration, cond func() bool) error {
	return UntilEvery(timeout, Poll, cond)
}

// UntilEvery is Until asking every poll, for a condition that costs a
// request or more to ask.
func UntilEvery(timeout, poll time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		time.Sleep(poll)
	}
	return nil
}
