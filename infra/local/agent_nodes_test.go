package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	agent "spaces/agent/client"
	"spaces/agent/manifests"
	"spaces/infra/kubetest"
	"spaces/infra/testwait"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
)

// leaseBodies records the agent's lease renewals that reached Spaces with
// a 200, and which of them carried nodes.
type leaseBodies struct {
	mu             sync.Mutex
	leases, nodes  int
	lastNodesSent  string
	transportInner http.RoundTripper
}

func (l *leaseBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	isLease := r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/lease")
	var body []byte
	if isLease && r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := l.transportInner.RoundTrip(r)
	if isLease && err == nil && res.StatusCode == http.StatusOK {
		l.mu.Lock()
		l.leases++
		if i := bytes.Index(body, []byte(`"nodes":`)); i >= 0 {
			l.nodes++
			l.lastNodesSent = string(body[i:])
		}
		l.mu.Unlock()
	}
	return res, err
}

func (l *leaseBodies) counts() (leases, nodes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leases, l.nodes
}

// TestAgentReportsNodes: an agent space's node count and kubelet versions,
// from the agent's watch of a real kube-apiserver's Node objects (no
// kubelet: the nodes are created by an admin, their status.nodeInfo set
// through the status subresource), reach the space's facts through the
// lease; a lease sends them only when they changed and the space is
// written only then: several leases without a change leave the space's
// version as it is, a node added writes it once, and the stored nodes sent
// again (an agent restarted) renew the lease without a write. A lease whose nodes are
// bad is refused with 422 naming the field, and neither the lease nor the
// space changes.
func TestAgentReportsNodes(t *testing.T) {
	const lease = 5 * time.Second
	kc := kubetest.Start(t, kubetest.Options{})
	admin := kubernetes.NewForConfigOrDie(kc.RESTConfig())
	addNode := func(name, version string) {
		t.Helper()
		n, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.NodeInfo.KubeletVersion = version
		if _, err := admin.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addNode("node-a", "v1.31.2")
	addNode("node-b", "v1.31.2")
	addNode("node-c", "v1.30.4")

	prefix := fmt.Sprintf("n%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
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
	reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes",
		"cloud_account_id": c.account("aws"), "config": configFor("aws", "private-nodes"), "connectivity": "agent"}))
	id := reg["id"].(string)
	rendered, err := manifests.Render(manifests.Values{Image: "spaces-agent:test", AgentURL: st.AgentURL})
	if err != nil {
		t.Fatal(err)
	}
	applyManifests(t, kc.RESTConfig(), append(append(rendered, "\n---\n"...), reg["agent_bootstrap"].(map[string]any)["manifest"].(string)...))
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

	// No presence channel (no MQTTRoots: its TLS is refused), so the agent
	// renews over HTTP every interval: the leases this test counts.
	var logs syncBuffer
	bodies := &leaseBodies{transportInner: http.DefaultTransport}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	cfg := agent.Config{BootstrapFile: bootFile, Kube: kubernetes.NewForConfigOrDie(agentConfig), KubeConfig: agentConfig,
		Namespace: ns, StateSecret: "spaces-agent-state", RetryDelay: time.Second,
		Log: slog.New(slog.NewJSONHandler(&logs, nil)), HTTP: &http.Client{Timeout: 30 * time.Second, Transport: bodies}}
	if cfg.AgentURL, err = agent.CheckURL(st.AgentURL); err != nil {
		t.Fatal(err)
	}
	go func() { done <- agent.Run(ctx, cfg) }()
	t.Cleanup(cancel)

	get := func() map[string]any { return c.must(200, c.do("GET", "/spaces/"+id, nil)) }
	nodesOf := func(m map[string]any) any { return m["facts"].(map[string]any)["nodes"] }
	waitNodes := func(want map[string]any) map[string]any {
		t.Helper()
		var m map[string]any
		if err := testwait.UntilEvery(testwait.Timeout, 250*time.Millisecond, func() bool {
			m = get()
			return reflect.DeepEqual(nodesOf(m), want)
		}); err != nil {
			t.Fatalf("facts.nodes %v, want %v %s; agent log:\n%s", nodesOf(m), want, err, logs.String())
		}
		return m
	}
	// afterLeases waits for n more renewals that reached Spaces.
	afterLeases := func(n int) {
		t.Helper()
		from, _ := bodies.counts()
		if err := testwait.UntilEvery(max(testwait.Timeout, time.Duration(n+2)*lease), 250*time.Millisecond, func() bool {
			l, _ := bodies.counts()
			return l >= from+n
		}); err != nil {
			t.Fatalf("fewer than %d renewals %s; agent log:\n%s", n, err, logs.String())
		}
	}

	m := waitNodes(map[string]any{"count": 3.0, "versions": map[string]any{"v1.31.2": 2.0, "v1.30.4": 1.0}})
	if m["status"] != "active" {
		// The first lease's check makes it active; wait for that write to
		// be behind us before counting.
		eventually(t, "the space active", func() bool { return get()["status"] == "active" })
	}
	if p := get()["probe"].(map[string]any)["nodes"]; !reflect.DeepEqual(p, nodesOf(m)) {
		t.Errorf("probe.nodes %v, facts.nodes %v: the same stored fact", p, nodesOf(m))
	}
	v0 := get()["version"].(float64)
	leases0, sent0 := bodies.counts()
	afterLeases(3)
	leases1, sent1 := bodies.counts()
	if m := get(); m["version"].(float64) != v0 || sent1 != sent0 {
		t.Fatalf("%d leases without a change: version %v → %v, nodes sent %d more times (want none of either)",
			leases1-leases0, v0, m["version"], sent1-sent0)
	}
	if sent1 != 1 {
		t.Errorf("nodes sent with %d of %d leases, want the first only", sent1, leases1)
	}

	// A node added: sent once, written once.
	addNode("node-d", "v1.31.2")
	m = waitNodes(map[string]any{"count": 4.0, "versions": map[string]any{"v1.31.2": 3.0, "v1.30.4": 1.0}})
	if m["version"].(float64) != v0+1 {
		t.Errorf("a node added moved the version %v → %v, want one write", v0, m["version"])
	}
	afterLeases(2)
	if _, sent := bodies.counts(); sent != 2 || get()["version"].(float64) != v0+1 {
		t.Errorf("after the change: nodes sent %d times in all (want 2), version %v (want %v)", sent, get()["version"], v0+1)
	}

	// A bad report, with the agent's own credential (the agent stopped,
	// so that nothing else renews): 422 naming the field, nothing stored.
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the agent stopped with %v", err)
	}
	state, err := admin.CoreV1().Secrets(ns).Get(t.Context(), "spaces-agent-state", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store := dynamostore.New(awsclient.DynamoDB(st.AWS, st.EmulatorURL), st.Table)
	before, err := store.GetLease(t.Context(), id)
	if err != nil || before.RenewedAt == nil {
		t.Fatalf("lease %+v, %v", before, err)
	}
	// The cluster the credential is bound to, as the agent names it.
	ks, err := admin.CoreV1().Namespaces().Get(t.Context(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := agentConfig.TLSClientConfig.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(agentConfig.TLSClientConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	block, _ := pem.Decode(ca)
	if block == nil {
		t.Fatal("no CA certificate in the agent's configuration")
	}
	caSum := sha256.Sum256(block.Bytes)
	cluster := `{"kube_system_uid":"` + string(ks.UID) + `","ca_sha256":"` + hex.EncodeToString(caSum[:]) + `"}`
	put := func(nodes string) (int, []byte) {
		t.Helper()
		body := `{"agent_version":"0.1.0","server_version":{"gitVersion":"` + kubetest.KubernetesVersion + `","platform":"linux/amd64"},"cluster":` + cluster + `,"nodes":` + nodes + `}`
		req, _ := http.NewRequest(http.MethodPut, strings.TrimSuffix(st.AgentURL, "/")+"/agent/spaces/"+id+"/lease", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+string(state.Data["credential"]))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") && res.StatusCode != http.StatusOK {
			t.Errorf("%d answered as %q", res.StatusCode, res.Header.Get("Content-Type"))
		}
		return res.StatusCode, b
	}
	// The stored nodes sent again (an agent restarted): renewed, the space
	// not written.
	spaceBefore := get()
	if code, b := put(`{"count": 4, "versions": {"v1.31.2": 3, "v1.30.4": 1}}`); code != http.StatusOK {
		t.Fatalf("the same nodes again: %d %s", code, b)
	}
	if m := get(); m["version"] != spaceBefore["version"] {
		t.Errorf("the same nodes again wrote the space: version %v → %v", spaceBefore["version"], m["version"])
	}
	before, err = store.GetLease(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ nodes, field string }{
		{`{"count": 1, "versions": {"v1.31.2": 2}}`, "nodes.versions"},
		{`{"count": -1}`, "nodes.count"},
		{`{"count": 2, "versions": {"v1.31.2\u0000": 2}}`, "nodes.versions"},
	} {
		if code, b := put(bad.nodes); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), `"`+bad.field+`"`) {
			t.Errorf("nodes %s: %d %s, want a 422 problem naming %s", bad.nodes, code, b, bad.field)
		}
	}
	after, err := store.GetLease(t.Context(), id)
	if err != nil || !after.RenewedAt.Equal(*before.RenewedAt) {
		t.Errorf("a refused lease renewed it: %v → %v (%v)", before.RenewedAt, after.RenewedAt, err)
	}
	if m := get(); m["version"] != spaceBefore["version"] || !reflect.DeepEqual(nodesOf(m), nodesOf(spaceBefore)) {
		t.Errorf("a refused lease changed the space: version %v → %v, nodes %v → %v",
			spaceBefore["version"], m["version"], nodesOf(spaceBefore), nodesOf(m))
	}
	if l := logs.String(); strings.Contains(l, "may not list nodes") || strings.Contains(l, "cannot list the cluster's nodes") {
		t.Errorf("the agent, granted list/watch on nodes, says it cannot list them:\n%s", l)
	}
}
