// Package manifests renders the agent's Kubernetes manifests: its
// namespace, ServiceAccount, least-privilege RBAC, the Secret it keeps its
// credential in, the one-time bootstrap Secret and its Deployment (no
// port, non-root, read-only root filesystem). make agent-image renders
// them with the image it built; the proof test applies the same objects
// to a real API server.
package manifests

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"spaces/shared/space"
)

//go:embed agent.yaml.tmpl
var text string

var tmpl = template.Must(template.New("agent").Option("missingkey=error").Funcs(template.FuncMap{
	"optin": func(agentNS, ns string) optIn { return optIn{AgentNamespace: agentNS, Namespace: ns} },
}).Parse(text))

// Namespace is where the agent runs unless told otherwise.
const Namespace = space.AgentNamespace

type optIn struct{ AgentNamespace, Namespace string }

// Values fill the manifests.
type Values struct {
	// Image is the agent's image reference (make agent-image prints it).
	Image string
	// AgentURL is the base URL of Spaces' agent routes, which the agent
	// calls out to (the stack's AgentUrl output: AgentFunction's URL).
	AgentURL string
	// Namespace defaults to Namespace.
	Namespace string
	// BootstrapToken, when set, adds the bootstrap Secret; without it the
	// manifests install everything but the token.
	BootstrapToken   string
	BootstrapExpires time.Time
	// OptIn names the namespaces the agent may apply revisions in: one
	// RoleBinding of the ClusterRole spaces-agent-apply each (OptIn
	// renders one more later). None: the agent applies nowhere.
	OptIn []string
}

// Render writes the manifests as one YAML stream.
func Render(v Values) ([]byte, error) {
	if v.Namespace == "" {
		v.Namespace = Namespace
	}
	if v.Image == "" || v.AgentURL == "" {
		return nil, errors.New("manifests: Image and AgentURL are required")
	}
	for _, ns := range v.OptIn {
		if err := checkOptIn(v.Namespace, ns); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, v); err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	return b.Bytes(), nil
}

// OptIn renders the RoleBinding that opts namespace in for the agent
// installed in agentNamespace ("" is Namespace): applied by the cluster's
// owner (kubectl apply -f -), it lets the agent apply revisions there.
// Reserved namespaces (space.ReservedNamespace) and the agent's own are
// refused: the agent would refuse to apply there anyway.
func OptIn(agentNamespace, namespace string) ([]byte, error) {
	if agentNamespace == "" {
		agentNamespace = Namespace
	}
	if err := checkOptIn(agentNamespace, namespace); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, "optin", optIn{AgentNamespace: agentNamespace, Namespace: namespace}); err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	return b.Bytes(), nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func checkOptIn(agentNamespace, ns string) error {
	switch {
	case !dnsLabel.MatchString(ns):
		return fmt.Errorf("manifests: cannot opt in %q: not a namespace name", ns)
	case space.ReservedNamespace(ns) != "":
		return fmt.Errorf("manifests: cannot opt in %q: it %s", ns, space.ReservedNamespace(ns))
	case ns == agentNamespace:
		return fmt.Errorf("manifests: cannot opt in %q: it is the agent's own namespace", ns)
	}
	return nil
}

// Objects splits rendered manifests into their objects, in order.
func Objects(rendered []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("manifests: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}
