// Package testclock is the one settable clock of the tests: code that
// takes its time from a `func() time.Time` (the store's WithClock, the
// broker model's Config.Now, the agent's Clock) is handed Clock.Now, and
// the test moves time with Advance instead of waiting for it.
package testclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only when told; safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New is a clock reading at.
func New(at time.Time) *Clock { return &Clock{now: at} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set puts the clock at t (a simulation that steps through its own
// instants).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
