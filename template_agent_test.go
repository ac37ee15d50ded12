package spaces_test

import (
	"fmt"
	"slices"
	"testing"

	"spaces/shared/console"
	"spaces/shared/httpapi"
)

// TestGatewayAuthorizerOffOnlyOnPublicRoutes: the HTTP API's JWT
// authorizer is off (Authorizer: NONE) exactly on the public routes (the
// API document and the console's pages), so no user route is left open; the agent's routes, which carry the
// agent's own secret instead of a JWT, are not on the gateway at all.
func TestGatewayAuthorizerOffOnlyOnPublicRoutes(t *testing.T) {
	tpl := parseRaw(t)
	public := append(slices.Clone(httpapi.PublicRoutes), console.Routes...)
	seen := 0
	for fn, res := range tpl.Resources {
		events, _ := res.Properties["Events"].(map[string]any)
		for name, ev := range events {
			if get(ev, "Type") != "HttpApi" {
				continue
			}
			route := fmt.Sprint(get(ev, "Properties", "Method"), " ", get(ev, "Properties", "Path"))
			none := get(ev, "Properties", "Auth", "Authorizer") == "NONE"
			want := slices.Contains(public, route)
			if none != want {
				t.Errorf("%s.%s (%s): authorizer off %v, want %v", fn, name, route, none, want)
			}
			if slices.Contains(httpapi.AgentRoutes(), route) {
				t.Errorf("%s.%s (%s): an agent route on the HTTP API; it belongs on AgentFunction's URL", fn, name, route)
			}
			if want {
				seen++
			}
		}
	}
	if seen != len(public) {
		t.Errorf("%d of the %d public routes are in template.yaml", seen, len(public))
	}
}

// TestAgentRoutesOnTheFunctionURL: the agent's routes are AgentFunction's
// function URL, public (the function checks the agent's secret) and
// buffered, and only AgentFunction has one: any other function URL
// would be a door past the gateway's JWT authorizer. The stack tells
// its operator the URL (the AgentUrl output) to render the agent's
// manifests with.
func TestAgentRoutesOnTheFunctionURL(t *testing.T) {
	tpl := parseRaw(t)
	for fn, res := range tpl.Resources {
		cfg := res.Properties["FunctionUrlConfig"]
		if fn != "AgentFunction" {
			if cfg != nil {
				t.Errorf("%s has a function URL: %v", fn, cfg)
			}
			continue
		}
		if get(cfg, "AuthType") != "NONE" || get(cfg, "InvokeMode") != "BUFFERED" {
			t.Errorf("AgentFunction's FunctionUrlConfig %v, want AuthType NONE, InvokeMode BUFFERED", cfg)
		}
	}
	out := get(tpl.Outputs["AgentUrl"], "Value", "Fn::GetAtt")
	if fmt.Sprint(out) != "AgentFunctionUrl.FunctionUrl" && fmt.Sprint(out) != "[AgentFunctionUrl FunctionUrl]" {
		t.Errorf("output AgentUrl is %v, want !GetAtt AgentFunctionUrl.FunctionUrl", tpl.Outputs["AgentUrl"])
	}
}
