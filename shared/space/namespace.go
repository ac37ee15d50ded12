package space

import (
	"strings"
	"time"
)

// Namespace is what the API shows of a namespace on a space's cluster. The
// type lives in the domain, not beside client-go (shared/kubens), so that the
// catalog API can name it without linking client-go.
type Namespace struct {
	Name      string            `json:"name"`
	Phase     string            `json:"phase"`
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"created_at"`
}

// NewNamespace is a namespace to create; kubens.Validate checks it by
// Kubernetes' own rules.
type NewNamespace struct {
	Name   string
	Labels map[string]string
}

// NamespaceCreated is a create's answer: the namespace created on a direct
// space's cluster, or (Pending) the create recorded for an agent space's
// agent to carry out on its next lease renewal (agentwork.go).
type NamespaceCreated struct {
	Namespace Namespace
	Pending   *NamespaceCreate
}

// AgentNamespace is the namespace the agent's manifests install it in
// (agent/manifests.Namespace).
const AgentNamespace = "spaces-agent"

// ReservedNamespace says why Spaces never deploys to, creates or targets
// the namespace name, or "" when it may (docs/trust.md, "In the
// customer's cluster"). Kubernetes' own namespaces (kube-*) run the
// cluster's controllers, whose ServiceAccounts a workload there could
// mount; default is where every object without a namespace lands, the
// cluster owner's, not an environment's; the agent's own holds its
// credential. The agent refuses the same names before any call, and its
// own namespace wherever it is installed.
func ReservedNamespace(name string) string {
	switch {
	case strings.HasPrefix(name, "kube-"):
		return "is reserved for Kubernetes itself (kube-*); Spaces never touches it"
	case name == "default":
		return "is the cluster's shared default namespace, not one Spaces may use: use a namespace of its own"
	case name == AgentNamespace:
		return "is the Spaces agent's own namespace; Spaces never touches it"
	}
	return ""
}

// Pod Security admission reads these namespace labels
// (https://kubernetes.io/docs/concepts/security/pod-security-admission/).
const (
	PodSecurityEnforce        = "pod-security.kubernetes.io/enforce"
	PodSecurityEnforceVersion = "pod-security.kubernetes.io/enforce-version"
	// PodSecurityBaseline is the level a namespace Spaces creates
	// enforces when its labels name none.
	PodSecurityBaseline = "baseline"
)

// CheckNamespaceLabels records under field ("labels.<key>") every label
// of a namespace to create that would weaken Pod Security: an enforce
// level below baseline (privileged, or a value Kubernetes does not know),
// and an enforce version other than latest (a pinned older version can be
// a weaker policy). Audit and warn levels enforce nothing and pass.
// CheckLabels is the syntax; this is the policy.
func CheckNamespaceLabels(fe *[]FieldError, field string, m map[string]string) {
	if v, ok := m[PodSecurityEnforce]; ok && v != "baseline" && v != "restricted" {
		*fe = append(*fe, FieldError{Field: field + "." + PodSecurityEnforce,
			Reason: "must be baseline or restricted: Spaces never creates a namespace that enforces less than Pod Security baseline"})
	}
	if v, ok := m[PodSecurityEnforceVersion]; ok && v != "latest" {
		*fe = append(*fe, FieldError{Field: field + "." + PodSecurityEnforceVersion,
			Reason: "must be latest: a pinned version may enforce an older, weaker policy"})
	}
}

// NamespaceLabels are the labels a namespace is created with: m, and
// Pod Security's enforce level baseline unless m names one (which
// CheckNamespaceLabels allows only at baseline or above).
func NamespaceLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	if _, ok := out[PodSecurityEnforce]; !ok {
		out[PodSecurityEnforce] = PodSecurityBaseline
	}
	return out
}
