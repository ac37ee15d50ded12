package httpapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"spaces/infra/shapetest"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// The API's bodies are the domain's types as encoding/json writes them,
// and the same json tags name the table's attributes (dynamostore): the
// shapes are frozen in testdata/shapes.golden (why: package shapetest), so
// that a renamed tag or a new field fails here before it changes the
// contract.

// filled is a value of T with every field set (shapetest.Fill).
func filled[T any]() T {
	var v T
	shapetest.Fill(&v)
	return v
}

// bodies are the JSON bodies the API writes, by section name.
var bodies = map[string]func() any{
	"Space":                  func() any { return filled[spaceBody]() },
	"Space list":             func() any { return filled[listResponse[spaceBody]]() },
	"Space registered":       func() any { return filled[registered]() },
	"CloudAccount":           func() any { return filled[space.CloudAccount]() },
	"CloudAccount list":      func() any { return filled[listResponse[space.CloudAccount]]() },
	"Transition list":        func() any { return filled[listResponse[space.Transition]]() },
	"Counts":                 func() any { return filled[space.Counts]() },
	"Environment":            func() any { return filled[space.Environment]() },
	"Environment list":       func() any { return filled[listResponse[space.Environment]]() },
	"AutoscalerPolicy":       func() any { return filled[space.AutoscalerPolicy]() },
	"AutoscalerPolicy list":  func() any { return filled[listResponse[space.AutoscalerPolicy]]() },
	"Revision":               func() any { return filled[space.Revision]() },
	"RevisionSummary list":   func() any { return filled[listResponse[space.RevisionSummary]]() },
	"Job":                    func() any { return filled[provisioning.Job]() },
	"Job list":               func() any { return filled[listResponse[provisioning.Job]]() },
	"DiscoveredCluster list": func() any { return filled[listResponse[space.DiscoveredCluster]]() },
	"NamespaceList":          func() any { return filled[space.NamespaceList]() },
	"Namespace":              func() any { return filled[space.Namespace]() },
	"NamespaceCreate":        func() any { return filled[space.NamespaceCreate]() },
	"Bootstrap":              func() any { return filled[bootstrapAnswer]() },
	"AgentCredential":        func() any { return filled[space.AgentCredential]() },
	"Lease answer":           func() any { return filled[leaseAnswer]() },
	"Problem":                func() any { return filled[problem]() },
	"WebhookEndpoint":        func() any { return filled[space.WebhookEndpoint]() },
	"WebhookEndpoint list":   func() any { return filled[listResponse[space.WebhookEndpoint]]() },
	"WebhookEndpoint secret": func() any { return filled[space.Created]() },
	"DeliveryAttempt list":   func() any { return filled[listResponse[space.DeliveryAttempt]]() },
	"WebhookTest accepted":   func() any { return filled[testAccepted]() },
	"WebhookReplay accepted": func() any { return filled[space.Replayed]() },
	"Activity list":          func() any { return filled[listResponse[space.Activity]]() },
}

// requests are the tagged types the API reads, by section name: a whole
// body read by readStruct (strict), or a field's value inside a body whose
// top-level fields the handler names itself (readObject, decodeField).
var requests = map[string]struct {
	value  func() any
	strict bool
}{
	"request CreateJob":                 {func() any { return filled[jobBody]() }, true},
	"request PolicyTarget (target)":     {func() any { return filled[policyTarget]() }, false},
	"request ServerVersion (lease)":     {func() any { return filled[space.ServerVersion]() }, false},
	"request ReportedNamespace (items)": {func() any { return filled[space.ReportedNamespace]() }, false},
	"request CreateOutcome (creates)":   {func() any { return filled[space.CreateOutcome]() }, false},
}

// routeBodies names, for every route, the sections of its bodies (any
// route may also answer a Problem). A new route fails
// TestAPIShapesCoverEveryRoute until it is listed here.
var routeBodies = map[string][]string{
	"GET /openapi.yaml": nil, // YAML, the document itself

	"GET /spaces":               {"Space list"},
	"POST /spaces":              {"Space registered"},
	"GET /spaces/{id}":          {"Space"},
	"PATCH /spaces/{id}/status": {"Space"},
	"PUT /spaces/{id}/labels":   {"Space"},
	"DELETE /spaces/{id}":       nil,
	"GET /spaces/{id}/status-history": {
		"Transition list"},
	"GET /space-counts":                          {"Counts"},
	"GET /activity":                              {"Activity list"},
	"POST /spaces/{id}/agent-bootstrap":          {"Bootstrap"},
	"GET /cloud-accounts":                        {"CloudAccount list"},
	"POST /cloud-accounts":                       {"CloudAccount"},
	"GET /cloud-accounts/{id}":                   {"CloudAccount"},
	"DELETE /cloud-accounts/{id}":                nil,
	"GET /cloud-accounts/{id}/clusters":          {"DiscoveredCluster list"},
	"POST /cloud-accounts/{id}/verify":           {"CloudAccount"},
	"GET /environments":                          {"Environment list"},
	"POST /environments":                         {"Environment"},
	"GET /environments/{id}":                     {"Environment"},
	"PUT /environments/{id}/space":               {"Environment"},
	"GET /autoscaler-policies":                   {"AutoscalerPolicy list"},
	"POST /autoscaler-policies":                  {"AutoscalerPolicy", "request PolicyTarget (target)"},
	"GET /autoscaler-policies/{id}":              {"AutoscalerPolicy"},
	"DELETE /autoscaler-policies/{id}":           nil,
	"POST /environments/{id}/revisions":          {"Revision"},
	"GET /environments/{id}/revisions":           {"RevisionSummary list"},
	"GET /revisions":                             {"RevisionSummary list"},
	"GET /revisions/{id}":                        {"Revision"},
	"POST /revisions/{id}/retry":                 {"Revision"},
	"GET /provisioning-jobs":                     {"Job list"},
	"POST /provisioning-jobs":                    {"Job", "request CreateJob"},
	"GET /provisioning-jobs/{id}":                {"Job"},
	"DELETE /provisioning-jobs/{id}":             {"Job"},
	"POST /provisioning-jobs/{id}/retry":         {"Job"},
	"GET /space-discovery/{spaceID}/namespaces":  {"NamespaceList"},
	"POST /space-discovery/{spaceID}/namespaces": {"Namespace", "NamespaceCreate"},

	"POST /agent/exchange":                                         {"AgentCredential"},
	"POST /agent/credential":                                       {"AgentCredential"},
	"PUT /agent/spaces/{spaceID}/lease":                            {"Lease answer", "request ServerVersion (lease)"},
	"PUT /agent/spaces/{spaceID}/namespaces":                       {"request ReportedNamespace (items)", "request CreateOutcome (creates)"},
	"PUT /agent/spaces/{spaceID}/revisions/{revisionID}":           nil,
	"GET /webhook-endpoints":                                       {"WebhookEndpoint list"},
	"POST /webhook-endpoints":                                      {"WebhookEndpoint secret"},
	"GET /webhook-endpoints/{id}":                                  {"WebhookEndpoint"},
	"PATCH /webhook-endpoints/{id}":                                {"WebhookEndpoint"},
	"DELETE /webhook-endpoints/{id}":                               nil,
	"POST /webhook-endpoints/{id}/pause":                           {"WebhookEndpoint"},
	"POST /webhook-endpoints/{id}/resume":                          {"WebhookEndpoint"},
	"POST /webhook-endpoints/{id}/rotate-secret":                   {"WebhookEndpoint secret"},
	"GET /webhook-endpoints/{id}/deliveries":                       {"DeliveryAttempt list"},
	"POST /webhook-endpoints/{id}/test":                            {"WebhookTest accepted"},
	"POST /webhook-endpoints/{id}/deliveries/{delivery_id}/replay": {"WebhookReplay accepted"},
	"POST /webhook-endpoints/{id}/replay":                          {"WebhookReplay accepted"},
}

const apiGolden = "testdata/shapes.golden"

// TestAPIShapes compares every body's JSON shape, from encoding/json on a
// value with every field set, with testdata/shapes.golden.
func TestAPIShapes(t *testing.T) {
	got := map[string][]string{}
	for name, body := range bodies {
		got[name] = shapetest.Marshal(t, body())
	}
	for name, req := range requests {
		got[name] = shapetest.Marshal(t, req.value())
	}
	shapetest.Golden(t, apiGolden, `
The JSON shape of every API body: a field path and its JSON type per line
(<key>: a key the data chooses; []: a list's elements). Generated by
TestAPIShapes from the code; regenerate with
  go test ./shared/httpapi -run TestAPIShapes -update
only when the change to the API contract is meant.`,
		`This changes the API contract (and, for a domain type, the names of the stored attributes too: see
shared/dynamostore's TestItemShapes). If it is meant, update openapi.yaml and regenerate with
  go test ./shared/httpapi -run TestAPIShapes -update`, got)
}

// TestAPIShapesCoverEveryRoute holds routeBodies to the routes the API
// serves, and each of its sections to a body TestAPIShapes freezes.
func TestAPIShapesCoverEveryRoute(t *testing.T) {
	for _, r := range Routes() {
		if _, ok := routeBodies[r]; !ok {
			t.Errorf("route %s is not in routeBodies: name the bodies it writes and reads so that their shapes are frozen", r)
		}
	}
	used := map[string]bool{"Problem": true}
	for r, sections := range routeBodies {
		if !slices.Contains(Routes(), r) {
			t.Errorf("routeBodies names %s, which the API does not serve", r)
		}
		for _, s := range sections {
			_, isBody := bodies[s]
			_, isRequest := requests[s]
			if !isBody && !isRequest {
				t.Errorf("routeBodies[%s] names %q, which neither bodies nor requests has", r, s)
			}
			used[s] = true
		}
	}
	for s := range bodies {
		if !used[s] {
			t.Errorf("bodies has %q, which no route of routeBodies names", s)
		}
	}
	for s := range requests {
		if !used[s] {
			t.Errorf("requests has %q, which no route of routeBodies names", s)
		}
	}
}

// TestRequestShapesAreWhatHandlersRead reads each request value, written
// with its json tags, back the way its handler reads it: the shape frozen
// from the tags is then the shape accepted (policyTarget, for one, names
// its fields again in its UnmarshalJSON).
func TestRequestShapesAreWhatHandlersRead(t *testing.T) {
	for name, req := range requests {
		v := req.value()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back := reflect.New(reflect.TypeOf(v))
		if req.strict {
			raw, err := decodeObject(b)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var d strictDecoder
			d.object("", raw, back.Elem())
			if len(d.bad) > 0 {
				t.Errorf("%s: the handler refuses its own shape: %+v", name, d.bad)
				continue
			}
		} else if err := decodeField(b, back.Interface()); err != nil {
			t.Errorf("%s: the handler refuses its own shape %s: %v", name, b, err)
			continue
		}
		if got := back.Elem().Interface(); !reflect.DeepEqual(got, v) {
			t.Errorf("%s: read back %+v from %s, want %+v", name, got, b, v)
		}
	}
}
