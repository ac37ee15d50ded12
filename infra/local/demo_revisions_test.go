package local

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/demo"
	"spaces/shared/space"
)

// TestDemoClustersTakeRevisions: in the demo `make run` starts, the
// demo-*-apps cluster of each cloud and a cluster the demo's cloud creates
// for each (through the stack's minter, as a provisioning job does) are
// served by the real kube-apiserver: registered over HTTP they turn active,
// and a revision pushed to an environment on them is deployed (the
// ConfigMap is on the API server).
func TestDemoClustersTakeRevisions(t *testing.T) {
	prefix := fmt.Sprintf("v%s-", uuid.NewString()[:8])
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log:     slog.New(slog.DiscardHandler),
		Names:   func(id string) string { return prefix + id },
		Demo:    &demo.Options{CreateDelay: 2 * time.Second},
		Probing: ProbingConfig{Interval: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if st.Demo.Real == nil {
		t.Fatalf("the demo has no real API server: %s", st.Demo.RealMissing)
	}
	admin := kubernetes.NewForConfigOrDie(st.Demo.Real.RESTConfig())
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)

	// deploy registers the cluster, makes a namespace and an environment
	// there, pushes a ConfigMap and waits for it to be deployed.
	deploy := func(p space.Provider, acct string, cfg space.Config) {
		t.Helper()
		name := cfg["clusterName"]
		id := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": p, "space_type": "kubernetes",
			"cloud_account_id": acct, "config": cfg}))["id"].(string)
		waitActive(t, c, id)
		c.must(201, c.do("POST", "/space-discovery/"+id+"/namespaces", map[string]any{"name": name}))
		envID := c.must(201, c.do("POST", "/environments", map[string]any{"name": name, "space_id": id, "namespace": name}))["id"].(string)
		rev := c.must(202, c.do("POST", "/environments/"+envID+"/revisions", map[string]any{"manifests": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app"}, "data": map[string]any{"cluster": name}}}}))
		var m map[string]any
		eventually(t, name+" revision deployed", func() bool {
			m = c.must(200, c.do("GET", "/revisions/"+rev["id"].(string), nil))
			return m["state"] == "deployed" || m["state"] == "failed"
		})
		if m["state"] != "deployed" {
			t.Fatalf("%s: revision %v", name, m)
		}
		cm, err := admin.CoreV1().ConfigMaps(name).Get(t.Context(), "app", metav1.GetOptions{})
		if err != nil || cm.Data["cluster"] != name {
			t.Fatalf("%s: the API server has %v %v", name, cm, err)
		}
	}

	for _, p := range space.Providers {
		t.Run(string(p), func(t *testing.T) {
			acct := c.connect(st.Demo.Cloud, p, demo.Connection(p))
			for _, s := range demo.Specs {
				if s.Provider == p && s.Real {
					deploy(p, acct, s.Config())
				}
			}

			a, err := st.Service.GetAccount(t.Context(), org, acct)
			if err != nil {
				t.Fatal(err)
			}
			cfg, spec, token := demo.NewClusterConfig(p, "made-"+string(p)), demo.ClusterSpec(p), uuid.NewString()
			prog, err := st.Minter.StartCreate(t.Context(), a, cfg, spec, token)
			deadline := time.Now().Add(time.Minute)
			for err == nil && !prog.Done && time.Now().Before(deadline) {
				time.Sleep(300 * time.Millisecond)
				prog, err = st.Minter.Advance(t.Context(), a, cfg, spec, token, prog.Operation)
			}
			if err != nil || !prog.Done {
				t.Fatalf("creation: %+v %v", prog, err)
			}
			deploy(p, acct, cfg)
		})
	}
}
