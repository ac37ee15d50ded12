package space

import (
	"reflect"
	"testing"
)

// TestReservedNamespaces: Kubernetes' own namespaces, default and the
// agent's are refused wherever a namespace is named (an environment, an
// autoscaler policy's target, a manifest); any other DNS label passes.
func TestReservedNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reserved bool
	}{
		{"kube-system", true}, {"kube-public", true}, {"kube-node-lease", true}, {"kube-anything", true},
		{"default", true}, {AgentNamespace, true},
		{"team-a", false}, {"kube", false}, {"kubernetes-dashboard", false}, {"spaces-agent-2", false}, {"defaults", false},
	} {
		if got := ReservedNamespace(tc.name) != ""; got != tc.reserved {
			t.Errorf("ReservedNamespace(%q) reserved = %v, want %v", tc.name, got, tc.reserved)
		}
		env := NewEnvironmentInput{Name: "web", SpaceID: "0d5b7c1e-3f2a-4b6c-8d9e-1a2b3c4d5e6f", Namespace: tc.name}
		if err := env.Validate(); (fieldsOf(err)["namespace"] != "") != tc.reserved {
			t.Errorf("environment in %q: %v", tc.name, err)
		}
		one, two := 1, 2
		pol := NewPolicyInput{SpaceID: env.SpaceID, Target: PolicyTarget{Namespace: tc.name, Kind: "Deployment", Name: "w"}, MinReplicas: &one, MaxReplicas: &two}
		if err := pol.Validate(); (fieldsOf(err)["target.namespace"] != "") != tc.reserved {
			t.Errorf("policy in %q: %v", tc.name, err)
		}
	}
	// An environment named after a reserved namespace defaults to it, and
	// is refused the same way.
	if err := (NewEnvironmentInput{Name: "default", SpaceID: "0d5b7c1e-3f2a-4b6c-8d9e-1a2b3c4d5e6f"}).Validate(); fieldsOf(err)["namespace"] == "" {
		t.Errorf("environment named default: %v", err)
	}
}

// TestManifestNamespaces: a manifest may leave its namespace out or name
// its environment's; any other is refused, naming the manifest.
func TestManifestNamespaces(t *testing.T) {
	cm := func(ns any) map[string]any {
		meta := map[string]any{"name": "c"}
		if ns != nil {
			meta["namespace"] = ns
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
	}
	if err := checkManifestNamespaces("team-a", []map[string]any{cm(nil), cm("team-a")}); err != nil {
		t.Errorf("in the namespace: %v", err)
	}
	err := checkManifestNamespaces("team-a", []map[string]any{cm("team-a"), cm("kube-system"), cm("team-b")})
	if f := fieldsOf(err); KindOf(err) != KindInvalid || len(f) != 2 || f["manifests[1].metadata.namespace"] == "" || f["manifests[2].metadata.namespace"] == "" {
		t.Errorf("other namespaces: %v", err)
	}
}

// TestNamespaceLabelsKeepPodSecurity: a namespace Spaces creates enforces
// Pod Security baseline unless its labels ask for restricted; a lower
// level, an unknown one or a pinned version is refused, naming the label;
// audit and warn, which enforce nothing, pass.
func TestNamespaceLabelsKeepPodSecurity(t *testing.T) {
	for _, tc := range []struct {
		labels  map[string]string
		refused []string
		created map[string]string
	}{
		{labels: nil, created: map[string]string{PodSecurityEnforce: "baseline"}},
		{labels: map[string]string{"team": "a"}, created: map[string]string{"team": "a", PodSecurityEnforce: "baseline"}},
		{labels: map[string]string{PodSecurityEnforce: "restricted"}, created: map[string]string{PodSecurityEnforce: "restricted"}},
		{labels: map[string]string{PodSecurityEnforce: "baseline", PodSecurityEnforceVersion: "latest"},
			created: map[string]string{PodSecurityEnforce: "baseline", PodSecurityEnforceVersion: "latest"}},
		{labels: map[string]string{"pod-security.kubernetes.io/warn": "privileged", "pod-security.kubernetes.io/audit": "privileged"},
			created: map[string]string{"pod-security.kubernetes.io/warn": "privileged", "pod-security.kubernetes.io/audit": "privileged", PodSecurityEnforce: "baseline"}},
		{labels: map[string]string{PodSecurityEnforce: "privileged"}, refused: []string{"labels." + PodSecurityEnforce}},
		{labels: map[string]string{PodSecurityEnforce: ""}, refused: []string{"labels." + PodSecurityEnforce}},
		{labels: map[string]string{PodSecurityEnforce: "Baseline"}, refused: []string{"labels." + PodSecurityEnforce}},
		{labels: map[string]string{PodSecurityEnforce: "restricted", PodSecurityEnforceVersion: "v1.0"}, refused: []string{"labels." + PodSecurityEnforceVersion}},
	} {
		var fe []FieldError
		CheckNamespaceLabels(&fe, "labels", tc.labels)
		var got []string
		for _, f := range fe {
			got = append(got, f.Field)
		}
		if !reflect.DeepEqual(got, tc.refused) {
			t.Errorf("%v refused %v, want %v", tc.labels, fe, tc.refused)
		}
		if tc.refused == nil && !reflect.DeepEqual(NamespaceLabels(tc.labels), tc.created) {
			t.Errorf("%v created with %v, want %v", tc.labels, NamespaceLabels(tc.labels), tc.created)
		}
	}
}

// fieldsOf maps a validation error's fields to their reasons.
func fieldsOf(err error) map[string]string {
	out := map[string]string{}
	if e, ok := err.(*Error); ok {
		for _, f := range e.Fields {
			out[f.Field] = f.Reason
		}
	}
	return out
}
