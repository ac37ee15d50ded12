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
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

//go:embed agent.yaml.tmpl
var text string

var tmpl = template.Must(template.New("agent").Option("missingkey=error").Parse(text))

// Namespace is where the agent runs unless told otherwise.
const Namespace = "spaces-agent"

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
}

// Render writes the manifests as one YAML stream.
func Render(v Values) ([]byte, error) {
	if v.Namespace == "" {
		v.Namespace = Namespace
	}
	if v.Image == "" || v.AgentURL == "" {
		return nil, errors.New("manifests: Image and AgentURL are required")
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, v); err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	return b.Bytes(), nil
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
