package local

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// TestBindingBadRequestsChangeNothing: every bad request to the environment
// and autoscaler policy routes gets a clear 4xx problem naming the bad
// field where there is one, and the table is unchanged afterwards.
func TestBindingBadRequestsChangeNothing(t *testing.T) {
	st, _ := startCascadeStack(t, 100*time.Millisecond)
	c := newClient(t, st, "acme")
	internal := newClient(t, st, "acme", "spaces:internal")
	acct := c.account("aws")
	live := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "live")))["id"].(string)
	inactive := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "down")))["id"].(string)
	internal.must(200, internal.do("PATCH", "/spaces/"+inactive+"/status", map[string]any{"status": "inactive", "reason": "test"}, `If-Match: "1"`))
	synthetic := c.must(201, c.do("POST", "/spaces", map[string]any{
		"name": "placeholder", "provider": "aws", "space_type": "kubernetes", "cloud_account_id": acct,
		"config": configFor("aws", "placeholder"), "synthetic": true,
	}))["id"].(string)
	gone := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "gone")))["id"].(string)
	c.deregister(gone)
	other := newClient(t, st, "globex")
	foreign := other.must(201, other.do("POST", "/spaces", registerBody("aws", other.account("aws"), "theirs")))["id"].(string)
	env := c.must(201, c.do("POST", "/environments", map[string]any{"name": "prod", "space_id": live}))["id"].(string)
	c.must(201, c.do("POST", "/environments", map[string]any{"name": "on-synthetic", "space_id": synthetic}))
	const unknown = "00000000-0000-4000-8000-000000000000"
	// An environment stored before namespaces were reserved: a push to it
	// is refused (409 NamespaceReserved), nothing stored.
	now := time.Now().UTC()
	legacy := space.Environment{ID: uuid.NewString(), OrgID: "acme", Name: "legacy", SpaceID: live, Namespace: "kube-system",
		CreatedAt: now, UpdatedAt: now, Version: 1}
	if err := dynamostore.New(awsclient.DynamoDB(st.AWS, st.EmulatorURL), st.Table).CreateEnvironment(t.Context(), legacy); err != nil {
		t.Fatal(err)
	}

	target := map[string]any{"namespace": "web", "kind": "Deployment", "name": "api"}
	pol := c.must(201, c.do("POST", "/autoscaler-policies", map[string]any{"space_id": live, "target": target,
		"min_replicas": 1, "max_replicas": 2}))["id"].(string)
	foreignPol := other.must(201, other.do("POST", "/autoscaler-policies", map[string]any{"space_id": foreign, "target": target,
		"min_replicas": 1, "max_replicas": 2}))["id"].(string)
	policy := func(edit func(m map[string]any)) map[string]any {
		m := map[string]any{"space_id": live, "target": map[string]any{"namespace": "web", "kind": "Deployment", "name": "api"},
			"min_replicas": 1, "max_replicas": 3}
		edit(m)
		return m
	}
	set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	setTarget := func(k string, v any) func(map[string]any) {
		return func(m map[string]any) { m["target"].(map[string]any)[k] = v }
	}

	cases := []struct {
		name    string
		method  string
		path    string
		body    any
		headers []string
		status  int
		field   string
	}{
		{"env without fields", "POST", "/environments", map[string]any{}, nil, 422, "name"},
		{"env without space", "POST", "/environments", map[string]any{"name": "x"}, nil, 422, "space_id"},
		{"env name too long", "POST", "/environments", map[string]any{"name": string(make([]byte, 101)), "space_id": live}, nil, 422, "name"},
		{"env space not a uuid", "POST", "/environments", map[string]any{"name": "x", "space_id": "prod"}, nil, 422, "space_id"},
		{"env unknown space", "POST", "/environments", map[string]any{"name": "x", "space_id": unknown}, nil, 422, "space_id"},
		{"env another org's space", "POST", "/environments", map[string]any{"name": "x", "space_id": foreign}, nil, 422, "space_id"},
		{"env inactive space", "POST", "/environments", map[string]any{"name": "x", "space_id": inactive}, nil, 422, "space_id"},
		{"env deregistered space", "POST", "/environments", map[string]any{"name": "x", "space_id": gone}, nil, 422, "space_id"},
		{"env unknown field", "POST", "/environments", map[string]any{"name": "x", "space_id": live, "color": "red"}, nil, 400, "color"},
		{"env name not a string", "POST", "/environments", map[string]any{"name": 7, "space_id": live}, nil, 400, "name"},
		{"env in kube-system", "POST", "/environments", map[string]any{"name": "x", "space_id": live, "namespace": "kube-system"}, nil, 422, "namespace"},
		{"env in a kube-* namespace", "POST", "/environments", map[string]any{"name": "x", "space_id": live, "namespace": "kube-web"}, nil, 422, "namespace"},
		{"env in the agent's namespace", "POST", "/environments", map[string]any{"name": "x", "space_id": live, "namespace": "spaces-agent"}, nil, 422, "namespace"},
		{"env named default", "POST", "/environments", map[string]any{"name": "default", "space_id": live}, nil, 422, "namespace"},
		{"env not json", "POST", "/environments", "name=x", []string{"Content-Type: text/plain"}, 415, ""},
		{"env empty body", "POST", "/environments", "", nil, 400, ""},
		{"env list bad limit", "GET", "/environments?limit=0", nil, nil, 400, "limit"},
		{"env list bad cursor", "GET", "/environments?cursor=abc", nil, nil, 400, "cursor"},
		{"env list unknown param", "GET", "/environments?space_id=" + live, nil, nil, 400, "space_id"},
		{"env id not a uuid", "GET", "/environments/prod", nil, nil, 404, ""},
		{"env unknown", "GET", "/environments/" + unknown, nil, nil, 404, ""},
		{"rebind without space", "PUT", "/environments/" + env + "/space", map[string]any{}, nil, 422, "space_id"},
		{"rebind inactive space", "PUT", "/environments/" + env + "/space", map[string]any{"space_id": inactive}, nil, 422, "space_id"},
		{"rebind deregistered space", "PUT", "/environments/" + env + "/space", map[string]any{"space_id": gone}, nil, 422, "space_id"},
		{"rebind another org's space", "PUT", "/environments/" + env + "/space", map[string]any{"space_id": foreign}, nil, 422, "space_id"},
		{"rebind unknown env", "PUT", "/environments/" + unknown + "/space", map[string]any{"space_id": live}, nil, 404, ""},
		{"rebind stale If-Match", "PUT", "/environments/" + env + "/space", map[string]any{"space_id": live}, []string{`If-Match: "7"`}, 412, ""},
		{"rebind bad If-Match", "PUT", "/environments/" + env + "/space", map[string]any{"space_id": live}, []string{`If-Match: 1`}, 400, "If-Match"},
		{"rebind unknown field", "PUT", "/environments/" + env + "/space", map[string]any{"space_id": live, "name": "x"}, nil, 400, "name"},
		{"policy synthetic space", "POST", "/autoscaler-policies", policy(set("space_id", synthetic)), nil, 422, "space_id"},
		{"policy inactive space", "POST", "/autoscaler-policies", policy(set("space_id", inactive)), nil, 422, "space_id"},
		{"policy deregistered space", "POST", "/autoscaler-policies", policy(set("space_id", gone)), nil, 422, "space_id"},
		{"policy another org's space", "POST", "/autoscaler-policies", policy(set("space_id", foreign)), nil, 422, "space_id"},
		{"policy min above max", "POST", "/autoscaler-policies", policy(set("min_replicas", 5)), nil, 422, "max_replicas"},
		{"policy negative min", "POST", "/autoscaler-policies", policy(set("min_replicas", -1)), nil, 422, "min_replicas"},
		{"policy zero max", "POST", "/autoscaler-policies", policy(set("max_replicas", 0)), nil, 422, "max_replicas"},
		{"policy huge max", "POST", "/autoscaler-policies", policy(set("max_replicas", 1001)), nil, 422, "max_replicas"},
		{"policy fractional min", "POST", "/autoscaler-policies", policy(set("min_replicas", 1.5)), nil, 400, "min_replicas"},
		{"policy string max", "POST", "/autoscaler-policies", policy(set("max_replicas", "3")), nil, 400, "max_replicas"},
		{"policy without target", "POST", "/autoscaler-policies", policy(func(m map[string]any) { delete(m, "target") }), nil, 422, "target.namespace"},
		{"policy without replicas", "POST", "/autoscaler-policies", map[string]any{"space_id": live, "target": target}, nil, 422, "min_replicas"},
		{"policy target extra field", "POST", "/autoscaler-policies", policy(setTarget("replicas", "3")), nil, 400, "target"},
		{"policy target not an object", "POST", "/autoscaler-policies", policy(set("target", "web/api")), nil, 400, "target"},
		{"policy kind", "POST", "/autoscaler-policies", policy(setTarget("kind", "Pod")), nil, 422, "target.kind"},
		{"policy namespace", "POST", "/autoscaler-policies", policy(setTarget("namespace", "Web_NS")), nil, 422, "target.namespace"},
		{"policy name", "POST", "/autoscaler-policies", policy(setTarget("name", "API")), nil, 422, "target.name"},
		{"policy in kube-system", "POST", "/autoscaler-policies", policy(setTarget("namespace", "kube-system")), nil, 422, "target.namespace"},
		{"policy id not a uuid", "GET", "/autoscaler-policies/x", nil, nil, 404, ""},
		{"policy unknown", "GET", "/autoscaler-policies/" + unknown, nil, nil, 404, ""},
		{"policy list bad limit", "GET", "/autoscaler-policies?limit=x", nil, nil, 400, "limit"},
		{"delete policy id not a uuid", "DELETE", "/autoscaler-policies/x", nil, nil, 404, ""},
		{"delete policy unknown", "DELETE", "/autoscaler-policies/" + unknown, nil, nil, 404, ""},
		{"delete another org's policy", "DELETE", "/autoscaler-policies/" + foreignPol, nil, nil, 404, ""},
		{"delete policy stale If-Match", "DELETE", "/autoscaler-policies/" + pol, nil, []string{`If-Match: "7"`}, 412, ""},
		{"delete policy weak If-Match", "DELETE", "/autoscaler-policies/" + pol, nil, []string{`If-Match: W/"1"`}, 412, ""},
		{"delete policy bad If-Match", "DELETE", "/autoscaler-policies/" + pol, nil, []string{`If-Match: 1`}, 400, "If-Match"},
		{"env name not a namespace", "POST", "/environments", map[string]any{"name": "My Env", "space_id": live}, nil, 422, "namespace"},
		{"env bad namespace", "POST", "/environments", map[string]any{"name": "x", "space_id": live, "namespace": "Bad_NS"}, nil, 422, "namespace"},
		{"push without manifests", "POST", "/environments/" + env + "/revisions", map[string]any{}, nil, 422, "manifests"},
		{"push empty manifests", "POST", "/environments/" + env + "/revisions", map[string]any{"manifests": []any{}}, nil, 422, "manifests"},
		{"push manifests not an array", "POST", "/environments/" + env + "/revisions", map[string]any{"manifests": "cm.yaml"}, nil, 400, "manifests"},
		{"push manifest without kind", "POST", "/environments/" + env + "/revisions", map[string]any{"manifests": []any{
			map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": "a"}}}}, nil, 422, "manifests[0].kind"},
		{"push manifest without name", "POST", "/environments/" + env + "/revisions", map[string]any{"manifests": []any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}}}}, nil, 422, "manifests[0].metadata.name"},
		{"push manifest of another namespace", "POST", "/environments/" + env + "/revisions", map[string]any{"manifests": []any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "kube-system"}}}}, nil, 422, "manifests[0].metadata.namespace"},
		{"push to an environment in kube-system", "POST", "/environments/" + legacy.ID + "/revisions", map[string]any{"manifests": manyManifests(1)}, nil, 409, ""},
		{"push too many manifests", "POST", "/environments/" + env + "/revisions", map[string]any{"manifests": manyManifests(51)}, nil, 422, "manifests"},
		{"push unknown field", "POST", "/environments/" + env + "/revisions", map[string]any{"manifests": manyManifests(1), "wait": true}, nil, 400, "wait"},
		{"push unknown env", "POST", "/environments/" + unknown + "/revisions", map[string]any{"manifests": manyManifests(1)}, nil, 404, ""},
		{"push env not a uuid", "POST", "/environments/web/revisions", map[string]any{"manifests": manyManifests(1)}, nil, 404, ""},
		{"revision not a uuid", "GET", "/revisions/abc", nil, nil, 404, ""},
		{"revision unknown", "GET", "/revisions/" + unknown, nil, nil, 404, ""},
		{"retry unknown", "POST", "/revisions/" + unknown + "/retry", nil, nil, 404, ""},
	}
	before := itemCount(t, st)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := *c
			cc.t = t
			r := cc.do(tc.method, tc.path, tc.body, tc.headers...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
			m := r.json(t)
			if d, _ := m["detail"].(string); d == "" {
				t.Errorf("problem without detail: %s", r.body)
			}
			if tc.field != "" && !hasField(m, tc.field) {
				t.Errorf("problem does not name %s: %s", tc.field, r.body)
			}
			if tc.path == "/environments/"+legacy.ID+"/revisions" && m["reason"] != space.ReasonNamespaceReserved {
				t.Errorf("problem reason %v, want %s: %s", m["reason"], space.ReasonNamespaceReserved, r.body)
			}
		})
	}
	if after := itemCount(t, st); after != before {
		t.Errorf("bad requests changed the table: %d items, was %d", after, before)
	}
}

func hasField(problem map[string]any, field string) bool {
	fields, _ := problem["errors"].([]any)
	for _, f := range fields {
		if m, _ := f.(map[string]any); m["field"] == field {
			return true
		}
	}
	return false
}

func manyManifests(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}}
	}
	return out
}
