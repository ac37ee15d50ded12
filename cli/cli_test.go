package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"spaces"
	"spaces/infra/demo"
	"spaces/infra/local"
	"spaces/infra/openapitest"
	"spaces/infra/testwait"
)

var stackSeq atomic.Int64

// startDemoStack starts the local stack with the demo's simulated clouds
// (clusters on a real kube-apiserver) and probes every 2s, as
// infra/local's demo tests do.
func startDemoStack(t *testing.T) *local.Stack {
	t.Helper()
	prefix := fmt.Sprintf("c%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := local.Start(context.Background(), local.Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names:   func(id string) string { return prefix + id },
		Log:     slog.New(slog.DiscardHandler),
		Demo:    &demo.Options{},
		Probing: local.ProbingConfig{Interval: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// checked is a transport that holds every exchange with the API to
// openapi.yaml (the console's sign-in and config are not the API).
type checked struct {
	api, other http.RoundTripper
}

func (c checked) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasPrefix(req.URL.Path, "/console/") {
		return c.other.RoundTrip(req)
	}
	return c.api.RoundTrip(req)
}

// cli runs the CLI in process, as the binary would, with its own config
// folder and environment.
type cli struct {
	t   *testing.T
	dir string
	env map[string]string
	hc  *http.Client
}

func newCLI(t *testing.T, hc *http.Client) *cli {
	return &cli{t: t, dir: t.TempDir(), env: map[string]string{}, hc: hc}
}

func (c *cli) run(stdin string, args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return c.env[k] }, ConfigDir: c.dir, HTTPClient: c.hc,
	})
	return out.String(), errOut.String(), code
}

// ok runs args and fails the test unless they exit 0.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run("", args...)
	if code != ExitOK {
		c.t.Fatalf("spaces %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// exits runs args and checks the exit code and that stderr says why.
func (c *cli) exits(want int, says string, args ...string) {
	c.t.Helper()
	out, errOut, code := c.run("", args...)
	if code != want || !strings.Contains(errOut, says) {
		c.t.Errorf("spaces %s: exit %d, want %d with %q in stderr\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, says, out, errOut)
	}
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %q", err, s)
	}
	return v
}

// TestCLIRegistersWaitsLabelsDeregisters drives the CLI against the local
// stack with the demo, every API exchange checked against openapi.yaml:
// login (the token kept 0600), connect and verify an AWS account whose trust
// is applied in the simulated cloud, list its clusters, register one, wait
// until its probe makes it active, label it, find it by selector,
// deregister it and wait for that; and the exit codes of the failures: a
// second registration of the cluster (4), an unknown id (3), a wait that
// times out (5), a changed label without --overwrite (1), no token or a bad
// one (6), a bad command line (2).
func TestCLIRegistersWaitsLabelsDeregisters(t *testing.T) {
	t.Parallel()
	st := startDemoStack(t)
	v := openapitest.New(t, spaces.OpenAPI)
	hc := &http.Client{Transport: checked{api: openapitest.RoundTripper(t, v, http.DefaultTransport), other: http.DefaultTransport}}
	c := newCLI(t, hc)
	org := "org-" + uuid.NewString()[:8]

	c.ok("login", "--server", st.APIURL, "--org", org)
	cfgPath := filepath.Join(c.dir, "config.json")
	fi, err := os.Stat(cfgPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config after login: %v, %v; want mode 0600", fi, err)
	}
	var kept config
	raw, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(raw, &kept); err != nil || kept.Token == "" || kept.Server != st.APIURL || kept.Org != org {
		t.Fatalf("config after login: %s (%v)", raw, err)
	}

	// Connect, apply the setup in the simulated cloud as its customer
	// would (the console's local route), verify.
	acct := decode[map[string]any](t, c.ok("accounts", "connect", "--provider", "aws", "--name", "prod", "--connection", "roleArn="+demo.RoleARN, "-o", "json"))
	acctID, _ := acct["id"].(string)
	if acct["status"] != "pending" || acct["setup"] == nil {
		t.Fatalf("connected account: %v", acct)
	}
	applySetup(t, st, kept.Token, acctID)
	if out := c.ok("accounts", "verify", acctID); !strings.Contains(out, "ready") {
		t.Fatalf("verify: %s", out)
	}
	if accts := decode[[]map[string]any](t, c.ok("accounts", "list", "-o", "json")); len(accts) != 1 || accts[0]["id"] != acctID {
		t.Fatalf("accounts list: %v", accts)
	}

	clusters := decode[[]map[string]any](t, c.ok("clusters", "list", "--account", acctID, "--region", demo.AWSRegion, "-o", "json"))
	if len(clusters) == 0 {
		t.Fatal("the demo account sees no cluster")
	}
	cfg := clusters[0]["config"].(map[string]any)
	register := []string{"register", "--account", acctID, "--config", "region=" + cfg["region"].(string), "--config", "clusterName=" + cfg["clusterName"].(string), "--label", "env=dev"}
	sp := decode[map[string]any](t, c.ok(append(register, "-o", "json")...))
	id, _ := sp["id"].(string)
	if sp["status"] != "unknown" || sp["labels"].(map[string]any)["env"] != "dev" {
		t.Fatalf("registered: %v", sp)
	}
	c.exits(ExitConflict, "existing space "+id, register...)

	// An agent space: its bootstrap, which registration answers, is not
	// printed in any format.
	if len(clusters) < 2 {
		t.Fatalf("the demo account sees %d clusters, want 2", len(clusters))
	}
	cfg2 := clusters[1]["config"].(map[string]any)
	agentArgs := []string{"register", "--account", acctID, "--connectivity", "agent", "--config", "region=" + cfg2["region"].(string), "--config", "clusterName=" + cfg2["clusterName"].(string)}
	agentJSON := c.ok(append(agentArgs, "-o", "json", "--idempotency-key", "agent-1")...)
	agentSpace := decode[map[string]any](t, agentJSON)
	if agentSpace["connectivity"] != "agent" || strings.Contains(agentJSON, "agent_bootstrap") || strings.Contains(agentJSON, "token") {
		t.Fatalf("agent registration printed: %s", agentJSON)
	}
	for _, o := range []string{"yaml", "table"} {
		// The same key again: a replay, which answers a new bootstrap.
		if out := c.ok(append(agentArgs, "-o", o, "--idempotency-key", "agent-1")...); strings.Contains(out, "bootstrap") || strings.Contains(out, "token") || !strings.Contains(out, agentSpace["id"].(string)) {
			t.Fatalf("agent registration replayed, -o %s: %s", o, out)
		}
	}
	c.ok("deregister", agentSpace["id"].(string))

	// Completion offers the org's spaces by id, with their names.
	if out := c.ok("__complete", "get", ""); !strings.Contains(out, id+"\t"+sp["name"].(string)) {
		t.Fatalf("completion of get: %q", out)
	}

	c.exits(ExitTimeout, "timed out", "wait", id, "--for", "status=inactive", "--timeout", "1s", "--interval", "200ms")
	if out := c.ok("wait", id, "--for", "status=active", "--timeout", "2m", "--interval", "500ms"); !strings.Contains(out, "active") {
		t.Fatalf("wait: %s", out)
	}
	if out := c.ok("get", id); !strings.Contains(out, "active") || !strings.Contains(out, "env=dev") {
		t.Fatalf("get (table): %s", out)
	}

	c.ok("label", id, "team=platform")
	c.exits(ExitError, "--overwrite", "label", id, "env=prod")
	yml := c.ok("label", id, "env=prod", "--overwrite", "-o", "yaml")
	if !strings.Contains(yml, "env: prod") || !strings.Contains(yml, "team: platform") {
		t.Fatalf("label -o yaml: %s", yml)
	}
	labeled := decode[map[string]any](t, c.ok("label", id, "team-", "-o", "json"))
	if l := labeled["labels"].(map[string]any); len(l) != 1 || l["env"] != "prod" {
		t.Fatalf("after team-: %v", labeled["labels"])
	}
	if found := decode[[]map[string]any](t, c.ok("list", "-l", "env=prod", "-o", "json")); len(found) != 1 || found[0]["id"] != id {
		t.Fatalf("list -l env=prod: %v", found)
	}
	if found := decode[[]map[string]any](t, c.ok("list", "-l", "env=dev", "-o", "json")); len(found) != 0 {
		t.Fatalf("list -l env=dev: %v", found)
	}

	c.exits(ExitNotFound, "404", "get", uuid.NewString())
	c.ok("deregister", id)
	c.exits(ExitNotFound, "404", "get", id)
	c.exits(ExitNotFound, "404", "label", id, "a=b")
	if out := c.ok("wait", id, "--for", "delete", "--timeout", "10s"); !strings.Contains(out, "deregistered") {
		t.Fatalf("wait --for delete: %s", out)
	}
	if found := decode[[]map[string]any](t, c.ok("list", "-o", "json")); len(found) != 0 {
		t.Fatalf("list after deregister: %v", found)
	}

	// Signed out, and a token the API refuses.
	fresh := newCLI(t, hc)
	fresh.env["SPACES_SERVER"] = st.APIURL
	fresh.exits(ExitAuth, "not signed in", "list")
	fresh.env["SPACES_TOKEN"] = "not-a-jwt"
	fresh.exits(ExitAuth, "401", "list")

	// Usage.
	c.exits(ExitUsage, "unknown command", "regster")
	c.exits(ExitUsage, "--output must be one of", "list", "-o", "xml")
	c.exits(ExitUsage, "needs --account, --config", "register")
	c.exits(ExitUsage, "--for takes", "wait", id, "--for", "ready")
	c.exits(ExitUsage, "takes one space id", "get")
}

// applySetup applies an account's setup in the demo's simulated cloud
// through the local console's route, as the console's button does.
func applySetup(t *testing.T, st *local.Stack, token, acctID string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"account_id": acctID})
	req, _ := http.NewRequest("POST", st.APIURL+local.DevApplySetupPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("apply setup: %d", res.StatusCode)
	}
}

// TestCLIJobsEnvironmentsRevisions drives a provisioning job, an
// environment and a revision through the CLI against the local stack with
// the demo: jobs create from a YAML file, jobs watch to success (its steps
// printed), the job's space active, an environment on it, a revision
// pushed from a two-document YAML stream and deployed with every field of
// its manifests kept; and a job the cloud refuses, which jobs watch ends
// with exit 1 and the cloud's words.
func TestCLIJobsEnvironmentsRevisions(t *testing.T) {
	t.Parallel()
	prefix := fmt.Sprintf("j%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := local.Start(context.Background(), local.Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names:        func(id string) string { return prefix + id },
		Log:          slog.New(slog.DiscardHandler),
		Demo:         &demo.Options{CreateDelay: 2 * time.Second},
		Probing:      local.ProbingConfig{Interval: 2 * time.Second},
		Provisioning: local.ProvisioningConfig{PollInterval: time.Second, Wait: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if st.Demo.Real == nil {
		t.Fatalf("the demo has no real API server: %s", st.Demo.RealMissing)
	}
	v := openapitest.New(t, spaces.OpenAPI)
	c := newCLI(t, &http.Client{Transport: checked{api: openapitest.RoundTripper(t, v, http.DefaultTransport), other: http.DefaultTransport}})
	c.ok("login", "--server", st.APIURL, "--org", "org-"+uuid.NewString()[:8])
	var kept config
	raw, _ := os.ReadFile(filepath.Join(c.dir, "config.json"))
	_ = json.Unmarshal(raw, &kept)
	acctID := decode[map[string]any](t, c.ok("accounts", "connect", "--provider", "aws", "--name", "prod", "--connection", "roleArn="+demo.RoleARN, "-o", "json"))["id"].(string)
	applySetup(t, st, kept.Token, acctID)
	c.ok("accounts", "verify", acctID)

	writeJob := func(name string, spec any) string {
		job, _ := json.Marshal(map[string]any{"provider": "aws", "cloud_account_id": acctID,
			"config": demo.NewClusterConfig("aws", name), "spec": spec})
		yml, err := yaml.JSONToYAML(job)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(path, yml, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	job := decode[map[string]any](t, c.ok("jobs", "create", "-f", writeJob("cli-job", demo.ClusterSpec("aws")), "-o", "json"))
	jobID := job["id"].(string)
	watched := c.ok("jobs", "watch", jobID, "--interval", "500ms", "--timeout", "3m")
	for _, state := range []string{"creating", "registering", "succeeded"} {
		if !strings.Contains(watched, state) {
			t.Errorf("jobs watch printed no %s step:\n%s", state, watched)
		}
	}
	spaceID, _ := decode[map[string]any](t, c.ok("jobs", "get", jobID, "-o", "json"))["space_id"].(string)
	if spaceID == "" {
		t.Fatalf("the succeeded job has no space:\n%s", watched)
	}
	c.ok("wait", spaceID, "--for", "status=active", "--timeout", "2m", "--interval", "500ms")

	// The environment's namespace, created through the API (default, which
	// the cluster has, is not one Spaces may use).
	nsReq, _ := http.NewRequest("POST", st.APIURL+"/space-discovery/"+spaceID+"/namespaces", strings.NewReader(`{"name":"web"}`))
	nsReq.Header.Set("Authorization", "Bearer "+kept.Token)
	nsReq.Header.Set("Content-Type", "application/json")
	if res, err := c.hc.Do(nsReq); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("create namespace web: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	env := decode[map[string]any](t, c.ok("environments", "create", "--space", spaceID, "--name", "web", "--namespace", "web", "-o", "json"))
	envID := env["id"].(string)
	if envs := decode[[]map[string]any](t, c.ok("environments", "list", "-o", "json")); len(envs) != 1 || envs[0]["id"] != envID {
		t.Fatalf("environments list: %v", envs)
	}
	manifests := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(manifests, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cli-a\n  labels: {app: web}\ndata:\n  greeting: hi\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cli-b\ndata:\n  greeting: hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rev := decode[map[string]any](t, c.ok("revisions", "push", envID, "-f", manifests, "-o", "json"))
	revID := rev["id"].(string)
	if revs := decode[[]map[string]any](t, c.ok("revisions", "list", envID, "-o", "json")); len(revs) != 1 || revs[0]["id"] != revID {
		t.Fatalf("revisions list: %v", revs)
	}
	var got map[string]any
	if err := testwait.UntilEvery(testwait.Timeout, 500*time.Millisecond, func() bool {
		got = decode[map[string]any](t, c.ok("revisions", "get", revID, "-o", "json"))
		return got["state"] != "pending"
	}); err != nil || got["state"] != "deployed" {
		t.Fatalf("revision %v (%v)", got, err)
	}
	ms, _ := got["manifests"].([]any)
	if len(ms) != 2 {
		t.Fatalf("revision's manifests: %v", got["manifests"])
	}
	first, _ := ms[0].(map[string]any)
	if data, _ := first["data"].(map[string]any); data["greeting"] != "hi" {
		t.Errorf("the first manifest lost its data: %v", first)
	}
	if md, _ := first["metadata"].(map[string]any); md["labels"] == nil {
		t.Errorf("the first manifest lost its labels: %v", first)
	}

	// A version the cloud does not offer: the job fails, watch says why.
	bad := demo.ClusterSpec("aws")
	bad.KubernetesVersion = "1.19"
	refused := decode[map[string]any](t, c.ok("jobs", "create", "-f", writeJob("cli-refused", bad), "-o", "json"))["id"].(string)
	c.exits(ExitError, "1.19", "jobs", "watch", refused, "--interval", "500ms", "--timeout", "3m")
	c.exits(ExitNotFound, "404", "jobs", "get", uuid.NewString())
	c.exits(ExitNotFound, "404", "revisions", "push", uuid.NewString(), "-f", manifests)
}

// TestCLIAgentInstall: agent install applies an agent space's manifests to
// the cluster of a kubeconfig context (the demo's real API server) with a
// new bootstrap in its Secret, printing no token; the agent started from
// what the cluster holds exchanges it and renews its lease, and the space
// turns active.
func TestCLIAgentInstall(t *testing.T) {
	t.Parallel()
	st := startDemoStack(t)
	if st.Demo.Real == nil {
		t.Fatalf("the demo has no real API server: %s", st.Demo.RealMissing)
	}
	c := newCLI(t, http.DefaultClient)
	c.ok("login", "--server", st.APIURL, "--org", "org-"+uuid.NewString()[:8])
	var kept config
	raw, _ := os.ReadFile(filepath.Join(c.dir, "config.json"))
	_ = json.Unmarshal(raw, &kept)
	acctID := decode[map[string]any](t, c.ok("accounts", "connect", "--provider", "aws", "--name", "prod", "--connection", "roleArn="+demo.RoleARN, "-o", "json"))["id"].(string)
	applySetup(t, st, kept.Token, acctID)
	c.ok("accounts", "verify", acctID)
	cfg := decode[[]map[string]any](t, c.ok("clusters", "list", "--account", acctID, "--region", demo.AWSRegion, "-o", "json"))[0]["config"].(map[string]any)
	id := decode[map[string]any](t, c.ok("register", "--account", acctID, "--connectivity", "agent",
		"--config", "region="+cfg["region"].(string), "--config", "clusterName="+cfg["clusterName"].(string), "-o", "json"))["id"].(string)

	// A kubeconfig with the demo cluster as context "private".
	kc8s := st.Demo.Real
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: admin
  user: {token: %q}
contexts:
- name: private
  context: {cluster: demo, user: admin}
current-context: ""
`, kc8s.URL, base64.StdEncoding.EncodeToString(kc8s.CAPEM), kc8s.AdminToken)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	c.exits(ExitUsage, "needs --context", "agent", "install", id, "--kubeconfig", kubeconfig, "--image", "spaces-agent:demo", "--agent-url", st.AgentURL)
	c.exits(ExitError, "context", "agent", "install", id, "--kubeconfig", kubeconfig, "--context", "nowhere", "--image", "spaces-agent:demo", "--agent-url", st.AgentURL)
	out, errOut, code := c.run("", "agent", "install", id, "--kubeconfig", kubeconfig, "--context", "private", "--image", "spaces-agent:demo", "--agent-url", st.AgentURL)
	if code != ExitOK || !strings.Contains(out, "Deployment/spaces-agent applied") {
		t.Fatalf("agent install: exit %d\n%s%s", code, out, errOut)
	}
	secret, err := kubernetes.NewForConfigOrDie(kc8s.RESTConfig()).CoreV1().Secrets("spaces-agent").Get(t.Context(), "spaces-agent-bootstrap", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := string(secret.Data["token"])
	if !strings.HasPrefix(token, "spb1.") {
		t.Fatalf("bootstrap Secret holds %d bytes, not a bootstrap token", len(token))
	}
	if strings.Contains(out+errOut, token) || strings.Contains(out+errOut, "spb1.") {
		t.Fatal("agent install printed the bootstrap token")
	}
	if err := st.Demo.StartAgent(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.ok("wait", id, "--for", "status=active", "--timeout", "2m", "--interval", "500ms")
	c.exits(ExitNotFound, "404", "agent", "install", uuid.NewString(), "--kubeconfig", kubeconfig, "--context", "private", "--image", "spaces-agent:demo", "--agent-url", st.AgentURL)
}
