package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/cloudcall"
	"spaces/shared/config"
	"spaces/shared/httpapi"
	"spaces/shared/space"
	"spaces/shared/wiring/discovery"
	"spaces/shared/wiring/parts"
)

// TestSampleEventsThroughTheLambdaPath pushes every sample event in
// events/discovery through the function's Lambda handler, as Lambda runs
// it, on the emulator: the cluster-side routes (API Gateway v2 events) and
// the catalog's cloud question (a cloudcall.Request).
func TestSampleEventsThroughTheLambdaPath(t *testing.T) {
	env := emulatortest.Start(t)
	s := discovery.Settings{Common: parts.Common{Table: env.Name(t, "SpacesTable"), StaleAfter: space.DefaultStaleAfter}}
	fn := &config.Function{Log: slog.New(slog.DiscardHandler), Env: config.FromOS()}
	handle := function(parts.AWS{Config: env.Config, Endpoint: env.Endpoint}, s, fn).Lambda(fn.Tracing)
	files, _ := filepath.Glob("../../events/discovery/*.json")
	want := map[string]int{
		// The sample ids exist nowhere here.
		"list-namespaces.json":       404,
		"create-namespace.json":      404,
		"list-account-clusters.json": 404,
		"verify-cloud-account.json":  404,
	}
	var covered []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := handle(t.Context(), raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := filepath.Base(f)
		switch res := out.(type) {
		case events.APIGatewayV2HTTPResponse:
			var ev events.APIGatewayV2HTTPRequest
			_ = json.Unmarshal(raw, &ev)
			covered = append(covered, ev.RouteKey)
			if res.StatusCode != want[name] {
				t.Errorf("%s: status %d, want %d: %s", name, res.StatusCode, want[name], res.Body)
			}
		case cloudcall.Response:
			// The EKS minter asks the emulator's STS and EKS, which hold
			// no such cluster: the problem the catalog answers 422 with.
			if res.Error == nil || res.Error.Kind != space.KindInvalid || res.Error.Reason != space.ReasonClusterNotFound ||
				len(res.Error.Fields) != 1 || res.Error.Fields[0].Field != "config.clusterName" {
				t.Errorf("%s: %+v, want ClusterNotFound on config.clusterName", name, res.Error)
			}
		default:
			t.Errorf("%s: answered %T", name, out)
		}
	}
	for _, r := range httpapi.ClusterRoutes() {
		if !slices.Contains(covered, r) {
			t.Errorf("no sample event for %s", r)
		}
	}
	// A payload that is neither is refused as a function error.
	if _, err := handle(t.Context(), []byte(`{"op":"spaces.unknown"}`)); err == nil || !strings.Contains(err.Error(), "unknown request") {
		t.Errorf("unknown op: %v", err)
	}
}
