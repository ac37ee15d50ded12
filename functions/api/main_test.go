package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/config"
	"spaces/shared/httpapi"
	"spaces/shared/space"
	"spaces/shared/wiring/api"
	"spaces/shared/wiring/parts"
)

// TestSampleEventsThroughTheLambdaPath pushes every sample event in
// events/api through the API Gateway v2 adapter into the real handler on the
// emulator, the way Lambda runs it: the org comes from the authorizer's
// claims, and every route answers as documented.
func TestSampleEventsThroughTheLambdaPath(t *testing.T) {
	env := emulatortest.Start(t)
	// No discovery function: registrations are not checked against a
	// cloud, which is what the sample events expect of unknown ids.
	s := api.Settings{Common: parts.Common{Table: env.Name(t, "SpacesTable"), StaleAfter: space.DefaultStaleAfter},
		CursorSecret: "test-secret-test-secret-test-secret",
		ProbeQueue:   env.Resources["ProbeQueue"].URL, RevisionsQueue: env.Resources["RevisionsQueue"].URL,
		ProvisioningQueue: env.Resources["ProvisioningQueue"].URL, WebhookKey: env.Resources["WebhookSecretsKey"].Name}
	fn := &config.Function{Log: slog.New(slog.DiscardHandler), Env: config.FromOS()}
	h, err := handler(parts.AWS{Config: env.Config, Endpoint: env.Endpoint}, s, fn)
	if err != nil {
		t.Fatal(err)
	}
	adapter := httpadapter.NewV2(h)
	files, _ := filepath.Glob("../../events/api/*.json")
	want := map[string]int{
		"list-spaces.json":              200,
		"get-space-counts.json":         200,
		"list-activity.json":            200,
		"register-space.json":           422, // its cloud account does not exist here
		"get-space.json":                404,
		"patch-space-status.json":       404,
		"put-space-labels.json":         404,
		"deregister-space.json":         404,
		"list-cloud-accounts.json":      200,
		"create-cloud-account.json":     201,
		"get-cloud-account.json":        404,
		"delete-cloud-account.json":     404,
		"openapi.json":                  200,
		"get-space-status-history.json": 404,
		// Environments and policies: the sample space does not exist here.
		"list-environments.json":          200,
		"create-environment.json":         422,
		"get-environment.json":            404,
		"rebind-environment.json":         404,
		"list-autoscaler-policies.json":   200,
		"create-autoscaler-policy.json":   422,
		"get-autoscaler-policy.json":      404,
		"delete-autoscaler-policy.json":   404,
		"push-revision.json":              404,
		"get-revision.json":               404,
		"list-environment-revisions.json": 404,
		"list-stopped-revisions.json":     200,
		"retry-revision.json":             404,
		// Provisioning jobs: the sample job and account do not exist here.
		"list-provisioning-jobs.json":  200,
		"create-provisioning-job.json": 422,
		"get-provisioning-job.json":    404,
		"cancel-provisioning-job.json": 404,
		"retry-provisioning-job.json":  404,
		// Agent spaces: the sample space does not exist.
		"reissue-agent-bootstrap.json": 404,
		// Webhook endpoints: the sample endpoint does not exist; the
		// creation's URL is a literal public address (no DNS asked).
		"list-webhook-endpoints.json":          200,
		"create-webhook-endpoint.json":         201,
		"get-webhook-endpoint.json":            404,
		"update-webhook-endpoint.json":         404,
		"delete-webhook-endpoint.json":         404,
		"pause-webhook-endpoint.json":          404,
		"resume-webhook-endpoint.json":         404,
		"rotate-webhook-secret.json":           404,
		"test-webhook-endpoint.json":           404,
		"list-webhook-deliveries.json":         404,
		"replay-webhook-delivery.json":         404,
		"replay-webhook-deliveries-since.json": 404,
	}
	var covered []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		covered = append(covered, ev.RouteKey)
		res, err := adapter.ProxyWithContext(t.Context(), ev)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if res.StatusCode != want[filepath.Base(f)] {
			t.Errorf("%s: status %d, want %d: %s", filepath.Base(f), res.StatusCode, want[filepath.Base(f)], res.Body)
		}
		if filepath.Base(f) == "create-cloud-account.json" {
			var acct space.CloudAccount
			if err := json.Unmarshal([]byte(res.Body), &acct); err != nil || acct.OrgID != "acme" {
				t.Errorf("the org must come from the authorizer's claims: %s", res.Body)
			}
		}
	}
	// The cluster-side routes' samples are functions/discovery's, the
	// agent's functions/agent's.
	for _, r := range httpapi.Routes() {
		if !slices.Contains(covered, r) && !slices.Contains(httpapi.ClusterRoutes(), r) && !slices.Contains(httpapi.AgentRoutes(), r) {
			t.Errorf("no sample event for %s", r)
		}
	}
	// Without authorizer claims the function refuses the request.
	var ev events.APIGatewayV2HTTPRequest
	raw, _ := os.ReadFile("../../events/api/list-spaces.json")
	_ = json.Unmarshal(raw, &ev)
	ev.RequestContext.Authorizer = nil
	res, err := adapter.ProxyWithContext(t.Context(), ev)
	if err != nil || res.StatusCode != 401 || !strings.Contains(res.Body, "urn:spaces:problem:unauthenticated") {
		t.Errorf("no claims: %d %s %v", res.StatusCode, res.Body, err)
	}
}

// TestCatalogLinksNoClusterSDK: the catalog API stays small and quick to
// start because it links neither client-go nor a cloud SDK (nor gRPC, which
// the GKE client brings); functions/discovery does. Nor does it link the AWS
// services it does not call (EventBridge) or the SDK's default
// configuration chain (awsclient.FromEnv says why): each service's
// package init costs every cold start. The agent function (functions/agent,
// the agent's routes) is held to the same list.
func TestCatalogLinksNoClusterSDK(t *testing.T) {
	banned := []string{"k8s.io/", "sigs.k8s.io/", "cloud.google.com/", "google.golang.org/grpc", "github.com/Azure/",
		"github.com/aws/aws-sdk-go-v2/service/eks", "spaces/shared/mint", "spaces/shared/kubens",
		"github.com/aws/aws-sdk-go-v2/service/eventbridge", "github.com/aws/aws-sdk-go-v2/config",
		"github.com/aws/aws-sdk-go-v2/service/sts", "github.com/aws/aws-sdk-go-v2/service/sso", "github.com/aws/aws-sdk-go-v2/service/signin"}
	for _, fn := range []string{"functions/api", "functions/agent"} {
		out, err := exec.Command("go", "list", "-deps", "spaces/"+fn).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, pkg := range strings.Fields(string(out)) {
			for _, b := range banned {
				if strings.HasPrefix(pkg, b) {
					t.Errorf("%s links %s", fn, pkg)
				}
			}
		}
	}
}
