package local

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/kubetest"
	"spaces/infra/minttest"
	"spaces/infra/simcloud"
	"spaces/infra/testwait"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/mint"
	"spaces/shared/space"
)

// TestRealClusterThroughEveryCloud is the credentials' end-to-end
// proof: one real kube-apiserver stands behind an EKS, a GKE and an AKS
// cluster of the simulated clouds and authenticates every minted token
// through the cloud's token-review webhook. Over real HTTP against the local
// stack, each cloud's space is registered, probed active with the real
// server's version, lists and creates namespaces (seen by an admin client),
// turns inactive when the API server stops and active when it starts again.
func TestRealClusterThroughEveryCloud(t *testing.T) {
	sc := simcloud.StartForTest(t, simcloud.Options{})
	kc := kubetest.Start(t, kubetest.Options{TokenWebhook: &kubetest.TokenWebhook{URL: sc.WebhookURL("kube"), CAPEM: sc.CAPEM}})
	for _, p := range space.Providers {
		cl := minttest.Cluster(p, "real-"+string(p), kc.URL, kc.CAPEM)
		cl.Backend = "kube"
		sc.AddCluster(cl)
	}

	// The minter reads grants and accounts from the stack's table, which
	// exists once the stack has started; nothing mints before that.
	minter := &mint.Minter{Providers: sc.Providers(), Trust: sc.Trust()}
	prefix := fmt.Sprintf("k%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names:   func(id string) string { return prefix + id },
		Log:     slog.New(slog.DiscardHandler),
		Minter:  minter,
		Probing: ProbingConfig{Interval: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	store := dynamostore.New(awsclient.DynamoDB(st.AWS, st.EmulatorURL), st.Table)
	minter.Grants, minter.Accounts = store, store

	c := newClient(t, st, "acme")
	admin := kubernetes.NewForConfigOrDie(kc.RESTConfig())
	connections := map[space.Provider]map[string]string{
		space.AWS:   {"roleArn": minttest.RoleARN},
		space.GCP:   {"projectId": minttest.GCPProject, "serviceAccountEmail": minttest.ServiceAcct},
		space.Azure: {"tenantId": minttest.TenantID, "clientId": minttest.ClientID, "subscriptionId": minttest.Subscription},
	}
	ids := map[space.Provider]string{}
	for _, p := range space.Providers {
		acct := c.connect(sc, p, connections[p])
		cfg := map[string]string(minttest.Config(p, "real-"+string(p)))
		ids[p] = c.must(201, c.do("POST", "/spaces", map[string]any{
			"provider": p, "space_type": "kubernetes", "cloud_account_id": acct, "config": cfg,
		}))["id"].(string)
	}

	// waitFor polls every space until it reports want (bounded).
	waitFor := func(want space.Status, reason string) {
		t.Helper()
		for p, id := range ids {
			var m, probe map[string]any
			if err := testwait.UntilEvery(90*time.Second, 200*time.Millisecond, func() bool {
				m = c.must(200, c.do("GET", "/spaces/"+id, nil))
				probe = m["probe"].(map[string]any)
				return m["status"] == string(want) && (reason == "" || probe["reason"] == reason)
			}); err != nil {
				t.Fatalf("%s: still %v (%v) %s, want %s %s", p, m["status"], probe, err, want, reason)
			}
			if want == space.Active {
				if v := probe["server_version"].(map[string]any)["gitVersion"]; v != kubetest.KubernetesVersion {
					t.Errorf("%s: version %v, want the real server's %s", p, v, kubetest.KubernetesVersion)
				}
			}
		}
	}
	waitFor(space.Active, "")

	for p, id := range ids {
		ns := "team-" + string(p)
		c.must(201, c.do("POST", "/space-discovery/"+id+"/namespaces", map[string]any{"name": ns, "labels": map[string]string{"cloud": string(p)}}))
		got, err := admin.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		if err != nil || got.Labels["cloud"] != string(p) {
			t.Errorf("%s: the API server does not have the namespace: %v %v", p, got.Labels, err)
		}
		names := map[string]bool{}
		for _, it := range c.must(200, c.do("GET", "/space-discovery/"+id+"/namespaces", nil))["items"].([]any) {
			names[it.(map[string]any)["name"].(string)] = true
		}
		if !names[ns] || !names["kube-system"] {
			t.Errorf("%s: listed %v", p, names)
		}
	}

	if err := kc.Stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(space.Inactive, space.ReasonUnreachable)
	if err := kc.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(space.Active, "")

	for p, id := range ids {
		var path []string
		for _, it := range c.must(200, c.do("GET", "/spaces/"+id+"/status-history", nil))["items"].([]any) {
			tr := it.(map[string]any)
			path = append([]string{fmt.Sprint(tr["from"], "→", tr["to"])}, path...)
		}
		if fmt.Sprint(path) != "[unknown→active active→inactive inactive→active]" {
			t.Errorf("%s: history %v", p, path)
		}
	}
}
