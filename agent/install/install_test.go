package install

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/agent/manifests"
	"spaces/infra/kubetest"
)

const token = "spb1.0a1b2c3d-0000-4000-8000-000000000000.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"

// TestApplyAgainThenDelete: the manifests applied to a real API server
// through a kubeconfig's context, applied again with a new image and token
// (a reinstall: updated in place), then deleted: every object is gone but
// the namespace, which is left terminating for its controller (there is
// none here) to finalize; deleting again finds nothing and is no error.
func TestApplyAgainThenDelete(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: admin
  user: {token: %q}
contexts:
- name: private
  context: {cluster: c, user: admin}
`, kc.URL, base64.StdEncoding.EncodeToString(kc.CAPEM), kc.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RESTConfig(kubeconfig, "nowhere"); err == nil || !strings.Contains(err.Error(), `context "nowhere"`) {
		t.Fatalf("an unknown context: %v", err)
	}
	rc, err := RESTConfig(kubeconfig, "private")
	if err != nil {
		t.Fatal(err)
	}
	render := func(image, tok string) []byte {
		out, err := manifests.Render(manifests.Values{Image: image, AgentURL: "https://agent.example",
			BootstrapToken: tok, BootstrapExpires: time.Now().Add(time.Hour).UTC().Truncate(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := render("agent:1", token)
	objs, err := manifests.Objects(first)
	if err != nil {
		t.Fatal(err)
	}
	var applied []Object
	if err := Apply(t.Context(), rc, first, "install-test", func(o Object) { applied = append(applied, o) }); err != nil {
		t.Fatal(err)
	}
	if len(applied) != len(objs) || applied[0].Kind != "Namespace" {
		t.Fatalf("applied %v, want the %d objects, the namespace first", applied, len(objs))
	}
	second := render("agent:2", strings.Replace(token, "abc", "xyz", 1))
	if err := Apply(t.Context(), rc, second, "install-test", nil); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(kc.RESTConfig())
	d, err := kube.AppsV1().Deployments(manifests.Namespace).Get(t.Context(), "spaces-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "agent:2" {
		t.Fatalf("after the reinstall the Deployment runs %s", img)
	}
	s, err := kube.CoreV1().Secrets(manifests.Namespace).Get(t.Context(), "spaces-agent-bootstrap", metav1.GetOptions{})
	if err != nil || !strings.Contains(string(s.Data["token"]), "xyz") {
		t.Fatalf("after the reinstall the bootstrap Secret is %v (%v)", s.Data, err)
	}

	var deleted []Object
	if err := Delete(t.Context(), rc, second, func(o Object) { deleted = append(deleted, o) }); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != len(objs) || deleted[len(deleted)-1].Kind != "Namespace" || deleted[0].Kind == "Namespace" {
		t.Fatalf("deleted %v, want the %d objects, the namespace last", deleted, len(objs))
	}
	for _, o := range applied {
		if o.Kind == "Namespace" {
			ns, err := kube.CoreV1().Namespaces().Get(t.Context(), o.Name, metav1.GetOptions{})
			if err == nil && ns.DeletionTimestamp == nil {
				t.Errorf("the namespace %s is not being deleted", o.Name)
			}
			continue
		}
		var err error
		switch o.Kind {
		case "Deployment":
			_, err = kube.AppsV1().Deployments(o.Namespace).Get(t.Context(), o.Name, metav1.GetOptions{})
		case "Secret":
			_, err = kube.CoreV1().Secrets(o.Namespace).Get(t.Context(), o.Name, metav1.GetOptions{})
		case "ServiceAccount":
			_, err = kube.CoreV1().ServiceAccounts(o.Namespace).Get(t.Context(), o.Name, metav1.GetOptions{})
		case "Role":
			_, err = kube.RbacV1().Roles(o.Namespace).Get(t.Context(), o.Name, metav1.GetOptions{})
		case "RoleBinding":
			_, err = kube.RbacV1().RoleBindings(o.Namespace).Get(t.Context(), o.Name, metav1.GetOptions{})
		case "ClusterRole":
			_, err = kube.RbacV1().ClusterRoles().Get(t.Context(), o.Name, metav1.GetOptions{})
		case "ClusterRoleBinding":
			_, err = kube.RbacV1().ClusterRoleBindings().Get(t.Context(), o.Name, metav1.GetOptions{})
		default:
			t.Fatalf("no check for %s", o)
		}
		if !apierrors.IsNotFound(err) {
			t.Errorf("after Delete %s answers %v, want 404", o, err)
		}
	}
	deleted = nil
	if err := Delete(t.Context(), rc, second, func(o Object) { deleted = append(deleted, o) }); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
	// Only the terminating namespace answers a second delete.
	if len(deleted) > 1 {
		t.Errorf("deleting again deleted %v", deleted)
	}
}
