package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/cursor"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// GET /spaces?label_selector=… lists, page after page, exactly what the
// filter on the id listing kept before the label entries (the spaces of
// the whole listing whose labels the selector matches, in id order), on a
// mixed fleet: labelled at registration, relabelled since, deregistered,
// without labels; with every operator, combined with another filter and
// with a sort (by name, which still filters; problems first, read under
// the entries in that order: the same spaces as the problems index
// filtered, in its order); and its cursor continues only its own
// selector.
func TestLabelSelectorListsWhatTheFilterKept(t *testing.T) {
	env := emulatortest.Start(t)
	store := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(t, "SpacesTable"))
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	svc := &space.Service{Store: store, Now: func() time.Time { return at }, NewID: uuid.NewString}
	org := "org-" + uuid.NewString()[:8]
	acct, err := svc.CreateAccount(t.Context(), org, space.NewAccountInput{Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		t.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1 // as a verification would
	if err := store.SaveAccount(t.Context(), acct); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 30 {
		labels := space.Labels{}
		if i%5 != 4 {
			labels["env"] = []string{"prod", "staging", "dev"}[i%3]
		}
		if i%2 == 0 {
			labels["team"] = []string{"a", "b", "c"}[i%3]
		}
		if i%4 == 1 {
			labels["tier"] = []string{"db", "web"}[i%8/4]
		}
		if i%7 == 0 {
			labels["example.com/frozen"] = ""
		}
		s, _, err := svc.Register(t.Context(), org, space.RegisterInput{Name: fmt.Sprintf("c-%02d", i), Provider: space.AWS,
			SpaceType: space.TypeKubernetes, CloudAccountID: acct.ID, Synthetic: i%3 == 1, Labels: labels,
			Config: space.Config{"clusterName": fmt.Sprintf("c-%02d", i), "region": "us-east-1"}}, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	// Relabelled since (a value changed, labels added, all removed), and
	// deregistered.
	for i, l := range map[int]space.Labels{0: {"env": "dev", "team": "b"}, 4: {"env": "prod", "tier": "db"}, 9: nil} {
		if _, err := svc.SetLabels(t.Context(), org, ids[i], 0, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{3, 6} {
		if err := svc.Deregister(t.Context(), org, ids[i], 0, "test"); err != nil {
			t.Fatal(err)
		}
	}
	// Statuses apart, and moved again, so that problems first is an
	// order of its own.
	for i, id := range ids {
		if i == 3 || i == 6 || i%4 == 3 {
			continue
		}
		for j, to := range []space.Status{space.Active, space.Inactive}[:1+i%2] {
			if _, err := store.UpdateSpace(t.Context(), org, id, space.Update[space.Space]{At: at.Add(time.Duration(10*i+j) * time.Second),
				Apply: func(s space.Space) (space.Space, error) {
					s.Status = to
					s.Probe.LastTransitionAt = new(at.Add(time.Duration(10*i+j) * time.Second))
					return s, nil
				}}); err != nil {
				t.Fatal(err)
			}
		}
	}

	cursors, err := cursor.New(cursor.KeyFromSecret("test-secret-test-secret-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	api := &API{Spaces: svc, Auth: orgHeader{}, Cursors: cursors}
	mux := http.NewServeMux()
	mux.Handle("GET /spaces", api.authenticated((*API).listSpaces))
	get := func(path string) (int, listResponse[space.Space]) {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-Test-Org", org)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		var body listResponse[space.Space]
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, body
	}
	// list pages through query, limit 2; the first page's cursor too.
	list := func(query string) ([]string, string) {
		t.Helper()
		var got []string
		path, first := "/spaces?limit=2&"+query, ""
		for range 40 {
			code, body := get(path)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d", path, code)
			}
			for _, s := range body.Items {
				got = append(got, s.ID)
			}
			if first == "" {
				first = body.NextCursor
			}
			if body.NextCursor == "" {
				return got, first
			}
			path = "/spaces?limit=2&" + query + "&cursor=" + url.QueryEscape(body.NextCursor)
		}
		t.Fatalf("GET %s: no end after 40 pages", query)
		return nil, ""
	}
	// The whole listing, as the filter read it.
	_, all := get("/spaces?limit=1000")
	if len(all.Items) != 28 {
		t.Fatalf("%d spaces listed, want 28", len(all.Items))
	}
	for _, c := range []struct{ sel, more string }{
		{"env=prod", ""},
		{"env==dev", ""},
		{"team in (a,c)", ""},
		{"example.com/frozen", ""},
		{"tier", ""},
		{"env=prod,tier!=db", ""},
		{"env in (prod,dev),team,!tier", ""},
		{"env=dev,team=b", ""},
		{"env!=prod", ""},
		{"!env", ""},
		{"team notin (a)", ""},
		{"env=none", ""},
		{"env=prod", "synthetic=false"},
		{"team", "sort=name"},
		{"env=prod", "sort=problems"},
		{"team in (a,c)", "sort=problems"},
		{"env in (prod,dev),team,!tier", "sort=problems"},
		{"env=prod", "sort=problems&synthetic=false"},
	} {
		t.Run(c.sel+"&"+c.more, func(t *testing.T) {
			sel, err := space.ParseSelector("label_selector", c.sel)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			whole := all
			if strings.HasPrefix(c.more, "sort=problems") {
				// In that order: the problems index's listing, filtered.
				_, whole = get("/spaces?limit=1000&sort=problems")
			}
			for _, s := range whole.Items {
				if sel.Matches(s.Labels) && (!strings.HasSuffix(c.more, "synthetic=false") || !s.Synthetic) {
					want = append(want, s.ID)
				}
			}
			q := "label_selector=" + url.QueryEscape(c.sel)
			if c.more != "" {
				q += "&" + c.more
			}
			got, _ := list(q)
			if c.more == "sort=name" {
				slices.Sort(got) // name order; the same spaces
			}
			if !slices.Equal(got, want) {
				t.Errorf("listed %d %v,\nthe filter kept %d %v", len(got), got, len(want), want)
			}
		})
	}
	// A cursor continues its own selector only.
	_, cur := list("label_selector=env%3Dprod")
	if cur == "" {
		t.Fatal("env=prod listed in one page of 2")
	}
	if code, _ := get("/spaces?limit=2&label_selector=env%3Ddev&cursor=" + url.QueryEscape(cur)); code != http.StatusBadRequest {
		t.Errorf("env=prod's cursor with env=dev: %d, want 400", code)
	}
}
