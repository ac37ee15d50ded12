package dynamostore_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/shared/space"
)

// BenchmarkRevisionListingCost prices the revision listings' reads on the
// emulator's unit counts (awscost), through the domain's use case as the
// routes call it, in an org of 10 environments with 500 revisions each
// (5,000 revisions of a 4 KB manifest; every 50th stopped): the first page
// of one environment's revisions (GET /environments/{id}/revisions: the
// environment's read, then one Query of env-revisions) and of the org's
// stopped revisions (GET /revisions?state=stopped: one Query of
// stopped-revisions). Reported once under env-first-page: the write units
// of a push and of a claim that stops a revision, as the table's own item
// (the indexes' writes are not metered).
func BenchmarkRevisionListingCost(b *testing.B) {
	f, meter := meteredFixture(b)
	sp := f.register(b, f.newSpace(1))
	svc := &space.Service{Store: f.store, Now: func() time.Time { return now }, NewID: uuid.NewString}
	rv := &space.Revisions{Bindings: &space.Bindings{Spaces: svc, Store: f.store}, Store: f.store}

	const envs, perEnv, stopEvery, workers = 10, 500, 50, 16
	var envIDs []string
	for range envs {
		e := space.Environment{ID: uuid.NewString(), OrgID: f.org, Name: "web", SpaceID: sp.ID, Namespace: "web",
			CreatedAt: now, UpdatedAt: now, Version: 1}
		if err := f.store.CreateEnvironment(b.Context(), e); err != nil {
			b.Fatal(err)
		}
		envIDs = append(envIDs, e.ID)
	}
	manifest := []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "big"},
		"data": map[string]any{"blob": strings.Repeat("x", 4096)}}}
	revision := func(n int) space.Revision {
		at := now.Add(time.Duration(n) * time.Second)
		r := space.Revision{ID: uuid.NewString(), OrgID: f.org, EnvironmentID: envIDs[n%envs], SpaceID: sp.ID, Namespace: "web",
			Manifests: manifest, State: space.RevisionPending, CreatedAt: at, UpdatedAt: at, Version: 1}
		if n%stopEvery == 0 {
			r.State, r.Reason, r.Attempts = space.RevisionStopped, space.ReasonSpaceInactive, space.MaxClaimAttempts
		}
		return r
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := next.Add(1); n <= envs*perEnv; n = next.Add(1) {
				if err := f.store.CreateRevision(b.Context(), revision(int(n))); err != nil {
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

	b.Run("env-first-page", func(b *testing.B) {
		// One push and one stopping claim, metered alone.
		meter.Take()
		r := revision(1) // pending: 1 is not a multiple of stopEvery
		r.ID, r.EnvironmentID = uuid.NewString(), uuid.NewString()
		if err := f.store.CreateRevision(b.Context(), r); err != nil {
			b.Fatal(err)
		}
		push := meter.Take()
		if _, err := f.store.UpdateRevision(b.Context(), f.org, r.ID, space.Update[space.Revision]{At: now.Add(time.Hour), Read: &r,
			Apply: func(r space.Revision) (space.Revision, error) { r.State = space.RevisionStopped; return r, nil }}); err != nil {
			b.Fatal(err)
		}
		stop := meter.Take()

		for b.Loop() {
			page, after, err := rv.List(b.Context(), f.org, envIDs[3], space.Page{Limit: 50})
			if err != nil {
				b.Fatal(err)
			}
			if len(page) != 50 || after == "" {
				b.Fatalf("%d revisions, next %q", len(page), after)
			}
		}
		report(b, meter.Take())
		b.ReportMetric(push.TotalWRU(), "push-WRU")
		b.ReportMetric(stop.TotalWRU(), "stop-WRU")
	})
	b.Run("stopped-first-page", func(b *testing.B) {
		meter.Take()
		for b.Loop() {
			page, after, err := rv.Stopped(b.Context(), f.org, space.Page{Limit: 50})
			if err != nil {
				b.Fatal(err)
			}
			if len(page) != 50 || after == "" {
				b.Fatalf("%d stopped revisions, next %q", len(page), after)
			}
		}
		report(b, meter.Take())
	})
}
