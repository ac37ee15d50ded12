package local

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"spaces/infra/demo"
	"spaces/infra/testwait"
)

// TestDemoAgentComesBack: the demo's agent (make run's agent-mode demo)
// comes back when make run restarts, from the credential it stored in
// its state Secret on the real API server (kept in KubeDir), as a
// cluster restarts its pod; it needs no new bootstrap. Here the second
// stack's table is new (no Persist), so the space is unknown there: the
// restarted agent's first lease is refused and it stops, which shows it
// ran on the stored credential.
func TestDemoAgentComesBack(t *testing.T) {
	kubeDir := filepath.Join(t.TempDir(), "kube")
	var logs syncBuffer
	start := func() *Stack {
		prefix := fmt.Sprintf("d%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
		st, err := Start(context.Background(), Config{
			APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
			Names:   func(id string) string { return prefix + id },
			Log:     slog.New(slog.DiscardHandler),
			Demo:    &demo.Options{KubeDir: kubeDir, Log: slog.New(slog.NewJSONHandler(&logs, nil))},
			Probing: ProbingConfig{Interval: 2 * time.Second}, LeaseInterval: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if st.Demo.Real == nil {
			st.Close()
			t.Fatalf("the demo has no real API server: %s", st.Demo.RealMissing)
		}
		return st
	}
	st := start()
	c := newClient(t, st, "acme")
	acct := c.must(201, c.do("POST", "/cloud-accounts", map[string]any{"provider": "aws", "name": "demo", "connection": demo.Connection("aws")}))
	if err := st.Demo.Cloud.ApplySetup(accountOf(t, acct)); err != nil {
		t.Fatal(err)
	}
	c.must(200, c.do("POST", "/cloud-accounts/"+acct["id"].(string)+"/verify", nil))
	reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes", "connectivity": "agent",
		"cloud_account_id": acct["id"], "config": map[string]any{"clusterName": "demo-eks-apps", "region": demo.AWSRegion}}))
	id := reg["id"].(string)
	if err := st.Demo.InstallAgent(t.Context(), reg["agent_bootstrap"].(map[string]any)["token"].(string)); err != nil {
		t.Fatal(err)
	}
	if err := testwait.UntilEvery(testwait.Timeout, 250*time.Millisecond, func() bool {
		return c.must(200, c.do("GET", "/spaces/"+id, nil))["status"] == "active"
	}); err != nil {
		t.Fatalf("the agent space is not active %s:\n%s", err, logs.String())
	}
	st.Close()
	if n := strings.Count(logs.String(), "exchanged the bootstrap token"); n != 1 {
		t.Fatalf("%d exchanges before the restart:\n%s", n, logs.String())
	}

	st = start()
	t.Cleanup(st.Close)
	if err := testwait.Until(testwait.Timeout, func() bool {
		return strings.Contains(logs.String(), "the agent stopped: its space is deregistered")
	}); err != nil {
		t.Fatalf("the agent did not come back on its stored credential (%s):\n%s", err, logs.String())
	}
	if l := logs.String(); strings.Count(l, "agent started") != 2 || strings.Count(l, "exchanged the bootstrap token") != 1 {
		t.Errorf("after the restart the agent did not start once more on its stored credential:\n%s", l)
	}
	if l := logs.String(); strings.Contains(l, "spb1.") || strings.Contains(l, "spa1.") {
		t.Errorf("a token reached the demo's log:\n%s", l)
	}
}
