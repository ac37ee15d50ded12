package openapitest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"spaces"
	"spaces/infra/openapitest"
	"spaces/shared/auth"
	"spaces/shared/cursor"
	"spaces/shared/httpapi"
	"spaces/shared/kubens"
	"spaces/shared/space"
	"spaces/shared/webhook"
)

// recorder is a testing.TB that keeps the failures reported to it instead of
// failing the test, so a test can prove that a check fails.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprint(args...))
}

func (r *recorder) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errors)
}

func TestDocumentIsValidOpenAPI31(t *testing.T) {
	doc, err := libopenapi.NewDocument(spaces.OpenAPI)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("the document model does not build: %v", err)
	}
	if got := m.Model.Version; got != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", got)
	}
	if got := m.Model.Info.Version; got != "0.1.0" {
		t.Errorf("info.version = %q, want 0.1.0", got)
	}
	// New also validates the document against the OpenAPI 3.1 schema.
	v := openapitest.New(t, spaces.OpenAPI)

	scheme, ok := v.Model().Components.SecuritySchemes.Get("bearer")
	if !ok || scheme.Type != "http" || scheme.Scheme != "bearer" || scheme.BearerFormat != "JWT" {
		t.Errorf("components.securitySchemes.bearer = %+v, want http bearer JWT", scheme)
	}
	if len(v.Model().Security) != 1 || v.Model().Security[0].ContainsEmptyRequirement {
		t.Errorf("global security = %+v, want the bearer requirement", v.Model().Security)
	}
	for path, item := range v.Model().Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			route := strings.ToUpper(method) + " " + path
			public := slices.Contains(httpapi.PublicRoutes, route)
			agent := slices.Contains(httpapi.AgentRoutes(), route)
			switch {
			case public && (op.Security == nil || len(op.Security) != 0):
				t.Errorf("%s is public but does not declare security: []", route)
			case agent:
				// The agent's routes take its own secret, never a JWT.
				has := func(scheme string) bool { _, ok := op.Security[0].Requirements.Get(scheme); return ok }
				if len(op.Security) != 1 || op.Security[0].Requirements.Len() != 1 || !(has("agentBootstrap") || has("agentCredential")) {
					t.Errorf("%s is an agent route but does not declare the agent's security alone", route)
				}
			case !public && op.Security != nil:
				t.Errorf("%s overrides the global bearer security", route)
			}
			if op.OperationId == "" || op.Summary == "" {
				t.Errorf("%s needs an operationId and a summary", route)
			}
		}
	}
}

func TestDocumentedRoutesAreServedRoutes(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	served := httpapi.Routes()
	slices.Sort(served)
	documented := v.Routes()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served but not in openapi.yaml", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("%s is in openapi.yaml but not served", r)
		}
	}
	if len(documented) == 0 {
		t.Fatal("the document lists no routes")
	}
}

// TestExamplesFollowTheirSchemas keeps the reference's examples honest.
func TestExamplesFollowTheirSchemas(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	sv := schema_validation.NewSchemaValidator(config.WithFormatAssertions())
	checked := 0
	check := func(where string, mt *v3.MediaType) {
		for name, ex := range mt.Examples.FromOldest() {
			var val any
			if err := ex.Value.Decode(&val); err != nil {
				t.Errorf("%s example %s: %v", where, name, err)
				continue
			}
			b, err := json.Marshal(val)
			if err != nil {
				t.Errorf("%s example %s: %v", where, name, err)
				continue
			}
			if ok, errs := sv.ValidateSchemaBytes(mt.Schema.Schema(), b); !ok {
				for _, e := range errs {
					t.Errorf("%s example %s does not follow its schema: %v", where, name, e)
				}
			}
			checked++
		}
	}
	for path, item := range v.Model().Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			route := strings.ToUpper(method) + " " + path
			if op.RequestBody != nil {
				for ct, mt := range op.RequestBody.Content.FromOldest() {
					check(route+" request "+ct, mt)
				}
			}
			for code, res := range op.Responses.Codes.FromOldest() {
				for ct, mt := range res.Content.FromOldest() {
					check(route+" "+code+" "+ct, mt)
				}
			}
		}
	}
	if checked < 4 {
		t.Errorf("checked %d examples, want at least 4", checked)
	}
}

// TestRequestSchemasCarryTheDomainRules proves the documented config and
// connection patterns agree with the domain's validation, value by value.
func TestRequestSchemasCarryTheDomainRules(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	sv := schema_validation.NewSchemaValidator(config.WithFormatAssertions())
	schemas := v.Model().Components.Schemas
	schema := func(name string) *base.Schema {
		p, ok := schemas.Get(name)
		if !ok {
			t.Fatalf("components.schemas.%s is missing", name)
		}
		return p.Schema()
	}
	accountID := "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f"
	cases := []struct {
		provider space.Provider
		config   map[string]string
	}{
		{space.AWS, map[string]string{"clusterName": "prod-eu", "region": "eu-west-1"}},
		{space.AWS, map[string]string{"clusterName": "-bad", "region": "eu-west-1"}},
		{space.AWS, map[string]string{"clusterName": "prod", "region": "europe-1"}},
		{space.AWS, map[string]string{"clusterName": "prod", "region": "us-gov-west-1"}},
		{space.AWS, map[string]string{"clusterName": strings.Repeat("a", 100), "region": "us-east-1"}},
		{space.AWS, map[string]string{"clusterName": strings.Repeat("a", 101), "region": "us-east-1"}},
		{space.AWS, map[string]string{"clusterName": "prod"}},
		{space.AWS, map[string]string{"clusterName": "prod", "region": "us-east-1", "projectId": "my-project"}},
		{space.GCP, map[string]string{"clusterName": "prod", "region": "us-central1-a", "projectId": "my-project-1"}},
		{space.GCP, map[string]string{"clusterName": "Prod", "region": "us-central1", "projectId": "my-project-1"}},
		{space.GCP, map[string]string{"clusterName": "prod-", "region": "us-central1", "projectId": "my-project-1"}},
		{space.GCP, map[string]string{"clusterName": "prod", "region": "us-central1", "projectId": "short"}},
		{space.Azure, map[string]string{"clusterName": "aks_1", "resourceGroup": "rg.(prod)", "subscriptionId": accountID}},
		{space.Azure, map[string]string{"clusterName": "aks", "resourceGroup": "rg.", "subscriptionId": accountID}},
		{space.Azure, map[string]string{"clusterName": "aks", "resourceGroup": "rg", "subscriptionId": "nope"}},
		{space.Azure, map[string]string{"clusterName": "aks", "region": "westeurope", "subscriptionId": accountID}},
	}
	for _, c := range cases {
		in := space.RegisterInput{Provider: c.provider, SpaceType: "kubernetes", CloudAccountID: accountID, Config: c.config}
		body, _ := json.Marshal(map[string]any{"provider": c.provider, "space_type": "kubernetes", "cloud_account_id": accountID, "config": c.config})
		domainOK := in.Validate() == nil
		docOK, _ := sv.ValidateSchemaBytes(schema("RegisterSpaceRequest"), body)
		if domainOK != docOK {
			t.Errorf("%s %v: domain valid=%v, document valid=%v", c.provider, c.config, domainOK, docOK)
		}
	}

	conns := []struct {
		provider   space.Provider
		connection map[string]string
	}{
		{space.AWS, map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": "x1"}},
		{space.AWS, map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": strings.Repeat("x", 1224)}},
		{space.AWS, map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": strings.Repeat("x", 1225)}},
		{space.AWS, map[string]string{"roleArn": "arn:aws:iam::12345:role/spaces", "externalId": "x1"}},
		{space.GCP, map[string]string{"projectId": "my-project", "serviceAccountEmail": "spaces@my-project.iam.gserviceaccount.com"}},
		{space.GCP, map[string]string{"projectId": "my-project", "serviceAccountEmail": "spaces@gmail.com"}},
		{space.Azure, map[string]string{"tenantId": accountID, "clientId": accountID, "subscriptionId": accountID}},
		{space.Azure, map[string]string{"tenantId": accountID, "clientId": accountID}},
	}
	for _, c := range conns {
		in := space.NewAccountInput{Provider: c.provider, Name: "main", Connection: c.connection}
		body, _ := json.Marshal(map[string]any{"provider": c.provider, "name": "main", "connection": c.connection})
		domainOK := in.Validate() == nil
		docOK, _ := sv.ValidateSchemaBytes(schema("CreateCloudAccountRequest"), body)
		if domainOK != docOK {
			t.Errorf("%s %v: domain valid=%v, document valid=%v", c.provider, c.connection, domainOK, docOK)
		}
	}
	// The provider decides which keys apply: an AWS config under gcp is refused.
	body := `{"provider":"gcp","space_type":"kubernetes","cloud_account_id":"` + accountID + `","config":{"clusterName":"prod","region":"us-east-1"}}`
	if ok, _ := sv.ValidateSchemaBytes(schema("RegisterSpaceRequest"), []byte(body)); ok {
		t.Error("an aws config under provider gcp follows the document")
	}
}

// TestNamespaceAndRegionSchemasCarryTheDomainRules proves the documented
// namespace body and the picker's region parameter agree with the code's
// validation, value by value.
func TestNamespaceAndRegionSchemasCarryTheDomainRules(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	sv := schema_validation.NewSchemaValidator(config.WithFormatAssertions())
	req, ok := v.Model().Components.Schemas.Get("CreateNamespaceRequest")
	if !ok {
		t.Fatal("components.schemas.CreateNamespaceRequest is missing")
	}
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []kubens.NewNamespace{
		{Name: "team-a"},
		{Name: "a"},
		{Name: "0"},
		{Name: long(63)},
		{Name: long(64)},
		{Name: ""},
		{Name: "Team"},
		{Name: "team_a"},
		{Name: "-team"},
		{Name: "team-"},
		{Name: "team.a"},
		{Name: "ok", Labels: map[string]string{"team": "a", "empty": "", "spaces.dev/owner": "x", "a.b-c/D_e.F": "V-1_2.3"}},
		{Name: "ok", Labels: map[string]string{long(63): long(63)}},
		{Name: "ok", Labels: map[string]string{long(64): "v"}},
		{Name: "ok", Labels: map[string]string{"k": long(64)}},
		{Name: "ok", Labels: map[string]string{"bad key!": "v"}},
		{Name: "ok", Labels: map[string]string{"k": "bad value!"}},
		{Name: "ok", Labels: map[string]string{"k": "-v"}},
		{Name: "ok", Labels: map[string]string{"_k": "v"}},
		{Name: "ok", Labels: map[string]string{"/k": "v"}},
		{Name: "ok", Labels: map[string]string{"a/b/c": "v"}},
		{Name: "ok", Labels: map[string]string{"Example.com/k": "v"}},
		{Name: "ok", Labels: map[string]string{"example.com./k": "v"}},
		{Name: "ok", Labels: map[string]string{"example.com/": "v"}},
		{Name: "ok", Labels: map[string]string{long(200) + "." + long(52) + "/" + long(63): "v"}},
	}
	for _, c := range cases {
		body, _ := json.Marshal(map[string]any{"name": c.Name, "labels": c.Labels})
		domainOK := kubens.Validate(c) == nil
		docOK, _ := sv.ValidateSchemaBytes(req.Schema(), body)
		if domainOK != docOK {
			t.Errorf("%q %v: domain valid=%v, document valid=%v", c.Name, c.Labels, domainOK, docOK)
		}
	}

	// A space's labels: the same rule, and at most space.MaxLabels.
	setReq, ok := v.Model().Components.Schemas.Get("SetLabelsRequest")
	if !ok {
		t.Fatal("components.schemas.SetLabelsRequest is missing")
	}
	full, over := map[string]string{}, map[string]string{}
	for i := range space.MaxLabels + 1 {
		over[fmt.Sprint("k", i)] = "v"
		if i < space.MaxLabels {
			full[fmt.Sprint("k", i)] = "v"
		}
	}
	sets := []map[string]string{{}, full, over}
	for _, c := range cases {
		if c.Labels != nil {
			sets = append(sets, c.Labels)
		}
	}
	for _, l := range sets {
		body, _ := json.Marshal(map[string]any{"labels": l})
		domainOK := space.ValidateLabels(l) == nil
		docOK, _ := sv.ValidateSchemaBytes(setReq.Schema(), body)
		if domainOK != docOK {
			t.Errorf("space labels %v: domain valid=%v, document valid=%v", l, domainOK, docOK)
		}
	}

	param, ok := v.Model().Components.Parameters.Get("Region")
	if !ok {
		t.Fatal("components.parameters.Region is missing")
	}
	region := param.Schema.Schema()
	for _, r := range []string{"eu-west-1", "us-gov-west-1", "cn-north-1", "ap-southeast-2", "us-central1", "eu-west", "EU-WEST-1", "eu-west-10", " eu-west-1",
		"eusc-de-east-1", "us-isof-south-1", "eu-isoe-west-1", "eusc-fr-east-1", "us-gov-west"} {
		domainOK := space.ValidateConfigValue(space.AWS, "region", r) == ""
		docOK, _ := sv.ValidateSchemaBytes(region, []byte(strconv.Quote(r)))
		if domainOK != docOK {
			t.Errorf("region %q: domain valid=%v, document valid=%v", r, domainOK, docOK)
		}
	}
}

// exchange is one hand-built request and answer.
type exchange struct {
	method, path string
	reqHeader    http.Header
	reqBody      string
	status       int
	header       http.Header
	body         string
}

func (x exchange) check(t *testing.T, v *openapitest.Validator) []string {
	t.Helper()
	req := httptest.NewRequest(x.method, "http://spaces.test"+x.path, strings.NewReader(x.reqBody))
	req.Header.Set("Authorization", "Bearer token")
	for k, vals := range x.reqHeader {
		req.Header[k] = vals
	}
	resp := &http.Response{
		StatusCode: x.status,
		Header:     x.header,
		Body:       io.NopCloser(strings.NewReader(x.body)),
		Request:    req,
	}
	rec := &recorder{TB: t}
	v.Check(rec, req, []byte(x.reqBody), resp, []byte(x.body))
	// The caller's bodies are left unread.
	if b, _ := io.ReadAll(req.Body); string(b) != x.reqBody {
		t.Errorf("Check consumed the request body: %q left", b)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != x.body {
		t.Errorf("Check consumed the response body: %q left", b)
	}
	return rec.failures()
}

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

const spaceID = "0b6f3c1e-2d4a-4f8b-9c1d-7e5a3b2c1d0f"

// spaceJSON is a Space as the API renders it, with changes applied.
func spaceJSON(t testing.TB, change func(map[string]any)) string {
	t.Helper()
	created := time.Date(2025, 6, 1, 9, 13, 40, 0, time.UTC)
	probed := created.Add(time.Minute)
	s := space.NewSpace(spaceID, "org-42", space.RegisterInput{
		Provider: space.AWS, SpaceType: space.TypeKubernetes, CloudAccountID: "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f",
		Config: space.Config{"clusterName": "prod-eu", "region": "eu-west-1"},
	}, created)
	s, _ = space.ApplyProbe(s, space.Outcome{At: probed, Latency: 84 * time.Millisecond,
		Version: &space.ServerVersion{GitVersion: "v1.31.4", Platform: "linux/arm64"}})
	// As the API renders a space: with its facts beside it.
	b, err := json.Marshal(struct {
		space.Space
		Facts space.Facts `json:"facts"`
	}{s, s.FactsAt(probed)})
	if err != nil {
		t.Fatal(err)
	}
	if change == nil {
		return string(b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const registerBody = `{"provider":"aws","space_type":"kubernetes","cloud_account_id":"6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f","config":{"clusterName":"prod-eu","region":"eu-west-1"}}`

// remarshal renders v as JSON with changes applied to its object form.
func remarshal(t testing.TB, v any, change func(map[string]any)) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if change == nil {
		return string(b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// transitionJSON is a status transition as the API renders it.
func transitionJSON(t testing.TB, change func(map[string]any)) string {
	return remarshal(t, space.Transition{OrgID: "org-42", SpaceID: spaceID, From: space.Active, To: space.Inactive,
		Reason: space.ReasonTimeout, Message: "no answer", At: time.Date(2025, 6, 1, 12, 3, 5, 0, time.UTC)}, change)
}

// clusterJSON is a picker entry as the API renders it.
func clusterJSON(t testing.TB, change func(map[string]any)) string {
	return remarshal(t, space.DiscoveredCluster{Name: "prod-eu", Location: "eu-west-1",
		Config: space.Config{"clusterName": "prod-eu", "region": "eu-west-1"}, RegisteredSpaceID: spaceID}, change)
}

// namespaceJSON is a namespace as the API renders it.
func namespaceJSON(t testing.TB, change func(map[string]any)) string {
	return remarshal(t, kubens.Namespace{Name: "team-a", Phase: "Active", Labels: map[string]string{"team": "a"},
		CreatedAt: time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)}, change)
}

// pageHeaders are those of a page of a paged listing, which carries an ETag.
func pageHeaders() http.Header {
	h := listHeaders()
	h.Set("ETag", `W/"l-AAAAAAAAAAAAAAAAAAAAAAAA"`)
	return h
}

func listHeaders() http.Header {
	return headers("Content-Type", "application/json", "X-Request-Id", "r")
}

func okHeaders() http.Header {
	return headers("Content-Type", "application/json", "ETag", `"1"`, "X-Request-Id", "req-1")
}

func problemJSON(status int, slug string, extra string) string {
	return fmt.Sprintf(`{"type":"urn:spaces:problem:%s","title":%q,"status":%d,"detail":"d","instance":"/x","request_id":"req-1"%s}`,
		slug, http.StatusText(status), status, extra)
}

func problemHeaders() http.Header {
	return headers("Content-Type", "application/problem+json", "X-Request-Id", "req-1")
}

func TestCheckPassesWhatTheDocumentPromises(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	get := "/spaces/" + spaceID
	cases := map[string]exchange{
		"space": {method: "GET", path: get, status: 200, header: okHeaders(), body: spaceJSON(t, nil)},
		"new space, never probed": {method: "GET", path: get, status: 200, header: okHeaders(),
			body: spaceJSON(t, func(m map[string]any) { m["probe"] = map[string]any{"reason": "NotProbed", "consecutive_failures": 0} })},
		"empty list": {method: "GET", path: "/spaces?limit=500&provider=aws&picker=autoscaler", status: 200,
			header: pageHeaders(), body: `{"items":[]}`},
		"list with cursor": {method: "GET", path: "/spaces", status: 200,
			header: pageHeaders(), body: `{"items":[` + spaceJSON(t, nil) + `],"next_cursor":"AbC"}`},
		"registered": {method: "POST", path: "/spaces", reqHeader: headers("Content-Type", "application/json", "Idempotency-Key", "k-1"),
			reqBody: `{"provider":"aws","space_type":"kubernetes","cloud_account_id":"6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f","config":{"clusterName":"prod-eu","region":"eu-west-1"}}`,
			status:  201, header: headers("Content-Type", "application/json", "ETag", `"1"`, "X-Request-Id", "r", "Location", "/spaces/"+spaceID, "Idempotent-Replayed", "true"),
			body: spaceJSON(t, nil)},
		"conflict": {method: "POST", path: "/spaces", reqHeader: headers("Content-Type", "application/json"),
			reqBody: `{"provider":"aws","space_type":"kubernetes","cloud_account_id":"6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f","config":{"clusterName":"prod-eu","region":"eu-west-1"}}`,
			status:  409, header: problemHeaders(), body: problemJSON(409, "conflict", `,"existing_space_id":"`+spaceID+`"`)},
		"invalid body refused": {method: "POST", path: "/spaces", reqHeader: headers("Content-Type", "application/json"),
			reqBody: `{"provider":"oracle"}`, status: 422, header: problemHeaders(),
			body: problemJSON(422, "invalid-fields", `,"errors":[{"field":"provider","reason":"must be one of aws, gcp, azure"}]`)},
		"missing If-Match refused": {method: "PATCH", path: get + "/status", reqHeader: headers("Content-Type", "application/json"),
			reqBody: `{"status":"active"}`, status: 428, header: problemHeaders(), body: problemJSON(428, "precondition-required", "")},
		"deregistered": {method: "DELETE", path: get, reqHeader: headers("If-Match", `"3"`), status: 204, header: headers("X-Request-Id", "r")},
		"unauthenticated": {method: "GET", path: "/cloud-accounts", status: 401,
			header: headers("Content-Type", "application/problem+json", "X-Request-Id", "r", "WWW-Authenticate", `Bearer realm="spaces", error="invalid_token"`),
			body:   problemJSON(401, "unauthenticated", `,"reason":"invalid_token"`)},
		"unknown route refused":  {method: "GET", path: "/nowhere", status: 404, header: problemHeaders(), body: problemJSON(404, "not-found", "")},
		"unknown method refused": {method: "PUT", path: get, status: 405, header: problemHeaders(), body: problemJSON(405, "method-not-allowed", "")},
		"registration refused by the cloud": {method: "POST", path: "/spaces", reqHeader: headers("Content-Type", "application/json"),
			reqBody: registerBody, status: 502, header: problemHeaders(), body: problemJSON(502, "bad-gateway", `,"reason":"AccessDenied"`)},
		"list unchanged": {method: "GET", path: "/spaces?limit=10", reqHeader: headers("If-None-Match", `W/"l-AAAAAAAAAAAAAAAAAAAAAAAA"`), status: 304,
			header: headers("X-Request-Id", "r", "ETag", `W/"l-AAAAAAAAAAAAAAAAAAAAAAAA"`)},
		"status history": {method: "GET", path: get + "/status-history?limit=2", status: 200, header: pageHeaders(),
			body: `{"items":[` + transitionJSON(t, nil) + `],"next_cursor":"c1"}`},
		"status history, empty": {method: "GET", path: get + "/status-history", status: 200, header: pageHeaders(), body: `{"items":[]}`},
		"cluster picker": {method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters?region=eu-west-1", status: 200, header: listHeaders(),
			body: `{"items":[` + clusterJSON(t, nil) + `]}`},
		"cluster picker, gcp": {method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters", status: 200, header: listHeaders(),
			body: `{"items":[{"name":"c","location":"us-central1-a","status":"RUNNING","config":{"clusterName":"c","region":"us-central1-a","projectId":"my-project-1"}}]}`},
		"cluster picker, cloud down": {method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters?region=eu-west-1", status: 503,
			header: problemHeaders(), body: problemJSON(503, "unavailable", `,"reason":"CloudUnavailable"`)},
		"namespaces": {method: "GET", path: "/space-discovery/" + spaceID + "/namespaces", status: 200, header: listHeaders(),
			body: `{"items":[` + namespaceJSON(t, nil) + `]}`},
		"namespace created": {method: "POST", path: "/space-discovery/" + spaceID + "/namespaces", reqHeader: headers("Content-Type", "application/json"),
			reqBody: `{"name":"team-a","labels":{"team":"a","spaces.dev/owner":"x","empty":""}}`, status: 201,
			header: headers("Content-Type", "application/json", "X-Request-Id", "r", "Location", "/space-discovery/"+spaceID+"/namespaces/team-a"),
			body:   namespaceJSON(t, nil)},
		"namespace exists": {method: "POST", path: "/space-discovery/" + spaceID + "/namespaces", reqHeader: headers("Content-Type", "application/json"),
			reqBody: `{"name":"team-a"}`, status: 409, header: problemHeaders(), body: problemJSON(409, "conflict", "")},
		"cluster unreachable": {method: "GET", path: "/space-discovery/" + spaceID + "/namespaces", status: 503, header: problemHeaders(),
			body: problemJSON(503, "unavailable", `,"reason":"Unreachable"`)},
	}
	for name, x := range cases {
		t.Run(name, func(t *testing.T) {
			if got := x.check(t, v); len(got) != 0 {
				t.Errorf("a conforming exchange failed the check:\n%s", strings.Join(got, "\n"))
			}
		})
	}
}

func TestCheckCatchesDrift(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	get := "/spaces/" + spaceID
	cases := map[string]struct {
		x    exchange
		want string // a piece of the failure message
	}{
		"undocumented field": {exchange{method: "GET", path: get, status: 200, header: okHeaders(),
			body: spaceJSON(t, func(m map[string]any) { m["surprise"] = 1 })}, "surprise"},
		"deleted_at on a read": {exchange{method: "GET", path: get, status: 200, header: okHeaders(),
			body: spaceJSON(t, func(m map[string]any) { m["deleted_at"] = "2025-06-02T00:00:00Z" })}, "deleted_at"},
		"undocumented probe field": {exchange{method: "GET", path: get, status: 200, header: okHeaders(),
			body: spaceJSON(t, func(m map[string]any) { m["probe"].(map[string]any)["healthy"] = true })}, "healthy"},
		"missing field": {exchange{method: "GET", path: get, status: 200, header: okHeaders(),
			body: spaceJSON(t, func(m map[string]any) { delete(m, "version") })}, "version"},
		"config of another provider": {exchange{method: "GET", path: get, status: 200, header: okHeaders(),
			body: spaceJSON(t, func(m map[string]any) { m["provider"] = "gcp" })}, "oneOf"},
		"id not a uuid": {exchange{method: "GET", path: get, status: 200, header: okHeaders(),
			body: spaceJSON(t, func(m map[string]any) { m["id"] = "space-1" })}, "id"},
		"wrong status code": {exchange{method: "GET", path: get, status: 202, header: okHeaders(), body: spaceJSON(t, nil)}, "202"},
		"wrong content type": {exchange{method: "GET", path: get, status: 200,
			header: headers("Content-Type", "text/plain", "ETag", `"1"`, "X-Request-Id", "r"), body: spaceJSON(t, nil)}, "text/plain"},
		"problem without status": {exchange{method: "GET", path: get, status: 404, header: problemHeaders(),
			body: `{"type":"urn:spaces:problem:not-found","title":"Not Found","detail":"space not found"}`}, "status"},
		"problem of the wrong type": {exchange{method: "GET", path: get, status: 404, header: problemHeaders(),
			body: problemJSON(404, "conflict", "")}, "type"},
		"problem as plain json": {exchange{method: "GET", path: get, status: 404,
			header: headers("Content-Type", "application/json", "X-Request-Id", "r"), body: problemJSON(404, "not-found", "")}, "application/json"},
		"status a route cannot answer": {exchange{method: "GET", path: get, status: 409, header: problemHeaders(),
			body: problemJSON(409, "conflict", "")}, "409"},
		"missing ETag": {exchange{method: "GET", path: get, status: 200,
			header: headers("Content-Type", "application/json", "X-Request-Id", "r"), body: spaceJSON(t, nil)}, "ETag"},
		"weak ETag": {exchange{method: "GET", path: get, status: 200,
			header: headers("Content-Type", "application/json", "X-Request-Id", "r", "ETag", `W/"1"`), body: spaceJSON(t, nil)}, "ETag"},
		"missing X-Request-Id": {exchange{method: "DELETE", path: get, status: 204, header: http.Header{}}, "X-Request-Id"},
		"missing Location": {exchange{method: "POST", path: "/cloud-accounts", reqHeader: headers("Content-Type", "application/json"),
			reqBody: `{"provider":"azure","name":"n","connection":{"tenantId":"` + spaceID + `","clientId":"` + spaceID + `","subscriptionId":"` + spaceID + `"}}`,
			status:  201, header: okHeaders(),
			body: `{"id":"` + spaceID + `","org_id":"o","provider":"azure","name":"n","connection":{"tenantId":"` + spaceID + `","clientId":"` + spaceID + `","subscriptionId":"` + spaceID + `"},"created_at":"2025-06-01T00:00:00Z","version":1}`}, "Location"},
		"missing WWW-Authenticate": {exchange{method: "GET", path: "/spaces", status: 401, header: problemHeaders(),
			body: problemJSON(401, "unauthenticated", "")}, "WWW-Authenticate"},
		"body on a 204": {exchange{method: "DELETE", path: get, status: 204, header: headers("X-Request-Id", "r"), body: `{}`}, "no body"},
		"list without items": {exchange{method: "GET", path: "/cloud-accounts", status: 200,
			header: headers("Content-Type", "application/json", "X-Request-Id", "r"), body: `{"next_cursor":"x"}`}, "items"},
		"invalid request accepted": {exchange{method: "POST", path: "/spaces", reqHeader: headers("Content-Type", "application/json"),
			reqBody: `{"provider":"aws","space_type":"vm","cloud_account_id":"6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f","config":{"clusterName":"prod-eu","region":"eu-west-1"}}`,
			status:  201, header: headers("Content-Type", "application/json", "ETag", `"1"`, "X-Request-Id", "r", "Location", "/spaces/"+spaceID),
			body: spaceJSON(t, nil)}, "instead of refusing"},
		"invalid query accepted": {exchange{method: "GET", path: "/spaces?limit=0", status: 200,
			header: headers("Content-Type", "application/json", "X-Request-Id", "r"), body: `{"items":[]}`}, "limit"},
		"patch without If-Match accepted": {exchange{method: "PATCH", path: get + "/status", reqHeader: headers("Content-Type", "application/json"),
			reqBody: `{"status":"active"}`, status: 200, header: okHeaders(), body: spaceJSON(t, nil)}, "If-Match"},
		"unknown route served": {exchange{method: "GET", path: "/spaces/" + spaceID + "/events", status: 200,
			header: headers("Content-Type", "application/json"), body: `{}`}, "not in the document"},
		"trailing slash served": {exchange{method: "GET", path: "/spaces/", status: 200,
			header: headers("Content-Type", "application/json", "X-Request-Id", "r"), body: `{"items":[]}`}, "not exactly the documented path"},
		"unknown route with a plain 404": {exchange{method: "GET", path: "/nowhere", status: 404,
			header: headers("Content-Type", "text/plain"), body: "404 page not found"}, "application/problem+json"},
		"transition of an unknown status": {exchange{method: "GET", path: get + "/status-history", status: 200, header: listHeaders(),
			body: `{"items":[` + transitionJSON(t, func(m map[string]any) { m["to"] = "gone" }) + `]}`}, "to"},
		"transition without its time": {exchange{method: "GET", path: get + "/status-history", status: 200, header: listHeaders(),
			body: `{"items":[` + transitionJSON(t, func(m map[string]any) { delete(m, "at") }) + `]}`}, "at"},
		"cluster with an undocumented field": {exchange{method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters?region=eu-west-1", status: 200,
			header: listHeaders(), body: `{"items":[` + clusterJSON(t, func(m map[string]any) { m["arn"] = "x" }) + `]}`}, "arn"},
		"cluster holder not a uuid": {exchange{method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters?region=eu-west-1", status: 200,
			header: listHeaders(), body: `{"items":[` + clusterJSON(t, func(m map[string]any) { m["registered_space_id"] = "space-1" }) + `]}`}, "registered_space_id"},
		"cluster list paged": {exchange{method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters?region=eu-west-1", status: 200,
			header: listHeaders(), body: `{"items":[],"next_cursor":"c"}`}, "next_cursor"},
		"bad gateway without a reason": {exchange{method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters?region=eu-west-1", status: 502,
			header: problemHeaders(), body: problemJSON(502, "bad-gateway", "")}, "reason"},
		"bad gateway with an unknown reason": {exchange{method: "GET", path: "/space-discovery/" + spaceID + "/namespaces", status: 502,
			header: problemHeaders(), body: problemJSON(502, "bad-gateway", `,"reason":"Flaky"`)}, "reason"},
		"namespace without labels": {exchange{method: "GET", path: "/space-discovery/" + spaceID + "/namespaces", status: 200,
			header: listHeaders(), body: `{"items":[` + namespaceJSON(t, func(m map[string]any) { delete(m, "labels") }) + `]}`}, "labels"},
		"namespace created without Location": {exchange{method: "POST", path: "/space-discovery/" + spaceID + "/namespaces",
			reqHeader: headers("Content-Type", "application/json"), reqBody: `{"name":"team-a"}`, status: 201,
			header: headers("Content-Type", "application/json", "X-Request-Id", "r"), body: namespaceJSON(t, nil)}, "Location"},
		"bad namespace name accepted": {exchange{method: "POST", path: "/space-discovery/" + spaceID + "/namespaces",
			reqHeader: headers("Content-Type", "application/json"), reqBody: `{"name":"Team_A"}`, status: 201,
			header: headers("Content-Type", "application/json", "X-Request-Id", "r", "Location", "/space-discovery/"+spaceID+"/namespaces/team-a"),
			body:   namespaceJSON(t, nil)}, "instead of refusing"},
		"region on a picker answered": {exchange{method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters?region=mars-1", status: 200,
			header: listHeaders(), body: `{"items":[]}`}, "region"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := c.x.check(t, v)
			if len(got) == 0 {
				t.Fatalf("the check passed; want a failure mentioning %q", c.want)
			}
			t.Logf("reported as:\n%s", strings.Join(got, "\n"))
			if !strings.Contains(strings.ToLower(strings.Join(got, "\n")), strings.ToLower(c.want)) {
				t.Errorf("the failure does not mention %q:\n%s", c.want, strings.Join(got, "\n"))
			}
		})
	}
}

// realAPI serves the real HTTP API with a real token verifier. Its service
// has no store: every exchange below is decided before storage is reached
// (authentication, parsing, validation), and one that reached it would panic
// rather than pass.
func realAPI(t *testing.T) (*httptest.Server, *auth.Signer) {
	t.Helper()
	key := filepath.Join(t.TempDir(), "dev-jwt.pem")
	verifier, err := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: key})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(auth.LocalConfig{KeyPath: key})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := cursor.New(cursor.KeyFromSecret("openapitest"))
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.API{
		Spaces:  &space.Service{Now: time.Now, NewID: uuid.NewString},
		Auth:    verifier,
		Cursors: codec,
		Log:     slog.New(slog.DiscardHandler),
		OpenAPI: spaces.OpenAPI,
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv, signer
}

func TestRealAPIFollowsTheDocument(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	srv, signer := realAPI(t)
	token := func(scopes ...string) string {
		tok, err := signer.Mint("org-42", "tester", scopes, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	user, internal := token(), token(auth.ScopeInternal)
	client := &http.Client{
		Transport: openapitest.RoundTripper(t, v, nil),
		// Redirects are answers to check, not to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}

	const jsonType = "application/json"
	big := `{"name":"` + strings.Repeat("x", httpapi.MaxBody) + `"}`
	bad := "/spaces/not-a-uuid"
	cases := []struct {
		method, path, authz, ctype, ifMatch, idem, body string
		want                                            int
	}{
		{method: "GET", path: "/openapi.yaml", want: 200},
		{method: "GET", path: "/spaces", want: 401},
		{method: "POST", path: "/spaces", ctype: jsonType, body: `{}`, want: 401},
		{method: "GET", path: "/spaces/" + spaceID, authz: "Bearer not-a-jwt", want: 401},
		{method: "PATCH", path: "/spaces/" + spaceID + "/status", authz: "Basic dXNlcjpwdw==", want: 401},
		{method: "DELETE", path: "/spaces/" + spaceID, want: 401},
		{method: "GET", path: "/cloud-accounts", want: 401},
		{method: "POST", path: "/cloud-accounts", want: 401},
		{method: "GET", path: "/cloud-accounts/" + spaceID, want: 401},
		{method: "DELETE", path: "/cloud-accounts/" + spaceID, want: 401},

		{method: "GET", path: "/spaces?limit=0", authz: user, want: 400},
		{method: "GET", path: "/spaces?provider=oracle&status=gone", authz: user, want: 400},
		{method: "GET", path: "/spaces?cursor=forged", authz: user, want: 400},
		{method: "GET", path: "/cloud-accounts?limit=many", authz: user, want: 400},
		{method: "POST", path: "/spaces", authz: user, ctype: "text/plain", body: "hello", want: 415},
		{method: "POST", path: "/spaces", authz: user, ctype: jsonType, body: `{"surprise":true,"synthetic":"yes"}`, want: 400},
		{method: "POST", path: "/spaces", authz: user, ctype: jsonType, body: `[]`, want: 400},
		{method: "POST", path: "/spaces", authz: user, ctype: jsonType, idem: "has space", body: `{}`, want: 400},
		{method: "POST", path: "/spaces", authz: user, ctype: jsonType, body: big, want: 413},
		{method: "POST", path: "/spaces", authz: user, ctype: jsonType,
			body: `{"provider":"aws","space_type":"vm","cloud_account_id":"x","config":{"clusterName":"-","region":"mars-1"}}`, want: 422},
		{method: "GET", path: bad, authz: user, want: 404},
		{method: "GET", path: "/spaces/a%20b%22c", authz: user, want: 404},
		{method: "DELETE", path: bad, authz: user, want: 404},
		{method: "DELETE", path: "/spaces/" + spaceID, authz: user, ifMatch: "3", want: 400},
		{method: "PATCH", path: "/spaces/" + spaceID + "/status", authz: user, ctype: jsonType, ifMatch: `"1"`, body: `{"status":"active"}`, want: 403},
		{method: "PATCH", path: "/spaces/" + spaceID + "/status", authz: internal, ctype: jsonType, body: `{"status":"active"}`, want: 428},
		{method: "PATCH", path: "/spaces/" + spaceID + "/status", authz: internal, ctype: jsonType, ifMatch: `"1", "2"`, body: `{"status":"active"}`, want: 400},
		{method: "PATCH", path: "/spaces/" + spaceID + "/status", authz: internal, ctype: jsonType, ifMatch: `"1"`, body: `{"status":"gone"}`, want: 422},
		{method: "PATCH", path: bad + "/status", authz: internal, ctype: jsonType, ifMatch: `"1"`, body: `{"status":"active"}`, want: 404},
		{method: "POST", path: "/cloud-accounts", authz: user, ctype: jsonType, body: `{"provider":"aws","name":" padded ","connection":{}}`, want: 422},
		{method: "GET", path: "/cloud-accounts/" + "nope", authz: user, want: 404},
		{method: "DELETE", path: "/cloud-accounts/" + "nope", authz: user, want: 404},
		{method: "GET", path: "/nowhere", authz: user, want: 404},
		{method: "PUT", path: "/spaces", authz: user, want: 405},
		{method: "GET", path: "/spaces/", authz: user, want: 404},
		{method: "GET", path: "/spaces/" + spaceID + "/status", authz: user, want: 405},
		{method: "GET", path: "//spaces", authz: user, want: 404}, // no redirect to a cleaned path

		{method: "GET", path: "/spaces/" + spaceID + "/status-history", want: 401},
		{method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters?region=eu-west-1", want: 401},
		{method: "GET", path: "/space-discovery/" + spaceID + "/namespaces", want: 401},
		{method: "POST", path: "/space-discovery/" + spaceID + "/namespaces", ctype: jsonType, body: `{"name":"a"}`, want: 401},
		{method: "GET", path: "/spaces/" + spaceID + "/status-history?limit=0", authz: user, want: 400},
		{method: "GET", path: "/spaces/" + spaceID + "/status-history?cursor=forged&provider=aws", authz: user, want: 400},
		{method: "GET", path: bad + "/status-history", authz: user, want: 404},
		{method: "POST", path: "/spaces/" + spaceID + "/status-history", authz: user, want: 405},
		// This API has no discovery configured: those routes are 503.
		{method: "GET", path: "/cloud-accounts/" + spaceID + "/clusters?region=eu-west-1", authz: user, want: 503},
		{method: "GET", path: "/space-discovery/" + spaceID + "/namespaces", authz: user, want: 503},
		{method: "POST", path: "/space-discovery/" + spaceID + "/namespaces", authz: user, ctype: jsonType, body: `{"name":"a"}`, want: 503},
		{method: "DELETE", path: "/space-discovery/" + spaceID + "/namespaces", authz: user, want: 405},
		{method: "GET", path: "/space-discovery/" + spaceID + "/namespaces/default", authz: user, want: 404},
	}
	for _, c := range cases {
		name := c.method + " " + c.path
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, val := range map[string]string{"Authorization": c.authz, "Content-Type": c.ctype, "If-Match": c.ifMatch, "Idempotency-Key": c.idem} {
				if val != "" {
					req.Header.Set(k, val)
				}
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.want, body)
			}
			if c.path == "/openapi.yaml" && !bytes.Equal(body, spaces.OpenAPI) {
				t.Error("GET /openapi.yaml does not serve the embedded document")
			}
		})
	}
}

// TestRoundTripperCatchesDriftOverHTTP runs a server that answers with an
// undocumented field and proves the checked client reports it while the
// caller still gets both bodies intact.
func TestRoundTripperCatchesDriftOverHTTP(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	drifted := spaceJSON(t, func(m map[string]any) { m["surprise"] = "field" })
	reqBody := `{"provider":"aws","space_type":"kubernetes","cloud_account_id":"6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f","config":{"clusterName":"prod-eu","region":"eu-west-1"}}`
	var received []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = append(received, string(b))
		mu.Unlock()
		w.Header().Set("X-Request-Id", "r")
		w.Header().Set("ETag", `"1"`)
		w.Header().Set("Location", "/spaces/"+spaceID)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, drifted)
	}))
	defer srv.Close()

	rec := &recorder{TB: t}
	client := &http.Client{Transport: openapitest.RoundTripper(rec, v, srv.Client().Transport)}
	// One body the client can replay (GetBody) and one it cannot.
	bodies := []io.Reader{strings.NewReader(reqBody), io.MultiReader(strings.NewReader(reqBody))}
	for i, body := range bodies {
		req, err := http.NewRequest("POST", srv.URL+"/spaces", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", "application/json")
		if (req.GetBody != nil) != (i == 0) {
			t.Fatalf("body %d: GetBody set = %v", i, req.GetBody != nil)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != drifted {
			t.Errorf("body %d: the caller got %q (%v), want the server's body", i, got, err)
		}
	}
	if want := []string{reqBody, reqBody}; !slices.Equal(received, want) {
		t.Errorf("the server received %q, want %q", received, want)
	}
	fails := rec.failures()
	if len(fails) != 2 {
		t.Fatalf("%d failures recorded, want 2 (one per exchange): %q", len(fails), fails)
	}
	for _, f := range fails {
		if !strings.Contains(f, "surprise") || !strings.Contains(f, "POST /spaces") {
			t.Errorf("the failure does not name the route and the field:\n%s", f)
		}
	}
}

func TestNewRefusesABrokenDocument(t *testing.T) {
	cases := map[string]struct{ doc, want string }{
		"not yaml":        {"openapi: [", "parse the document"},
		"not openapi":     {"swagger: '2.0'\ninfo: {title: x, version: '1'}\npaths: {}\n", "different version"},
		"invalid openapi": {"openapi: 3.1.0\ninfo: {title: x}\npaths: {}\ncomponents: {schemas: {Problem: {type: object}}}\n", "missing property 'version'"},
		"no Problem":      {"openapi: 3.1.0\ninfo: {title: x, version: '1'}\npaths: {}\n", "no components.schemas.Problem"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rec := &fatalRecorder{recorder: recorder{TB: t}}
			done := make(chan struct{})
			go func() {
				defer close(done)
				openapitest.New(rec, []byte(c.doc))
			}()
			<-done
			if !rec.fatal {
				t.Fatal("New accepted a broken document")
			}
			if got := strings.Join(rec.failures(), "\n"); !strings.Contains(got, c.want) {
				t.Errorf("refused with %q, want it to mention %q", got, c.want)
			}
		})
	}
}

// fatalRecorder also records Fatalf, ending the goroutine as testing does.
type fatalRecorder struct {
	recorder
	fatal bool
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = true
	r.Errorf(format, args...)
	runtime.Goexit()
}

// TestRoundTripperConcurrent checks exchanges from many goroutines through one
// checked client, as parallel tests do.
func TestRoundTripperConcurrent(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	srv, _ := realAPI(t)
	client := &http.Client{Transport: openapitest.RoundTripper(t, v, nil)}
	paths := []string{"/openapi.yaml", "/spaces", "/cloud-accounts", "/spaces/" + spaceID, "/nowhere"}
	var wg sync.WaitGroup
	statuses := make([]int, 40)
	for i := range statuses {
		wg.Go(func() {
			resp, err := client.Get(srv.URL + paths[i%len(paths)])
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, got := range statuses {
		want := map[int]int{0: 200, 4: 404}[i%len(paths)]
		if want == 0 {
			want = 401
		}
		if got != want {
			t.Errorf("request %d (%s): status %d, want %d", i, paths[i%len(paths)], got, want)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		openapitest.New(b, spaces.OpenAPI)
	}
}

func BenchmarkCheckSpace(b *testing.B) {
	v := openapitest.New(b, spaces.OpenAPI)
	req := httptest.NewRequest("GET", "/spaces/"+spaceID, nil)
	req.Header.Set("Authorization", "Bearer t")
	body := []byte(spaceJSON(b, nil))
	resp := &http.Response{StatusCode: 200, Header: okHeaders(), Body: http.NoBody, Request: req}
	for b.Loop() {
		v.Check(b, req, nil, resp, body)
	}
}

// TestWebhookSchemasRefuse: the webhooks section's schemas refuse a body
// missing its data, of another type, or with a field they do not name, so
// that the local stack's delivery test can fail.
func TestWebhookSchemasRefuse(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	good := `{"type":"space.registered","timestamp":"2026-01-01T00:00:00Z","data":{"space_id":"0b6e6c2a-1f1d-4b0e-9a43-2f0d6c1e8a11","provider":"aws","cloud_account_id":"6f1c2a9e-3b7d-4c1e-9f2a-8d4b5e6f7a81"}}`
	if bad := v.Webhook("space.registered", []byte(good)); bad != nil {
		t.Fatalf("a good body is refused: %v", bad)
	}
	for name, body := range map[string]string{
		"no data":       `{"type":"space.registered","timestamp":"2026-01-01T00:00:00Z"}`,
		"another type":  strings.Replace(good, `"space.registered"`, `"space.deregistered"`, 1),
		"unknown field": strings.Replace(good, `"provider"`, `"kubeconfig":"x","provider"`, 1),
	} {
		if v.Webhook("space.registered", []byte(body)) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if v.Webhook("space.exploded", []byte(good)) == nil {
		t.Error("an undocumented event is accepted")
	}
}

// TestInventoryWebhookSchemas: the inventory events' schemas accept the
// bodies the domain makes (space.InventoryEvent's data, in the sender's
// envelope) and refuse a threshold that is not one of the sent ones and a
// support event without its source.
func TestInventoryWebhookSchemas(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	at := time.Date(2025, 11, 12, 0, 0, 50, 0, time.UTC)
	id := "0b6e6c2a-1f1d-4b0e-9a43-2f0d6c1e8a11"
	bodies := map[space.EventType]any{
		space.EventSpaceVersionChanged: space.VersionChangedData{SpaceID: id, From: "1.31", To: "v1.32.0-eks-1", At: at},
		space.EventSupportEnding: space.SupportEndingData{SpaceID: id, Provider: space.AWS, KubernetesVersion: "v1.31.4-eks-1", ThresholdDays: 14,
			DaysRemaining: 14, StandardEnds: "2025-11-26", ExtendedEnds: "2026-11-26", Source: "https://docs.aws.amazon.com/eks/", At: at},
		space.EventCertificateExpiring: space.CertificateExpiringData{SpaceID: id, ThresholdDays: 7, DaysRemaining: 7,
			NotAfter: at.Add(7 * 24 * time.Hour), Issuer: "CN=kubernetes", At: at},
	}
	for typ, data := range bodies {
		b, err := webhook.Body(typ, at, data)
		if err != nil {
			t.Fatal(err)
		}
		if bad := v.Webhook(string(typ), b); bad != nil {
			t.Errorf("%s: a good body is refused: %v\n%s", typ, bad, b)
		}
	}
	for name, c := range map[string]struct {
		typ  space.EventType
		data any
	}{
		"support at 45 days": {space.EventSupportEnding, space.SupportEndingData{SpaceID: id, Provider: space.AWS, KubernetesVersion: "v1.31.4",
			ThresholdDays: 45, DaysRemaining: 45, StandardEnds: "2025-11-26", Source: "https://docs.aws.amazon.com/eks/", At: at}},
		"support without a source": {space.EventSupportEnding, space.SupportEndingData{SpaceID: id, Provider: space.AWS, KubernetesVersion: "v1.31.4",
			ThresholdDays: 14, DaysRemaining: 14, StandardEnds: "2025-11-26", At: at}},
		"certificate at 14 days": {space.EventCertificateExpiring, space.CertificateExpiringData{SpaceID: id, ThresholdDays: 14, DaysRemaining: 14,
			NotAfter: at, Issuer: "CN=kubernetes", At: at}},
	} {
		b, err := webhook.Body(c.typ, at, c.data)
		if err != nil {
			t.Fatal(err)
		}
		if v.Webhook(string(c.typ), b) == nil {
			t.Errorf("%s: accepted\n%s", name, b)
		}
	}
}
