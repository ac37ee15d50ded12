package client

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"spaces/shared/space"
)

// Defaults. The credential lives 24 h (space.AgentCredentialTTL); renewing
// at half-life survives half a day of Spaces being unreachable.
const (
	DefaultRenewBefore   = 12 * time.Hour
	DefaultRetryDelay    = 5 * time.Second
	DefaultMQTTRetry     = time.Minute
	defaultLeaseInterval = 35 * time.Second
	// Bounds on the cadence Spaces answers, so a wrong answer can neither
	// spin the agent nor silence it.
	MinLeaseInterval = 5 * time.Second
	maxLeaseInterval = 10 * time.Minute
)

// Config is the agent's configuration (cmd/spaces-agent reads it from
// the environment).
type Config struct {
	// AgentURL is the base of Spaces' agent routes, AgentFunction's
	// function URL (https; plain http only to a loopback host, for tests
	// and make run).
	AgentURL *url.URL
	// BootstrapFile holds the one-time bootstrap token (a mounted Secret).
	// It is read, never logged; once exchanged it may stay mounted.
	BootstrapFile string
	// Kube is the cluster's API server as the agent's ServiceAccount
	// (rest.InClusterConfig in a pod): GET /version, the state Secret,
	// namespaces; KubeConfig is the same configuration, for server-side
	// apply of the revisions handed to the agent (shared/kubeapply).
	Kube       kubernetes.Interface
	KubeConfig *rest.Config
	// Namespace and StateSecret name the Secret the agent keeps its
	// credential in.
	Namespace, StateSecret string
	// HTTP calls Spaces (default: a client with a 30 s timeout).
	HTTP *http.Client
	Log  *slog.Logger
	// Clock is the agent's time (default the system's).
	Clock Clock
	// RenewBefore: the credential is renewed once less than this is left
	// (default DefaultRenewBefore).
	RenewBefore time.Duration
	// RetryDelay is the mean wait after a failed call (default
	// DefaultRetryDelay), well inside a lease interval; each wait is
	// spread over half to one and a half times it (jitter).
	RetryDelay time.Duration
	// MQTTRoots verifies the presence endpoint's certificate (nil: the
	// system's roots, as for AWS IoT Core).
	MQTTRoots *x509.CertPool
	// MQTTRetry bounds the waits between the presence channel's connection
	// attempts (default DefaultMQTTRetry). paho waits in real time, not on
	// Clock, so a test that runs days on a simulated clock shortens it.
	MQTTRetry time.Duration

	refused string // the hash of a bootstrap Spaces refused
}

// CheckURL refuses a SPACES_AGENT_URL the agent must not send a secret to.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("SPACES_AGENT_URL must be an absolute URL without credentials, query or fragment")
	}
	switch h := u.Hostname(); {
	case u.Scheme == "https":
	case u.Scheme == "http" && (h == "127.0.0.1" || h == "::1" || h == "localhost"):
	default:
		return nil, fmt.Errorf("SPACES_AGENT_URL must be https (plain http only to a loopback host)")
	}
	return u, nil
}

// Clock is the agent's time: when credentials expire and how long it
// waits. Tests drive days of renewals through a clock of their own.
type Clock interface {
	Now() time.Time
	// After is a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Run connects the agent and keeps its lease until ctx ends (nil) or
// Spaces refuses its credential (ErrRefused: the space is deregistered;
// the caller stops cleanly). Any other failure is retried, except one that
// retrying cannot mend at start (no state Secret, no usable bootstrap).
// Each round is the same steps: credential, lease, presence, work, sleep.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	a := &agent{cfg: &cfg, api: &spacesAPI{base: cfg.AgentURL, http: cfg.HTTP, cluster: cfg.clusterBinding(ctx)}, log: cfg.Log,
		store:    stateSecret{kube: cfg.Kube, namespace: cfg.Namespace, name: cfg.StateSecret},
		interval: defaultLeaseInterval, nodes: newNodeWatch(cfg.Kube, cfg.Log, cfg.Clock)}
	var err error
	if a.st, err = a.store.load(ctx); err != nil {
		return err
	}
	if err := a.awaitCredential(ctx); err != nil || a.st.Credential == "" {
		return stopped(ctx, err)
	}
	a.log.Info("agent started", "space_id", a.st.SpaceID, "agent_version", Version, "credential_expires_at", a.st.ExpiresAt)
	defer func() { a.pres.close() }()
	for {
		next, err := a.round(ctx)
		if err != nil {
			return stopped(ctx, err)
		}
		if !a.sleep(ctx, next) {
			return nil
		}
	}
}

// stopped is Run's answer to a step's error: nil when ctx ended (a call
// cut short), except a refusal, which is the answer whatever the context.
func stopped(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrRefused) {
		return nil
	}
	return err
}

// agent is Run's state between rounds.
type agent struct {
	cfg      *Config
	api      *spacesAPI
	store    stateSecret
	log      *slog.Logger
	st       state
	unsaved  *state        // a renewed credential not in the state Secret yet: not used until it is
	leasing  bool          // the last lease renewal succeeded
	interval time.Duration // the lease interval Spaces last answered
	pres     *presence     // the presence channel, while the lease answer names one (presence.go)
	nodes    *nodeWatch    // the cluster's nodes (nodes.go)
	sent     *space.Nodes  // the nodes the last successful renewal reported: sent again only when they differ
	// unsigned: the presence channel's authorizer signs, and the stored
	// credential came without a signature (stored by an older agent): the
	// next round renews it for one, and it does not connect meanwhile.
	unsigned bool
}

// awaitCredential: until it holds a credential, the agent waits for a
// bootstrap (the install command may create its Secret just after the
// Deployment). It returns with no credential only when ctx ends.
func (a *agent) awaitCredential(ctx context.Context) error {
	for waiting := false; ; waiting = true {
		st, err := a.cfg.exchange(ctx, a.api, a.store, a.st)
		if err != nil {
			return err
		}
		if a.st = st; st.Credential != "" {
			return nil
		}
		if !waiting {
			a.log.Info("waiting for the bootstrap token", "file", a.cfg.BootstrapFile)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.cfg.Clock.After(a.cfg.RetryDelay):
		}
	}
}

// round runs the steps once and answers how long to sleep: the lease
// interval, the presence fallback while connected, or the retry delay
// after a failure. An error ends Run.
func (a *agent) round(ctx context.Context) (time.Duration, error) {
	next := a.interval
	retry, err := a.credential(ctx)
	if err != nil {
		return 0, err
	}
	w, ep, leased, err := a.lease(ctx)
	if err != nil {
		return 0, err
	}
	if retry || !leased {
		next = jitter(a.cfg.RetryDelay)
	}
	if !leased {
		return next, nil
	}
	a.presence(ep)
	next = min(next, a.interval)
	if a.pres.up() && next == a.interval {
		// Connected: IoT Core's lifecycle events keep the lease.
		next = a.pres.fallback()
	}
	return next, a.cfg.doWork(ctx, a.api, a.st, w) // only ErrRefused
}

// credential: a new bootstrap (a reinstall) replaces the credential; one
// with less than RenewBefore left is renewed, and a renewed one stored.
// retry: a renewal or its storing failed, and is tried again soon (the old
// credential works for space.RenewOverlap more).
func (a *agent) credential(ctx context.Context) (retry bool, err error) {
	if a.st, err = a.cfg.exchange(ctx, a.api, a.store, a.st); err != nil {
		return false, err
	}
	if a.unsaved == nil && (a.unsigned || a.st.ExpiresAt.Sub(a.cfg.Clock.Now()) < a.cfg.RenewBefore) {
		c, err := a.api.renew(ctx, a.st.Credential)
		switch {
		case errors.Is(err, ErrRefused):
			return false, err
		case err != nil:
			a.log.Warn("cannot renew the credential; retrying", "error", err.Error(), "expires_at", a.st.ExpiresAt)
			retry = true
		default:
			next := a.st
			next.Credential, next.ExpiresAt, next.TokenSignature = c.Credential, c.ExpiresAt, c.TokenSignature
			a.unsaved = &next
			a.log.Info("renewed the credential", "expires_at", c.ExpiresAt)
		}
	}
	if a.unsaved != nil {
		// Used only once stored: a restart reads the Secret back, and a
		// credential presented after the one renewed from it was used is
		// a copy to Spaces, which revokes them all. Until then the old one
		// works (the new one unused) for space.RenewOverlap.
		if err := a.store.save(ctx, *a.unsaved); err != nil {
			a.log.Warn("cannot store the renewed credential; carrying on with the old one and retrying", "error", err.Error())
			retry = true
		} else {
			a.st, a.unsaved = *a.unsaved, nil
		}
	}
	return retry, nil
}

// lease renews the lease (renewLease); leased is false after a failure
// that is retried. Only ErrRefused is an error.
func (a *agent) lease(ctx context.Context) (w space.AgentWork, ep *space.PresenceEndpoint, leased bool, err error) {
	var send *space.Nodes
	if cur := a.nodes.current(ctx); cur != nil && !cur.Equal(a.sent) {
		send = cur
	}
	d, w, ep, err := renewLease(ctx, a.api, a.cfg.Kube, a.st, send)
	if errors.Is(err, ErrRefused) {
		return w, nil, false, err
	}
	if err != nil {
		a.log.Warn("cannot renew the lease; retrying", "error", err.Error())
		a.leasing = false
		return w, nil, false, nil
	}
	if !a.leasing {
		a.log.Info("lease renewed", "space_id", a.st.SpaceID, "interval", d.String())
	}
	a.leasing, a.interval = true, d
	if send != nil {
		a.sent = send
	}
	return w, ep, true, nil
}

// presence holds the channel the lease answer names: the newest credential
// (and its token's signature) for its next (re)connect, and a fresh
// connection for a new endpoint (or none). A credential without the
// signature a signing authorizer needs is renewed first: a CONNECT
// without one is refused by IoT Core.
func (a *agent) presence(ep *space.PresenceEndpoint) {
	a.unsigned = ep != nil && ep.TokenKeyName != "" && a.st.TokenSignature == ""
	if a.unsigned {
		a.log.Info("the presence channel needs a signed credential; renewing it first")
		a.pres.close()
		a.pres = nil
		return
	}
	a.pres.use(a.st.Credential, a.st.TokenSignature)
	if !a.pres.same(ep) {
		a.pres.close()
		a.pres = nil
		if ep != nil {
			a.pres = dialPresence(*ep, a.st.Credential, a.st.TokenSignature, a.cfg.MQTTRoots, a.cfg.MQTTRetry, a.log)
		}
	}
}

// sleep waits next, or less when the presence channel asks for a renewal
// (connected, woken, or disconnected); false when ctx ended.
func (a *agent) sleep(ctx context.Context, next time.Duration) bool {
	select {
	case <-ctx.Done():
		a.log.Info("agent stopping", "reason", context.Cause(ctx).Error())
		return false
	case <-a.cfg.Clock.After(next):
	case <-a.pres.pokes():
	}
	return true
}

// exchange trades the mounted bootstrap for a credential when it is not
// the one the stored credential came from, and stores the result before
// anything else: the bootstrap is spent once exchanged. A refused
// bootstrap with a stored credential is left (the agent carries on); one
// without is the end (a new bootstrap is needed).
func (cfg *Config) exchange(ctx context.Context, api *spacesAPI, store stateSecret, st state) (state, error) {
	boot, err := readBootstrap(cfg.BootstrapFile)
	if err != nil || boot == "" {
		return st, err
	}
	h := hashToken(boot)
	if h == st.BootstrapSHA256 || h == cfg.refused {
		return st, nil
	}
	var c credential
	err = retry(ctx, cfg.Clock, cfg.RetryDelay, cfg.Log, func() error {
		var err error
		c, err = api.exchange(ctx, boot)
		return err
	})
	switch {
	case err == nil:
	case errors.Is(err, ErrRefused) && st.Credential != "":
		cfg.refused = h
		cfg.Log.Warn("the mounted bootstrap token was refused; carrying on with the stored credential", "error", err.Error())
		return st, nil
	case errors.Is(err, ErrRefused):
		// Not an ErrRefused: the agent has no credential to be refused,
		// and stopping with exit 0 would hide a failed install.
		return st, fmt.Errorf("the bootstrap token was refused (it expired, was already used, or its space is deregistered): "+
			"issue a new one with POST /spaces/{id}/agent-bootstrap and apply it (%v)", err)
	default:
		return st, err // ctx ended
	}
	st = state{Credential: c.Credential, ExpiresAt: c.ExpiresAt, SpaceID: c.SpaceID, BootstrapSHA256: h, TokenSignature: c.TokenSignature}
	cfg.Log.Info("exchanged the bootstrap token for a credential", "space_id", c.SpaceID, "expires_at", c.ExpiresAt)
	// Until the credential is stored, a restart would need a new bootstrap.
	return st, retry(ctx, cfg.Clock, cfg.RetryDelay, cfg.Log, func() error { return store.save(ctx, st) })
}

// renewLease reads the cluster's version, as the prober's GET /version
// does for a direct space, and reports it, with the cluster's nodes when
// they changed (nil: not sent): a cluster whose API server does not answer
// renews no lease, so its space turns inactive.
func renewLease(ctx context.Context, api *spacesAPI, kube kubernetes.Interface, st state, nodes *space.Nodes) (time.Duration, space.AgentWork, *space.PresenceEndpoint, error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return 0, space.AgentWork{}, nil, fmt.Errorf("GET /version from the cluster: %w", err)
	}
	var v ServerVersion
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, space.AgentWork{}, nil, fmt.Errorf("GET /version from the cluster: %w", err)
	}
	a, err := api.lease(ctx, st.Credential, st.SpaceID, v, nodes)
	return leaseInterval(a.LeaseIntervalSeconds), a.Work, a.Presence, err
}

func leaseInterval(seconds int) time.Duration {
	if seconds <= 0 {
		return defaultLeaseInterval
	}
	return min(max(time.Duration(seconds)*time.Second, MinLeaseInterval), maxLeaseInterval)
}

// retry calls f until it succeeds, Spaces refuses (ErrRefused), or ctx
// ends.
func retry(ctx context.Context, clock Clock, delay time.Duration, log *slog.Logger, f func() error) error {
	for {
		err := f()
		if err == nil || errors.Is(err, ErrRefused) {
			return err
		}
		wait := jitter(delay)
		log.Warn("retrying", "error", err.Error(), "in", wait.String())
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-clock.After(wait):
		}
	}
}

// jitter is a retry's wait: d spread at random over [d/2, 3d/2). Spaces'
// URL throttles by the second (a function URL's rate, answering 429), and
// a flood takes each second's share early in it: a retry a fixed whole
// number of seconds later lands in the same part of the second, refused
// again every time, while a spread one lands anywhere
// (TestRetriesSpreadOverTheThrottle).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d/2 + rand.N(d)
}

// readBootstrap reads the token file; a missing or empty file is no token.
func readBootstrap(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the bootstrap token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (c *Config) defaults() {
	if c.HTTP == nil {
		c.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.RenewBefore == 0 {
		c.RenewBefore = DefaultRenewBefore
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.MQTTRetry <= 0 {
		c.MQTTRetry = DefaultMQTTRetry
	}
}
