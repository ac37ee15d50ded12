package dynamostore_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"

	"spaces/shared/space"
)

// names pages through ListSpaces with q, limit at a time, and returns the
// names in the order listed.
func (f *fixture) names(t *testing.T, q space.Query, limit int) []string {
	t.Helper()
	var out []string
	q.Limit = limit
	for pages := 0; ; pages++ {
		page, next, err := f.store.ListSpaces(t.Context(), f.org, q)
		if err != nil {
			t.Fatalf("ListSpaces %+v: %v", q, err)
		}
		if next != "" && len(page) != limit {
			t.Fatalf("a page of %d (limit %d) with a next position", len(page), limit)
		}
		for _, s := range page {
			out = append(out, s.Name)
		}
		if next == "" || pages > 50 {
			return out
		}
		q.After = next
	}
}

func TestListByName(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	gcp := f.createAccount(t, f.org, space.GCP)
	byName := map[string]space.Space{}
	for i, name := range []string{"beta", "Alpha", "alpha-2", "Gamma", "ALPHABET", "delta", "alpha gone", "", "al|pha"} {
		s := f.newSpace(i)
		s.Name = name
		byName[name] = f.register(t, s)
	}
	g := space.NewSpace(uuid.NewString(), f.org, space.RegisterInput{Name: "alpine",
		Provider: space.GCP, SpaceType: space.TypeKubernetes, CloudAccountID: gcp.ID,
		Config: space.Config{"clusterName": "gke-1", "region": "us-central1", "projectId": "acme-prod"}}, now)
	f.register(t, g)
	if _, err := f.store.Deregister(ctx, f.org, byName["alpha gone"].ID, 0, now, "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.setStatus(t, byName["beta"].ID, space.Active, now.Add(1)); err != nil {
		t.Fatal(err)
	}
	// A rename moves the space in name order.
	if _, err := f.store.UpdateSpace(ctx, f.org, byName["delta"].ID, space.Update[space.Space]{At: now.Add(2),
		Apply: func(s space.Space) (space.Space, error) { s.Name = "Epsilon"; return s, nil }}); err != nil {
		t.Fatal(err)
	}

	// "|" sorts after the letters.
	all := []string{"", "Alpha", "alpha-2", "ALPHABET", "alpine", "al|pha", "beta", "Epsilon", "Gamma"}
	rev := slices.Clone(all)
	slices.Reverse(rev)
	for _, c := range []struct {
		name string
		q    space.Query
		want []string
	}{
		{"by name", space.Query{Sort: space.SortName}, all},
		{"by name, descending", space.Query{Sort: space.SortNameDesc}, rev},
		{"prefix, by name", space.Query{Sort: space.SortName, NamePrefix: "alph"}, []string{"Alpha", "alpha-2", "ALPHABET"}},
		{"prefix, descending", space.Query{Sort: space.SortNameDesc, NamePrefix: "al"}, []string{"al|pha", "alpine", "ALPHABET", "alpha-2", "Alpha"}},
		// A word search lists by the word matched, then name (words.go).
		{"word search", space.Query{Search: []string{"al"}}, []string{"al|pha", "Alpha", "alpha-2", "ALPHABET", "alpine"}},
		{"word search and provider", space.Query{Search: []string{"al"}, Provider: space.GCP}, []string{"alpine"}},
		{"prefix and provider", space.Query{Sort: space.SortName, NamePrefix: "al", Provider: space.GCP}, []string{"alpine"}},
		{"by name, status kept", space.Query{Sort: space.SortName, Keep: func(s space.Space) bool { return s.Status == space.Active }}, []string{"beta"}},
		{"no match", space.Query{Sort: space.SortName, NamePrefix: "zzz"}, nil},
	} {
		for _, limit := range []int{1, 2, 100} {
			got := f.names(t, c.q, limit)
			if !slices.Equal(got, c.want) {
				t.Errorf("%s, limit %d: %q, want %q", c.name, limit, got, c.want)
			}
		}
	}
	// Id order is unchanged by the index: every live space, by id.
	ids := f.names(t, space.Query{}, 3)
	if len(ids) != len(all) {
		t.Errorf("id order lists %d spaces, want %d", len(ids), len(all))
	}
	// Another org's spaces are never listed.
	other := *f
	other.org = uuid.NewString()
	if got := other.names(t, space.Query{Sort: space.SortName}, 10); len(got) != 0 {
		t.Errorf("another org lists %q", got)
	}
}
