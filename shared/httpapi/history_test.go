package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/auth"
	"spaces/shared/awsclient"
	"spaces/shared/cursor"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// orgHeader authenticates a test request as the org in X-Test-Org.
type orgHeader struct{}

func (orgHeader) Authenticate(r *http.Request) (auth.Principal, error) {
	if org := r.Header.Get("X-Test-Org"); org != "" {
		return auth.Principal{OrgID: org, Subject: "test"}, nil
	}
	return auth.Principal{}, errors.New("no org")
}

func TestStatusHistory(t *testing.T) {
	env := emulatortest.Start(t)
	store := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(t, "SpacesTable"))
	// The present: history expires after 30 days and the emulator sweeps it.
	at := time.Now().UTC().Truncate(time.Second)
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
	s, _, err := svc.Register(t.Context(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: acct.ID, Config: space.Config{"clusterName": "c1", "region": "us-east-1"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	// unknown→active→inactive→active.
	for i, o := range []space.Outcome{{}, {Reason: "Timeout"}, {Reason: "Timeout"}, {Reason: "Timeout"}, {}} {
		o.At = at.Add(time.Duration(i+1) * time.Minute)
		res, err := store.UpdateSpace(t.Context(), s.OrgID, s.ID, space.Update[space.Space]{At: o.At, Read: &s,
			Apply: func(cur space.Space) (space.Space, error) { next, _ := space.ApplyProbe(cur, o); return next, nil }})
		if err != nil {
			t.Fatal(err)
		}
		s = res.After
	}
	cursors, err := cursor.New(cursor.KeyFromSecret("test-secret-test-secret-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	api := &API{Spaces: svc, Auth: orgHeader{}, Cursors: cursors}
	mux := http.NewServeMux()
	mux.Handle("GET /spaces/{id}/status-history", api.authenticated((*API).statusHistory))

	get := func(orgID, id, query string) (int, listResponse[space.Transition], string) {
		req := httptest.NewRequest("GET", "/spaces/"+id+"/status-history?"+query, nil)
		req.Header.Set("X-Test-Org", orgID)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		var body listResponse[space.Transition]
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, body, rec.Body.String()
	}

	code, page1, raw := get(org, s.ID, "limit=2")
	if code != 200 || len(page1.Items) != 2 || page1.NextCursor == "" ||
		page1.Items[0].To != space.Active || page1.Items[1].To != space.Inactive || page1.Items[1].Reason != "Timeout" {
		t.Fatalf("page 1: %d %s", code, raw)
	}
	code, page2, raw := get(org, s.ID, "limit=2&cursor="+url.QueryEscape(page1.NextCursor))
	if code != 200 || len(page2.Items) != 1 || page2.NextCursor != "" || page2.Items[0].From != space.Unknown {
		t.Fatalf("page 2: %d %s", code, raw)
	}
	if code, _, raw := get("another-org", s.ID, ""); code != 404 {
		t.Errorf("another org: %d %s", code, raw)
	}
	if code, _, raw := get(org, "not-a-uuid", ""); code != 404 {
		t.Errorf("bad id: %d %s", code, raw)
	}
	for _, q := range []string{"limit=0", "limit=x", "cursor=forged", "status=active", "cursor=" + url.QueryEscape(page1.NextCursor) + "&cursor=x"} {
		if code, _, raw := get(org, s.ID, q); code != 400 {
			t.Errorf("%s: %d %s", q, code, raw)
		}
	}
	// A cursor of this space's history is refused for another space.
	other, _, err := svc.Register(t.Context(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: acct.ID, Config: space.Config{"clusterName": "c2", "region": "us-east-1"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, raw := get(org, other.ID, "cursor="+url.QueryEscape(page1.NextCursor)); code != 400 {
		t.Errorf("cursor replayed on another space: %d %s", code, raw)
	}
	if code, body, raw := get(org, other.ID, ""); code != 200 || len(body.Items) != 0 || raw == "" {
		t.Errorf("empty history: %d %s", code, raw)
	}
}
