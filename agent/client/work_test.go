package client

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"spaces/agent/manifests"
	"spaces/infra/kubetest"
	"spaces/shared/space"
)

// TestAgentRefusesWhatSpacesMustNotAsk: the agent is the last line
// against a compromised or mistaken Spaces. On a real kube-apiserver, as
// its ServiceAccount with the rendered RBAC (team-a opted in), and with the
// cluster's owner having also bound its apply role in kube-system, default
// and its own namespace by mistake, work that Spaces would never hand is
// refused by the agent before any call: revisions into those namespaces,
// namespace creates of reserved names, of its own, or with a Pod Security
// downgrade. A namespace it creates enforces baseline. A namespace not
// opted in is the cluster's 403 with what to do; team-a deploys.
func TestAgentRefusesWhatSpacesMustNotAsk(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{})
	admin := kubernetes.NewForConfigOrDie(kc.RESTConfig())
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rendered, err := manifests.Render(manifests.Values{Image: "i", AgentURL: "https://a.example", OptIn: []string{"team-a"}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Objects(rendered)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(admin.Discovery()))
	dyn := dynamic.NewForConfigOrDie(kc.RESTConfig())
	for _, o := range objs {
		m, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if o.GetNamespace() != "" {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	// The owner's mistake: the apply role bound where Spaces never goes.
	for _, ns := range []string{"kube-system", "default", manifests.Namespace} {
		if _, err := admin.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "spaces-agent-apply"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "spaces-agent-apply"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "spaces-agent", Namespace: manifests.Namespace}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := admin.CoreV1().ServiceAccounts(manifests.Namespace).CreateToken(t.Context(), "spaces-agent",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agentConfig := kc.RESTConfigForToken(tr.Status.Token)

	// Spaces' side: the reports, as the agent sends them.
	var mu sync.Mutex
	revisions := map[string]string{}
	var creates []space.CreateOutcome
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/namespaces"):
			var body struct{ Creates []space.CreateOutcome }
			_ = json.NewDecoder(r.Body).Decode(&body)
			creates = body.Creates
		case strings.Contains(r.URL.Path, "/revisions/"):
			var body struct{ Error string }
			_ = json.NewDecoder(r.Body).Decode(&body)
			revisions[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]] = body.Error
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)

	cfg := &Config{Kube: kubernetes.NewForConfigOrDie(agentConfig), KubeConfig: agentConfig, Namespace: manifests.Namespace,
		Log: slog.New(slog.DiscardHandler)}
	cm := func(name string) []map[string]any {
		return []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": map[string]any{"k": "v"}}}
	}
	rev := func(id, ns string) space.AgentRevision {
		return space.AgentRevision{ID: id, Version: 1, Namespace: ns, Manifests: cm("takeover")}
	}
	w := space.AgentWork{
		NamespaceCreates: []space.NamespaceCreate{{Name: "kube-evil"}, {Name: manifests.Namespace}, {Name: "default"},
			{Name: "priv", Labels: map[string]string{space.PodSecurityEnforce: "privileged"}}, {Name: "fresh", Labels: map[string]string{"team": "x"}}},
		Revisions: []space.AgentRevision{rev("kube-system", "kube-system"), rev("default", "default"), rev(manifests.Namespace, manifests.Namespace),
			rev("team-b", "team-b"), rev("team-a", "team-a")},
	}
	if err := cfg.doWork(t.Context(), &spacesAPI{base: base, http: srv.Client()}, state{Credential: "c", SpaceID: "s"}, w); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	outcome := map[string]string{}
	for _, c := range creates {
		outcome[c.Name] = c.Error
	}
	for _, name := range []string{"kube-evil", manifests.Namespace, "default", "priv"} {
		if !strings.HasPrefix(outcome[name], "refused by the agent: ") {
			t.Errorf("create of %s: %q, want refused by the agent", name, outcome[name])
		}
	}
	for _, name := range []string{"kube-evil", "priv"} {
		if _, err := admin.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s was created: %v", name, err)
		}
	}
	if d, _ := admin.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); d.Labels[space.PodSecurityEnforce] != "" {
		t.Errorf("default relabelled: %v", d.Labels)
	}
	if e, ok := outcome["fresh"]; !ok || e != "" {
		t.Errorf("create of fresh: %q (reported %v)", e, ok)
	}
	if ns, err := admin.CoreV1().Namespaces().Get(t.Context(), "fresh", metav1.GetOptions{}); err != nil ||
		ns.Labels["team"] != "x" || ns.Labels[space.PodSecurityEnforce] != space.PodSecurityBaseline {
		t.Errorf("fresh on the API server: %v %v", ns.Labels, err)
	}
	for _, ns := range []string{"kube-system", "default", manifests.Namespace} {
		if msg := revisions[ns]; !strings.Contains(msg, `namespace "`+ns+`" `) || strings.Contains(msg, "forbidden") {
			t.Errorf("revision into %s: %q, want refused by the agent before any call", ns, msg)
		}
		if _, err := admin.CoreV1().ConfigMaps(ns).Get(t.Context(), "takeover", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a ConfigMap was applied in %s: %v", ns, err)
		}
	}
	if msg := revisions["team-b"]; !strings.Contains(msg, "forbidden") || !strings.Contains(msg, "opted in") {
		t.Errorf("revision into team-b (not opted in): %q, want the cluster's 403 and what to do", msg)
	}
	if msg, ok := revisions["team-a"]; !ok || msg != "" {
		t.Errorf("revision into team-a: %q (reported %v), want deployed", msg, ok)
	}
	if _, err := admin.CoreV1().ConfigMaps("team-a").Get(t.Context(), "takeover", metav1.GetOptions{}); err != nil {
		t.Errorf("team-a: %v", err)
	}
}
