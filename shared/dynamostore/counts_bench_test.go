package dynamostore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"spaces/infra/awscost"
	"spaces/shared/space"
)

// BenchmarkFleetCost prices the fleet routes' reads on the emulator's unit
// counts (awscost) in an org of 10,000 named spaces: the counts (per op),
// a first page by name, by registration (newest first) and by status, a name-prefix
// search and a word search,
// and, reported once under counts, the units of a registration, a
// heartbeat, a transition and a deregistration with the counters kept.
func BenchmarkFleetCost(b *testing.B) {
	f, meter := meteredFixture(b)

	const spaces, workers = 10_000, 16
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := next.Add(1); n <= spaces; n = next.Add(1) {
				sp := f.newSpace(int(n))
				sp.Name = fmt.Sprintf("cluster-%05d", n)
				// A third each of prod, staging and dev; 1 in 100 gold.
				sp.Labels = space.Labels{"env": []string{"prod", "staging", "dev"}[n%3]}
				if n%100 == 0 {
					sp.Labels["tier"] = "gold"
				}
				if err := f.store.Register(b.Context(), sp, space.Idempotency{}); err != nil {
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

	b.Run("counts", func(b *testing.B) {
		// One of each write, metered alone.
		meter.Take()
		s := f.register(b, f.newSpace(spaces+1))
		reg := meter.Take()
		if _, err := f.store.UpdateSpace(b.Context(), f.org, s.ID, space.Update[space.Space]{At: now.Add(time.Second),
			Apply: func(s space.Space) (space.Space, error) { s.Probe.LatencyMS = 9; return s, nil }}); err != nil {
			b.Fatal(err)
		}
		beat := meter.Take()
		if err := f.setStatus(b, s.ID, space.Active, now.Add(2*time.Second)); err != nil {
			b.Fatal(err)
		}
		tr := meter.Take()
		if _, err := f.store.Deregister(b.Context(), f.org, s.ID, 0, now.Add(3*time.Second), "test"); err != nil {
			b.Fatal(err)
		}
		dereg := meter.Take()

		var c space.Counts
		var err error
		for b.Loop() {
			if c, err = f.store.Counts(b.Context(), f.org); err != nil {
				b.Fatal(err)
			}
		}
		if c.Total != spaces {
			b.Fatalf("counted %d spaces, want %d", c.Total, spaces)
		}
		report(b, meter.Take())
		// After the loop: b.Loop's first call drops metrics reported before.
		b.ReportMetric(reg.TotalWRU(), "register-WRU")
		b.ReportMetric(beat.TotalWRU(), "heartbeat-WRU")
		b.ReportMetric(tr.TotalWRU(), "transition-WRU")
		b.ReportMetric(dereg.TotalWRU(), "deregister-WRU")
	})
	for _, c := range []struct {
		name string
		q    space.Query
		want int
	}{
		{"first-page-by-name", space.Query{Sort: space.SortName}, 50},
		{"first-page-by-registered", space.Query{Sort: space.SortRegisteredDesc}, 50},
		{"first-page-by-status", space.Query{Sort: space.SortStatus}, 50},
		{"prefix-search", space.Query{Sort: space.SortName, NamePrefix: "cluster-0123"}, 10},
		{"word-search", space.Query{Search: []string{"0077"}}, 10},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := c.q
			q.Limit = 50
			meter.Take()
			for b.Loop() {
				page, _, err := f.store.ListSpaces(b.Context(), f.org, q)
				if err != nil {
					b.Fatal(err)
				}
				if len(page) != c.want {
					b.Fatalf("%d spaces, want %d", len(page), c.want)
				}
			}
			report(b, meter.Take())
		})
	}
	// label_selector, through the service as GET /spaces calls it: in
	// name order the selector filters the spaces each page reads; in id
	// order it is read under its label's entries (labels.go).
	svc := space.NewService(f.store, 0)
	for _, c := range []struct {
		name, sel string
		sort      space.Sort
		want      int
	}{
		{"label-selector-third", "env=prod", "", 50},
		{"label-selector-third-by-name", "env=prod", space.SortName, 50},
		{"label-selector-1-in-100", "tier=gold", "", 50},
	} {
		b.Run(c.name, func(b *testing.B) {
			sel, err := space.ParseSelector("label_selector", c.sel)
			if err != nil {
				b.Fatal(err)
			}
			meter.Take()
			for b.Loop() {
				page, _, err := svc.List(b.Context(), f.org, space.ListFilter{Selector: sel, Sort: c.sort}, space.Page{Limit: 50})
				if err != nil {
					b.Fatal(err)
				}
				if len(page) != c.want {
					b.Fatalf("%d spaces, want %d", len(page), c.want)
				}
			}
			report(b, meter.Take())
		})
	}
}

// report prints u per op: DynamoDB requests, read units and their price.
func report(b *testing.B, u awscost.Usage) {
	n := 0.0
	for _, v := range u.Requests {
		n += v
	}
	b.ReportMetric(n/float64(b.N), "requests/op")
	b.ReportMetric(u.TotalRRU()/float64(b.N), "RRU/op")
	b.ReportMetric(u.TotalRRU()/float64(b.N)*awscost.PriceRRU*1e6, "USD/1M-ops")
}

// BenchmarkVersionWriteCost: the table write units of a probe that keeps
// the minor (a heartbeat with a patch release: one UpdateItem, as before
// the version counters) and of one that changes it (an upgrade: the space
// and its counter item in one transaction), each op a pair of both on one
// space. Index writes are not metered (see BENCHMARKS.md).
func BenchmarkVersionWriteCost(b *testing.B) {
	f, meter := meteredFixture(b)
	s := f.newSpace(1)
	s.KubernetesVersion = "1.30"
	f.register(b, s)
	probe := func(git string, at time.Time) {
		if _, err := f.store.UpdateSpace(b.Context(), f.org, s.ID, space.Update[space.Space]{At: at,
			Apply: func(s space.Space) (space.Space, error) {
				s.Probe.ServerVersion = &space.ServerVersion{GitVersion: git}
				return s, nil
			}}); err != nil {
			b.Fatal(err)
		}
	}
	var patch, upgrade float64
	minor, i := 30, 0
	for b.Loop() {
		i++
		meter.Take()
		probe(fmt.Sprintf("v1.%d.%d", minor, i), now.Add(time.Duration(2*i)*time.Second))
		patch += meter.Take().TotalWRU()
		minor++
		probe(fmt.Sprintf("v1.%d.0", minor), now.Add(time.Duration(2*i+1)*time.Second))
		upgrade += meter.Take().TotalWRU()
	}
	if c := f.counts(b, f.org); c.ByVersion[fmt.Sprintf("1.%d", minor)] != 1 || len(c.ByVersion) != 1 {
		b.Fatalf("counts by version %v, want only 1.%d", c.ByVersion, minor)
	}
	b.ReportMetric(patch/float64(b.N), "same-minor-WRU")
	b.ReportMetric(upgrade/float64(b.N), "new-minor-WRU")
}
