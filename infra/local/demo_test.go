package local

import (
	"net/url"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/demo"
	"spaces/infra/testwait"
	"spaces/shared/space"
)

// startDemoStack starts a local stack with the demo on and a short probe
// interval.
func startDemoStack(t *testing.T) *Stack {
	t.Helper()
	st := startWith(t, Config{
		Demo:    &demo.Options{},
		Probing: ProbingConfig{Interval: 2 * time.Second},
	})
	return st
}

// The tour (docs/tour.md), over real HTTP against the demo: connect an account per
// cloud with the demo identity, pick a cluster, register it, watch it turn
// active with the cluster's version, list and create namespaces, and see the
// transition in the status history.
func TestDemoTour(t *testing.T) {
	st := startDemoStack(t)
	c := newClient(t, st, "org-"+uuid.NewString()[:8])

	type registered struct {
		id   string
		spec demo.Spec
	}
	var spaces []registered
	for _, p := range []space.Provider{space.AWS, space.GCP, space.Azure} {
		acct := c.connect(st.Demo.Cloud, p, demo.Connection(p))
		picker := "/cloud-accounts/" + acct + "/clusters"
		if p == space.AWS {
			picker += "?region=" + demo.AWSRegion
		}
		items := c.must(200, c.do("GET", picker, nil))["items"].([]any)
		var got, want []string
		for _, it := range items {
			got = append(got, it.(map[string]any)["name"].(string))
		}
		for _, s := range demo.Specs {
			if s.Provider == p {
				want = append(want, s.Name)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s picker: %v, want %v", p, got, want)
		}

		// Register the first cluster with the config the picker offers.
		first := items[0].(map[string]any)
		spec := specNamed(t, first["name"].(string))
		body := map[string]any{"provider": p, "space_type": "kubernetes", "cloud_account_id": acct, "config": first["config"]}
		s := c.must(201, c.do("POST", "/spaces", body, "Idempotency-Key: tour-"+string(p)))
		if s["status"] != "unknown" {
			t.Errorf("%s: registered as %v, want unknown", spec.Name, s["status"])
		}
		id := s["id"].(string)
		spaces = append(spaces, registered{id, spec})

		// The picker now names the space holding the cluster.
		for _, it := range c.must(200, c.do("GET", picker, nil))["items"].([]any) {
			m := it.(map[string]any)
			if held := m["registered_space_id"]; (m["name"] == spec.Name) != (held == id) {
				t.Errorf("%s picker after registering: %v", p, m)
			}
		}

		// A cluster the cloud does not have is refused, and no space is
		// stored (the table itself changes meanwhile: probes write).
		cfg := spec.Config()
		cfg["clusterName"] = "no-such-cluster"
		r := c.do("POST", "/spaces", map[string]any{"provider": p, "space_type": "kubernetes", "cloud_account_id": acct, "config": cfg})
		if r.status != 422 || r.json(t)["reason"] != space.ReasonClusterNotFound {
			t.Errorf("%s: unknown cluster: %d %s", p, r.status, r.body)
		}
		if n := len(c.must(200, c.do("GET", "/spaces?cloud_account_id="+acct, nil))["items"].([]any)); n != 1 {
			t.Errorf("%s: %d spaces on the account after a refused registration, want 1", p, n)
		}
	}

	for _, r := range spaces {
		s := waitActive(t, c, r.id)
		v, _ := s["probe"].(map[string]any)["server_version"].(map[string]any)
		if v["gitVersion"] != r.spec.GitVersion || v["platform"] != r.spec.Platform {
			t.Errorf("%s: server_version %v, want %s %s", r.spec.Name, v, r.spec.GitVersion, r.spec.Platform)
		}

		hist := c.must(200, c.do("GET", "/spaces/"+r.id+"/status-history", nil))["items"].([]any)
		found := false
		for _, h := range hist {
			m := h.(map[string]any)
			found = found || (m["from"] == "unknown" && m["to"] == "active")
		}
		if !found {
			t.Errorf("%s: status history %v has no unknown→active", r.spec.Name, hist)
		}

		// Namespaces: the system ones, then one created through the API,
		// which the cluster itself now holds.
		nsPath := "/space-discovery/" + r.id + "/namespaces"
		if names := itemNames(c.must(200, c.do("GET", nsPath, nil))); !slices.Contains(names, "default") {
			t.Errorf("%s: namespaces %v", r.spec.Name, names)
		}
		ns := "tour-" + string(r.spec.Provider)
		created := c.must(201, c.do("POST", nsPath, map[string]any{"name": ns, "labels": map[string]string{"team": "tour"}}))
		if created["name"] != ns {
			t.Errorf("%s: created %v", r.spec.Name, created)
		}
		dc, err := st.Demo.Cluster(r.spec.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(dc.Namespaces(), ns) {
			t.Errorf("%s: cluster holds %v, want %s among them", r.spec.Name, dc.Namespaces(), ns)
		}
		if names := itemNames(c.must(200, c.do("GET", nsPath, nil))); !slices.Contains(names, ns) {
			t.Errorf("%s: listed %v after creating %s", r.spec.Name, names, ns)
		}
		// Creating it again is a conflict the cluster reports, and adds nothing.
		if r := c.do("POST", nsPath, map[string]any{"name": ns}); r.status != 409 {
			t.Errorf("%s: creating %s twice: %d %s", dc.Name, ns, r.status, r.body)
		}
		if n := len(dc.Namespaces()); n != 5 {
			t.Errorf("%s: %d namespaces after a refused create, want 5", dc.Name, n)
		}
	}
}

// The flapping cluster, once down, turns its space inactive after three
// failed probes, and active again when it is back.
func TestDemoFlappingCluster(t *testing.T) {
	st := startWith(t, Config{
		// Long enough for the space to be seen active, and down long
		// enough for three failed probes one second apart.
		Demo:    &demo.Options{FlapUp: 6 * time.Second, FlapDown: 12 * time.Second},
		Probing: ProbingConfig{Interval: time.Second},
	})
	c := newClient(t, st, "org-"+uuid.NewString()[:8])
	var flapping demo.Spec
	for _, s := range demo.Specs {
		if s.Flaps {
			flapping = s
		}
	}
	acct := c.connect(st.Demo.Cloud, flapping.Provider, demo.Connection(flapping.Provider))
	id := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": flapping.Provider, "space_type": "kubernetes",
		"cloud_account_id": acct, "config": flapping.Config()}))["id"].(string)
	waitActive(t, c, id)
	s := waitStatus(t, c, id, "inactive", time.Minute)
	if reason := s["probe"].(map[string]any)["reason"]; reason != space.ReasonUnreachable {
		t.Errorf("down: reason %v, want %s", reason, space.ReasonUnreachable)
	}
	waitActive(t, c, id)
}

func specNamed(t *testing.T, name string) demo.Spec {
	t.Helper()
	for _, s := range demo.Specs {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no demo cluster %q", name)
	return demo.Spec{}
}

func itemNames(list map[string]any) []string {
	var out []string
	for _, it := range list["items"].([]any) {
		out = append(out, it.(map[string]any)["name"].(string))
	}
	return out
}

func waitActive(t *testing.T, c *client, id string) map[string]any {
	t.Helper()
	return waitStatus(t, c, id, "active", time.Minute)
}

// waitStatus polls the space until it reads status, failing after limit
// (a bound against hanging, not a timing goal).
func waitStatus(t *testing.T, c *client, id, status string, limit time.Duration) map[string]any {
	t.Helper()
	var s map[string]any
	if err := testwait.UntilEvery(limit, 200*time.Millisecond, func() bool {
		s = c.must(200, c.do("GET", "/spaces/"+url.PathEscape(id), nil))
		return s["status"] == status
	}); err != nil {
		t.Fatalf("space %s is %v (%v) %s, want %s", id, s["status"], s["probe"], err, status)
	}
	return s
}
