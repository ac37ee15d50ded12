package kubeapply_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/kubetest"
	"spaces/shared/kubeapply"
	"spaces/shared/kubecred"
)

// TestApplyStaysInTheNamespace: against a real kube-apiserver, a
// cluster-scoped kind is refused by the cluster's own scope (here one the
// push-time list does not name, VolumeAttributesClass, and one it does,
// Namespace, as if the push check were bypassed), a manifest naming
// another namespace is refused, and nothing of them is created; a
// namespaced object is applied in the environment's namespace.
func TestApplyStaysInTheNamespace(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{})
	creds := kubecred.Credentials{Server: kc.URL, CAData: kc.CAPEM, Token: kc.AdminToken}
	kube, err := kubernetes.NewForConfig(kc.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var a kubeapply.Applier
	escapes := []map[string]any{
		{"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass", "metadata": map[string]any{"name": "escape"},
			"driverName": "example.com/csi", "parameters": map[string]any{"iops": "100"}},
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "escape"}},
	}
	for _, m := range escapes {
		err := a.Apply(t.Context(), creds, "team-a", []map[string]any{m})
		if err == nil || !strings.Contains(err.Error(), "cluster-scoped") {
			t.Errorf("%s applied: %v", m["kind"], err)
		}
	}
	if _, err := kube.StorageV1().VolumeAttributesClasses().Get(t.Context(), "escape", metav1.GetOptions{}); err == nil {
		t.Error("the VolumeAttributesClass was created")
	}
	if _, err := kube.CoreV1().Namespaces().Get(t.Context(), "escape", metav1.GetOptions{}); err == nil {
		t.Error("the Namespace was created")
	}
	stray := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "stray", "namespace": "team-b"}}
	if err := a.Apply(t.Context(), creds, "team-a", []map[string]any{stray}); err == nil || !strings.Contains(err.Error(), `namespace "team-b" is not the environment's namespace "team-a"`) {
		t.Errorf("a manifest of another namespace: %v", err)
	}
	if _, err := kube.CoreV1().ConfigMaps("team-b").Get(t.Context(), "stray", metav1.GetOptions{}); err == nil {
		t.Error("the ConfigMap of another namespace was created")
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "inside"}, "data": map[string]any{"k": "v"}}
	if err := a.Apply(t.Context(), creds, "team-a", []map[string]any{cm}); err != nil {
		t.Fatal(err)
	}
	if got, err := kube.CoreV1().ConfigMaps("team-a").Get(t.Context(), "inside", metav1.GetOptions{}); err != nil || got.Data["k"] != "v" {
		t.Errorf("the ConfigMap was not applied in the namespace: %v", err)
	}
}

// TestApplyRefusesReservedNamespaces: kube-*, default, the agent's
// namespace and any the Applier is told to refuse (the agent's own where
// it is installed) are refused before any call: the ConfigMap is not
// created although the credentials could (cluster admin).
func TestApplyRefusesReservedNamespaces(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{})
	creds := kubecred.Credentials{Server: kc.URL, CAData: kc.CAPEM, Token: kc.AdminToken}
	kube := kubernetes.NewForConfigOrDie(kc.RESTConfig())
	for _, ns := range []string{"spaces-agent", "agents"} {
		if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a := kubeapply.Applier{Refuse: []string{"agents"}}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "takeover"}}
	for _, ns := range []string{"kube-system", "kube-public", "default", "spaces-agent", "agents"} {
		err := a.Apply(t.Context(), creds, ns, []map[string]any{cm})
		if err == nil || !strings.Contains(err.Error(), `namespace "`+ns+`" `) {
			t.Errorf("applied into %s: %v", ns, err)
		}
		if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "takeover", metav1.GetOptions{}); err == nil {
			t.Errorf("a ConfigMap was created in %s", ns)
		}
	}
}

// TestApplyNeverForces: a field another field manager owns is a conflict
// that fails the apply with a reason saying so, and the field keeps its
// owner's value; Spaces' own fields apply again and change freely.
func TestApplyNeverForces(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{})
	creds := kubecred.Credentials{Server: kc.URL, CAData: kc.CAPEM, Token: kc.AdminToken}
	kube := kubernetes.NewForConfigOrDie(kc.RESTConfig())
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The cluster's owner applies a ConfigMap of their own.
	theirs, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "theirs"},
		"data": map[string]any{"owner": "customer"}})
	if _, err := kube.CoreV1().ConfigMaps("team-a").Patch(t.Context(), "theirs", types.ApplyPatchType, theirs,
		metav1.PatchOptions{FieldManager: "customer"}); err != nil {
		t.Fatal(err)
	}
	var a kubeapply.Applier
	takeover := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "theirs"},
		"data": map[string]any{"owner": "spaces"}}
	err := a.Apply(t.Context(), creds, "team-a", []map[string]any{takeover})
	if err == nil || !strings.Contains(err.Error(), "another field manager owns fields it sets") || !strings.Contains(err.Error(), `"customer"`) {
		t.Errorf("applying over another manager's field: %v", err)
	}
	if got, err := kube.CoreV1().ConfigMaps("team-a").Get(t.Context(), "theirs", metav1.GetOptions{}); err != nil || got.Data["owner"] != "customer" {
		t.Errorf("the owner's field was overwritten: %v %v", got.Data, err)
	}
	// Spaces' own object: applied, then changed by a second apply.
	mine := func(v string) []map[string]any {
		return []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "mine"}, "data": map[string]any{"k": v}}}
	}
	if err := a.Apply(t.Context(), creds, "team-a", mine("1")); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(t.Context(), creds, "team-a", mine("2")); err != nil {
		t.Fatal(err)
	}
	if got, err := kube.CoreV1().ConfigMaps("team-a").Get(t.Context(), "mine", metav1.GetOptions{}); err != nil || got.Data["k"] != "2" {
		t.Errorf("Spaces' own field: %v %v", got.Data, err)
	}
}

// TestApplySaysDiscoveryFailed: a cluster whose discovery of a group fails
// (here, with legacy discovery, /api/v1 answers 503, as an overloaded or
// stopping API server may)
// fails the apply with that discovery error, not with "no matches for
// kind", which would read as a wrong manifest; nothing is applied.
func TestApplySaysDiscoveryFailed(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{})
	target, err := url.Parse(kc.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(kc.CAPEM)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	front := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api", "/apis":
			// Legacy discovery, as a server without aggregated
			// discovery answers (infra/testcluster's): a group's
			// resources are then a request of their own.
			r.Header.Set("Accept", "application/json")
		case "/api/v1":
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw})
	creds := kubecred.Credentials{Server: front.URL, CAData: caPEM, Token: kc.AdminToken}
	kube, err := kubernetes.NewForConfig(kc.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "inside"}}
	err = (&kubeapply.Applier{}).Apply(t.Context(), creds, "team-a", []map[string]any{cm})
	if err == nil || strings.Contains(err.Error(), "no matches for kind") || !strings.Contains(err.Error(), "did not say which kinds") {
		t.Fatalf("apply with /api/v1 failing: %v", err)
	}
	if _, err := kube.CoreV1().ConfigMaps("team-a").Get(t.Context(), "inside", metav1.GetOptions{}); err == nil {
		t.Error("the ConfigMap was applied")
	}
}
