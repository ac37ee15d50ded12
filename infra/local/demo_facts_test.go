package local

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/demo"
	"spaces/shared/space"
)

// TestDemoShowsFacts: what `make run` shows of the fleet's facts, end to
// end (the prober against the demo's real TLS API servers, the facts
// carried by the probe index, the API's filters): demo-gke-1's serving
// certificate expires within 30 days and the others' do not; the EKS
// clusters' versions are past EKS's standard support (support_ends_within_days=0
// finds them, their state is extended or unsupported, never unknown), while
// a version the provider's file does not list reads unknown.
func TestDemoShowsFacts(t *testing.T) {
	st := startDemoStack(t)
	c := newClient(t, st, "org-"+uuid.NewString()[:8])
	accounts := map[space.Provider]string{}
	for _, p := range []space.Provider{space.AWS, space.GCP} {
		accounts[p] = c.connect(st.Demo.Cloud, p, demo.Connection(p))
	}
	ids := map[string]string{}
	for _, name := range []string{"demo-eks-1", "demo-eks-2", "demo-gke-1", "demo-gke-2"} {
		spec := specNamed(t, name)
		body := map[string]any{"provider": spec.Provider, "space_type": "kubernetes", "cloud_account_id": accounts[spec.Provider], "config": spec.Config()}
		ids[name] = c.must(201, c.do("POST", "/spaces", body))["id"].(string)
	}
	start := time.Now()
	for name, id := range ids {
		s := waitActive(t, c, id)
		facts := s["facts"].(map[string]any)
		cert, _ := facts["certificate"].(map[string]any)
		if cert == nil || cert["issuer"] != "CN=testcluster CA" {
			t.Fatalf("%s: facts %v, want the serving certificate", name, facts)
		}
		notAfter, err := time.Parse(time.RFC3339, cert["not_after"].(string))
		if err != nil {
			t.Fatal(err)
		}
		life := demo.DefaultCertificateLife
		if name == "demo-gke-1" {
			life = demo.ExpiringCertificateLife
		}
		// The demo made it before start, valid for life from then.
		if notAfter.After(start.Add(life)) || notAfter.Before(start.Add(life-time.Hour)) {
			t.Errorf("%s: certificate valid until %s, want about %s after the demo started", name, notAfter, life)
		}
		if facts["kubernetes_version"] != specNamed(t, name).GitVersion {
			t.Errorf("%s: version %v, want the cluster's %s", name, facts["kubernetes_version"], specNamed(t, name).GitVersion)
		}
		state := facts["support"].(map[string]any)["state"]
		switch specNamed(t, name).Provider {
		case space.AWS:
			if state != "extended" && state != "unsupported" {
				t.Errorf("%s: support %v, want past standard support", name, facts["support"])
			}
		case space.GCP: // gke.json lists no 1.30 or 1.31
			if state != "unknown" {
				t.Errorf("%s: support %v, want unknown", name, facts["support"])
			}
		}
	}
	names := func(path string) []string {
		var out []string
		for _, it := range c.must(200, c.do("GET", path, nil))["items"].([]any) {
			out = append(out, it.(map[string]any)["name"].(string))
		}
		sort.Strings(out)
		return out
	}
	for path, want := range map[string][]string{
		"/spaces?certificate_expires_within_days=30": {"demo-gke-1"},
		"/spaces?support_ends_within_days=0":         {"demo-eks-1", "demo-eks-2"},
		"/spaces?version=1.30":                       {"demo-eks-2", "demo-gke-2"},
	} {
		if got := names(path); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}
