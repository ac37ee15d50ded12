package kubeapply_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/kubetest"
	"spaces/shared/kubeapply"
	"spaces/shared/kubecred"
)

// TestApplyStaysInTheNamespace: against a real kube-apiserver, a
// cluster-scoped kind is refused by the cluster's own scope (here one the
// push-time list does not name, VolumeAttributesClass, and one it does,
// Namespace, as if the push check were bypassed), and nothing of it is
// created; a namespaced object is applied in the environment's namespace.
func TestApplyStaysInTheNamespace(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{})
	creds := kubecred.Credentials{Server: kc.URL, CAData: kc.CAPEM, Token: kc.AdminToken}
	kube, err := kubernetes.NewForConfig(kc.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var a kubeapply.Applier
	escapes := []map[string]any{
		{"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass", "metadata": map[string]any{"name": "escape"},
			"driverName": "example.com/csi", "parameters": map[string]any{"iops": "100"}},
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "escape"}},
	}
	for _, m := range escapes {
		err := a.Apply(t.Context(), creds, "default", []map[string]any{m})
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
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "inside"}, "data": map[string]any{"k": "v"}}
	if err := a.Apply(t.Context(), creds, "default", []map[string]any{cm}); err != nil {
		t.Fatal(err)
	}
	if got, err := kube.CoreV1().ConfigMaps("default").Get(t.Context(), "inside", metav1.GetOptions{}); err != nil || got.Data["k"] != "v" {
		t.Errorf("the ConfigMap was not applied in the namespace: %v", err)
	}
}
