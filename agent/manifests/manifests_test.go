package manifests

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

const token = "spb1.0a1b2c3d-0000-4000-8000-000000000000.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"

func render(t *testing.T, v Values) map[string]*unstructured.Unstructured {
	t.Helper()
	out, err := Render(v)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		key := o.GetKind() + "/" + o.GetName()
		if key == "RoleBinding/spaces-agent-apply" {
			key += "@" + o.GetNamespace()
		}
		if m[key] != nil {
			t.Fatalf("%s twice", key)
		}
		m[key] = o
	}
	return m
}

func as[T any](t *testing.T, objs map[string]*unstructured.Unstructured, key string) *T {
	t.Helper()
	o := objs[key]
	if o == nil {
		t.Fatalf("no %s among %v", key, keys(objs))
	}
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &v, true); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return &v
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestLeastPrivilege: the agent's RBAC grants exactly what its code uses,
// GET /version, list/create of namespaces and list/watch of nodes (the
// node count) cluster-wide, create/patch
// (server-side apply) of the listed workload kinds (never Secrets: an
// apply answers the object) only in the namespaces opted in (a
// RoleBinding each, never a ClusterRoleBinding), get/update of its one
// state Secret by name, and nothing else is bound to its ServiceAccount.
func TestLeastPrivilege(t *testing.T) {
	objs := render(t, Values{Image: "example.test/agent@sha256:00", AgentURL: "https://api.example.test", BootstrapToken: token,
		OptIn: []string{"team-a", "team-b"}})
	cr := as[rbacv1.ClusterRole](t, objs, "ClusterRole/spaces-agent")
	if want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/version"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "create"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}}}; !reflect.DeepEqual(cr.Rules, want) {
		t.Errorf("ClusterRole rules %+v, want %+v", cr.Rules, want)
	}
	apply := as[rbacv1.ClusterRole](t, objs, "ClusterRole/spaces-agent-apply")
	for _, r := range apply.Rules {
		if !reflect.DeepEqual(r.Verbs, []string{"create", "patch"}) || len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 ||
			slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") ||
			slices.Contains(r.APIGroups, "rbac.authorization.k8s.io") {
			t.Errorf("ClusterRole spaces-agent-apply grants %+v, want create/patch of workload kinds only", r)
		}
	}
	if len(apply.Rules) == 0 {
		t.Error("ClusterRole spaces-agent-apply grants nothing: revisions cannot be applied")
	}
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: "spaces-agent", Namespace: Namespace}
	for _, ns := range []string{"team-a", "team-b"} {
		rb := as[rbacv1.RoleBinding](t, objs, "RoleBinding/spaces-agent-apply@"+ns)
		if rb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "spaces-agent-apply"}) ||
			!reflect.DeepEqual(rb.Subjects, []rbacv1.Subject{sa}) || rb.Namespace != ns {
			t.Errorf("opt-in RoleBinding of %s: %+v", ns, rb)
		}
	}
	role := as[rbacv1.Role](t, objs, "Role/spaces-agent-state")
	if want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{"spaces-agent-state"}, Verbs: []string{"get", "update"}}}; !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("Role rules %+v, want %+v", role.Rules, want)
	}
	crb := as[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding/spaces-agent")
	if crb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "spaces-agent"}) ||
		!reflect.DeepEqual(crb.Subjects, []rbacv1.Subject{sa}) {
		t.Errorf("ClusterRoleBinding %+v", crb)
	}
	rb := as[rbacv1.RoleBinding](t, objs, "RoleBinding/spaces-agent-state")
	if rb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "spaces-agent-state"}) ||
		!reflect.DeepEqual(rb.Subjects, []rbacv1.Subject{sa}) || rb.Namespace != Namespace {
		t.Errorf("RoleBinding %+v", rb)
	}
	var bindings, clusterBindings int
	for k := range objs {
		if strings.Contains(k, "Binding/") {
			bindings++
		}
		if strings.HasPrefix(k, "ClusterRoleBinding/") {
			clusterBindings++
		}
	}
	if bindings != 4 || clusterBindings != 1 {
		t.Errorf("%d bindings (%d cluster-wide), want the 4 above, 1 cluster-wide: %v", bindings, clusterBindings, keys(objs))
	}
	// Without opt-ins, the agent can write nowhere.
	if objs := render(t, Values{Image: "i", AgentURL: "https://a"}); len(keys(objs)) != len(keys(render(t, Values{Image: "i", AgentURL: "https://a", OptIn: []string{"x"}})))-1 {
		t.Errorf("rendered without opt-ins: %v", keys(objs))
	}
}

// TestOptIn: one namespace's opt-in is the same RoleBinding the install
// renders; Kubernetes' namespaces, default and the agent's own cannot be
// opted in (the agent would refuse to apply there anyway).
func TestOptIn(t *testing.T) {
	out, err := OptIn("", "team-c")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(out)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%v %v", objs, err)
	}
	var rb rbacv1.RoleBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[0].Object, &rb, true); err != nil {
		t.Fatal(err)
	}
	if rb.Name != "spaces-agent-apply" || rb.Namespace != "team-c" || rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != "spaces-agent-apply" ||
		!reflect.DeepEqual(rb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "spaces-agent", Namespace: Namespace}}) {
		t.Errorf("opt-in %+v", rb)
	}
	if out, err := OptIn("agents", "team-c"); err != nil || !strings.Contains(string(out), "namespace: agents") {
		t.Errorf("opt-in for an agent in agents: %s %v", out, err)
	}
	for _, ns := range []string{"kube-system", "default", Namespace, "Bad_Name"} {
		if _, err := OptIn("", ns); err == nil {
			t.Errorf("opted in %s", ns)
		}
		if _, err := Render(Values{Image: "i", AgentURL: "https://a", OptIn: []string{ns}}); err == nil {
			t.Errorf("rendered an opt-in of %s", ns)
		}
	}
	if _, err := OptIn("agents", "agents"); err == nil {
		t.Error("opted in the agent's own namespace")
	}
}

// TestDeployment: no port, non-root, read-only root filesystem, no
// privilege escalation, one replica replaced (never two at once), the
// API URL and the bootstrap file as the command reads them; the token
// only in the bootstrap Secret.
func TestDeployment(t *testing.T) {
	exp := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	objs := render(t, Values{Image: "example.test/agent@sha256:00", AgentURL: "https://api.example.test", BootstrapToken: token, BootstrapExpires: exp})
	d := as[appsv1.Deployment](t, objs, "Deployment/spaces-agent")
	pod := d.Spec.Template.Spec
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %q", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if pod.ServiceAccountName != "spaces-agent" || pod.HostNetwork || len(pod.Containers) != 1 {
		t.Errorf("pod %+v", pod)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod security context %+v", sc)
	}
	c := pod.Containers[0]
	if len(c.Ports) != 0 {
		t.Errorf("ports %+v: the agent listens on none", c.Ports)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v", sc)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if strings.Contains(e.Value, "spb1.") {
			t.Errorf("env %s carries the token", e.Name)
		}
	}
	if env["SPACES_AGENT_URL"] != "https://api.example.test" || env["SPACES_BOOTSTRAP_FILE"] != "/var/run/spaces-agent/bootstrap/token" ||
		env["SPACES_STATE_SECRET"] != "spaces-agent-state" {
		t.Errorf("env %v", env)
	}
	if c.Image != "example.test/agent@sha256:00" {
		t.Errorf("image %q", c.Image)
	}
	s := as[corev1.Secret](t, objs, "Secret/spaces-agent-bootstrap")
	if s.StringData["token"] != token || len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != s.Name {
		t.Errorf("bootstrap Secret %+v, volumes %+v", s, pod.Volumes)
	}
	if st := as[corev1.Secret](t, objs, "Secret/spaces-agent-state"); len(st.Data)+len(st.StringData) != 0 {
		t.Errorf("the state Secret is rendered with data %v: applying again would overwrite the agent's credential", st.Data)
	}

	// Without a token, everything but the bootstrap Secret.
	if objs := render(t, Values{Image: "i", AgentURL: "https://a"}); objs["Secret/spaces-agent-bootstrap"] != nil || objs["Deployment/spaces-agent"] == nil {
		t.Errorf("rendered without a token: %v", keys(objs))
	}
	if _, err := Render(Values{AgentURL: "https://a"}); err == nil {
		t.Error("rendered without an image")
	}
}
