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
// checked by the function), and on every other ApiFunction route, so no
// user route is left open and no agent route needs a JWT it cannot have.
func TestGatewayAuthorizerOffOnlyWhereTheFunctionAuthenticates(t *testing.T) {
	tpl := parseRaw(t)
	events, _ := tpl.Resources["ApiFunction"].Properties["Events"].(map[string]any)
	open := append(slices.Clone(httpapi.PublicRoutes), httpapi.AgentRoutes()...)
	seen := 0
	for name, ev := range events {
		if get(ev, "Type") != "HttpApi" {
			continue
		}
		route := fmt.Sprint(get(ev, "Properties", "Method"), " ", get(ev, "Properties", "Path"))
		none := get(ev, "Properties", "Auth", "Authorizer") == "NONE"
		want := slices.Contains(open, route)
		if none != want {
			t.Errorf("ApiFunction.%s (%s): authorizer off %v, want %v", name, route, none, want)
		}
		if want {
			seen++
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
// agent's routes take its reports (TakeHanded, and the report's
// transaction of two updates). Each function's role must grant it on the
// table, or the work fails only when deployed (the emulator checks no IAM).
func TestRoleGrantsTheAgentWork(t *testing.T) {
	tpl := parseRaw(t)
	sts := statements(tpl)
	for _, fn := range []string{"RevisionsFunction", "DiscoveryFunction", "ApiFunction"} {
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
		for _, want := range []string{"dynamodb:GetItem", "dynamodb:UpdateItem"} {
			if !granted[want] {
				t.Errorf("%s (%s) is not granted %s on the table: %v", fn, role, want, granted)
			}
		}
	}
}
