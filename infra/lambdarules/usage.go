package lambdarules

import (
	"sync"
	"time"
)

// Usage is what Lambda bills a function for, counted over its invocations
// (Run) since the template was read: requests, and duration "rounded up
// to the nearest 1 ms" at the function's memory
// (https://aws.amazon.com/lambda/pricing/). A throttled invocation runs
// nothing and is not billed (Invocations leaves it out; Throttled counts
// it).
type Usage struct {
	Invocations int64
	// Billed is the sum of the invocations' durations, each rounded up to
	// the millisecond.
	Billed time.Duration
	// MemoryMB is the function's MemorySize.
	MemoryMB int
}

// GBSeconds is the duration Lambda bills, in GB-seconds.
func (u Usage) GBSeconds() float64 { return u.Billed.Seconds() * float64(u.MemoryMB) / 1024 }

// Sub is u less an earlier reading o: the use between the two.
func (u Usage) Sub(o Usage) Usage {
	return Usage{Invocations: u.Invocations - o.Invocations, Billed: u.Billed - o.Billed, MemoryMB: u.MemoryMB}
}

type meter struct {
	mu          sync.Mutex
	invocations int64
	billed      time.Duration
}

func (m *meter) add(d time.Duration) {
	if m == nil {
		return
	}
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	m.mu.Lock()
	m.invocations++
	m.billed += d
	m.mu.Unlock()
}

// Usage is f's use so far (zero for a Function not read from a
// template).
func (f Function) Usage() Usage {
	if f.meter == nil {
		return Usage{MemoryMB: f.MemoryMB}
	}
	f.meter.mu.Lock()
	defer f.meter.mu.Unlock()
	return Usage{Invocations: f.meter.invocations, Billed: f.meter.billed, MemoryMB: f.MemoryMB}
}
