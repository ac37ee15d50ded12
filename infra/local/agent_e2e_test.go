package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	agent "spaces/agent/client"
	"spaces/agent/manifests"
	"spaces/infra/kubetest"
	"spaces/infra/testwait"
	"spaces/shared/kubeapply"
	"spaces/shared/space"
)

// syncBuffer collects the agent's log lines.
// countingTransport counts the requests match picks.
type countingTransport struct {
	match func(*http.Request) bool
	n     atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.match(r) {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count() int64 { return c.n.Load() }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAgentThroughPrivateCluster is the agent's proof on real parts: a
// real kube-apiserver (and etcd) that Spaces cannot reach, and the agent
// (spaces/agent/client, run in-process as cmd/spaces-agent runs it) in
// front of it, over real HTTP to the local stack.
//
// Spaces cannot reach the API server: its address is given to nothing in
// Spaces (the space's config names a cluster no cloud knows), the stack
// has no minter (every direct probe would fail CredentialsUnavailable),
// and an agent space is probed by reading its lease, never by calling the
// cluster (probing.Prober.lease). The API server refuses anonymous calls.
//
// The agent runs as it would in the cluster, with one honest substitute:
// a pod's rest.InClusterConfig reads the ServiceAccount token the kubelet
// mounts; here the token is got from the same API server by a
// TokenRequest for the agent's ServiceAccount, after the agent's rendered
// manifests (RBAC included) were applied to it, so the agent acts on the
// cluster as its ServiceAccount, with that RBAC and Kubernetes' default
// bindings (GET /version is also open to every authenticated user) and
// nothing more: what it was not granted is refused (checked below). The bootstrap file is the Secret those manifests carry,
// read back from the API server, as the kubelet would mount it. No pod
// runs (no kubelet): the Deployment is applied, validated by the real
// API server, but the agent runs as a goroutine.
//
// register in agent mode → install with the bootstrap → active with the
// API server's real version → stop the agent → inactive within the bound
// → restart (from the credential it stored in its state Secret; the
// bootstrap is spent) → active → the cluster-side work through the agent
// (clusterWork: namespaces listed and created, revisions deployed and
// failed) → deregister → the agent's next call is refused and it stops
// (ErrRefused: cmd/spaces-agent exits 0).
//
// The lease is shortened to 5 s (Config.LeaseInterval: the one cadence
// the API tells the agent and the prober judges by; deployed, 35 s), so
// the lapse takes 3 × 5 s + 5 s grace after the last renewal plus a 2 s
// tick, not two and a half minutes; the agent logs the cadence it was told.
func TestAgentThroughPrivateCluster(t *testing.T) {
	const lease = 5 * time.Second
	kc := kubetest.Start(t, kubetest.Options{})
	admin := kubernetes.NewForConfigOrDie(kc.RESTConfig())

	prefix := fmt.Sprintf("a%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names:   func(id string) string { return prefix + id },
		Log:     slog.New(slog.DiscardHandler),
		Probing: ProbingConfig{Interval: 2 * time.Second}, LeaseInterval: lease,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c := newClient(t, st, "acme")

	// Register in agent mode.
	reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes",
		"cloud_account_id": c.account("aws"), "config": configFor("aws", "private-1"), "connectivity": "agent"}))
	id := reg["id"].(string)
	boot := reg["agent_bootstrap"].(map[string]any)["token"].(string)
	// The install: the rendered manifests, then the answer's bootstrap
	// manifest on standard input (kubectl is not run here: the same objects
	// are applied below with client-go, in that order). The token is in
	// the manifest, never in the command.
	install := reg["agent_bootstrap"].(map[string]any)["install"].(string)
	bootManifest := reg["agent_bootstrap"].(map[string]any)["manifest"].(string)
	if install != "kubectl apply -f spaces-agent.yaml -f -" || strings.Contains(install, boot) {
		t.Errorf("the install command %q", install)
	}
	rendered, err := manifests.Render(manifests.Values{Image: "spaces-agent:test", AgentURL: st.AgentURL})
	if err != nil {
		t.Fatal(err)
	}
	applyManifests(t, kc.RESTConfig(), append(append(rendered, "\n---\n"...), bootManifest...))
	ns := manifests.Namespace
	bs, err := admin.CoreV1().Secrets(ns).Get(t.Context(), "spaces-agent-bootstrap", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bootFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bootFile, bs.Data["token"], 0o400); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), "spaces-agent",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agentConfig := kc.RESTConfigForToken(tr.Status.Token)
	kube := kubernetes.NewForConfigOrDie(agentConfig)
	// Its RBAC is in force: what it was not granted is refused.
	if _, err := kube.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the agent's ServiceAccount lists Secrets: %v", err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Get(t.Context(), "spaces-agent-bootstrap", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the agent's ServiceAccount reads the bootstrap Secret through the API: %v", err)
	}

	var logs syncBuffer
	renewals := &countingTransport{match: func(r *http.Request) bool {
		return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/lease")
	}}
	type run struct {
		cancel context.CancelFunc
		done   chan error
	}
	start := func(cfg agent.Config) run {
		ctx, cancel := context.WithCancel(t.Context())
		cfg.AgentURL, err = agent.CheckURL(st.AgentURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.BootstrapFile, cfg.Kube, cfg.Namespace, cfg.StateSecret = bootFile, kube, ns, "spaces-agent-state"
		cfg.KubeConfig = agentConfig
		cfg.Log = slog.New(slog.NewJSONHandler(&logs, nil))
		cfg.RetryDelay = time.Second
		cfg.MQTTRoots = st.MQTTRoots
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: renewals}
		r := run{cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- agent.Run(ctx, cfg) }()
		t.Cleanup(cancel)
		return r
	}

	space1 := func() (map[string]any, map[string]any) {
		m := c.must(200, c.do("GET", "/spaces/"+id, nil))
		return m, m["probe"].(map[string]any)
	}
	// within is what the lease allows; the wait is bounded by at least
	// testwait.Timeout, which only a hang reaches on a busy machine.
	waitFor := func(want space.Status, within time.Duration) {
		t.Helper()
		var m, probe map[string]any
		if err := testwait.UntilEvery(max(within, testwait.Timeout), 250*time.Millisecond, func() bool {
			m, probe = space1()
			return m["status"] == string(want)
		}); err != nil {
			t.Fatalf("still %v (%v) %s, want %s; agent log:\n%s", m["status"], probe, err, want, logs.String())
		}
	}

	// RenewBefore of a whole day: the credential is renewed (and stored)
	// on every cycle, so the restart below runs on a renewed one.
	a := start(agent.Config{RenewBefore: 24 * time.Hour})
	waitFor(space.Active, 30*time.Second)
	m, probe := space1()
	if v := probe["server_version"].(map[string]any)["gitVersion"]; v != kubetest.KubernetesVersion || m["connectivity"] != "agent" {
		t.Fatalf("active space %v: version %v, want the real server's %s", m, v, kubetest.KubernetesVersion)
	}
	state, err := admin.CoreV1().Secrets(ns).Get(t.Context(), "spaces-agent-state", metav1.GetOptions{})
	if err != nil || string(state.Data["space_id"]) != id || !strings.HasPrefix(string(state.Data["credential"]), "spa1."+id+".") ||
		len(state.Data["token_signature"]) == 0 {
		t.Fatalf("the state Secret holds keys %v (%v), want the credential and its token's signature", keysOf(state), err)
	}
	if !strings.Contains(logs.String(), "renewed the credential") {
		t.Fatalf("no credential renewal logged:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"interval":"5s"`) {
		t.Fatalf("the agent was not told the stack's 5 s cadence:\n%s", logs.String())
	}

	// The presence channel: connected to the local IoT Core, the agent
	// renews over HTTP only when it (re)connects or is woken, and IoT
	// Core's lifecycle events keep the lease: through 3 lease intervals
	// and the grace (which would make an HTTP-only lease expire) the
	// space stays active on at most one renewal.
	eventually(t, "the agent's presence connection", func() bool { return strings.Contains(logs.String(), `"msg":"presence connected"`) })
	time.Sleep(time.Second) // the renewal a connection asks for
	before := renewals.count()
	time.Sleep(3*lease + space.LeaseGrace + 2*time.Second)
	if n := renewals.count() - before; n > 1 {
		t.Errorf("%d HTTP lease renewals in %s while connected, want at most 1", n, 3*lease+space.LeaseGrace)
	}
	if m, probe := space1(); m["status"] != string(space.Active) {
		t.Fatalf("connected but %v (%v):\n%s", m["status"], probe, logs.String())
	}

	// Stop the agent: the lease lapses; the bound is 3 intervals + grace
	// after the last renewal, plus the scheduler's tick (here 2 s).
	a.cancel()
	if err := <-a.done; err != nil {
		t.Fatalf("stopped agent: %v", err)
	}
	stopped := time.Now()
	bound := 3*lease + space.LeaseGrace + 2*time.Second
	waitFor(space.Inactive, bound+15*time.Second)
	if _, probe := space1(); probe["reason"] != space.ReasonAgentLeaseExpired {
		t.Errorf("inactive with %v, want %s", probe["reason"], space.ReasonAgentLeaseExpired)
	}
	t.Logf("inactive %s after the agent stopped (bound %s after its last renewal)", time.Since(stopped).Round(time.Second), bound)

	// Restart: the bootstrap still mounted is spent; the agent carries on
	// with the credential in its state Secret.
	a = start(agent.Config{})
	waitFor(space.Active, 30*time.Second)
	if strings.Count(logs.String(), "exchanged the bootstrap token") != 1 {
		t.Errorf("the bootstrap was exchanged other than once:\n%s", logs.String())
	}

	var path []string
	for _, it := range c.must(200, c.do("GET", "/spaces/"+id+"/status-history", nil))["items"].([]any) {
		tr := it.(map[string]any)
		path = append([]string{fmt.Sprint(tr["from"], "→", tr["to"])}, path...)
	}
	if fmt.Sprint(path) != "[unknown→active active→inactive inactive→active]" {
		t.Errorf("history %v", path)
	}

	began := time.Now()
	clusterWork(t, c, admin, agentConfig, id, func() string { return logs.String() })
	t.Logf("the cluster-side work through the agent took %s (lease every %s)", time.Since(began).Round(100*time.Millisecond), lease)

	// Deregister: the agent's next call is refused and it stops.
	c.must(204, c.do("DELETE", "/spaces/"+id, nil))
	select {
	case err := <-a.done:
		if !errors.Is(err, agent.ErrRefused) {
			t.Fatalf("after deregistration the agent stopped with %v, want ErrRefused", err)
		}
	case <-time.After(max(lease+15*time.Second, testwait.Timeout)):
		t.Fatalf("the agent runs on after its space was deregistered:\n%s", logs.String())
	}

	// No secret reached the log.
	if l := logs.String(); strings.Contains(l, boot) || strings.Contains(l, "spa1.") || strings.Contains(l, "spb1.") {
		t.Errorf("a token reached the agent's log:\n%s", l)
	}
}

// clusterWork is the cluster-side work of an active agent space, through
// the local stack and the running agent, on the real API server that
// Spaces cannot reach: the namespaces list (the agent's report, with when
// it was observed) → a namespace created (202, then on the API server and
// in the list, enforcing Pod Security baseline) → reserved namespaces and
// a Pod Security downgrade refused (422, nothing recorded) → an
// environment bound in it (reserved namespaces 422) → a manifest of
// another namespace refused at push → a revision before the owner opted
// the namespace in fails with the cluster's 403 and how to opt in → opted
// in, a revision deployed, its object on the API server applied by the
// "spaces" field manager → a revision over a field the owner's field
// manager holds fails with the applier's own message, the field kept →
// one the agent's RBAC does not grant (a Secret) fails with the cluster's
// 403.
func clusterWork(t *testing.T, c *client, admin kubernetes.Interface, agentConfig *rest.Config, id string, logs func() string) {
	t.Helper()
	until := func(what string, ok func() bool) {
		t.Helper()
		if err := testwait.UntilEvery(testwait.Timeout, 250*time.Millisecond, ok); err != nil {
			t.Fatalf("no %s %s; agent log:\n%s", what, err, logs())
		}
	}
	names := func() (map[string]bool, map[string]any) {
		m := c.must(200, c.do("GET", "/space-discovery/"+id+"/namespaces", nil))
		out := map[string]bool{}
		for _, it := range m["items"].([]any) {
			out[it.(map[string]any)["name"].(string)] = true
		}
		return out, m
	}
	// The list, as the agent reports it (asked for by this GET if none yet).
	until("namespace list from the agent", func() bool {
		n, m := names()
		return m["observed_at"] != nil && n["default"] && n["kube-system"] && n[manifests.Namespace]
	})
	// A bad create is refused before anything is stored.
	c.must(422, c.do("POST", "/space-discovery/"+id+"/namespaces", map[string]any{"name": "Team_A"}))
	created := c.must(202, c.do("POST", "/space-discovery/"+id+"/namespaces", map[string]any{"name": "team-a", "labels": map[string]any{"team": "a"}}))
	if created["name"] != "team-a" {
		t.Fatalf("create answered %v", created)
	}
	// A second create is 409 while the first is pending or done; only if
	// the cluster refused the first (a failed create, shown as such) may
	// it be taken again.
	if r := c.do("POST", "/space-discovery/"+id+"/namespaces", map[string]any{"name": "team-a"}); r.status != http.StatusConflict {
		_, list := names()
		failed, _ := list["failed"].([]any)
		if r.status != http.StatusAccepted || len(failed) == 0 || failed[0].(map[string]any)["name"] != "team-a" {
			t.Fatalf("a second create of team-a: %d %s, want 409; the list %v; agent log:\n%s", r.status, r.body, list, logs())
		}
		t.Logf("the cluster refused the first create of team-a (%v); the second was taken", failed[0])
	}
	until("team-a in the list", func() bool { n, _ := names(); return n["team-a"] })
	ns, err := admin.CoreV1().Namespaces().Get(t.Context(), "team-a", metav1.GetOptions{})
	if err != nil || ns.Labels["team"] != "a" || ns.Labels[space.PodSecurityEnforce] != space.PodSecurityBaseline {
		t.Fatalf("team-a on the API server: %v %v", ns, err)
	}
	// What Spaces never asks of the agent is refused by Spaces first: 422,
	// nothing recorded.
	for _, body := range []map[string]any{{"name": "kube-spaces"}, {"name": "default"}, {"name": manifests.Namespace},
		{"name": "team-p", "labels": map[string]any{space.PodSecurityEnforce: "privileged"}}} {
		c.must(422, c.do("POST", "/space-discovery/"+id+"/namespaces", body))
	}
	if _, m := names(); m["pending"] != nil {
		t.Fatalf("a refused create was recorded: %v", m)
	}
	for _, ns := range []string{"kube-system", "default", manifests.Namespace} {
		c.must(422, c.do("POST", "/environments", map[string]any{"name": "web", "space_id": id, "namespace": ns}))
	}
	if _, m := names(); m["pending"] != nil {
		t.Fatalf("a create still pending after it was carried out: %v", m)
	}

	env := c.must(201, c.do("POST", "/environments", map[string]any{"name": "web", "space_id": id, "namespace": "team-a"}))
	push := func(manifests ...map[string]any) string {
		t.Helper()
		return c.must(202, c.do("POST", "/environments/"+env["id"].(string)+"/revisions", map[string]any{"manifests": manifests}))["id"].(string)
	}
	settled := func(id string) map[string]any {
		t.Helper()
		var m map[string]any
		until("revision "+id+" settled", func() bool {
			m = c.must(200, c.do("GET", "/revisions/"+id, nil))
			return m["state"] != "pending"
		})
		return m
	}
	cm := func(name, namespace string) map[string]any {
		meta := map[string]any{"name": name}
		if namespace != "" {
			meta["namespace"] = namespace
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": map[string]any{"greeting": "hello"}}
	}
	// A manifest of another namespace is refused at push.
	c.must(422, c.do("POST", "/environments/"+env["id"].(string)+"/revisions", map[string]any{"manifests": []map[string]any{cm("stray", "elsewhere")}}))
	// team-a was created by the agent but not opted in: the agent may not
	// write there (the cluster's 403, saying how to opt it in).
	if r := settled(push(cm("early", ""))); r["state"] != "failed" || !strings.Contains(fmt.Sprint(r["reason"]), "opted in") {
		t.Fatalf("revision before the opt-in %v, want failed, saying how to opt in", r)
	}
	// The cluster's owner opts team-a in, and owns a ConfigMap there.
	optIn, err := manifests.OptIn("", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Objects(optIn)
	if err != nil || len(objs) != 1 {
		t.Fatalf("opt-in %v %v", objs, err)
	}
	var rb rbacv1.RoleBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &rb); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("team-a").Create(t.Context(), &rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	theirs, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "theirs"},
		"data": map[string]any{"greeting": "from the owner"}})
	if _, err := admin.CoreV1().ConfigMaps("team-a").Patch(t.Context(), "theirs", types.ApplyPatchType, theirs,
		metav1.PatchOptions{FieldManager: "owner"}); err != nil {
		t.Fatal(err)
	}
	// Three revisions at once (each is handed to the agent on its own
	// claim and carried by the same renewals): one that deploys, one the
	// applier refuses (a field the owner's field manager holds: never
	// forced), one of a kind the agent's RBAC does not grant.
	bad := cm("theirs", "")
	secret := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}}
	ok, refused, forbidden := push(cm("web-config", "")), push(bad), push(secret)
	if r := settled(ok); r["state"] != "deployed" || r["reason"] != nil {
		t.Fatalf("revision %v", r)
	}
	got, err := admin.CoreV1().ConfigMaps("team-a").Get(t.Context(), "web-config", metav1.GetOptions{})
	if err != nil || got.Data["greeting"] != "hello" || len(got.ManagedFields) == 0 || got.ManagedFields[0].Manager != kubeapply.FieldManager ||
		got.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("the deployed object: %+v %v", got, err)
	}
	// The applier's refusal, word for word: the agent applies with the
	// claimer's own code (shared/kubeapply), here as its ServiceAccount;
	// the owner's field keeps its value.
	want := (&kubeapply.Applier{}).ApplyConfig(t.Context(), agentConfig, "team-a", []map[string]any{bad})
	if r := settled(refused); want == nil || r["state"] != "failed" || r["reason"] != space.FailureReason(want.Error()) ||
		!strings.Contains(want.Error(), "Spaces never overwrites") {
		t.Fatalf("revision %v, want failed with %v", r, want)
	}
	if got, err := admin.CoreV1().ConfigMaps("team-a").Get(t.Context(), "theirs", metav1.GetOptions{}); err != nil || got.Data["greeting"] != "from the owner" {
		t.Fatalf("the owner's ConfigMap: %v %v", got, err)
	}
	// A kind its RBAC does not grant: the cluster's 403, as the reason.
	if r := settled(forbidden); r["state"] != "failed" || !strings.Contains(fmt.Sprint(r["reason"]), "forbidden") {
		t.Fatalf("revision %v, want failed as forbidden", r)
	}
}

// keysOf names a Secret's data keys (never its values).
func keysOf(s *corev1.Secret) []string {
	var out []string
	if s != nil {
		for k := range s.Data {
			out = append(out, k)
		}
	}
	return out
}

// applyManifests creates every rendered object on the API server as an
// admin would with kubectl apply.
func applyManifests(t *testing.T, rc *rest.Config, rendered []byte) {
	t.Helper()
	objs, err := manifests.Objects(rendered)
	if err != nil {
		t.Fatal(err)
	}
	dc := kubernetes.NewForConfigOrDie(rc).Discovery()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn := dynamic.NewForConfigOrDie(rc)
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if o.GetNamespace() != "" {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Create(t.Context(), o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("create %s %s: %v", gvk.Kind, o.GetName(), err)
		}
	}
}

// TestAgentInstallOrderAndReinstall covers the install's other paths on
// the same real parts: the agent started before its bootstrap Secret
// exists waits for it (the install command applies the Deployment and the
// Secret together, in that order); a re-issued bootstrap mounted in place
// of the spent one is exchanged by the running agent (a reinstall), which
// stores the new credential; a spent bootstrap with no stored credential
// is the end, with an error that says what to do (exit 1, not 0).
func TestAgentInstallOrderAndReinstall(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{})
	admin := kubernetes.NewForConfigOrDie(kc.RESTConfig())
	prefix := fmt.Sprintf("a%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names:   func(id string) string { return prefix + id },
		Log:     slog.New(slog.DiscardHandler),
		Probing: ProbingConfig{Interval: 2 * time.Second}, LeaseInterval: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c := newClient(t, st, "acme")
	reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes",
		"cloud_account_id": c.account("aws"), "config": configFor("aws", "private-2"), "connectivity": "agent"}))
	id := reg["id"].(string)
	boot1 := reg["agent_bootstrap"].(map[string]any)["token"].(string)

	// The manifests as make agent-image renders them: no bootstrap Secret.
	rendered, err := manifests.Render(manifests.Values{Image: "spaces-agent:test", AgentURL: st.AgentURL})
	if err != nil {
		t.Fatal(err)
	}
	applyManifests(t, kc.RESTConfig(), rendered)
	ns := manifests.Namespace
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), "spaces-agent",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(kc.RESTConfigForToken(tr.Status.Token))
	bootFile := filepath.Join(t.TempDir(), "token")
	var logs syncBuffer
	start := func() (context.CancelFunc, chan error) {
		u, err := agent.CheckURL(st.AgentURL)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() {
			done <- agent.Run(ctx, agent.Config{AgentURL: u, BootstrapFile: bootFile, Kube: kube, Namespace: ns,
				StateSecret: "spaces-agent-state", RetryDelay: time.Second, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
		}()
		return cancel, done
	}
	until := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		if err := testwait.UntilEvery(max(within, testwait.Timeout), 250*time.Millisecond, ok); err != nil {
			t.Fatalf("no %s %s; agent log:\n%s", what, err, logs.String())
		}
	}
	status := func() any { return c.must(200, c.do("GET", "/spaces/"+id, nil))["status"] }
	stored := func() string {
		s, err := admin.CoreV1().Secrets(ns).Get(t.Context(), "spaces-agent-state", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(s.Data["bootstrap_sha256"])
	}
	sha := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

	// Started before its bootstrap: it waits.
	stop, done := start()
	until("wait for the bootstrap", 10*time.Second, func() bool { return strings.Contains(logs.String(), "waiting for the bootstrap token") })
	if s := status(); s != "unknown" {
		t.Fatalf("a space whose agent has no credential is %v", s)
	}
	// The Secret arrives (kubectl), the kubelet mounts it (the file).
	if _, err := admin.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "spaces-agent-bootstrap"},
		StringData: map[string]string{"token": boot1}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bootFile, []byte(boot1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	until("active", 30*time.Second, func() bool { return status() == "active" })
	if stored() != sha(boot1) {
		t.Fatal("the state Secret does not record the exchanged bootstrap")
	}

	// A reinstall: a new bootstrap takes the spent one's place; the running
	// agent exchanges it on its next cycle.
	boot2 := c.must(201, c.do("POST", "/spaces/"+id+"/agent-bootstrap", nil))["token"].(string)
	if err := os.WriteFile(bootFile, []byte(boot2), 0o600); err != nil {
		t.Fatal(err)
	}
	until("exchange of the new bootstrap", 5*time.Second+15*time.Second, func() bool { return stored() == sha(boot2) })
	if n := strings.Count(logs.String(), "exchanged the bootstrap token"); n != 2 {
		t.Errorf("%d exchanges logged, want 2", n)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("stopped agent: %v", err)
	}

	// A spent bootstrap and no stored credential: nothing to run on.
	s, err := admin.CoreV1().Secrets(ns).Get(t.Context(), "spaces-agent-state", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = nil
	if _, err := admin.CoreV1().Secrets(ns).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, done = start()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, agent.ErrRefused) || !strings.Contains(err.Error(), "bootstrap token was refused") {
			t.Fatalf("a spent bootstrap without a credential: %v", err)
		}
	case <-time.After(testwait.Timeout):
		t.Fatal("the agent runs on a spent bootstrap")
	}
	if l := logs.String(); strings.Contains(l, "spa1.") || strings.Contains(l, "spb1.") {
		t.Errorf("a token reached the agent's log:\n%s", l)
	}
}
