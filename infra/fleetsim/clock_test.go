package fleetsim_test

import (
	"sync"
	"sync/atomic"
	"time"

	"spaces/infra/testclock"
)

// tracker follows one agent's goroutine: it is parked (waiting on the
// simulated clock, nothing under way) when its last wait began after its
// last call and its last wake-up. seq orders every such mark.
type tracker struct {
	seq       *marks
	inflight  atomic.Int32
	lastAct   atomic.Int64 // a call began or ended, or its timer fired
	lastAfter atomic.Int64 // it began a wait
	running   atomic.Bool
}

func (t *tracker) begin() { t.inflight.Add(1); t.lastAct.Store(t.seq.Add(1)) }
func (t *tracker) end()   { t.lastAct.Store(t.seq.Add(1)); t.inflight.Add(-1); t.seq.poke() }

// marks orders the marks of every agent and of the network, and wakes
// the settling at each.
type marks struct {
	atomic.Int64
	changed chan struct{}
}

func newMarks() *marks { return &marks{changed: make(chan struct{}, 1)} }

// Add takes the next mark.
func (m *marks) Add(d int64) int64 {
	n := m.Int64.Add(d)
	m.poke()
	return n
}

func (m *marks) poke() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// parked: waiting on the clock (or stopped), after since.
func (t *tracker) parked(since int64) bool {
	if !t.running.Load() {
		return true
	}
	a := t.lastAfter.Load()
	return t.inflight.Load() == 0 && a > t.lastAct.Load() && a > since
}

// timers is the simulated clock of the agents (agent/client's Clock): the
// test's testclock.Clock for Now, and the waits of After, fired when the
// test moves the clock past them.
type timers struct {
	clk *testclock.Clock
	mu  sync.Mutex
	due []*timer
}

type timer struct {
	at  time.Time
	ch  chan time.Time
	tr  *tracker
	seq int64
}

// agentClock is one agent's view of timers.
type agentClock struct {
	t  *timers
	tr *tracker
}

func (c agentClock) Now() time.Time { return c.t.clk.Now() }

func (c agentClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	now := c.t.clk.Now()
	seq := c.tr.seq.Add(1)
	if d <= 0 {
		ch <- now
		c.tr.lastAct.Store(c.tr.seq.Add(1))
		return ch
	}
	c.t.mu.Lock()
	c.t.due = append(c.t.due, &timer{at: now.Add(d), ch: ch, tr: c.tr, seq: seq})
	c.tr.lastAfter.Store(seq)
	c.t.mu.Unlock()
	c.tr.seq.poke()
	return ch
}

// fire fires every wait due by now. A wait the agent left (woken another
// way) fires unheard; only its current one wakes it.
func (t *timers) fire(now time.Time) {
	t.mu.Lock()
	var keep, fired []*timer
	for _, x := range t.due {
		if x.at.After(now) {
			keep = append(keep, x)
		} else {
			fired = append(fired, x)
		}
	}
	t.due = keep
	for _, x := range fired {
		if x.tr.lastAfter.Load() == x.seq {
			x.tr.lastAct.Store(x.tr.seq.Add(1))
		}
	}
	t.mu.Unlock()
	for _, x := range fired {
		x.ch <- x.at
	}
}

// next is the earliest current wait's time (zero: none).
func (t *timers) next() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var at time.Time
	for _, x := range t.due {
		if x.tr.lastAfter.Load() != x.seq {
			continue
		}
		if at.IsZero() || x.at.Before(at) {
			at = x.at
		}
	}
	return at
}
