package httpapi

import (
	"strconv"
	"time"

	"spaces/shared/space"
)

// bootstrapAnswer is a bootstrap as answered: the token, the bootstrap
// Secret that carries it (Manifest: a complete manifest of the agent's
// bootstrap Secret, agent/manifests' names; the local agent test applies
// it as answered) and the one command that installs the agent with it,
// reading that manifest on its standard input. The token is never on a
// command line (shell history, ps, CI logs): it travels in the manifest,
// piped or pasted into kubectl.
type bootstrapAnswer struct {
	space.Bootstrap
	Manifest string `json:"manifest"`
	Install  string `json:"install"`
}

// installCommand applies the agent's manifests (agent/manifests, rendered
// by make agent-image into spaces-agent.yaml) and, from standard input,
// the bootstrap's Manifest.
const installCommand = "kubectl apply -f spaces-agent.yaml -f -"

func answerBootstrap(b space.Bootstrap) *bootstrapAnswer {
	return &bootstrapAnswer{Bootstrap: b, Install: installCommand, Manifest: "# The Spaces agent's one-time bootstrap: single use, expires " +
		b.ExpiresAt.UTC().Format(time.RFC3339) + ".\n" +
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: spaces-agent-bootstrap\n  namespace: " + space.AgentNamespace + "\ntype: Opaque\nstringData:\n" +
		"  token: " + strconv.Quote(b.Token) + "\n"}
}
