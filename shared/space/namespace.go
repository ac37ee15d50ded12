package space

import "time"

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
