package spaces_test

import (
	"fmt"
	"slices"
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
