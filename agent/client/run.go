package client

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	Now  func() time.Time
	// RenewBefore: the credential is renewed once less than this is left
	// (default DefaultRenewBefore).
	RenewBefore time.Duration
	// RetryDelay is the wait after a failed call (default
	// DefaultRetryDelay), well inside a lease interval.
	RetryDelay time.Duration
	// MQTTRoots verifies the presence endpoint's certificate (nil: the
	// system's roots, as for AWS IoT Core).
	MQTTRoots *x509.CertPool

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

// Run connects the agent and keeps its lease until ctx ends (nil) or
// Spaces refuses its credential (ErrRefused: the space is deregistered;
// the caller stops cleanly). Any other failure is retried, except one that
// retrying cannot mend at start (no state Secret, no usable bootstrap).
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	api := &spacesAPI{base: cfg.AgentURL, http: cfg.HTTP}
	store := stateSecret{kube: cfg.Kube, namespace: cfg.Namespace, name: cfg.StateSecret}
	log := cfg.Log

	st, err := store.load(ctx)
	if err != nil {
		return err
	}
	interval := defaultLeaseInterval
	// Until it holds a credential, the agent waits for a bootstrap (the
	// install command may create its Secret just after the Deployment).
	for waiting := false; ; waiting = true {
		if st, err = cfg.exchange(ctx, api, store, st); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while exchanging
			}
			return err
		}
		if st.Credential != "" {
			break
		}
		if !waiting {
			log.Info("waiting for the bootstrap token", "file", cfg.BootstrapFile)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(cfg.RetryDelay):
		}
	}

	log.Info("agent started", "space_id", st.SpaceID, "agent_version", Version, "credential_expires_at", st.ExpiresAt)
	unsaved, leasing := false, false
	var pres *presence // the presence channel, while the lease answer names one (presence.go)
	defer func() { pres.close() }()
	for {
		next := interval
		// A new bootstrap (a reinstall) replaces the credential.
		if st, err = cfg.exchange(ctx, api, store, st); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while exchanging
			}
			return err
		}
		if st.ExpiresAt.Sub(cfg.Now()) < cfg.RenewBefore {
			c, err := api.renew(ctx, st.Credential)
			switch {
			case errors.Is(err, ErrRefused):
				return err
			case err != nil:
				log.Warn("cannot renew the credential; retrying", "error", err.Error(), "expires_at", st.ExpiresAt)
				next = cfg.RetryDelay
			default:
				// The old credential works for an hour more (space.RenewOverlap),
				// so a state write that fails here is retried below.
				st.Credential, st.ExpiresAt, unsaved = c.Credential, c.ExpiresAt, true
				log.Info("renewed the credential", "expires_at", c.ExpiresAt)
			}
		}
		if unsaved {
			if err := store.save(ctx, st); err != nil {
				log.Warn("cannot store the renewed credential; retrying", "error", err.Error())
				next = cfg.RetryDelay
			} else {
				unsaved = false
			}
		}
		if d, w, ep, err := renewLease(ctx, api, cfg.Kube, st); errors.Is(err, ErrRefused) {
			return err
		} else if err != nil {
			log.Warn("cannot renew the lease; retrying", "error", err.Error())
			next, leasing = cfg.RetryDelay, false
		} else {
			if !leasing {
				log.Info("lease renewed", "space_id", st.SpaceID, "interval", d.String())
			}
			leasing, interval = true, d
			pres.use(st.Credential)
			// A new endpoint (or none): connect afresh.
			if !pres.same(ep) {
				pres.close()
				pres = nil
				if ep != nil {
					pres = dialPresence(*ep, st.Credential, cfg.MQTTRoots, log)
				}
			}
			next = min(next, interval)
			if pres.up() && next == interval {
				// Connected: IoT Core's lifecycle events keep the lease.
				next = pres.fallback()
			}
			if err := cfg.doWork(ctx, api, st, w); err != nil {
				return err // ErrRefused
			}
		}
		select {
		case <-ctx.Done():
			log.Info("agent stopping", "reason", context.Cause(ctx).Error())
			return nil
		case <-time.After(next):
		case <-pres.pokes(): // connected, woken, or disconnected: renew now
		}
	}
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
	err = retry(ctx, cfg.RetryDelay, cfg.Log, func() error {
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
	st = state{Credential: c.Credential, ExpiresAt: c.ExpiresAt, SpaceID: c.SpaceID, BootstrapSHA256: h}
	cfg.Log.Info("exchanged the bootstrap token for a credential", "space_id", c.SpaceID, "expires_at", c.ExpiresAt)
	// Until the credential is stored, a restart would need a new bootstrap.
	return st, retry(ctx, cfg.RetryDelay, cfg.Log, func() error { return store.save(ctx, st) })
}

// renewLease reads the cluster's version, as the prober's GET /version
// does for a direct space, and reports it: a cluster whose API server does
// not answer renews no lease, so its space turns inactive.
func renewLease(ctx context.Context, api *spacesAPI, kube kubernetes.Interface, st state) (time.Duration, space.AgentWork, *space.PresenceEndpoint, error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return 0, space.AgentWork{}, nil, fmt.Errorf("GET /version from the cluster: %w", err)
	}
	var v ServerVersion
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, space.AgentWork{}, nil, fmt.Errorf("GET /version from the cluster: %w", err)
	}
	a, err := api.lease(ctx, st.Credential, st.SpaceID, v)
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
func retry(ctx context.Context, delay time.Duration, log *slog.Logger, f func() error) error {
	for {
		err := f()
		if err == nil || errors.Is(err, ErrRefused) {
			return err
		}
		log.Warn("retrying", "error", err.Error(), "in", delay.String())
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(delay):
		}
	}
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
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RenewBefore == 0 {
		c.RenewBefore = DefaultRenewBefore
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultRetryDelay
	}
}
