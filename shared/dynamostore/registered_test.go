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
