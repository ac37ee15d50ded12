package demo

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	agent "spaces/agent/client"
	"spaces/agent/install"
	"spaces/agent/manifests"
)

// The demo's private cluster is the real kube-apiserver (Demo.Real): an
// agent space names a cluster no cloud knows, so Spaces never calls it;
// the agent, installed there, calls Spaces. What stands in for the pod
// (there is no kubelet): the agent runs as a goroutine of make run,
// authenticated as its ServiceAccount by a TokenRequest token kept in a
// file and renewed (as the kubelet renews a pod's projected token, and
// rest.InClusterConfig reads it from a file), with the bootstrap read back
// from the Secret the install applied (as the kubelet mounts it).
const (
	agentImage = "spaces-agent:demo" // named by the Deployment; no pod pulls it
	agentState = "spaces-agent-state"
	agentBoot  = "spaces-agent-bootstrap"
	// saTokenLife is the ServiceAccount token's life; it is renewed at a
	// third of it.
	saTokenLife = time.Hour
)

// ErrNoAgentCluster: the demo has no real API server to install the agent
// on (Demo.RealMissing says why).
var ErrNoAgentCluster = errors.New("the demo has no private cluster for the agent: it needs the real kube-apiserver")

// agentRun is the running agent.
type agentRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// ServeAgents tells the demo where Spaces' agent routes are (the agent
// calls out to them: the local AgentFunction's URL) and which roots verify the presence channel's endpoint (the local
// IoT Core's CA), and, when the private cluster's state Secret holds a
// credential from an earlier make run, starts its agent again, as the
// cluster would restart its pod.
func (d *Demo) ServeAgents(agentURL string, mqttRoots *x509.CertPool) error {
	d.agentMu.Lock()
	d.agentURL, d.agentMQTT = agentURL, mqttRoots
	d.agentMu.Unlock()
	if d.Real == nil {
		return nil
	}
	s, err := kubernetes.NewForConfigOrDie(d.Real.RESTConfig()).CoreV1().Secrets(manifests.Namespace).
		Get(context.Background(), agentState, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && len(s.Data["credential"]) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("demo agent: %w", err)
	}
	return d.startAgent(context.Background())
}

// InstallAgent does on the demo's private cluster what the registration
// answer's agent_bootstrap.install does on a customer's: it applies the
// agent's manifests with the bootstrap Secret, then (re)starts the agent,
// which exchanges the token. The token is never logged.
func (d *Demo) InstallAgent(ctx context.Context, token string) error {
	if d.Real == nil {
		return fmt.Errorf("%w (%s)", ErrNoAgentCluster, d.RealMissing)
	}
	if token == "" || strings.ContainsAny(token, " \t\r\n\"'") || len(token) > 512 {
		return errors.New("the bootstrap token must be agent_bootstrap.token as POST /spaces answered it")
	}
	d.agentMu.Lock()
	api := d.agentURL
	d.agentMu.Unlock()
	if api == "" {
		return errors.New("the demo does not know Spaces' API yet")
	}
	rendered, err := manifests.Render(manifests.Values{Image: agentImage, AgentURL: api, BootstrapToken: token,
		BootstrapExpires: time.Now().Add(time.Hour).UTC()})
	if err != nil {
		return err
	}
	if err := install.Apply(ctx, d.Real.RESTConfig(), rendered, "spaces-demo-install", nil); err != nil {
		return fmt.Errorf("install the agent: %w", err)
	}
	return d.startAgent(ctx)
}

// StartAgent (re)starts the agent with what the private cluster holds now,
// as the kubelet starts the pod of a Deployment that another tool applied
// (the spaces CLI's agent install).
func (d *Demo) StartAgent(ctx context.Context) error {
	if d.Real == nil {
		return fmt.Errorf("%w (%s)", ErrNoAgentCluster, d.RealMissing)
	}
	return d.startAgent(ctx)
}

// startAgent stops the running agent, if any, and starts it again with
// what the cluster holds: the bootstrap Secret as a file, a fresh
// ServiceAccount token. A changed bootstrap is exchanged at once.
func (d *Demo) startAgent(ctx context.Context) error {
	d.agentMu.Lock()
	defer d.agentMu.Unlock()
	if d.agent != nil {
		d.agent.cancel()
		<-d.agent.done
		d.agent = nil
	}
	u, err := agent.CheckURL(d.agentURL)
	roots := d.agentMQTT
	if err != nil {
		return err
	}
	if d.agentDir == "" {
		if d.agentDir, err = os.MkdirTemp("", "spaces-demo-agent-"); err != nil {
			return err
		}
	}
	admin := kubernetes.NewForConfigOrDie(d.Real.RESTConfig())
	ns := manifests.Namespace
	bootFile, tokenFile := filepath.Join(d.agentDir, "bootstrap"), filepath.Join(d.agentDir, "sa-token")
	// The kubelet's part: mount the bootstrap Secret (optional, as in the
	// Deployment) and the ServiceAccount token.
	var boot []byte
	switch s, err := admin.CoreV1().Secrets(ns).Get(ctx, agentBoot, metav1.GetOptions{}); {
	case err == nil:
		boot = s.Data["token"]
	case !apierrors.IsNotFound(err):
		return err
	}
	if err := os.WriteFile(bootFile, boot, 0o600); err != nil {
		return err
	}
	writeToken := func(ctx context.Context) error {
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "spaces-agent",
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: new(int64(saTokenLife / time.Second))}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		return os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600)
	}
	if err := writeToken(ctx); err != nil {
		return fmt.Errorf("demo agent: the ServiceAccount's token: %w", err)
	}
	rc := d.Real.RESTConfigForToken("")
	rc.BearerTokenFile = tokenFile // re-read by client-go, as in a pod
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}

	log := d.log.With("component", "demo-agent")
	runCtx, cancel := context.WithCancel(context.Background())
	r := &agentRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		go func() {
			for {
				select {
				case <-runCtx.Done():
					return
				case <-time.After(saTokenLife / 3):
				}
				if err := writeToken(runCtx); err != nil && runCtx.Err() == nil {
					log.Warn("cannot renew the agent's ServiceAccount token", "error", err.Error())
				}
			}
		}()
		err := agent.Run(runCtx, agent.Config{AgentURL: u, BootstrapFile: bootFile, Kube: kube, KubeConfig: rc, Namespace: ns,
			StateSecret: agentState, Log: log, MQTTRoots: roots})
		cancel()
		switch {
		case errors.Is(err, agent.ErrRefused):
			log.Info("the agent stopped: its space is deregistered")
		case err != nil:
			log.Warn("the agent stopped", "error", err.Error())
		}
	}()
	d.agent = r
	return nil
}

// stopAgent stops the running agent and removes its files.
func (d *Demo) stopAgent() {
	d.agentMu.Lock()
	defer d.agentMu.Unlock()
	if d.agent != nil {
		d.agent.cancel()
		<-d.agent.done
		d.agent = nil
	}
	if d.agentDir != "" {
		_ = os.RemoveAll(d.agentDir)
	}
}
