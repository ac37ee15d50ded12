package local

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/pb33f/libopenapi/datamodel/high/base"

	"spaces"
	"spaces/infra/openapitest"
)

// TestEveryDocumentedRequestFieldIsKnown walks every request body schema
// of openapi.yaml and sends, through the real router of the local stack,
// one body holding every documented field (nested ones too, with a value
// of the documented JSON type): no answer may refuse a field the document
// promises as unknown or mistyped (400 "is not a known field"). The
// values need not be valid: a 422 about a value is fine; a
// 400 naming a documented field is drift.
func TestEveryDocumentedRequestFieldIsKnown(t *testing.T) {
	st, _ := provisioningStack(t, &fakeCreator{polls: 1000}, ProvisioningConfig{})
	c := newClient(t, st, "acme")
	internal := newClient(t, st, "acme", "spaces:internal")
	acct := c.account("aws")
	sp := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "walked")))["id"].(string)
	env := c.must(201, c.do("POST", "/environments", map[string]any{"name": "walked", "space_id": sp}))["id"].(string)
	job := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("aws", acct, "walked-job")))["id"].(string)
	ids := map[string]string{"spaces": sp, "space-discovery": sp, "cloud-accounts": acct, "environments": env,
		"provisioning-jobs": job, "autoscaler-policies": uuid.NewString(), "revisions": uuid.NewString()}

	v := openapitest.New(t, spaces.OpenAPI)
	decoded := map[string]bool{}
	for path, item := range v.Model().Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			if op.RequestBody == nil {
				continue
			}
			mt, ok := op.RequestBody.Content.Get("application/json")
			if !ok {
				continue
			}
			route := strings.ToUpper(method) + " " + path
			body, fields := fullBody(mt.Schema.Schema(), "", 0)
			// The concrete path: each {param} is the id of the fixture of
			// its collection.
			segs := strings.Split(path, "/")
			for i, s := range segs {
				if strings.HasPrefix(s, "{") && i > 0 {
					segs[i] = ids[segs[i-1]]
				}
			}
			raw, _ := json.Marshal(body)
			req, _ := http.NewRequest(strings.ToUpper(method), st.APIURL+strings.Join(segs, "/"), bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+internal.token)
			req.Header.Set("If-Match", "*")
			req.Header.Set("Idempotency-Key", "walk-"+uuid.NewString())
			// A plain client: these bodies break value rules on purpose.
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode >= 500 && res.StatusCode != 503 {
				t.Errorf("%s: %d %s", route, res.StatusCode, answer)
				continue
			}
			if res.StatusCode == 503 || res.StatusCode == 404 {
				continue // not decoded here (no discovery configured, or no such item)
			}
			decoded[route] = true
			if res.StatusCode != 400 {
				continue
			}
			var p struct {
				Errors []struct{ Field, Reason string }
			}
			_ = json.Unmarshal(answer, &p)
			for _, e := range p.Errors {
				if slices.Contains(fields, e.Field) || slices.ContainsFunc(fields, func(f string) bool { return strings.HasPrefix(f, e.Field+".") }) {
					t.Errorf("%s: the documented field %s is refused: %s (body %s)", route, e.Field, e.Reason, raw)
				}
			}
		}
	}
	for _, must := range []string{"POST /spaces", "POST /provisioning-jobs", "POST /cloud-accounts", "POST /environments",
		"PUT /environments/{id}/space", "PATCH /spaces/{id}/status"} {
		if !decoded[must] {
			t.Errorf("%s was not decoded by the walk (decoded: %v)", must, decoded)
		}
	}
}

// fullBody is a value of schema holding every documented property (the
// properties of every allOf, oneOf and anyOf branch too), and the dotted
// paths of the fields it holds.
func fullBody(s *base.Schema, at string, depth int) (any, []string) {
	if s == nil || depth > 8 {
		return "x", nil
	}
	var fields []string
	if at != "" {
		fields = append(fields, at)
	}
	props := map[string]*base.Schema{}
	var collect func(s *base.Schema)
	collect = func(s *base.Schema) {
		if s.Properties != nil {
			for name, p := range s.Properties.FromOldest() {
				props[name] = p.Schema()
			}
		}
		for _, group := range [][]*base.SchemaProxy{s.AllOf, s.OneOf, s.AnyOf} {
			for _, b := range group {
				if bs := b.Schema(); bs != nil {
					collect(bs)
				}
			}
		}
	}
	collect(s)
	join := func(name string) string {
		if at == "" {
			return name
		}
		return at + "." + name
	}
	switch {
	case len(props) > 0:
		obj := map[string]any{}
		for name, p := range props {
			v, f := fullBody(p, join(name), depth+1)
			obj[name] = v
			fields = append(fields, f...)
		}
		return obj, fields
	case slices.Contains(s.Type, "array"):
		var item any = "x"
		if s.Items != nil && s.Items.IsA() {
			v, f := fullBody(s.Items.A.Schema(), at+"[0]", depth+1)
			item, fields = v, append(fields, f...)
		}
		return []any{item}, fields
	case slices.Contains(s.Type, "object"):
		var val any = "v"
		if s.AdditionalProperties != nil && s.AdditionalProperties.IsA() {
			val, _ = fullBody(s.AdditionalProperties.A.Schema(), join("k"), depth+1)
		}
		return map[string]any{"k": val}, append(fields, join("k"))
	case len(s.Enum) > 0:
		var v any
		_ = s.Enum[0].Decode(&v)
		return v, fields
	case slices.Contains(s.Type, "integer"), slices.Contains(s.Type, "number"):
		if s.Minimum != nil {
			return int(*s.Minimum), fields
		}
		return 1, fields
	case slices.Contains(s.Type, "boolean"):
		return false, fields
	}
	if s.Example != nil {
		var v any
		if s.Example.Decode(&v) == nil {
			return v, fields
		}
	}
	return "x", fields
}

// TestCloudAccountExampleIsARealAnswer: the 201 example of POST
// /cloud-accounts is what make run answers a new AWS connection (version
// 2: the account is written, then its first verification).
func TestCloudAccountExampleIsARealAnswer(t *testing.T) {
	st := startDemoStack(t)
	c := newClient(t, st, "acme")
	got := c.must(201, c.do("POST", "/cloud-accounts", map[string]any{"provider": "aws", "name": "production",
		"connection": map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}}))

	v := openapitest.New(t, spaces.OpenAPI)
	op, _ := v.Model().Paths.PathItems.Get("/cloud-accounts")
	res, _ := op.Post.Responses.Codes.Get("201")
	mt, _ := res.Content.Get("application/json")
	ex, ok := mt.Examples.Get("aws")
	if !ok {
		t.Fatal("POST /cloud-accounts 201 has no aws example")
	}
	var want map[string]any
	if err := ex.Value.Decode(&want); err != nil {
		t.Fatal(err)
	}
	if a, b := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(a, b) {
		t.Errorf("answer fields %v, example fields %v", a, b)

	}
	for _, k := range []string{"version", "status", "status_reason", "provider"} {
		if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
			t.Errorf("%s: answered %v, the example shows %v", k, got[k], want[k])
		}
	}
	prefix := func(m map[string]any) string {
		s, _ := m["status_message"].(string)
		s, _, _ = strings.Cut(s, "/cloud-accounts/")
		return s
	}
	if prefix(got) != prefix(want) {
		t.Errorf("status_message: answered %q, the example shows %q", got["status_message"], want["status_message"])
	}
}
