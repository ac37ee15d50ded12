package dynamostore_test

import (
	"slices"
	"sort"
	"testing"

	"github.com/google/uuid"

	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// listOrg registers 60 spaces: every third on a second (GCP) account, every
// fifth synthetic, and deregisters every fourth.
func listOrg(t *testing.T) (f *fixture, live []space.Space) {
	f = newFixture(t)
	gcp := f.createAccount(t, f.org, space.GCP)
	for i := range 60 {
		s := f.newSpace(i)
		if i%3 == 0 {
			s = space.NewSpace(uuid.NewString(), f.org, space.RegisterInput{
				Provider: space.GCP, SpaceType: space.TypeKubernetes, CloudAccountID: gcp.ID,
				Config: space.Config{"clusterName": "gke", "region": "europe-west1", "projectId": "project-" + uuid.NewString()[:8]},
			}, now)
		}
		s.Synthetic = i%5 == 0
		f.register(t, s)
		if i%4 == 0 {
			if _, err := f.store.Deregister(t.Context(), f.org, s.ID, 0, now, "test"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		live = append(live, s)
	}
	sort.Slice(live, func(i, j int) bool { return live[i].ID < live[j].ID })
	return f, live
}

// listAll pages through q with the given limit.
func listAll(t *testing.T, f *fixture, q space.Query) []space.Space {
	t.Helper()
	var all []space.Space
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		page, next, err := f.store.ListSpaces(t.Context(), f.org, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > q.Limit {
			t.Fatalf("page of %d, limit %d", len(page), q.Limit)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		if len(page) == 0 || next != page[len(page)-1].ID {
			t.Fatalf("next %q after a page ending %v", next, page)
		}
		q.After = next
	}
}

func ids(ss []space.Space) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

func filter(ss []space.Space, keep func(space.Space) bool) []space.Space {
	var out []space.Space
	for _, s := range ss {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func TestListSpaces(t *testing.T) {
	f, live := listOrg(t)
	gcpAccount := ""
	for _, s := range live {
		if s.Provider == space.GCP {
			gcpAccount = s.CloudAccountID
		}
	}
	notSynthetic := func(s space.Space) bool { return !s.Synthetic }
	cases := map[string]struct {
		q    space.Query
		want []space.Space
	}{
		"all":        {space.Query{}, live},
		"provider":   {space.Query{Provider: space.GCP}, filter(live, func(s space.Space) bool { return s.Provider == space.GCP })},
		"account":    {space.Query{CloudAccountID: gcpAccount}, filter(live, func(s space.Space) bool { return s.CloudAccountID == gcpAccount })},
		"space type": {space.Query{SpaceType: space.TypeKubernetes}, live},
		"other type": {space.Query{SpaceType: "vm"}, nil},
		"keep":       {space.Query{Provider: space.AWS, Keep: notSynthetic}, filter(live, func(s space.Space) bool { return s.Provider == space.AWS && !s.Synthetic })},
	}
	for name, c := range cases {
		for _, limit := range []int{1, 7, 45, 1000} {
			q := c.q
			q.Limit = limit
			got := listAll(t, f, q)
			if !slices.Equal(ids(got), ids(c.want)) {
				t.Errorf("%s, limit %d: got %d spaces %v\nwant %d %v", name, limit, len(got), ids(got), len(c.want), ids(c.want))
			}
		}
	}
	// Items are whole spaces.
	first, _, err := f.store.ListSpaces(t.Context(), f.org, space.Query{Page: space.Page{Limit: 1}})
	if err != nil || len(first) != 1 {
		t.Fatal(first, err)
	}
	if got, _ := f.store.GetSpace(t.Context(), f.org, first[0].ID); !slices.Equal(ids(first), []string{got.ID}) || got.Name != first[0].Name {
		t.Errorf("listed %#v, stored %#v", first[0], got)
	}
}

func TestListSpacesAfterAnyID(t *testing.T) {
	f, live := listOrg(t)
	// After a deleted space's id, and after ids no item has, the listing
	// continues at the next live id.
	for _, after := range []string{uuid.NewString(), uuid.NewString(), "00000000-0000-0000-0000-000000000000", live[len(live)/2].ID} {
		want := filter(live, func(s space.Space) bool { return s.ID > after })
		got := listAll(t, f, space.Query{Page: space.Page{Limit: 5, After: after}})
		if !slices.Equal(ids(got), ids(want)) {
			t.Errorf("after %s: got %v, want %v", after, ids(got), ids(want))
		}
	}
	// Nothing after the last one.
	got, next, err := f.store.ListSpaces(t.Context(), f.org, space.Query{Page: space.Page{Limit: 5, After: live[len(live)-1].ID}})
	if err != nil || len(got) != 0 || next != "" {
		t.Errorf("after the last: %v %q %v", got, next, err)
	}
	// The exact page boundary: a full last page says there is no more.
	page, next, err := f.store.ListSpaces(t.Context(), f.org, space.Query{Page: space.Page{Limit: 3, After: live[len(live)-4].ID}})
	if err != nil || len(page) != 3 || next != "" {
		t.Errorf("last full page: %d spaces, next %q, %v", len(page), next, err)
	}
}

func TestListLimits(t *testing.T) {
	f := newFixture(t)
	for _, limit := range []int{0, -1, dynamostore.MaxLimit + 1} {
		e := wantKind(t, errOf2(f.store.ListSpaces(t.Context(), f.org, space.Query{Page: space.Page{Limit: limit}})), space.KindInvalid)
		if e.Fields[0].Field != "limit" {
			t.Errorf("fields %+v", e.Fields)
		}
		wantKind(t, errOf2(f.store.ListAccounts(t.Context(), f.org, space.Page{Limit: limit})), space.KindInvalid)
		wantKind(t, errOf2(f.store.ProbeTargets(t.Context(), 0, "", limit)), space.KindInvalid)
	}
	for _, shard := range []int{-1, f.store.ProbeShards()} {
		wantKind(t, errOf2(f.store.ProbeTargets(t.Context(), shard, "", 10)), space.KindInvalid)
	}
}

func TestListAccounts(t *testing.T) {
	f := newFixture(t)
	accounts := []space.CloudAccount{f.account}
	for range 11 {
		accounts = append(accounts, f.createAccount(t, f.org, space.Azure))
	}
	f.createAccount(t, uuid.NewString(), space.AWS) // another org's
	sort.Slice(accounts, func(i, j int) bool { return accounts[i].ID < accounts[j].ID })

	var got []space.CloudAccount
	after := ""
	for {
		page, next, err := f.store.ListAccounts(t.Context(), f.org, space.Page{Limit: 4, After: after})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		// The account the cursor names goes away between pages.
		if err := f.store.DeleteAccount(t.Context(), f.org, next); err != nil {
			t.Fatal(err)
		}
		accounts = slices.DeleteFunc(accounts, func(a space.CloudAccount) bool { return a.ID == next })
		got = slices.DeleteFunc(got, func(a space.CloudAccount) bool { return a.ID == next })
		after = next
	}
	if !slices.EqualFunc(got, accounts, func(a, b space.CloudAccount) bool { return a.ID == b.ID && a.Name == b.Name }) {
		t.Errorf("listed %d accounts, want %d", len(got), len(accounts))
	}
}

func TestProbeTargets(t *testing.T) {
	f, live := listOrg(t)
	// A second org's spaces are probed too.
	g := &fixture{store: f.store, db: f.db, table: f.table, org: uuid.NewString()}
	g.account = g.createAccount(t, g.org, space.AWS)
	for i := range 5 {
		live = append(live, g.register(t, g.newSpace(i)))
	}
	// Agent spaces are listed apart (AgentProbeTargets), never with the
	// direct ones.
	for i := range 7 {
		s := g.newSpace(100 + i)
		s.Connectivity = space.ViaAgent
		live = append(live, g.register(t, s))
	}
	for _, agents := range []bool{false, true} {
		want := map[string]string{}
		for _, s := range live {
			if !s.Synthetic && (s.Connectivity == space.ViaAgent) == agents {
				want[s.ID] = s.OrgID
			}
		}
		got := probeTargets(t, f.store, agents)
		if len(got) != len(want) {
			t.Errorf("agents %t: %d targets, want %d", agents, len(got), len(want))
		}
		for id, org := range want {
			if got[id] != org {
				t.Errorf("agents %t: target %s: org %q, want %q", agents, id, got[id], org)
			}
		}
	}
}

// probeTargets walks every shard of the probe index three at a time: the
// direct spaces, or the agent spaces.
func probeTargets(t *testing.T, store *dynamostore.Store, agents bool) map[string]string {
	list := store.ProbeTargets
	if agents {
		list = store.AgentProbeTargets
	}
	got := map[string]string{}
	for shard := range store.ProbeShards() {
		after := ""
		for {
			page, next, err := list(t.Context(), shard, after, 3)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range page {
				if _, dup := got[p.ID]; dup {
					t.Errorf("%s listed twice", p.ID)
				}
				if i > 0 && p.ID <= page[i-1].ID {
					t.Errorf("shard %d out of order", shard)
				}
				got[p.ID] = p.OrgID
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	return got
}
