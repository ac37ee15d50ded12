package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/httpapi"
	"spaces/shared/space"
	"spaces/shared/wiring/agents"
	"spaces/shared/wiring/parts"
)

// TestSampleEventsThroughTheLambdaPath pushes every sample event in
// events/agent (function URL requests: payload format 2.0, routeKey
// $default, no path parameters) through the v2 adapter into the
// function's real handler on the emulator: each agent route is there and
// checks the agent's secret (the samples' secrets are no one's: 401), and
// a catalog route is the function's 404 (a function URL passes every
// path on).
func TestSampleEventsThroughTheLambdaPath(t *testing.T) {
	env := emulatortest.Start(t)
	s := agents.Settings{Common: parts.Common{Table: env.Name(t, "SpacesTable"), StaleAfter: space.DefaultStaleAfter},
		ProbeQueue: env.Resources["ProbeQueue"].URL}
	h := agents.NewHandlers(parts.AWS{Config: env.Config, Endpoint: env.Endpoint}, s, agents.Options{Log: slog.New(slog.DiscardHandler)})
	handle := httpOnly(serve(h, nil)) // nil: no tracing
	files, _ := filepath.Glob("../../events/agent/*.json")
	routes := http.NewServeMux()
	for _, r := range httpapi.AgentRoutes() {
		routes.Handle(r, http.NotFoundHandler())
	}
	var covered []string
	for _, f := range files {
		ev := sample(t, f)
		if ev.RouteKey != "$default" || ev.RequestContext.RouteKey != "$default" {
			t.Errorf("%s: route key %q, want a function URL's $default", f, ev.RouteKey)
		}
		_, pattern := routes.Handler(httptest.NewRequest(ev.RequestContext.HTTP.Method, ev.RawPath, nil))
		covered = append(covered, pattern)
		res, err := handle(t.Context(), ev)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if res.StatusCode != 401 || !strings.Contains(res.Body, "urn:spaces:problem:") {
			t.Errorf("%s: %d %s, want a 401 problem", filepath.Base(f), res.StatusCode, res.Body)
		}
	}
	for _, r := range httpapi.AgentRoutes() {
		if !slices.Contains(covered, r) {
			t.Errorf("no sample event for %s", r)
		}
	}
	ev := sample(t, "../../events/api/list-spaces.json")
	if res, err := handle(t.Context(), ev); err != nil || res.StatusCode != 404 {
		t.Errorf("GET /spaces on the agent function: %d %v, want 404", res.StatusCode, err)
	}
}

// httpOnly calls the Lambda handler with HTTP requests, as the runtime
// does: the event as JSON in, the answer as JSON out.
func httpOnly(h func(context.Context, json.RawMessage) (any, error)) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		var res events.APIGatewayV2HTTPResponse
		raw, err := json.Marshal(ev)
		if err != nil {
			return res, err
		}
		out, err := h(ctx, raw)
		if err != nil {
			return res, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return res, err
		}
		return res, json.Unmarshal(b, &res)
	}
}

func sample(t *testing.T, path string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ev
}

// TestIoTEventsAreNotTheAgentFunctions: the presence channel's events
// are PresenceFunction's (functions/presence): sent here by mistake, a
// presence batch is an error and an authorizer request a refusal, and
// neither reaches a handler.
func TestIoTEventsAreNotTheAgentFunctions(t *testing.T) {
	env := emulatortest.Start(t)
	s := agents.Settings{Common: parts.Common{Table: env.Name(t, "SpacesTable"), StaleAfter: space.DefaultStaleAfter},
		ProbeQueue: env.Resources["ProbeQueue"].URL}
	handle := serve(agents.NewHandlers(parts.AWS{Config: env.Config, Endpoint: env.Endpoint}, s, agents.Options{Log: slog.New(slog.DiscardHandler)}), nil)
	raw, err := os.ReadFile("../../events/presence/authorizer.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := handle(t.Context(), raw)
	if res, ok := out.(events.IoTCoreCustomAuthorizerResponse); err != nil || !ok || res.IsAuthenticated {
		t.Errorf("authorizer sample: %#v %v, want a refusal", out, err)
	}
	if raw, err = os.ReadFile("../../events/presence/presence.json"); err != nil {
		t.Fatal(err)
	}
	if out, err = handle(t.Context(), raw); err == nil {
		t.Errorf("presence sample: %#v, want an error (not this function's)", out)
	}
}
