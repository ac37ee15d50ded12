package local

import (
	"testing"

	"github.com/google/uuid"

	"spaces/infra/demo"
	"spaces/shared/space"
)

// TestRegistrationRecordsCloudLocation: over HTTP against the demo clouds,
// every provider's registration keeps where the cloud said the cluster
// runs and its Kubernetes version in the cloud's words (an Azure space its
// location, not its resource group), on the answer, the space, the
// listing and a replay; a synthetic space has neither.
func TestRegistrationRecordsCloudLocation(t *testing.T) {
	st := startDemoStack(t)
	c := newClient(t, st, "org-"+uuid.NewString()[:8])
	want := map[string]struct{ location, version string }{
		"demo-eks-1": {demo.AWSRegion, "1.31"},
		"demo-eks-2": {demo.AWSRegion, "1.30"},
		"demo-gke-1": {"europe-west1", "1.31.5-gke.1023000"},
		"demo-gke-2": {"us-central1", "1.30.9-gke.1009000"},
		"demo-aks-1": {"westeurope", "1.31.3"},
		"demo-aks-2": {"northeurope", "1.30.7"},
	}
	accounts := map[space.Provider]string{}
	for _, p := range []space.Provider{space.AWS, space.GCP, space.Azure} {
		accounts[p] = c.connect(st.Demo.Cloud, p, demo.Connection(p))
	}
	ids := map[string]string{}
	for _, s := range demo.Specs {
		w, ok := want[s.Name]
		if !ok {
			continue
		}
		body := map[string]any{"provider": s.Provider, "space_type": "kubernetes", "cloud_account_id": accounts[s.Provider], "config": s.Config()}
		for _, answer := range []map[string]any{
			c.must(201, c.do("POST", "/spaces", body, "Idempotency-Key: loc-"+s.Name)),
			c.must(201, c.do("POST", "/spaces", body, "Idempotency-Key: loc-"+s.Name)), // the replay
		} {
			if answer["location"] != w.location || answer["kubernetes_version"] != w.version {
				t.Errorf("%s registered with location %v, version %v; want %s, %s", s.Name, answer["location"], answer["kubernetes_version"], w.location, w.version)
			}
			ids[s.Name] = answer["id"].(string)
		}
		got := c.must(200, c.do("GET", "/spaces/"+ids[s.Name], nil))
		if got["location"] != w.location || got["kubernetes_version"] != w.version {
			t.Errorf("%s read back with location %v, version %v", s.Name, got["location"], got["kubernetes_version"])
		}
	}
	if len(ids) != len(want) {
		t.Fatalf("registered %v, want every cluster of %v", ids, want)
	}
	// Listed in id order, and through an index (sort=name).
	for _, q := range []string{"/spaces?limit=100", "/spaces?limit=100&sort=name"} {
		for _, it := range c.must(200, c.do("GET", q, nil))["items"].([]any) {
			m := it.(map[string]any)
			if w := want[m["name"].(string)]; m["location"] != w.location || m["kubernetes_version"] != w.version {
				t.Errorf("%s lists %s with location %v, version %v", q, m["name"], m["location"], m["kubernetes_version"])
			}
		}
	}

	// A synthetic space is not looked up: it has neither.
	syn := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": space.Azure, "space_type": "kubernetes", "synthetic": true,
		"cloud_account_id": accounts[space.Azure], "config": map[string]string{"clusterName": "placeholder", "resourceGroup": "rg-x", "subscriptionId": demo.AzureSubscription}}))
	for _, k := range []string{"location", "kubernetes_version"} {
		if v, ok := syn[k]; ok {
			t.Errorf("synthetic space has %s %v", k, v)
		}
	}
}
