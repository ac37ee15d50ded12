package dynamostore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/shared/space"
)

// pushRevisions stores n pending revisions of envID, one a second from
// now, and returns their ids oldest first.
func (f *fixture) pushRevisions(t *testing.T, org, envID string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		at := now.Add(time.Duration(i) * time.Second)
		r := space.Revision{ID: uuid.NewString(), OrgID: org, EnvironmentID: envID, SpaceID: uuid.NewString(), Namespace: "web",
			Manifests: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}},
			State:     space.RevisionPending, CreatedAt: at, UpdatedAt: at, Version: 1}
		if err := f.store.CreateRevision(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// every pages through a revisions listing with the given page size and
// returns the ids in the order answered.
func every(t *testing.T, limit int, list func(space.Page) ([]space.RevisionSummary, string, error)) []string {
	t.Helper()
	var ids []string
	page := space.Page{Limit: limit}
	for range 100 {
		items, after, err := list(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range items {
			ids = append(ids, r.ID)
		}
		if after == "" {
			return ids
		}
		page.After = after
	}
	t.Fatal("the listing never ended")
	return nil
}

// An environment's revisions come newest first, page by page, without
// manifests and without another environment's or org's; the org's stopped
// revisions are exactly the stopped ones, most recently stopped first, and
// a re-enqueue takes one out.
func TestRevisionListings(t *testing.T) {
	f := newFixture(t)
	env, other := uuid.NewString(), uuid.NewString()
	ids := f.pushRevisions(t, f.org, env, 7)
	f.pushRevisions(t, f.org, other, 2)
	foreign := uuid.NewString()
	f.pushRevisions(t, foreign, env, 1) // a forged environment id in another org

	newest := slices.Clone(ids)
	slices.Reverse(newest)
	for _, limit := range []int{1, 3, 7, 50} {
		got := every(t, limit, func(p space.Page) ([]space.RevisionSummary, string, error) {
			return f.store.ListRevisions(t.Context(), f.org, env, p)
		})
		if !slices.Equal(got, newest) {
			t.Errorf("limit %d: %v, want %v", limit, got, newest)
		}
	}
	page, _, err := f.store.ListRevisions(t.Context(), f.org, env, space.Page{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := page[0]; r.EnvironmentID != env || r.Namespace != "web" || r.State != space.RevisionPending || r.Version != 1 ||
		!r.CreatedAt.Equal(now.Add(6*time.Second)) {
		t.Errorf("summary %+v", r)
	}

	// Stop three (ids[1] first, then ids[4], then ids[2]) and deploy one.
	set := func(id string, state space.RevisionState, at time.Time) {
		t.Helper()
		if _, err := f.store.UpdateRevision(t.Context(), f.org, id, space.Update[space.Revision]{At: at,
			Apply: func(r space.Revision) (space.Revision, error) { r.State = state; return r, nil }}); err != nil {
			t.Fatal(err)
		}
	}
	set(ids[1], space.RevisionStopped, now.Add(time.Minute))
	set(ids[4], space.RevisionStopped, now.Add(2*time.Minute))
	set(ids[2], space.RevisionStopped, now.Add(3*time.Minute))
	set(ids[0], space.RevisionDeployed, now.Add(4*time.Minute))
	stopped := func(limit int) []string {
		return every(t, limit, func(p space.Page) ([]space.RevisionSummary, string, error) {
			return f.store.StoppedRevisions(t.Context(), f.org, p)
		})
	}
	for _, limit := range []int{1, 2, 50} {
		if got, want := stopped(limit), []string{ids[2], ids[4], ids[1]}; !slices.Equal(got, want) {
			t.Errorf("stopped, limit %d: %v, want %v", limit, got, want)
		}
	}
	// Re-enqueued: no longer stopped; the environment's listing shows the
	// new state.
	set(ids[4], space.RevisionPending, now.Add(5*time.Minute))
	if got, want := stopped(50), []string{ids[2], ids[1]}; !slices.Equal(got, want) {
		t.Errorf("stopped after a re-enqueue: %v, want %v", got, want)
	}
	all, _, err := f.store.ListRevisions(t.Context(), f.org, env, space.Page{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]space.RevisionState{}
	for _, r := range all {
		states[r.ID] = r.State
	}
	if states[ids[0]] != space.RevisionDeployed || states[ids[4]] != space.RevisionPending || states[ids[2]] != space.RevisionStopped {
		t.Errorf("states %v", states)
	}
	if got, _, err := f.store.StoppedRevisions(t.Context(), foreign, space.Page{Limit: 50}); err != nil || len(got) != 0 {
		t.Errorf("another org's stopped revisions: %v %v", got, err)
	}

	// A cursor that names no revision is refused.
	for _, after := range []string{"x", "2025-11-30T12:00:00.000000000Z#not-a-uuid", "yesterday#" + ids[0]} {
		if _, _, err := f.store.ListRevisions(t.Context(), f.org, env, space.Page{Limit: 5, After: after}); space.KindOf(err) != space.KindInvalid {
			t.Errorf("after %q: %v", after, err)
		}
	}
}
