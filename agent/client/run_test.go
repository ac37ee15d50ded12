package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"spaces/shared/space"
)

// jumpClock is simulated time that passes only while the agent waits:
// After moves it on by d and fires at once.
type jumpClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *jumpClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *jumpClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	c.mu.Unlock()
	return ch
}

// fakeSpaces is Spaces' agent routes on the simulated clock: a credential
// lives space.AgentCredentialTTL, a renewed one space.RenewOverlap more,
// and anything else is refused with 401, as Spaces does.
type fakeSpaces struct {
	clock    *jumpClock
	interval int // lease_interval_seconds answered
	stopAt   time.Time
	stop     context.CancelFunc

	mu       sync.Mutex
	valid    map[string]time.Time // credential -> expiry
	issued   int
	renewals int
	leases   []time.Time
	refused  []string
	// Reuse detection, as Spaces': a credential presented after the one
	// renewed from it was used is a superseded one.
	renewedTo map[string]string // credential -> the one renewed from it
	used      map[string]bool
	reused    []string
	clusters  []string // the "cluster" of each exchange and lease body, as sent
	nodes     []string // the "nodes" of each lease body that has them
	// presence is the channel each lease answer names (nil: none); sign,
	// when set, signs each credential issued (its token_signature).
	presence *space.PresenceEndpoint
	sign     func(cred string) string
}

func (f *fakeSpaces) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	var body struct{ Cluster, Nodes json.RawMessage }
	_ = json.NewDecoder(r.Body).Decode(&body)
	if r.URL.Path == "/agent/exchange" || strings.HasSuffix(r.URL.Path, "/lease") {
		f.clusters = append(f.clusters, string(body.Cluster))
	}
	if body.Nodes != nil {
		f.nodes = append(f.nodes, string(body.Nodes))
	}
	issue := func() {
		f.issued++
		c := "cred-" + strconv.Itoa(f.issued)
		f.valid[c] = now.Add(space.AgentCredentialTTL)
		w.Header().Set("Content-Type", "application/json")
		answer := credential{Credential: c, ExpiresAt: f.valid[c], SpaceID: presenceSpaceID}
		if f.sign != nil {
			answer.TokenSignature = f.sign(c)
		}
		_ = json.NewEncoder(w).Encode(answer)
	}
	if r.URL.Path == "/agent/exchange" && token == "boot" && f.issued == 0 {
		issue()
		return
	}
	if next, ok := f.renewedTo[token]; ok && f.used[next] {
		f.reused = append(f.reused, token+" at "+now.Format(time.RFC3339))
	}
	f.used[token] = true
	if exp, ok := f.valid[token]; !ok || !now.Before(exp) {
		f.refused = append(f.refused, r.Method+" "+r.URL.Path+" at "+now.Format(time.RFC3339))
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"status":401,"title":"Unauthorized","detail":"the agent token is not valid"}`))
		return
	}
	switch {
	case r.URL.Path == "/agent/credential":
		f.renewals++
		if end := now.Add(space.RenewOverlap); end.Before(f.valid[token]) {
			f.valid[token] = end
		}
		issue()
		f.renewedTo[token] = "cred-" + strconv.Itoa(f.issued)
	case r.URL.Path == "/agent/spaces/"+presenceSpaceID+"/lease":
		f.leases = append(f.leases, now)
		if !now.Before(f.stopAt) {
			f.stop()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(leaseAnswer{LeaseIntervalSeconds: f.interval, Presence: f.presence})
	default:
		http.NotFound(w, r)
	}
}

const presenceSpaceID = "0a1b2c3d-0000-4000-8000-000000000000"

// fakeKube is the API server calls the agent makes with no work to do:
// GET /version and its state Secret; it refuses to list nodes (403), as a
// cluster where the agent's ClusterRole predates the node count does.
func fakeKube(t *testing.T) kubernetes.Interface { return fakeKubeFailing(t, nil) }

// fakeKubeFailing is fakeKube whose state Secret's n-th update (from 1)
// fails with 500 when fail(n).
func fakeKubeFailing(t *testing.T, fail func(n int) bool) kubernetes.Interface {
	var mu sync.Mutex
	puts := 0
	secret := corev1.Secret{}
	secret.Name, secret.Namespace, secret.ResourceVersion = "state", "agent", "1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/version":
			_, _ = w.Write([]byte(`{"gitVersion":"v1.31.0","platform":"linux/amd64"}`))
		case r.URL.Path == "/api/v1/namespaces" && r.URL.Query().Get("fieldSelector") == "metadata.name=kube-system":
			_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","items":[{"metadata":{"name":"kube-system","uid":"6f1c1c1e-9a2b-4c3d-8e4f-5a6b7c8d9e0f"}}]}`))
		case r.URL.Path == "/api/v1/namespaces/agent/secrets/state" && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(secret)
		case r.URL.Path == "/api/v1/namespaces/agent/secrets/state" && r.Method == http.MethodPut:
			if puts++; fail != nil && fail(puts) {
				http.Error(w, `{"kind":"Status","status":"Failure","code":500}`, http.StatusInternalServerError)
				return
			}
			var s corev1.Secret
			if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			n, _ := strconv.Atoi(secret.ResourceVersion)
			s.ResourceVersion = strconv.Itoa(n + 1)
			secret = s
			_ = json.NewEncoder(w).Encode(secret)
		case r.URL.Path == "/api/v1/nodes":
			nodeLists.Add(1)
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
				`"message":"nodes is forbidden: User \"system:serviceaccount:agent:spaces-agent\" cannot list resource \"nodes\""}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	k, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}) // no real-time rate limit
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRunForAWeek: seven simulated days of an agent without a presence
// channel, in well under a second of real time per day: it renews its
// credential every half-life and never presents an expired one, and
// renews its lease every interval Spaces answers, without a gap.
func TestRunForAWeek(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clk := &jumpClock{now: start}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	spaces := &fakeSpaces{clock: clk, interval: 600, stopAt: start.Add(7 * 24 * time.Hour), stop: cancel, valid: map[string]time.Time{},
		renewedTo: map[string]string{}, used: map[string]bool{}}
	srv := httptest.NewServer(spaces)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	boot := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(boot, []byte("boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(ctx, Config{AgentURL: base, BootstrapFile: boot, Kube: fakeKube(t), Namespace: "agent", StateSecret: "state",
		Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("Run: %v (refused: %q)", err, spaces.refused)
	}
	spaces.mu.Lock()
	defer spaces.mu.Unlock()
	if len(spaces.refused) != 0 {
		t.Fatalf("Spaces refused %q", spaces.refused)
	}
	// A credential lives 24 h and is renewed with under 12 h left: 13
	// renewals in 7 days (at 12 h, 24 h, ..., 156 h).
	if spaces.renewals != 13 {
		t.Errorf("%d renewals in 7 days, want 13", spaces.renewals)
	}
	// The first answer's interval applies from the second renewal on
	// (until then the default 35 s): then one every 10 minutes.
	if n := len(spaces.leases); n < 7*24*6 || n > 7*24*6+2 {
		t.Errorf("%d lease renewals, want one every 10 minutes (about %d)", n, 7*24*6)
	}
	for i := 1; i < len(spaces.leases); i++ {
		if gap := spaces.leases[i].Sub(spaces.leases[i-1]); gap > 10*time.Minute || gap < defaultLeaseInterval {
			t.Fatalf("lease renewals %s apart at %s", gap, spaces.leases[i-1])
		}
	}
}

// TestRenewedCredentialUsedOnlyOnceStored: a renewed credential that
// cannot be stored in the state Secret is not used; the agent carries on
// with the old one (valid while the new one is unused), so that a restart,
// which reads the old one back, never presents a credential superseded by
// one it used: Spaces would take it for a copy and revoke the space's
// credentials (space.ErrCredentialReused).
func TestRenewedCredentialUsedOnlyOnceStored(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clk := &jumpClock{now: start}
	boot := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(boot, []byte("boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	failing := true
	kube := fakeKubeFailing(t, func(n int) bool { return n > 1 && failing }) // the exchange's save only
	spaces := &fakeSpaces{clock: clk, interval: 600, valid: map[string]time.Time{},
		renewedTo: map[string]string{}, used: map[string]bool{}}
	srv := httptest.NewServer(spaces)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	run := func(until time.Time) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		spaces.mu.Lock()
		spaces.stopAt, spaces.stop = until, cancel
		spaces.mu.Unlock()
		if err := Run(ctx, Config{AgentURL: base, BootstrapFile: boot, Kube: kube, Namespace: "agent", StateSecret: "state",
			Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
			t.Fatalf("Run: %v (refused: %q)", err, spaces.refused)
		}
	}
	// Past the first renewal (at 12 h), whose credential cannot be stored;
	// the pod stops there.
	run(start.Add(12*time.Hour + 30*time.Minute))
	spaces.mu.Lock()
	renewed := spaces.renewals
	spaces.mu.Unlock()
	if renewed == 0 {
		t.Fatal("no renewal before the stop")
	}
	// A restart, with a Secret that works again: it reads the stored
	// credential and carries on for a day.
	failing = false
	run(clk.Now().Add(24 * time.Hour))
	spaces.mu.Lock()
	defer spaces.mu.Unlock()
	if len(spaces.reused) != 0 || len(spaces.refused) != 0 {
		t.Errorf("superseded credentials presented: %q (refused: %q)", spaces.reused, spaces.refused)
	}
}

// TestAgentSendsItsCluster: the agent names its cluster (the kube-system
// namespace's UID, the SHA-256 of its API server's CA certificate) in its
// exchange and in every lease, the same each time, so that Spaces binds
// its credentials to it (space.ClusterBinding).
// nodeLists counts fakeKube's node lists.
var nodeLists atomic.Int64

// TestAgentWithoutNodePermission: an agent whose ClusterRole lacks
// list/watch on nodes (installed before the node count) renews its lease
// all the same, sends no nodes, logs it once, and asks again once an hour
// (silently), not every lease.
func TestAgentWithoutNodePermission(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clk := &jumpClock{now: start}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	spaces := &fakeSpaces{clock: clk, interval: 600, stopAt: start.Add(3 * time.Hour), stop: cancel, valid: map[string]time.Time{},
		renewedTo: map[string]string{}, used: map[string]bool{}}
	srv := httptest.NewServer(spaces)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	boot := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(boot, []byte("boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	lists := nodeLists.Load()
	err := Run(ctx, Config{AgentURL: base, BootstrapFile: boot, Kube: fakeKube(t), Namespace: "agent", StateSecret: "state",
		Clock: clk, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("the agent stopped: %v", err)
	}
	lists = nodeLists.Load() - lists
	spaces.mu.Lock()
	defer spaces.mu.Unlock()
	if len(spaces.leases) < 18 || len(spaces.nodes) != 0 {
		t.Errorf("%d leases in 3 hours (want one each 10 minutes), %d with nodes (want none)", len(spaces.leases), len(spaces.nodes))
	}
	if n := strings.Count(logs.String(), "may not list nodes"); n != 1 {
		t.Errorf("the missing permission logged %d times, want once:\n%s", n, logs.String())
	}
	if lists < 3 || lists > 4 {
		t.Errorf("nodes listed %d times in 3 hours, want once an hour", lists)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAgentSendsItsCluster(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clk := &jumpClock{now: start}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	spaces := &fakeSpaces{clock: clk, interval: 600, stopAt: start.Add(time.Hour), stop: cancel, valid: map[string]time.Time{},
		renewedTo: map[string]string{}, used: map[string]bool{}}
	srv := httptest.NewServer(spaces)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	boot := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(boot, []byte("boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("a CA certificate's DER")})
	err := Run(ctx, Config{AgentURL: base, BootstrapFile: boot, Kube: fakeKube(t), Namespace: "agent", StateSecret: "state",
		KubeConfig: &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: ca}},
		Clock:      clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("a CA certificate's DER"))
	want := `{"kube_system_uid":"6f1c1c1e-9a2b-4c3d-8e4f-5a6b7c8d9e0f","ca_sha256":"` + hex.EncodeToString(sum[:]) + `"}`
	spaces.mu.Lock()
	defer spaces.mu.Unlock()
	if len(spaces.clusters) < 3 {
		t.Fatalf("%d exchange and lease bodies, want the exchange and several leases", len(spaces.clusters))
	}
	for i, c := range spaces.clusters {
		if c != want {
			t.Errorf("body %d names the cluster %s, want %s", i, c, want)
		}
	}
}

// TestRetriesSpreadOverTheThrottle: Spaces' URL throttled as a flood
// leaves it, answering 429 in the second half of every second (the flood
// took the second's share in its first half), the agent's lease is
// renewed all the same within a few retries: its retries land at random
// points of the second. Retried a whole RetryDelay (5 s) after a call in
// the refused half, every retry would land in it again.
func TestRetriesSpreadOverTheThrottle(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 700_000_000, time.UTC) // in the refused half
	clk := &jumpClock{now: start}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	spaces := &fakeSpaces{clock: clk, interval: 600, stopAt: start, stop: cancel, valid: map[string]time.Time{},
		renewedTo: map[string]string{}, used: map[string]bool{}}
	var throttled atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if clk.Now().Nanosecond() >= 500_000_000 {
			throttled.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"Message":"Rate Exceeded."}`))
			return
		}
		spaces.ServeHTTP(w, r)
	}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	boot := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(boot, []byte("boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Bounded: a call refused 60 times ends the run, renewed or not.
	go func() {
		for ctx.Err() == nil && throttled.Load() < 60 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if err := Run(ctx, Config{AgentURL: base, BootstrapFile: boot, Kube: fakeKube(t), Namespace: "agent", StateSecret: "state",
		Clock: clk, Log: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	spaces.mu.Lock()
	defer spaces.mu.Unlock()
	if len(spaces.leases) == 0 {
		t.Fatalf("no lease renewed after %d answers 429 (issued %d credentials): the retries land where the throttle refuses",
			throttled.Load(), spaces.issued)
	}
	t.Logf("the bootstrap exchanged and the lease renewed after %d answers 429", throttled.Load())
}
