// Command spaces-agent runs inside a cluster whose API server Spaces
// cannot reach: it connects out to Spaces, keeps its space's lease and
// reports the cluster's version (package spaces/agent/client). It listens
// on no port.
//
// Settings, from the environment (the manifests set them):
//
//	SPACES_AGENT_URL       base URL of Spaces' agent routes (https; the stack's AgentUrl output)
//	SPACES_BOOTSTRAP_FILE  the mounted one-time bootstrap token
//	                       (default /var/run/spaces-agent/bootstrap/token)
//	SPACES_AGENT_NAMESPACE the agent's namespace (the downward API)
//	SPACES_STATE_SECRET    the Secret its credential is kept in
//	                       (default spaces-agent-state)
//
// It exits 0 when Spaces refuses its credential (the space is
// deregistered) or on SIGTERM, and 1 on a failure it cannot mend.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"spaces/agent/client"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		if errors.Is(err, client.ErrRefused) {
			// Spaces answers every refusal alike: deregistered is the
			// usual cause. A Deployment restarts the pod, which is refused
			// the same way; uninstall it (kubectl delete -f spaces-agent.yaml).
			log.Info("Spaces refused this agent's credential: its space is deregistered, a newer install replaced this agent, "+
				"or the credential expired while the agent was stopped; stopping", "error", err.Error())
			os.Exit(0)
		}
		log.Error("agent failed", "error", err.Error())
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	cfg := client.Config{
		BootstrapFile: env("SPACES_BOOTSTRAP_FILE", "/var/run/spaces-agent/bootstrap/token"),
		Namespace:     env("SPACES_AGENT_NAMESPACE", ""),
		StateSecret:   env("SPACES_STATE_SECRET", "spaces-agent-state"),
		Log:           log,
	}
	var err error
	if cfg.AgentURL, err = client.CheckURL(os.Getenv("SPACES_AGENT_URL")); err != nil {
		return err
	}
	if cfg.Namespace == "" {
		return errors.New("SPACES_AGENT_NAMESPACE is not set (the manifests set it from the pod's namespace)")
	}
	// The pod's ServiceAccount, bound by the agent's RBAC manifests.
	rc, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	rc.UserAgent = "spaces-agent/" + client.Version
	cfg.KubeConfig = rc
	if cfg.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return client.Run(ctx, cfg)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
