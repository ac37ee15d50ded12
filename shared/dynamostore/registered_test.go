package dynamostore_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"spaces/shared/space"
)

// sort=registered lists the live spaces oldest first (-registered: newest
// first), ties broken by id, page by page; a deregistered space leaves the
// order; the name search and the filters apply within it.
func TestListByRegistration(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	gcp := f.createAccount(t, f.org, space.GCP)
	var want []string // oldest first
	var ids []string
	for i := range 7 {
		s := f.newSpace(i)
		s.Name = fmt.Sprintf("z-%d", 6-i) // names in the reverse order
		s.CreatedAt = now.Add(time.Duration(i) * time.Minute)
		if i == 3 { // same time as the previous one: the id decides
			s.CreatedAt = now.Add(2 * time.Minute)
		}
		f.register(t, s)
		want = append(want, s.Name)
		ids = append(ids, s.ID)
	}
	// 2 and 3 share a time: order them by id.
	if ids[3] < ids[2] {
		want[2], want[3] = want[3], want[2]
	}
	g := space.NewSpace("00000000-0000-4000-8000-000000000001", f.org, space.RegisterInput{Provider: space.GCP, SpaceType: space.TypeKubernetes,
		CloudAccountID: gcp.ID, Config: space.Config{"clusterName": "g", "region": "europe-west1", "projectId": "p-1"}}, now.Add(time.Hour))
	f.register(t, g)
	want = append(want, "g")

	for _, limit := range []int{1, 3, 50} {
		if got := f.names(t, space.Query{Sort: space.SortRegistered}, limit); !slices.Equal(got, want) {
			t.Errorf("registered, limit %d: %v, want %v", limit, got, want)
		}
		rev := slices.Clone(want)
		slices.Reverse(rev)
		if got := f.names(t, space.Query{Sort: space.SortRegisteredDesc}, limit); !slices.Equal(got, rev) {
			t.Errorf("-registered, limit %d: %v, want %v", limit, got, rev)
		}
	}
	if got := f.names(t, space.Query{Sort: space.SortRegistered, Provider: space.GCP}, 2); !slices.Equal(got, []string{"g"}) {
		t.Errorf("gcp only: %v", got)
	}
	if got := f.names(t, space.Query{Sort: space.SortRegistered, NamePrefix: "z-"}, 2); !slices.Equal(got, want[:7]) {
		t.Errorf("prefix z-: %v, want %v", got, want[:7])
	}
	if _, err := f.store.Deregister(ctx, f.org, ids[0], 0, now.Add(2*time.Hour), "test"); err != nil {
		t.Fatal(err)
	}
	if got := f.names(t, space.Query{Sort: space.SortRegistered}, 3); !slices.Equal(got, want[1:]) {
		t.Errorf("after a deregistration: %v, want %v", got, want[1:])
	}
	if item := f.raw(t, f.org, "SPACE#"+ids[0]); item["reg_key"] != nil {
		t.Errorf("a deregistered space keeps reg_key: %v", item["reg_key"])
	}
}

// sort=status lists the live spaces by stored status (active, inactive,
// unknown), each by name; a transition and a rename move a space, a
// heartbeat does not write its status_key; a deregistration removes it.
func TestListByStatus(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	ids := map[string]string{}
	for i, name := range []string{"d", "a", "c", "b", "e"} {
		s := f.newSpace(i)
		s.Name = name
		f.register(t, s)
		ids[name] = s.ID
	}
	for name, st := range map[string]space.Status{"d": space.Active, "b": space.Active, "c": space.Inactive} {
		if err := f.setStatus(t, ids[name], st, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"b", "d", "c", "a", "e"} // active b, d; inactive c; unknown a, e
	for _, limit := range []int{1, 2, 50} {
		if got := f.names(t, space.Query{Sort: space.SortStatus}, limit); !slices.Equal(got, want) {
			t.Errorf("status, limit %d: %v, want %v", limit, got, want)
		}
		rev := slices.Clone(want)
		slices.Reverse(rev)
		if got := f.names(t, space.Query{Sort: space.SortStatusDesc}, limit); !slices.Equal(got, rev) {
			t.Errorf("-status, limit %d: %v, want %v", limit, got, rev)
		}
	}
	// A heartbeat leaves status_key as it was; a transition moves it.
	before := f.raw(t, f.org, "SPACE#"+ids["d"])["status_key"]
	if _, err := f.store.UpdateSpace(ctx, f.org, ids["d"], space.Update[space.Space]{At: now.Add(2 * time.Minute),
		Apply: func(s space.Space) (space.Space, error) { s.Probe.LatencyMS = 7; return s, nil }}); err != nil {
		t.Fatal(err)
	}
	if after := f.raw(t, f.org, "SPACE#"+ids["d"])["status_key"]; !reflect.DeepEqual(after, before) {
		t.Errorf("a heartbeat changed status_key: %v, was %v", after, before)
	}
	if err := f.setStatus(t, ids["d"], space.Inactive, now.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, want := f.names(t, space.Query{Sort: space.SortStatus}, 2), []string{"b", "c", "d", "a", "e"}; !slices.Equal(got, want) {
		t.Errorf("after d went inactive: %v, want %v", got, want)
	}
	if _, err := f.store.Deregister(ctx, f.org, ids["c"], 0, now.Add(time.Hour), "test"); err != nil {
		t.Fatal(err)
	}
	if got, want := f.names(t, space.Query{Sort: space.SortStatus, Provider: space.AWS}, 2), []string{"b", "d", "a", "e"}; !slices.Equal(got, want) {
		t.Errorf("after c was deregistered: %v, want %v", got, want)
	}
}

// sort=status_since lists the live spaces by when they took their stored
// status (their last transition, else their registration), oldest first
// (-status_since: the latest changes first), page by page. Only a
// transition moves a space; a heartbeat, a rename, a labels or a version
// change leaves its since_key as it was; a deregistration removes it.
func TestListByStatusSince(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	ids := map[string]string{}
	for i, name := range []string{"a", "b", "c", "d"} {
		s := f.newSpace(i)
		s.Name, s.CreatedAt = name, now.Add(time.Duration(i)*time.Minute)
		f.register(t, s)
		ids[name] = s.ID
	}
	check := func(when string, want []string) {
		t.Helper()
		for _, limit := range []int{1, 3, 50} {
			if got := f.names(t, space.Query{Sort: space.SortStatusSince}, limit); !slices.Equal(got, want) {
				t.Errorf("%s: status_since, limit %d: %v, want %v", when, limit, got, want)
			}
			rev := slices.Clone(want)
			slices.Reverse(rev)
			if got := f.names(t, space.Query{Sort: space.SortStatusSinceDesc}, limit); !slices.Equal(got, rev) {
				t.Errorf("%s: -status_since, limit %d: %v, want %v", when, limit, got, rev)
			}
		}
	}
	check("never changed: by registration", []string{"a", "b", "c", "d"})

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
	transition("b", space.Active, now.Add(time.Hour))
	transition("a", space.Inactive, now.Add(2*time.Hour))
	check("after two transitions", []string{"c", "d", "b", "a"})

	// Writes that are no transition leave since_key.
	before := f.raw(t, f.org, "SPACE#"+ids["b"])["since_key"]
	for _, apply := range []func(space.Space) space.Space{
		func(s space.Space) space.Space { s.Probe.LatencyMS = 7; return s },
		func(s space.Space) space.Space { s.Name = "bb"; return s },
		func(s space.Space) space.Space { s.Labels = space.Labels{"env": "prod"}; return s },
		func(s space.Space) space.Space {
			s.Probe.ServerVersion = &space.ServerVersion{GitVersion: "v1.33.0"}
			return s
		},
	} {
		if _, err := f.store.UpdateSpace(ctx, f.org, ids["b"], space.Update[space.Space]{At: now.Add(3 * time.Hour),
			Apply: func(s space.Space) (space.Space, error) { return apply(s), nil }}); err != nil {
			t.Fatal(err)
		}
	}
	if after := f.raw(t, f.org, "SPACE#"+ids["b"])["since_key"]; before == nil || !reflect.DeepEqual(after, before) {
		t.Errorf("a write that is no transition changed since_key: %v, was %v", after, before)
	}
	check("after writes that are no transition", []string{"c", "d", "bb", "a"})

	// The filters apply within the order; a deregistered space leaves it.
	if _, err := f.store.Deregister(ctx, f.org, ids["d"], 0, now.Add(4*time.Hour), "test"); err != nil {
		t.Fatal(err)
	}
	if item := f.raw(t, f.org, "SPACE#"+ids["d"]); item["since_key"] != nil {
		t.Errorf("a deregistered space keeps since_key: %v", item["since_key"])
	}
	if got, want := f.names(t, space.Query{Sort: space.SortStatusSinceDesc, Provider: space.AWS, NamePrefix: "b"}, 1), []string{"bb"}; !slices.Equal(got, want) {
		t.Errorf("-status_since, prefix b: %v, want %v", got, want)
	}
	check("after a deregistration", []string{"c", "bb", "a"})
}
