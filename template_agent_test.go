package spaces_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"spaces/shared/httpapi"
)

// TestGatewayAuthorizerOffOnlyWhereTheFunctionAuthenticates: the HTTP
// API's JWT authorizer is off (Authorizer: NONE) exactly on the public
// routes and the agent's routes (which carry the agent's own secret,
// checked by the function), and on no other route, so no user route is
// left open and no agent route needs a JWT it cannot have.
func TestGatewayAuthorizerOffOnlyWhereTheFunctionAuthenticates(t *testing.T) {
	tpl := parseRaw(t)
	open := append(slices.Clone(httpapi.PublicRoutes), httpapi.AgentRoutes()...)
	seen := 0
	// The catalog's routes and the agent's, which have a function of their
	// own so that their unauthenticated traffic holds none of the API's
	// concurrency: only agent routes go there.
	for _, fn := range []string{"ApiFunction", "AgentFunction"} {
		events, _ := tpl.Resources[fn].Properties["Events"].(map[string]any)
		for name, ev := range events {
			if get(ev, "Type") != "HttpApi" {
				continue
			}
			route := fmt.Sprint(get(ev, "Properties", "Method"), " ", get(ev, "Properties", "Path"))
			none := get(ev, "Properties", "Auth", "Authorizer") == "NONE"
			want := slices.Contains(open, route)
			if none != want {
				t.Errorf("%s.%s (%s): authorizer off %v, want %v", fn, name, route, none, want)
			}
			if agent := slices.Contains(httpapi.AgentRoutes(), route); agent != (fn == "AgentFunction") {
				t.Errorf("%s.%s (%s): an agent route %v on %s", fn, name, route, agent, fn)
			}
			if want {
				seen++
			}
		}
	}
	if seen != len(open) {
		t.Errorf("%d of the %d routes without the JWT authorizer are in template.yaml", seen, len(open))
	}
}

// TestRoleGrantsTheAgentWork: the cluster-side work of agent spaces
// (space/agentwork.go) writes the space's AGENT item with UpdateItem from
// three functions: the claimer hands a revision to the agent
// (dynamostore.HandRevision), discovery records a namespace create and a
// user's ask for the list (RequestNamespace, WantNamespaces), and the
// agent function takes its reports (TakeHanded, and the report's
// transaction of two updates). Each function's role must grant it on the
// table, or the work fails only when deployed (the emulator checks no IAM).
func TestRoleGrantsTheAgentWork(t *testing.T) {
	tpl := parseRaw(t)
	sts := statements(tpl)
	need := map[string][]string{
		"RevisionsFunction": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		"DiscoveryFunction": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// The reports: the namespaces list's own item, and the revision's
		// result (a versioned PutItem, space.Run).
		"AgentFunction": {"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"},
	}
	for fn, want := range need {
		role := ref(tpl.Resources[fn].Properties["Role"])
		granted := map[string]bool{}
		for _, st := range sts[role] {
			if fmt.Sprint(st["Effect"]) != "Allow" || !strings.Contains(fmt.Sprint(st["Resource"]), "SpacesTable") {
				continue
			}
			for _, a := range list(st["Action"]) {
				granted[fmt.Sprint(a)] = true
			}
			if a, ok := st["Action"].(string); ok {
				granted[a] = true
			}
		}
		for _, w := range want {
			if !granted[w] {
				t.Errorf("%s (%s) is not granted %s on the table: %v", fn, role, w, granted)
			}
		}
	}
}
