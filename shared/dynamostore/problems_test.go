package dynamostore_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"spaces/shared/space"
)

// TestListProblemsFirst: sort=problems lists inactive spaces, then unknown,
// then active, each with the latest status change first (a space that
// never changed counts from its registration), ties by id; every page size
// walks the same order, its cursor crossing from one status to the next
// mid-page and between pages; a page that spans two statuses is one Query
// of the problems index and one BatchGetItem; only a transition moves a
// space's problem_key, and a deregistration removes it.
func TestListProblemsFirst(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	ids := map[string]string{}
	for i, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		s := f.newSpace(i)
		s.Name, s.CreatedAt = name, now.Add(time.Duration(i)*time.Minute)
		f.register(t, s)
		ids[name] = s.ID
	}
	check := func(when string, want []string) {
		t.Helper()
		for _, limit := range []int{1, 2, 3, 4, 50} {
			if got := f.names(t, space.Query{Sort: space.SortProblems}, limit); !slices.Equal(got, want) {
				t.Errorf("%s: problems, limit %d: %v, want %v", when, limit, got, want)
			}
		}
	}
	// All unknown (never probed): the latest registration first.
	check("never changed", []string{"g", "f", "e", "d", "c", "b", "a"})

	transition := func(name string, to space.Status, at time.Time) {
		t.Helper()
		if _, err := f.store.UpdateSpace(ctx, f.org, ids[name], space.Update[space.Space]{At: at,
			Apply: func(s space.Space) (space.Space, error) {
				s, _ = space.ApplyManual(s, to, "Test", at)
				return s, nil
			}}); err != nil {
			t.Fatal(err)
		}
	}
	transition("a", space.Inactive, now.Add(1*time.Hour))
	transition("b", space.Active, now.Add(2*time.Hour))
	transition("c", space.Inactive, now.Add(3*time.Hour))
	transition("d", space.Active, now.Add(4*time.Hour))
	// inactive: c (3h), a (1h); unknown: g, f, e (registration); active: d (4h), b (2h).
	want := []string{"c", "a", "g", "f", "e", "d", "b"}
	check("after four transitions", want)

	// A page across the inactive/unknown boundary is one Query and one
	// BatchGetItem, and the next page continues from its last space.
	rec, ops := f.recording()
	page, next, err := rec.ListSpaces(ctx, f.org, space.Query{Sort: space.SortProblems, Page: space.Page{Limit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if got := namesOf(page); !slices.Equal(got, want[:3]) || next == "" {
		t.Errorf("first page of 3: %v (next %q), want %v and a cursor", got, next, want[:3])
	}
	count := func(op string) (n int) {
		for _, o := range *ops {
			if o == op {
				n++
			}
		}
		return n
	}
	if count("Query") != 1 || count("BatchGetItem") != 1 {
		t.Errorf("a page across two statuses took %v, want one Query and one BatchGetItem (and the probe beats' read)", *ops)
	}
	page, _, err = rec.ListSpaces(ctx, f.org, space.Query{Sort: space.SortProblems, Page: space.Page{Limit: 3, After: next}})
	if err != nil {
		t.Fatal(err)
	}
	if got := namesOf(page); !slices.Equal(got, want[3:6]) {
		t.Errorf("second page of 3: %v, want %v", got, want[3:6])
	}

	// Back to active moves a space; a later change of the same status
	// puts it first among its status.
	transition("c", space.Active, now.Add(5*time.Hour))
	transition("e", space.Inactive, now.Add(6*time.Hour))
	check("after two more", []string{"e", "a", "g", "f", "c", "d", "b"})

	// Writes that are no transition leave problem_key.
	before := f.raw(t, f.org, "SPACE#"+ids["a"])["problem_key"]
	for _, apply := range []func(space.Space) space.Space{
		func(s space.Space) space.Space { s.Probe.LatencyMS = 7; return s },
		func(s space.Space) space.Space { s.Name = "aa"; return s },
		func(s space.Space) space.Space { s.Labels = space.Labels{"env": "prod"}; return s },
	} {
		if _, err := f.store.UpdateSpace(ctx, f.org, ids["a"], space.Update[space.Space]{At: now.Add(7 * time.Hour),
			Apply: func(s space.Space) (space.Space, error) { return apply(s), nil }}); err != nil {
			t.Fatal(err)
		}
	}
	if after := f.raw(t, f.org, "SPACE#"+ids["a"])["problem_key"]; before == nil || !reflect.DeepEqual(after, before) {
		t.Errorf("a write that is no transition changed problem_key: %v, was %v", after, before)
	}

	// The filters apply within the order; a deregistered space leaves it.
	if _, err := f.store.Deregister(ctx, f.org, ids["g"], 0, now.Add(8*time.Hour), "test"); err != nil {
		t.Fatal(err)
	}
	if item := f.raw(t, f.org, "SPACE#"+ids["g"]); item["problem_key"] != nil {
		t.Errorf("a deregistered space keeps problem_key: %v", item["problem_key"])
	}
	check("after a deregistration", []string{"e", "aa", "f", "c", "d", "b"})
	if got, want := f.names(t, space.Query{Sort: space.SortProblems, Keep: func(s space.Space) bool { return s.Status == space.Active }}, 2),
		[]string{"c", "d", "b"}; !slices.Equal(got, want) {
		t.Errorf("problems, active only: %v, want %v", got, want)
	}
}

func namesOf(spaces []space.Space) []string {
	var out []string
	for _, s := range spaces {
		out = append(out, s.Name)
	}
	return out
}
