package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/cursor"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// TestActivityRoute: GET /activity lists the caller's org's entries only,
// newest first, paged and filtered; a filter that is not valid, or a cursor
// of another listing or org, is 400 naming it and lists nothing.
func TestActivityRoute(t *testing.T) {
	env := emulatortest.Start(t)
	store := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(t, "SpacesTable"))
	orgA, orgB := "org-"+uuid.NewString()[:8], "org-"+uuid.NewString()[:8]
	spaceID := uuid.NewString()
	base := time.Now().UTC().Add(-time.Hour)
	entries := []space.Activity{
		{ID: "act_1", OrgID: orgA, Kind: space.ActivitySpaceRegistered, At: base, ActorType: space.ActorUser, Actor: "alice",
			RequestID: "r1", ResourceType: "space", ResourceID: spaceID, SpaceID: spaceID},
		{ID: "act_2", OrgID: orgA, Kind: space.ActivitySpaceRelabeled, At: base.Add(time.Second), ActorType: space.ActorUser, Actor: "bob",
			RequestID: "r2", ResourceType: "space", ResourceID: spaceID, SpaceID: spaceID},
		{ID: "act_3", OrgID: orgA, Kind: space.ActivityAccountConnected, At: base.Add(2 * time.Second), ActorType: space.ActorUser,
			Actor: "alice", RequestID: "r3", ResourceType: "cloud_account", ResourceID: uuid.NewString()},
		{ID: "act_b", OrgID: orgB, Kind: space.ActivitySpaceRegistered, At: base.Add(3 * time.Second), ActorType: space.ActorUser,
			Actor: "alice", RequestID: "rb", ResourceType: "space", ResourceID: spaceID, SpaceID: spaceID},
	}
	for _, e := range entries {
		if err := store.RecordActivity(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	cursors, err := cursor.New(cursor.KeyFromSecret("test-secret-test-secret-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	api := &API{Activity: store, Auth: orgHeader{}, Cursors: cursors}
	h := api.Handler()
	get := func(org, query string) (int, listResponse[space.Activity], string) {
		t.Helper()
		req := httptest.NewRequest("GET", "/activity?"+query, nil)
		req.Header.Set("X-Test-Org", org)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var body listResponse[space.Activity]
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, body, rec.Body.String()
	}
	ids := func(b listResponse[space.Activity]) string {
		var out []string
		for _, a := range b.Items {
			out = append(out, a.ID)
		}
		return strings.Join(out, ",")
	}

	if code, b, raw := get(orgA, ""); code != 200 || ids(b) != "act_3,act_2,act_1" {
		t.Errorf("org A: %d %s", code, raw)
	}
	if code, b, raw := get(orgB, ""); code != 200 || ids(b) != "act_b" {
		t.Errorf("org B sees %d %s", code, raw)
	}
	if code, b, raw := get(orgB, "space_id="+spaceID); code != 200 || ids(b) != "act_b" {
		t.Errorf("org B, filtered by a space id org A's entries name: %d %s", code, raw)
	}
	if code, b, raw := get(orgA, "actor=alice&limit=1"); code != 200 || ids(b) != "act_3" || b.NextCursor == "" {
		t.Fatalf("alice's first page: %d %s", code, raw)
	} else {
		if code, b2, raw := get(orgA, "actor=alice&limit=1&cursor="+b.NextCursor); code != 200 || ids(b2) != "act_1" || b2.NextCursor != "" {
			t.Errorf("alice's second page: %d %s", code, raw)
		}
		// The cursor is bound to its org and filters.
		for _, c := range []struct{ org, query string }{{orgB, "actor=alice&limit=1"}, {orgA, "actor=bob&limit=1"}, {orgA, "limit=1"}} {
			if code, _, raw := get(c.org, c.query+"&cursor="+b.NextCursor); code != 400 || !strings.Contains(raw, `"cursor"`) {
				t.Errorf("%s %s with alice's cursor: %d %s", c.org, c.query, code, raw)
			}
		}
	}
	if code, b, raw := get(orgA, "kind=space.relabeled"); code != 200 || ids(b) != "act_2" {
		t.Errorf("kind: %d %s", code, raw)
	}
	if code, b, raw := get(orgA, "space_id="+spaceID+"&actor=alice"); code != 200 || ids(b) != "act_1" {
		t.Errorf("space and actor: %d %s", code, raw)
	}

	bad := []struct{ query, field string }{
		{"kind=space.renamed", "kind"},
		{"actor=", "actor"},
		{"actor=" + strings.Repeat("a", 257), "actor"},
		{"space_id=not-a-uuid", "space_id"},
		{"space=" + spaceID, "space"},
		{"actor=alice&actor=bob", "actor"},
		{"limit=0", "limit"},
	}
	for _, c := range bad {
		code, _, raw := get(orgA, c.query)
		if code != 400 || !strings.Contains(raw, `"field":"`+c.field+`"`) || strings.Contains(raw, `"items"`) {
			t.Errorf("%s: %d %s", c.query, code, raw)
		}
	}
	// Nothing was written by any of it.
	if code, b, raw := get(orgA, ""); code != 200 || ids(b) != "act_3,act_2,act_1" {
		t.Errorf("org A after the refusals: %d %s", code, raw)
	}
}

// TestRequestWritesCarryItsStamp: a write through the API records the
// caller's subject and the request's id on the item, which is what the
// table's stream carries to the audit trail.
func TestRequestWritesCarryItsStamp(t *testing.T) {
	env := emulatortest.Start(t)
	db := awsclient.DynamoDB(env.Config, env.Endpoint)
	table := env.Name(t, "SpacesTable")
	store := dynamostore.New(db, table)
	svc := &space.Service{Store: store, Now: func() time.Time { return time.Now().UTC() }, NewID: uuid.NewString}
	org := "org-" + uuid.NewString()[:8]
	cursors, err := cursor.New(cursor.KeyFromSecret("test-secret-test-secret-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	h := (&API{Spaces: svc, Auth: orgHeader{}, Cursors: cursors}).Handler()
	req := httptest.NewRequest("POST", "/cloud-accounts", strings.NewReader(
		`{"provider":"aws","name":"prod","connection":{"roleArn":"arn:aws:iam::123456789012:role/spaces"}}`))
	req.Header.Set("X-Test-Org", org)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "req-stamp-1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create account: %d %s", rec.Code, rec.Body)
	}
	var acct space.CloudAccount
	if err := json.Unmarshal(rec.Body.Bytes(), &acct); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rec.Body.String(), "request_id") || strings.Contains(rec.Body.String(), "changed_by") {
		t.Errorf("the stamp is the item's, not the body's: %s", rec.Body)
	}
	item, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "ORG#" + org}, "sk": &types.AttributeValueMemberS{Value: "ACCOUNT#" + acct.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	for attr, want := range map[string]string{"changed_by": "test", "request_id": "req-stamp-1"} {
		if v, _ := item.Item[attr].(*types.AttributeValueMemberS); v == nil || v.Value != want {
			t.Errorf("%s = %v, want %q", attr, item.Item[attr], want)
		}
	}
}
