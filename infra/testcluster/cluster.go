// Package testcluster runs light Kubernetes API servers for tests: TLS on a
// loopback port, bearer-token checks, the paths Spaces uses (/version,
// namespaces, enough discovery for client-go's discovery and dynamic
// clients), and faults switchable at run time — down, hung, slow, trickling,
// unauthorized, forbidden, garbled, bad version, server error. A cluster
// costs one listener and a few goroutines, so a test can run a thousand.
//
// It is no substitute for a real kube-apiserver: it implements no
// admission, no RBAC, no watch and no apply. Use it for fault injection and
// scale, and a real API server for end-to-end proof.
package testcluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"spaces/infra/loopport"
	"spaces/shared/kubecred"
)

// Option configures a cluster.
type Option func(*config)

type config struct {
	ca         *CA
	tokens     []string
	gitVersion string
	platform   string
	http2      bool
	errorLog   *log.Logger
	check      func(ctx context.Context, token string) bool
	cert       *tls.Certificate
}

// WithCA serves with a certificate from ca, shared with every other cluster
// of ca. Without it each cluster makes its own CA.
func WithCA(ca *CA) Option { return func(c *config) { c.ca = ca } }

// WithTokens sets the bearer tokens the cluster accepts at start. Without
// it the cluster accepts one random token, returned by Token.
func WithTokens(tokens ...string) Option {
	return func(c *config) { c.tokens = append(c.tokens, tokens...) }
}

// WithVersion sets what /version reports (default v1.31.4, linux/amd64).
func WithVersion(gitVersion, platform string) Option {
	return func(c *config) { c.gitVersion, c.platform = gitVersion, platform }
}

// WithServingCertificate serves cert instead of the CA's shared one
// (CA.ServerCertificate); it must be signed by the cluster's CA
// (CA.ServerCertificateUntil), for instance to serve one about to expire.
func WithServingCertificate(cert tls.Certificate) Option {
	return func(c *config) { c.cert = &cert }
}

// WithHTTP2 offers HTTP/2 in the TLS handshake, as real API servers do.
func WithHTTP2() Option { return func(c *config) { c.http2 = true } }

// WithErrorLog receives the server's connection errors (TLS handshake
// failures and the like), which are discarded by default because faults
// produce them on purpose.
func WithErrorLog(l *log.Logger) Option { return func(c *config) { c.errorLog = l } }

// WithTokenCheck also accepts every bearer token check approves, asked
// with the request's context for each request whose token is not in the
// accepted set: for tokens made client-side, such as EKS's presigned STS
// URLs, that only an authenticator can verify (simcloud.Cloud.TokenCheck).
func WithTokenCheck(check func(ctx context.Context, token string) bool) Option {
	return func(c *config) { c.check = check }
}

// Cluster is one running test API server. All methods are safe for
// concurrent use.
type Cluster struct {
	srv   *httptest.Server
	ln    *listener
	caPEM []byte
	token string
	mux   *http.ServeMux
	done  chan struct{} // closed by Close: wakes slow, hung and trickling handlers

	closeOnce sync.Once

	mu         sync.Mutex
	tokens     map[string]bool
	mode       Mode
	next       []Mode
	held       []net.Conn // connections swallowed by Hang
	requests   map[string]int
	served401  int
	accepted   int
	open       int
	gitVersion string
	platform   string
	serving    *tls.Config // set by SetServingCertificate
	namespaces map[string]corev1.Namespace
	rv         int64
	check      func(ctx context.Context, token string) bool

	decOnce sync.Once
	dec     apiruntime.Decoder
}

// New starts a healthy cluster.
func New(opts ...Option) (*Cluster, error) {
	cfg := config{gitVersion: "v1.31.4", platform: "linux/amd64"}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.ca == nil {
		ca, err := NewCA()
		if err != nil {
			return nil, err
		}
		cfg.ca = ca
	}
	cert, err := cfg.ca.ServerCertificate()
	if err != nil {
		return nil, err
	}
	if cfg.cert != nil {
		cert = *cfg.cert
	}
	if len(cfg.tokens) == 0 {
		cfg.tokens = []string{randomToken()}
	}
	if cfg.errorLog == nil {
		cfg.errorLog = log.New(io.Discard, "", 0)
	}

	c := &Cluster{
		caPEM:      cfg.ca.PEM(),
		token:      cfg.tokens[0],
		done:       make(chan struct{}),
		tokens:     map[string]bool{},
		requests:   map[string]int{},
		gitVersion: cfg.gitVersion,
		platform:   cfg.platform,
		namespaces: map[string]corev1.Namespace{},
		check:      cfg.check,
	}
	for _, t := range cfg.tokens {
		c.tokens[t] = true
	}
	now := time.Now()
	for _, ns := range []string{"default", "kube-node-lease", "kube-public", "kube-system"} {
		c.namespaces[ns] = c.newNamespaceLocked(ns, now)
	}
	c.mux = c.routes()

	c.srv = httptest.NewUnstartedServer(c)
	// A port Stop and Start can reopen: one from :0 may be taken meanwhile.
	inner, err := loopport.Listen()
	if err != nil {
		return nil, err
	}
	c.srv.Listener.Close()
	c.ln = newListener(inner, c.admit)
	c.srv.Listener = c.ln
	c.srv.EnableHTTP2 = cfg.http2
	c.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		// Called on every handshake (GetCertificate is not without SNI,
		// and a client of 127.0.0.1 sends none): the certificate set by
		// SetServingCertificate, or nil for the one above.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.serving, nil
		}}
	c.srv.Config.ErrorLog = cfg.errorLog
	c.srv.Config.ConnState = c.connState
	c.srv.StartTLS()
	return c, nil
}

// NewForTest starts a cluster that closes when tb ends, failing tb if it
// cannot start.
func NewForTest(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	c, err := New(opts...)
	if err != nil {
		tb.Fatalf("testcluster: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// URL is the API server address, https://127.0.0.1:port. It stays the same
// across Stop and Start.
func (c *Cluster) URL() string { return c.srv.URL }

// CAPEM is the PEM of the CA that signed the serving certificate.
func (c *Cluster) CAPEM() []byte { return append([]byte(nil), c.caPEM...) }

// Token is the first token the cluster accepted at start (it may have been
// revoked since).
func (c *Cluster) Token() string { return c.token }

// Credentials reach the cluster with Token and no expiry.
func (c *Cluster) Credentials() kubecred.Credentials {
	return kubecred.Credentials{Server: c.URL(), CAData: c.CAPEM(), Token: c.token}
}

// RESTConfig is a client-go configuration for the cluster with Token.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            c.URL(),
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM()},
	}
}

// AddToken makes the cluster accept token.
func (c *Cluster) AddToken(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens[token] = true
}

// RevokeToken makes the cluster reject token from the next request on.
func (c *Cluster) RevokeToken(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.tokens, token)
}

// SetTokens replaces the accepted tokens; with none, every request is 401
// unless a token check (WithTokenCheck) approves its token.
func (c *Cluster) SetTokens(tokens ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens = make(map[string]bool, len(tokens))
	for _, t := range tokens {
		c.tokens[t] = true
	}
}

// SetVersion changes what /version reports, as an upgrade would.
func (c *Cluster) SetVersion(gitVersion, platform string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gitVersion, c.platform = gitVersion, platform
}

// SetServingCertificate makes the API server present cert from now on, as
// a restart with a renewed certificate would: the connections open now are
// closed, so a client's kept-alive connection sees the new one too. cert
// must be signed by the cluster's CA for clients to trust it.
func (c *Cluster) SetServingCertificate(cert tls.Certificate) {
	c.mu.Lock()
	cfg := c.srv.TLS.Clone() // httptest's: with its NextProtos
	cfg.Certificates, cfg.GetConfigForClient = []tls.Certificate{cert}, nil
	c.serving = cfg
	c.mu.Unlock()
	c.srv.CloseClientConnections()
}

// SetMode switches how the cluster answers from now on and drops modes
// queued with Next. Down and Hang also cut the connections already open, so
// a client's kept-alive connection does not slip past the fault.
func (c *Cluster) SetMode(m Mode) {
	c.mu.Lock()
	c.next = nil
	if m.kind == kindUnauthorizedOnce {
		c.mode, c.next = Healthy(), []Mode{Unauthorized()}
	} else {
		c.mode = m
	}
	var held []net.Conn
	if m.kind != kindHang {
		held, c.held = c.held, nil
	}
	c.mu.Unlock()
	closeAll(held)
	if m.kind == kindDown || m.kind == kindHang {
		c.srv.CloseClientConnections()
	}
}

// Mode returns the current base mode (ignoring modes queued with Next).
func (c *Cluster) Mode() Mode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mode
}

// Next queues modes for the next requests, one request each, in order;
// after them the base mode applies again. Use it for flapping clusters.
// Queued modes act on requests, so a queued Down aborts one request and a
// queued Hang blocks one request; Down and Hang as base modes also act on
// new connections.
func (c *Cluster) Next(modes ...Mode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range modes {
		if m.kind == kindUnauthorizedOnce {
			m = Unauthorized()
		}
		c.next = append(c.next, m)
	}
}

// Stop closes the listening socket and every open connection: clients get
// connection refused until Start.
func (c *Cluster) Stop() error {
	if err := c.ln.stop(); err != nil {
		return err
	}
	c.srv.CloseClientConnections()
	c.mu.Lock()
	held := c.held
	c.held = nil
	c.mu.Unlock()
	closeAll(held)
	return nil
}

// Start listens again on the same port after Stop.
func (c *Cluster) Start() error { return c.ln.start() }

// Close shuts the cluster down for good, releasing every connection and
// handler.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.mu.Lock()
		held := c.held
		c.held = nil
		c.mu.Unlock()
		closeAll(held)
		c.srv.Close()
	})
}

// Requests counts the requests that reached the server for path, whatever
// they were answered.
func (c *Cluster) Requests(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[path]
}

// Served401 counts the 401 answers.
func (c *Cluster) Served401() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.served401
}

// Namespaces lists the namespace names the cluster holds, sorted.
func (c *Cluster) Namespaces() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sortedNames(c.namespaces)
}

// Accepted counts the connections the server has taken (connections a
// fault swallowed at accept are not counted): a client that reuses its
// connections keeps this at one.
func (c *Cluster) Accepted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted
}

// OpenConns counts the server's connections open now. The server notices a
// client's close asynchronously, so poll when waiting for it to drop.
func (c *Cluster) OpenConns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

func (c *Cluster) connState(_ net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateNew:
		c.accepted++
		c.open++
	case http.StateClosed, http.StateHijacked:
		c.open--
	}
}

// admit applies connection-level faults to a freshly accepted connection.
func (c *Cluster) admit(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.mode.kind {
	case kindDown:
		conn.Close()
		return false
	case kindHang:
		c.held = append(c.held, conn)
		return false
	}
	return true
}

// take counts a request and returns the mode that answers it.
func (c *Cluster) take(r *http.Request) Mode {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests[r.URL.Path]++
	if len(c.next) > 0 {
		m := c.next[0]
		c.next = c.next[1:]
		return m
	}
	return c.mode
}

func (c *Cluster) authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	token = strings.TrimSpace(token)
	c.mu.Lock()
	ok = c.tokens[token]
	c.mu.Unlock()
	// The check may make a network round trip: never under the lock.
	return ok || (c.check != nil && token != "" && c.check(r.Context(), token))
}

// ServeHTTP applies request-level faults, checks the token and serves the
// API. Connection faults and 401/403 come before authentication, as they
// would from a broken load balancer or a rejecting authenticator; the
// other faults model a server that authenticates and then answers badly.
func (c *Cluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := c.take(r)
	switch m.kind {
	case kindDown:
		panic(http.ErrAbortHandler) // closes the connection without an answer
	case kindHang:
		c.wait(r.Context(), -1)
		panic(http.ErrAbortHandler)
	case kindUnauthorized:
		c.writeUnauthorized(w)
		return
	case kindForbidden:
		writeForbidden(w, r)
		return
	case kindSlow:
		if !c.wait(r.Context(), m.delay) {
			panic(http.ErrAbortHandler)
		}
	}
	if !c.authorized(r) {
		c.writeUnauthorized(w)
		return
	}
	switch m.kind {
	case kindGarbled:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"kind":"NamespaceList","gitVersion":"v1.31.4",<<garbled`)
		return
	case kindServerError:
		writeStatus(w, internalError())
		return
	case kindBadVersion:
		if r.URL.Path == "/version" {
			writeJSON(w, http.StatusOK, map[string]string{"major": "1", "minor": "31", "gitVersion": "not-a-version", "platform": "linux/amd64"})
			return
		}
	case kindTrickle:
		rec := httptest.NewRecorder()
		c.mux.ServeHTTP(rec, r)
		c.trickle(w, r, rec, m.delay)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// wait sleeps d (forever when d < 0) unless the client goes away or the
// cluster closes first; it reports whether the full time passed.
func (c *Cluster) wait(ctx context.Context, d time.Duration) bool {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return true
	case <-ctx.Done():
	case <-c.done:
	}
	return false
}

// trickle sends rec's answer with the body one byte every d.
func (c *Cluster) trickle(w http.ResponseWriter, r *http.Request, rec *httptest.ResponseRecorder, d time.Duration) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	body := rec.Body.Bytes()
	w.WriteHeader(rec.Code)
	flusher, _ := w.(http.Flusher)
	for i := range body {
		if flusher != nil {
			flusher.Flush()
		}
		if !c.wait(r.Context(), d) {
			panic(http.ErrAbortHandler)
		}
		if _, err := w.Write(body[i : i+1]); err != nil {
			return
		}
	}
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

func randomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "tc-" + hex.EncodeToString(b)
}
