package dynamostore_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"spaces/shared/space"
)

// The benchmarks run against the in-process emulator: they measure the
// store's and the SDK's cost plus kumo's, and allocations include the
// emulator's side of each request.

func BenchmarkRegister(b *testing.B) {
	f := newFixture(b)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		if err := f.store.Register(b.Context(), f.newSpace(i), space.Idempotency{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	f := newFixture(b)
	s := f.register(b, f.newSpace(1))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.store.GetSpace(b.Context(), f.org, s.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList100 pages through a 10,000-space org, 100 spaces a page.
func BenchmarkList100(b *testing.B) {
	f := newFixture(b)
	const spaces, workers = 10_000, 16
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := next.Add(1); n <= spaces; n = next.Add(1) {
				if err := f.store.Register(b.Context(), f.newSpace(int(n)), space.Idempotency{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	after := ""
	b.ReportAllocs()
	for b.Loop() {
		page, cursor, err := f.store.ListSpaces(b.Context(), f.org, space.Query{Page: space.Page{Limit: 100, After: after}})
		if err != nil {
			b.Fatal(err)
		}
		if len(page) != 100 && cursor != "" {
			b.Fatalf("page of %d with a cursor", len(page))
		}
		after = cursor
	}
}
