package local

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/demo"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// TestDemoClustersTakeRevisions: in the demo `make run` starts, the
// demo-*-apps cluster of each cloud and a cluster the demo's cloud creates
// for each by a provisioning job over HTTP (one cluster in the cloud, one
// space) are served by the real kube-apiserver: they turn active, and a
// revision pushed to an environment on them is deployed (the ConfigMap is
// on the API server). A job the cloud refuses fails with the cloud's words
// and leaves nothing behind.
func TestDemoClustersTakeRevisions(t *testing.T) {
	st := startWith(t, Config{
		Demo:         &demo.Options{CreateDelay: 2 * time.Second},
		Probing:      ProbingConfig{Interval: 2 * time.Second},
		Provisioning: ProvisioningConfig{PollInterval: time.Second, Wait: time.Second},
	})
	if st.Demo.Real == nil {
		t.Fatalf("the demo has no real API server: %s", st.Demo.RealMissing)
	}
	admin := kubernetes.NewForConfigOrDie(st.Demo.Real.RESTConfig())
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)

	// deploy registers the cluster, makes a namespace and an environment
	// there, pushes a ConfigMap and waits for it to be deployed.
	register := func(p space.Provider, acct string, cfg space.Config) string {
		t.Helper()
		return c.must(201, c.do("POST", "/spaces", map[string]any{"provider": p, "space_type": "kubernetes",
			"cloud_account_id": acct, "config": cfg}))["id"].(string)
	}
	deploy := func(id, name string) {
		t.Helper()
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
					deploy(register(p, acct, s.Config()), s.Name)
				}
			}

			// A provisioning job over HTTP: the demo's cloud creates the
			// cluster through the real SDK calls, the job registers it.
			cfg := demo.NewClusterConfig(p, "made-"+string(p))
			before := st.Demo.Cloud.Created(p)
			job := c.must(201, c.do("POST", "/provisioning-jobs", map[string]any{"provider": p, "cloud_account_id": acct,
				"config": cfg, "spec": demo.ClusterSpec(p)}))
			done := waitJob(t, c, job["id"].(string), provisioning.Succeeded)
			if n := st.Demo.Cloud.Created(p) - before; n != 1 {
				t.Errorf("the cloud made %d clusters for one job", n)
			}
			id := done["space_id"].(string)
			if sp := c.must(200, c.do("GET", "/spaces/"+id, nil)); sp["config"].(map[string]any)["clusterName"] != cfg["clusterName"] {
				t.Errorf("the job registered %v", sp)
			}
			deploy(id, cfg["clusterName"])

			// The cloud refuses a version it does not offer: the job fails
			// with the cloud's words, nothing is made and nothing registered.
			spaces := spaceCount(t, c)
			bad := demo.ClusterSpec(p)
			bad.KubernetesVersion = "1.19"
			job = c.must(201, c.do("POST", "/provisioning-jobs", map[string]any{"provider": p, "cloud_account_id": acct,
				"config": demo.NewClusterConfig(p, "refused-"+string(p)), "spec": bad}))
			failed := waitJob(t, c, job["id"].(string), provisioning.Failed)
			f, _ := failed["failure"].(map[string]any)
			if f["reason"] != space.ReasonCloudRefused || !strings.Contains(fmt.Sprint(f["message"]), "1.19") || f["retryable"] != false {
				t.Errorf("refused job: %v", failed)
			}
			if n := st.Demo.Cloud.Created(p) - before; n != 1 {
				t.Errorf("the cloud made %d clusters, want only the first job's", n)
			}
			if n := spaceCount(t, c); n != spaces {
				t.Errorf("%d spaces after a refused job, want %d", n, spaces)
			}
		})
	}
}
