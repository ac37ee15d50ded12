package httpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/cursor"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// GET /spaces?sort=status_since and -status_since list by when each space
// took its status, and sort=problems problems first (no reverse), page by
// page (a cursor continues only its own order);
// GET /space-counts answers the version distribution. A bad sort value,
// a cursor of another order, or a parameter on /space-counts is a 400
// naming it, and changes nothing.
func TestSortByStatusSinceAndVersionCounts(t *testing.T) {
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
	ids := map[string]string{}
	for i, name := range []string{"a", "b", "c"} {
		svc.Now = func() time.Time { return at.Add(time.Duration(i) * time.Minute) }
		s, _, err := svc.Register(t.Context(), org, space.RegisterInput{Name: name, Provider: space.AWS, SpaceType: space.TypeKubernetes,
			CloudAccountID: acct.ID, Config: space.Config{"clusterName": name, "region": "us-east-1"}}, "")
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = s.ID
	}
	// a answers 1.31 and goes active (the latest change); b answers 1.31
	// too, no transition; c never answers.
	for name, active := range map[string]bool{"a": true, "b": false} {
		if _, err := store.UpdateSpace(t.Context(), org, ids[name], space.Update[space.Space]{At: at.Add(time.Hour),
			Apply: func(s space.Space) (space.Space, error) {
				s.Probe.ServerVersion = &space.ServerVersion{GitVersion: "v1.31.4"}
				if active {
					s, _ = space.ApplyManual(s, space.Active, "", at.Add(time.Hour))
				}
				return s, nil
			}}); err != nil {
			t.Fatal(err)
		}
	}
	cursors, err := cursor.New(cursor.KeyFromSecret("test-secret-test-secret-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	api := &API{Spaces: svc, Auth: orgHeader{}, Cursors: cursors}
	mux := http.NewServeMux()
	mux.Handle("GET /spaces", api.authenticated((*API).listSpaces))
	mux.Handle("GET /space-counts", api.authenticated((*API).spaceCounts))
	get := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-Test-Org", org)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	list := func(sort string) ([]string, string) {
		t.Helper()
		var names []string
		path, first := "/spaces?limit=1&sort="+sort, ""
		for range 5 {
			rec := get(path)
			if rec.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
			}
			var body listResponse[space.Space]
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			for _, s := range body.Items {
				names = append(names, s.Name)
			}
			if first == "" {
				first = body.NextCursor
			}
			if body.NextCursor == "" {
				break
			}
			path = "/spaces?limit=1&sort=" + sort + "&cursor=" + body.NextCursor
		}
		return names, first
	}
	oldest, _ := list("status_since")
	latest, cur := list("-status_since")
	if !slices.Equal(oldest, []string{"b", "c", "a"}) || !slices.Equal(latest, []string{"a", "c", "b"}) {
		t.Errorf("status_since %v (want [b c a]), -status_since %v (want [a c b])", oldest, latest)
	}
	// Problems first: the unknown ones (never changed: latest
	// registration first), then the active one.
	problems, pcur := list("problems")
	if !slices.Equal(problems, []string{"c", "b", "a"}) {
		t.Errorf("problems %v, want [c b a]", problems)
	}

	counts := func() (space.Counts, string) {
		t.Helper()
		rec := get("/space-counts")
		var c space.Counts
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &c) != nil {
			t.Fatalf("GET /space-counts: %d %s", rec.Code, rec.Body)
		}
		return c, rec.Body.String()
	}
	c, before := counts()
	if !maps.Equal(c.ByVersion, map[string]int64{"1.31": 2}) || c.VersionUnknown != 1 || c.Total != 3 {
		t.Errorf("counts: by_version %v, version_unknown %d, total %d; want {1.31: 2}, 1, 3", c.ByVersion, c.VersionUnknown, c.Total)
	}

	for path, field := range map[string]string{
		"/spaces?sort=status-since":                  "sort",
		"/spaces?sort=since":                         "sort",
		"/spaces?sort=STATUS_SINCE":                  "sort",
		"/spaces?sort=--status_since":                "sort",
		"/spaces?sort=-problems":                     "sort",
		"/spaces?sort=status_since&cursor=" + pcur:   "cursor",
		"/spaces?sort=status_since&cursor=" + cur:    "cursor",
		"/spaces?sort=-status&limit=1&cursor=" + cur: "cursor",
		"/space-counts?version=1.31":                 "version",
		"/space-counts?by_version=1":                 "by_version",
	} {
		rec := get(path)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", path, rec.Code, rec.Body)
			continue
		}
		var p problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || len(p.Errors) == 0 || p.Errors[0].Field != field {
			t.Errorf("GET %s: %s, want a problem naming %s", path, rec.Body, field)
		}
	}
	if _, after := counts(); after != before {
		t.Errorf("the refused requests changed the counts: %s, was %s", after, before)
	}
}
