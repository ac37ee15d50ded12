package local

import (
	"fmt"
	"strings"
	"testing"

	"spaces/shared/dynamostore"
)

// TestWebhookEndpointLifecycle: an endpoint is created with its secret
// shown once (never in a get or a list), changed, paused and resumed, its
// secret rotated (a new one answered once), and deleted; another org sees
// none of it.
func TestWebhookEndpointLifecycle(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	other := newClient(t, st, "globex")

	created := c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{
		"url": "https://127.0.0.1:9/hook", "description": "on-call",
		"event_types": []string{"space.registered", "space.status_changed"}, "label_selector": "env=prod"}))
	id, secret := created["id"].(string), created["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") || created["state"] != "enabled" || created["version"] != 1.0 {
		t.Fatalf("created: %v", created)
	}
	got := c.must(200, c.do("GET", "/webhook-endpoints/"+id, nil))
	if _, has := got["secret"]; has || got["url"] != "https://127.0.0.1:9/hook" {
		t.Fatalf("get: %v", got)
	}
	list := c.must(200, c.do("GET", "/webhook-endpoints", nil))
	if items := list["items"].([]any); len(items) != 1 || strings.Contains(fmt.Sprint(list), secret) {
		t.Fatalf("list: %v", list)
	}
	if items := other.must(200, other.do("GET", "/webhook-endpoints", nil))["items"].([]any); len(items) != 0 {
		t.Fatalf("another org lists %v", items)
	}
	other.must(404, other.do("GET", "/webhook-endpoints/"+id, nil))
	other.must(404, other.do("DELETE", "/webhook-endpoints/"+id, nil))

	patched := c.must(200, c.do("PATCH", "/webhook-endpoints/"+id, map[string]any{"description": "pager", "label_selector": ""}, `If-Match: "1"`))
	if patched["description"] != "pager" || patched["label_selector"] != nil || patched["url"] != "https://127.0.0.1:9/hook" || patched["version"] != 2.0 {
		t.Fatalf("patched: %v", patched)
	}
	c.must(412, c.do("PATCH", "/webhook-endpoints/"+id, map[string]any{"description": "stale"}, `If-Match: "1"`))

	if p := c.must(200, c.do("POST", "/webhook-endpoints/"+id+"/pause", nil)); p["state"] != "paused" {
		t.Fatalf("paused: %v", p)
	}
	if p := c.must(200, c.do("POST", "/webhook-endpoints/"+id+"/pause", nil)); p["state"] != "paused" || p["version"] != 3.0 {
		t.Fatalf("paused twice: %v", p)
	}
	if p := c.must(200, c.do("POST", "/webhook-endpoints/"+id+"/resume", nil)); p["state"] != "enabled" {
		t.Fatalf("resumed: %v", p)
	}

	rotated := c.must(200, c.do("POST", "/webhook-endpoints/"+id+"/rotate-secret", nil))
	if s, _ := rotated["secret"].(string); !strings.HasPrefix(s, "whsec_") || s == secret {
		t.Fatalf("rotated: %v", rotated)
	}
	ep, err := st.webhookStore().GetWebhook(t.Context(), "acme", id)
	if err != nil || len(ep.Secrets) != 2 || ep.Secrets[0].Value != rotated["secret"] || ep.Secrets[1].Value != secret || ep.Secrets[1].ExpiresAt == nil {
		t.Fatalf("stored secrets after rotation: %+v %v", ep.Secrets, err)
	}

	c.must(412, c.do("DELETE", "/webhook-endpoints/"+id, nil, `If-Match: "1"`))
	c.must(204, c.do("DELETE", "/webhook-endpoints/"+id, nil))
	c.must(404, c.do("GET", "/webhook-endpoints/"+id, nil))
}

// TestWebhookBadRequestsChangeNothing: each bad request gets its problem,
// naming the field, and neither creates an endpoint nor changes the one
// there is.
func TestWebhookBadRequestsChangeNothing(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	id := c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{
		"url": "https://127.0.0.1:9/hook", "event_types": []string{"space.registered"}}))["id"].(string)
	before := c.must(200, c.do("GET", "/webhook-endpoints/"+id, nil))
	good := func(k string, v any) map[string]any {
		m := map[string]any{"url": "https://hooks.example.com/x", "event_types": []string{"space.registered"}}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		field              string
	}{
		{"http", "POST", "/webhook-endpoints", good("url", "http://hooks.example.com/x"), 422, "url"},
		{"no url", "POST", "/webhook-endpoints", good("url", nil), 422, "url"},
		{"credentials in url", "POST", "/webhook-endpoints", good("url", "https://u:p@hooks.example.com/"), 422, "url"},
		{"private literal", "POST", "/webhook-endpoints", good("url", "https://10.0.0.7/x"), 422, "url"},
		{"metadata literal", "POST", "/webhook-endpoints", good("url", "https://169.254.169.254/latest"), 422, "url"},
		{"does not resolve", "POST", "/webhook-endpoints", good("url", "https://nothing.invalid/x"), 422, "url"},
		{"no types", "POST", "/webhook-endpoints", good("event_types", []string{}), 422, "event_types"},
		{"unknown type", "POST", "/webhook-endpoints", good("event_types", []string{"space.exploded"}), 422, "event_types.0"},
		{"types not strings", "POST", "/webhook-endpoints", good("event_types", []int{1}), 400, "event_types"},
		{"bad selector", "POST", "/webhook-endpoints", good("label_selector", "env in (a"), 422, "label_selector"},
		{"unknown field", "POST", "/webhook-endpoints", good("secret", "whsec_mine"), 400, "secret"},
		{"patch private url", "PATCH", "/webhook-endpoints/" + id, map[string]any{"url": "https://[fd00::1]/"}, 422, "url"},
		{"patch unknown type", "PATCH", "/webhook-endpoints/" + id, map[string]any{"event_types": []string{"x"}}, 422, "event_types.0"},
		{"patch empty types", "PATCH", "/webhook-endpoints/" + id, map[string]any{"event_types": []string{}}, 422, "event_types"},
	} {
		r := c.do(tc.method, tc.path, tc.body)
		if r.status != tc.status || !strings.Contains(string(r.body), `"field":"`+tc.field+`"`) {
			t.Errorf("%s: %d %s; want %d naming %s", tc.name, r.status, r.body, tc.status, tc.field)
		}
	}
	// The delivery log: an unknown endpoint, another org's, a bad limit.
	other := newClient(t, st, "globex")
	for _, tc := range []struct {
		name   string
		c      *client
		path   string
		status int
	}{
		{"unknown endpoint", c, "/webhook-endpoints/0b6f3c1e-2d4a-4f8b-9c1d-7e5a3b2c1d0f/deliveries", 404},
		{"not a uuid", c, "/webhook-endpoints/nope/deliveries", 404},
		{"another org's", other, "/webhook-endpoints/" + id + "/deliveries", 404},
		{"limit 0", c, "/webhook-endpoints/" + id + "/deliveries?limit=0", 400},
		{"limit not a number", c, "/webhook-endpoints/" + id + "/deliveries?limit=x", 400},
		{"bad cursor", c, "/webhook-endpoints/" + id + "/deliveries?cursor=zzz", 400},
		{"unknown parameter", c, "/webhook-endpoints/" + id + "/deliveries?since=1", 400},
	} {
		if r := tc.c.do("GET", tc.path, nil); r.status != tc.status {
			t.Errorf("%s: %d %s; want %d", tc.name, r.status, r.body, tc.status)
		}
	}
	if log := c.must(200, c.do("GET", "/webhook-endpoints/"+id+"/deliveries", nil)); len(log["items"].([]any)) != 0 {
		t.Errorf("an endpoint nothing was sent to has a log: %v", log)
	}
	if items := c.must(200, c.do("GET", "/webhook-endpoints", nil))["items"].([]any); len(items) != 1 {
		t.Errorf("bad requests created endpoints: %d listed", len(items))
	}
	after := c.must(200, c.do("GET", "/webhook-endpoints/"+id, nil))
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("bad requests changed the endpoint:\n%v\n%v", before, after)
	}
}

// webhookStore reads the stack's table with the webhook key, as the API does.
func (st *Stack) webhookStore() *dynamostore.Store {
	return st.aws.Store(st.Table, st.aws.Sealer(st.Resources["WebhookSecretsKey"].Name)...)
}
