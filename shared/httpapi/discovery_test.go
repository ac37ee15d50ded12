package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/kubetest"
	"spaces/infra/minttest"
	"spaces/shared/auth"
	"spaces/shared/cursor"
	"spaces/shared/kubens"
	"spaces/shared/space"
)

// discoveryServer serves the discovery and picker routes the way Handler
// serves the others (the lead adds them to the routes table).
func discoveryServer(t *testing.T, env *minttest.Env) (*httptest.Server, *auth.Signer) {
	t.Helper()
	cfg := auth.LocalConfig{KeyPath: filepath.Join(t.TempDir(), "key.pem")}
	verifier, err := auth.NewLocalVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cursors, err := cursor.New(cursor.KeyFromSecret("test"))
	if err != nil {
		t.Fatal(err)
	}
	a := &API{Spaces: env.Service, Auth: verifier, Cursors: cursors, Discovery: &Discovery{
		Namespaces: &kubens.Service{Spaces: env.Service, Minter: env.Minter, Timeout: 3 * time.Second},
		Clusters:   env.Minter, Claims: env.Store,
	}}
	mux := http.NewServeMux()
	mux.Handle("GET /space-discovery/{spaceID}/namespaces", a.authenticated((*API).listNamespaces))
	mux.Handle("POST /space-discovery/{spaceID}/namespaces", a.authenticated((*API).createNamespace))
	mux.Handle("GET /cloud-accounts/{id}/clusters", a.authenticated((*API).listClusters))
	srv := httptest.NewServer(observe(slog.New(slog.NewTextHandler(io.Discard, nil)), problems(mux)))
	t.Cleanup(srv.Close)
	return srv, signer
}

type caller struct {
	t     *testing.T
	base  string
	token string
}

func (c caller) do(method, path, body string) (int, map[string]any) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

func names(doc map[string]any) []string {
	var out []string
	items, _ := doc["items"].([]any)
	for _, it := range items {
		out = append(out, it.(map[string]any)["name"].(string))
	}
	return out
}

// TestDiscoveryEndToEnd drives the discovery and picker handlers against
// the simulated clouds with a real kube-apiserver behind every cluster.
func TestDiscoveryEndToEnd(t *testing.T) {
	env := minttest.Start(t)
	kc := kubetest.Start(t, kubetest.Options{TokenWebhook: &kubetest.TokenWebhook{
		URL: env.Cloud.WebhookURL("kube"), CAPEM: env.Cloud.CAPEM}})
	admin := kubernetes.NewForConfigOrDie(kc.RESTConfig())
	srv, signer := discoveryServer(t, env)
	tok, err := signer.Mint(env.Org, "tester", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	api := caller{t: t, base: srv.URL, token: tok}

	for _, p := range space.Providers {
		t.Run(string(p), func(t *testing.T) {
			api.t = t
			cl := minttest.Cluster(p, "disc-"+string(p), kc.URL, kc.CAPEM)
			cl.Backend = "kube"
			env.Cloud.AddCluster(cl)
			s := env.Register(t, p, cl.Name, false)
			path := "/space-discovery/" + s.ID + "/namespaces"

			code, doc := api.do("GET", path, "")
			if code != 200 || !contains(names(doc), "kube-system") || !contains(names(doc), "default") {
				t.Fatalf("list: %d %v", code, doc)
			}
			first := doc["items"].([]any)[0].(map[string]any)
			if first["phase"] != "Active" || first["created_at"] == "" || first["labels"] == nil {
				t.Errorf("namespace view: %v", first)
			}

			ns := "team-" + string(p)
			code, doc = api.do("POST", path, `{"name":"`+ns+`","labels":{"team":"a","spaces.dev/owner":"x"}}`)
			if code != 201 || doc["name"] != ns || doc["phase"] != "Active" {
				t.Fatalf("create: %d %v", code, doc)
			}
			got, err := admin.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
			if err != nil || got.Labels["team"] != "a" || got.Labels["spaces.dev/owner"] != "x" ||
				got.Labels[space.PodSecurityEnforce] != space.PodSecurityBaseline {
				t.Fatalf("namespace on the API server: %v %v", got, err)
			}
			// It enforces Pod Security baseline: the real API server refuses
			// a hostPath pod there (even to its admin; no controller makes
			// the default ServiceAccount here, so the test does).
			if _, err := admin.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			priv := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "priv"}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "example.test/x"}},
				Volumes:    []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}}
			if _, err := admin.CoreV1().Pods(ns).Create(t.Context(), priv, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
				!strings.Contains(err.Error(), "baseline") {
				t.Errorf("a hostPath pod in a namespace Spaces created: %v, want refused by Pod Security baseline", err)
			}
			if code, doc = api.do("POST", path, `{"name":"`+ns+`"}`); code != 409 {
				t.Errorf("create again: %d %v", code, doc)
			}

			// Bad input: every field reported, nothing created.
			before, _ := admin.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
			code, doc = api.do("POST", path, `{"name":"Bad_Name","labels":{"bad key!":"v","ok":"bad value!"}}`)
			errs, _ := doc["errors"].([]any)
			if code != 422 || len(errs) != 3 {
				t.Errorf("bad namespace: %d %v", code, doc)
			}
			// Reserved names and a Pod Security downgrade: 422 naming the
			// field, nothing created or changed.
			for body, field := range map[string]string{
				`{"name":"kube-spaces"}`:  "name",
				`{"name":"default"}`:      "name",
				`{"name":"spaces-agent"}`: "name",
				`{"name":"priv-` + string(p) + `","labels":{"pod-security.kubernetes.io/enforce":"privileged"}}`: "labels.pod-security.kubernetes.io/enforce",
			} {
				code, doc := api.do("POST", path, body)
				errs, _ := doc["errors"].([]any)
				if code != 422 || len(errs) != 1 || errs[0].(map[string]any)["field"] != field {
					t.Errorf("%s: %d %v, want 422 naming %s", body, code, doc, field)
				}
			}
			if d, _ := admin.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); d.Labels[space.PodSecurityEnforce] != "" {
				t.Errorf("default was relabelled: %v", d.Labels)
			}
			after, _ := admin.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
			if len(after.Items) != len(before.Items) {
				t.Errorf("a refused create changed the cluster: %d -> %d namespaces", len(before.Items), len(after.Items))
			}
		})
	}

	t.Run("not found, foreign, synthetic, deregistered", func(t *testing.T) {
		api.t = t
		if code, _ := api.do("GET", "/space-discovery/"+uuid.NewString()+"/namespaces", ""); code != 404 {
			t.Errorf("unknown space: %d", code)
		}
		if code, _ := api.do("GET", "/space-discovery/not-a-uuid/namespaces", ""); code != 404 {
			t.Errorf("bad id: %d", code)
		}
		s := env.Register(t, space.AWS, "synthetic-one", true)
		if code, doc := api.do("GET", "/space-discovery/"+s.ID+"/namespaces", ""); code != 422 {
			t.Errorf("synthetic: %d %v", code, doc)
		}
		foreign, _ := signer.Mint(uuid.NewString(), "other", nil, time.Hour)
		other := caller{t: t, base: srv.URL, token: foreign}
		live := env.Register(t, space.GCP, "disc-live", false)
		if code, _ := other.do("GET", "/space-discovery/"+live.ID+"/namespaces", ""); code != 404 {
			t.Errorf("foreign: %d", code)
		}
		if err := env.Service.Deregister(t.Context(), env.Org, live.ID, 0, "test"); err != nil {
			t.Fatal(err)
		}
		if code, _ := api.do("GET", "/space-discovery/"+live.ID+"/namespaces", ""); code != 404 {
			t.Errorf("deregistered: %d", code)
		}
	})

	t.Run("cluster picker", func(t *testing.T) {
		api.t = t
		for p, q := range map[space.Provider]string{space.AWS: "?region=" + minttest.Region, space.GCP: "", space.Azure: ""} {
			code, doc := api.do("GET", "/cloud-accounts/"+env.Accounts[p].ID+"/clusters"+q, "")
			items, _ := doc["items"].([]any)
			if code != 200 || len(items) == 0 {
				t.Fatalf("%s picker: %d %v", p, code, doc)
			}
			found := false
			for _, it := range items {
				m := it.(map[string]any)
				if m["name"] == "disc-"+string(p) {
					found = true
					if id, _ := m["registered_space_id"].(string); !space.ValidID(id) {
						t.Errorf("%s: registered cluster without its space id: %v", p, m)
					}
					if m["config"].(map[string]any)["clusterName"] != "disc-"+string(p) {
						t.Errorf("%s: config %v", p, m["config"])
					}
				}
			}
			if !found {
				t.Errorf("%s picker misses the cluster: %v", p, items)
			}
		}
		if code, doc := api.do("GET", "/cloud-accounts/"+env.Accounts[space.AWS].ID+"/clusters", ""); code != 400 {
			t.Errorf("aws without region: %d %v", code, doc)
		}
		if code, _ := api.do("GET", "/cloud-accounts/"+uuid.NewString()+"/clusters", ""); code != 404 {
			t.Errorf("unknown account: %d", code)
		}
	})

	t.Run("cluster down answers quickly", func(t *testing.T) {
		api.t = t
		s := env.Register(t, space.Azure, "disc-azure-2", false)
		cl := minttest.Cluster(space.Azure, "disc-azure-2", kc.URL, kc.CAPEM)
		cl.Backend = "kube"
		env.Cloud.AddCluster(cl)
		if err := kc.Stop(); err != nil {
			t.Fatal(err)
		}
		code, doc := api.do("GET", "/space-discovery/"+s.ID+"/namespaces", "")
		if code != 503 || doc["reason"] != space.ReasonUnreachable {
			t.Errorf("stopped cluster: %d %v", code, doc)
		}
		if err := kc.Restart(); err != nil {
			t.Fatal(err)
		}
		if code, doc := api.do("GET", "/space-discovery/"+s.ID+"/namespaces", ""); code != 200 {
			t.Errorf("restarted cluster: %d %v", code, doc)
		}
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
