package local

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestBadRequestsChangeNothing sends a table of bad requests: each gets the
// right problem (naming the bad field where there is one), and the table's
// contents are unchanged afterwards.
func TestBadRequestsChangeNothing(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	acct := c.account("aws")
	gcpAcct := c.account("gcp")
	taken := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "taken")))["id"].(string)
	other := newClient(t, st, "globex")
	foreignAcct := other.account("aws")

	body := func(edit func(m map[string]any)) map[string]any {
		m := registerBody("aws", acct, "fresh-cluster")
		edit(m)
		return m
	}
	cfg := func(kv ...string) func(m map[string]any) {
		return func(m map[string]any) {
			c := m["config"].(map[string]string)
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] == "<delete>" {
					delete(c, kv[i])
				} else {
					c[kv[i]] = kv[i+1]
				}
			}
		}
	}
	set := func(k string, v any) func(m map[string]any) { return func(m map[string]any) { m[k] = v } }

	expired, _ := st.Signer.Mint("acme", "t", nil, -time.Hour)
	noneTok := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"org_id": "acme", "iss": "spaces-local", "aud": "spaces", "exp": time.Now().Add(time.Hour).Unix()})
	none, _ := noneTok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	valid := c.token
	tampered := valid[:len(valid)-4] + "AAAA"

	cases := []struct {
		name    string
		method  string
		path    string
		body    any
		headers []string
		status  int
		field   string
	}{
		{"missing config key", "POST", "/spaces", body(cfg("region", "<delete>")), nil, 422, "config.region"},
		{"extra config key", "POST", "/spaces", body(cfg("zone", "a")), nil, 422, "config.zone"},
		{"gcp key on aws", "POST", "/spaces", body(cfg("projectId", "acme-prod")), nil, 422, "config.projectId"},
		{"bad region", "POST", "/spaces", body(cfg("region", "moon-1")), nil, 422, "config.region"},
		{"bad eks name", "POST", "/spaces", body(cfg("clusterName", "-bad")), nil, 422, "config.clusterName"},
		{"empty cluster name", "POST", "/spaces", body(cfg("clusterName", "")), nil, 422, "config.clusterName"},
		{"config value not string", "POST", "/spaces", `{"provider":"aws","space_type":"kubernetes","cloud_account_id":"` + acct + `","config":{"clusterName":1,"region":"us-east-1"}}`, nil, 400, "config"},
		{"config not object", "POST", "/spaces", body(set("config", "cluster")), nil, 400, "config"},
		{"no config", "POST", "/spaces", body(func(m map[string]any) { delete(m, "config") }), nil, 422, "config"},
		{"unknown provider", "POST", "/spaces", body(set("provider", "oracle")), nil, 422, "provider"},
		{"provider wrong case", "POST", "/spaces", body(set("provider", "AWS")), nil, 422, "provider"},
		{"no provider", "POST", "/spaces", body(func(m map[string]any) { delete(m, "provider") }), nil, 422, "provider"},
		{"provider mismatches account", "POST", "/spaces", registerBody("gcp", acct, "gke-one"), nil, 422, "cloud_account_id"},
		{"aws config on gcp", "POST", "/spaces", map[string]any{"provider": "gcp", "space_type": "kubernetes", "cloud_account_id": gcpAcct, "config": configFor("aws", "x")}, nil, 422, "config.projectId"},
		{"gcp bad project", "POST", "/spaces", map[string]any{"provider": "gcp", "space_type": "kubernetes", "cloud_account_id": gcpAcct, "config": map[string]string{"clusterName": "g", "region": "us-central1", "projectId": "UPPER"}}, nil, 422, "config.projectId"},
		{"azure bad subscription", "POST", "/spaces", map[string]any{"provider": "azure", "space_type": "kubernetes", "cloud_account_id": acct, "config": map[string]string{"clusterName": "a", "resourceGroup": "rg", "subscriptionId": "nope"}}, nil, 422, "config.subscriptionId"},
		{"reserved space_type", "POST", "/spaces", body(set("space_type", "vm")), nil, 422, "space_type"},
		{"no space_type", "POST", "/spaces", body(func(m map[string]any) { delete(m, "space_type") }), nil, 422, "space_type"},
		{"space_type not string", "POST", "/spaces", body(set("space_type", 7)), nil, 400, "space_type"},
		{"account not uuid", "POST", "/spaces", body(set("cloud_account_id", "acct-1")), nil, 422, "cloud_account_id"},
		{"unknown account", "POST", "/spaces", body(set("cloud_account_id", "7d9c3a52-4d7e-4b0e-9a43-2f0d6c1e8a11")), nil, 422, "cloud_account_id"},
		{"foreign account", "POST", "/spaces", body(set("cloud_account_id", foreignAcct)), nil, 422, "cloud_account_id"},
		{"synthetic not bool", "POST", "/spaces", body(set("synthetic", "yes")), nil, 400, "synthetic"},
		{"name not string", "POST", "/spaces", body(set("name", 12)), nil, 400, "name"},
		{"name too long", "POST", "/spaces", body(set("name", strings.Repeat("n", 101))), nil, 422, "name"},
		{"unknown field", "POST", "/spaces", body(set("org_id", "globex")), nil, 400, "org_id"},
		{"status in body", "POST", "/spaces", body(set("status", "active")), nil, 400, "status"},
		{"duplicate cluster", "POST", "/spaces", registerBody("aws", acct, "taken"), nil, 409, ""},
		{"bad JSON", "POST", "/spaces", `{"provider":`, nil, 400, ""},
		{"JSON array", "POST", "/spaces", `[1,2]`, nil, 400, ""},
		{"trailing data", "POST", "/spaces", `{} {}`, nil, 400, ""},
		{"empty body", "POST", "/spaces", ``, nil, 400, ""},
		{"huge body", "POST", "/spaces", `{"name":"` + strings.Repeat("x", 70<<10) + `"}`, nil, 413, ""},
		{"wrong content type", "POST", "/spaces", registerBody("aws", acct, "ct"), []string{"Content-Type: text/plain"}, 415, ""},
		{"form content type", "POST", "/spaces", "provider=aws", []string{"Content-Type: application/x-www-form-urlencoded"}, 415, ""},
		{"bad idempotency key", "POST", "/spaces", registerBody("aws", acct, "idem"), []string{"Idempotency-Key: has space"}, 400, "Idempotency-Key"},
		{"get non-uuid id", "GET", "/spaces/not-a-uuid", nil, nil, 404, ""},
		{"get unknown id", "GET", "/spaces/7d9c3a52-4d7e-4b0e-9a43-2f0d6c1e8a11", nil, nil, 404, ""},
		{"bad cursor", "GET", "/spaces?cursor=abc", nil, nil, 400, "cursor"},
		{"bad limit", "GET", "/spaces?limit=0", nil, nil, 400, "limit"},
		{"limit not number", "GET", "/spaces?limit=ten", nil, nil, 400, "limit"},
		{"bad provider filter", "GET", "/spaces?provider=ibm", nil, nil, 400, "provider"},
		{"bad status filter", "GET", "/spaces?status=up", nil, nil, 400, "status"},
		{"bad picker", "GET", "/spaces?picker=scheduler", nil, nil, 400, "picker"},
		{"bad account filter", "GET", "/spaces?cloud_account_id=x", nil, nil, 400, "cloud_account_id"},
		{"unknown query parameter", "GET", "/spaces?org_id=globex", nil, nil, 400, "org_id"},
		{"repeated parameter", "GET", "/spaces?provider=aws&provider=gcp", nil, nil, 400, "provider"},
		{"patch without internal scope", "PATCH", "/spaces/" + taken + "/status", map[string]any{"status": "active"}, []string{`If-Match: "1"`}, 403, ""},
		{"delete with garbage If-Match", "DELETE", "/spaces/" + taken, nil, []string{"If-Match: 1"}, 400, "If-Match"},
		{"delete with stale If-Match", "DELETE", "/spaces/" + taken, nil, []string{`If-Match: "9"`}, 412, ""},
		{"account: bad provider", "POST", "/cloud-accounts", map[string]any{"provider": "ibm", "name": "x", "connection": map[string]string{}}, nil, 422, "provider"},
		{"account: secret key", "POST", "/cloud-accounts", map[string]any{"provider": "aws", "name": "x", "connection": map[string]string{"roleArn": "arn:aws:iam::123456789012:role/r", "secretAccessKey": "s"}}, nil, 422, "connection.secretAccessKey"},
		{"account: bad role arn", "POST", "/cloud-accounts", map[string]any{"provider": "aws", "name": "x", "connection": map[string]string{"roleArn": "role/r"}}, nil, 422, "connection.roleArn"},
		{"account: gcp bad email", "POST", "/cloud-accounts", map[string]any{"provider": "gcp", "name": "x", "connection": map[string]string{"projectId": "acme-prod", "serviceAccountEmail": "me@gmail.com"}}, nil, 422, "connection.serviceAccountEmail"},
		{"account: no name", "POST", "/cloud-accounts", map[string]any{"provider": "azure", "connection": map[string]string{"tenantId": azSub, "clientId": azSub, "subscriptionId": azSub}}, nil, 422, "name"},
		{"account delete in use", "DELETE", "/cloud-accounts/" + acct, nil, nil, 409, ""},
		{"no token", "GET", "/spaces", nil, []string{"Authorization: "}, 401, ""},
		{"basic auth", "GET", "/spaces", nil, []string{"Authorization: Basic YTpi"}, 401, ""},
		{"expired token", "GET", "/spaces", nil, []string{"Authorization: Bearer " + expired}, 401, ""},
		{"alg none", "POST", "/spaces", registerBody("aws", acct, "none"), []string{"Authorization: Bearer " + none}, 401, ""},
		{"tampered signature", "POST", "/spaces", registerBody("aws", acct, "tamper"), []string{"Authorization: Bearer " + tampered}, 401, ""},
		{"garbage token", "GET", "/spaces", nil, []string{"Authorization: Bearer not.a.jwt"}, 401, ""},
		{"unknown route", "GET", "/clusters", nil, nil, 404, ""},
		{"wrong method", "PUT", "/spaces", registerBody("aws", acct, "put"), nil, 405, ""},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
	before := itemCount(t, st)
	for _, tc := range cases {
		r := c.do(tc.method, tc.path, tc.body, tc.headers...)
		if r.status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, r.status, tc.status, r.body)
			continue
		}
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: content type %q", tc.name, ct)
		}
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Detail string `json:"detail"`
			Errors []struct{ Field, Reason string }
		}
		if err := json.Unmarshal(r.body, &p); err != nil || p.Status != tc.status || p.Detail == "" || !strings.HasPrefix(p.Type, "urn:spaces:problem:") {
			t.Errorf("%s: not a complete problem: %s", tc.name, r.body)
		}
		if tc.field != "" {
			found := false
			for _, e := range p.Errors {
				found = found || (e.Field == tc.field && e.Reason != "")
			}
			if !found {
				t.Errorf("%s: no problem names %q: %s", tc.name, tc.field, r.body)
			}
		}
	}
	if after := itemCount(t, st); after != before {
		t.Errorf("bad requests changed the table: %d items → %d", before, after)
	}
	if m := c.must(200, c.do("GET", "/spaces/"+taken, nil)); m["version"].(float64) != 1 {
		t.Errorf("the existing space changed: %v", m)
	}
}
