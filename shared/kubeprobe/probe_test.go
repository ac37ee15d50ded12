package kubeprobe_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"spaces/infra/testcluster"
	"spaces/infra/testwait"
	"spaces/shared/kubecred"
	"spaces/shared/kubeprobe"
	"spaces/shared/space"
)

// short is the probe timeout in tests that wait for one.
const short = 300 * time.Millisecond

// probe runs Probe and fails the test if it does not return at all: a probe
// that ignores its deadline shows up here instead of as a stuck test binary.
func probe(t *testing.T, p *kubeprobe.Prober, ctx context.Context, creds kubecred.Credentials) space.Outcome {
	t.Helper()
	ch := make(chan space.Outcome, 1)
	go func() { ch <- p.Probe(ctx, creds) }()
	select {
	case o := <-ch:
		if len(creds.Token) >= 8 && strings.Contains(o.Message, creds.Token) {
			t.Errorf("the message carries the token: %q", o.Message)
		}
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("Probe did not return: it ignores its deadline")
		return space.Outcome{}
	}
}

func newProber(t *testing.T, timeout time.Duration) *kubeprobe.Prober {
	p := &kubeprobe.Prober{Timeout: timeout}
	t.Cleanup(p.Close)
	return p
}

func TestProbeClassifiesEveryMode(t *testing.T) {
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		mode    testcluster.Mode
		reason  string
		message string
	}{
		{testcluster.Healthy(), "", ""},
		{testcluster.Down(), space.ReasonUnreachable, ""},
		{testcluster.Unauthorized(), space.ReasonUnauthorized, "401"},
		{testcluster.Forbidden(), space.ReasonUnauthorized, "forbidden"},
		{testcluster.Garbled(), space.ReasonBadResponse, "not valid JSON"},
		{testcluster.BadVersion(), space.ReasonBadResponse, `gitVersion "not-a-version" is not a semantic version`},
		{testcluster.ServerError(), space.ReasonBadResponse, "500 Internal Server Error"},
		{testcluster.Slow(time.Hour), space.ReasonTimeout, "within 300ms"},
		{testcluster.Trickle(50 * time.Millisecond), space.ReasonTimeout, "within 300ms"},
		{testcluster.Hang(), space.ReasonTimeout, "within 300ms"},
	}
	for _, http2 := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/http2=%t", tc.mode, http2), func(t *testing.T) {
				t.Parallel()
				opts := []testcluster.Option{testcluster.WithCA(ca)}
				if http2 {
					opts = append(opts, testcluster.WithHTTP2())
				}
				c := testcluster.NewForTest(t, opts...)
				c.SetMode(tc.mode)
				o := probe(t, newProber(t, short), t.Context(), c.Credentials())
				t.Logf("%s: %s (%s)", o.Reason, o.Message, o.Latency)
				if o.Reason != tc.reason || !strings.Contains(o.Message, tc.message) {
					t.Fatalf("outcome %+v, want reason %q with %q", o, tc.reason, tc.message)
				}
				if o.OK() {
					want := space.ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}
					if o.Version == nil || *o.Version != want || o.Message != "" {
						t.Fatalf("healthy outcome %+v", o)
					}
				} else if o.Version != nil {
					t.Fatalf("a failed probe carries a version: %+v", o)
				}
				if o.Latency <= 0 || o.At.IsZero() || o.At.Location() != time.UTC {
					t.Fatalf("latency %v, at %v", o.Latency, o.At)
				}
				if kubeprobe.IsUnauthorized(o) != (tc.reason == space.ReasonUnauthorized) {
					t.Fatalf("IsUnauthorized = %t for %s", kubeprobe.IsUnauthorized(o), o.Reason)
				}
			})
		}
	}
}

// A probe honours the caller's deadline when it is sooner than its own
// timeout: a Prober with an hour's timeout still returns for a hung server.
func TestProbeHonoursTheCallersDeadline(t *testing.T) {
	c := testcluster.NewForTest(t)
	c.SetMode(testcluster.Hang())
	ctx, cancel := context.WithTimeout(t.Context(), short)
	defer cancel()
	o := probe(t, newProber(t, time.Hour), ctx, c.Credentials())
	if o.Reason != space.ReasonTimeout {
		t.Fatalf("outcome %+v, want Timeout", o)
	}
	if ctx.Err() != context.DeadlineExceeded {
		t.Fatalf("Probe returned before the caller's deadline passed: %+v", o)
	}

	// A caller that cancels gets a Timeout that says so.
	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	o = probe(t, newProber(t, time.Hour), ctx, c.Credentials())
	if o.Reason != space.ReasonTimeout || !strings.Contains(o.Message, "canceled") {
		t.Fatalf("canceled probe: %+v", o)
	}
}

// A bare TCP listener that accepts and never says a word, not even TLS.
func TestProbeHungListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()
	c := testcluster.NewForTest(t) // only for a CA and a token
	creds := c.Credentials()
	creds.Server = "https://" + ln.Addr().String()
	o := probe(t, newProber(t, short), t.Context(), creds)
	if o.Reason != space.ReasonTimeout || !strings.Contains(o.Message, ln.Addr().String()) {
		t.Fatalf("outcome %+v, want Timeout naming the host", o)
	}
}

func TestProbeStoppedClusterIsRefusedThenRecovers(t *testing.T) {
	c := testcluster.NewForTest(t)
	p := newProber(t, short)
	if o := probe(t, p, t.Context(), c.Credentials()); !o.OK() {
		t.Fatalf("healthy: %+v", o)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	o := probe(t, p, t.Context(), c.Credentials())
	if o.Reason != space.ReasonUnreachable || !strings.Contains(o.Message, "connection refused") {
		t.Fatalf("stopped: %+v", o)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if o := probe(t, p, t.Context(), c.Credentials()); !o.OK() {
		t.Fatalf("restarted: %+v", o)
	}
}

func TestProbeTLSFailuresAreUnreachable(t *testing.T) {
	c := testcluster.NewForTest(t)
	other, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	creds := c.Credentials()
	creds.CAData = other.PEM()
	o := probe(t, newProber(t, short), t.Context(), creds)
	if o.Reason != space.ReasonUnreachable || !strings.Contains(o.Message, "TLS verification failed") ||
		!strings.Contains(o.Message, "unknown authority") {
		t.Fatalf("wrong CA: %+v", o)
	}
	if c.Requests("/version") != 0 {
		t.Fatal("the request reached a server that failed verification")
	}

	// The server's certificate is for loopback, not for this name.
	creds = c.Credentials()
	creds.Server = strings.Replace(creds.Server, "127.0.0.1", "127.0.0.2", 1)
	if l, err := net.Listen("tcp", strings.TrimPrefix(creds.Server, "https://")); err == nil {
		l.Close() // 127.0.0.2 is loopback on Linux; serve the cluster's cert there
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.Listener.Close()
		srv.Listener, _ = net.Listen("tcp", "127.0.0.2:0")
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		creds.Server = srv.URL
		creds.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		// httptest's certificate names 127.0.0.1 and example.com only.
		o = probe(t, newProber(t, short), t.Context(), creds)
		if o.Reason != space.ReasonUnreachable || !strings.Contains(o.Message, "TLS verification failed") {
			t.Fatalf("wrong name: %+v", o)
		}
	}

	// A server that does not speak TLS at all.
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	creds = c.Credentials()
	creds.Server = strings.Replace(plain.URL, "http://", "https://", 1)
	o = probe(t, newProber(t, short), t.Context(), creds)
	if o.Reason != space.ReasonUnreachable || !strings.Contains(o.Message, "does not speak TLS") {
		t.Fatalf("plain HTTP server: %+v", o)
	}
}

func TestProbeUnresolvableHost(t *testing.T) {
	c := testcluster.NewForTest(t)
	creds := c.Credentials()
	creds.Server = "https://no-such-cluster.invalid"
	o := probe(t, newProber(t, 5*time.Second), t.Context(), creds)
	if o.Reason != space.ReasonUnreachable || !strings.Contains(o.Message, "cannot resolve no-such-cluster.invalid") {
		t.Fatalf("outcome %+v", o)
	}
}

// A 401 is fixed by fresh credentials: the prober probes once more with
// them and sees the cluster healthy.
func TestReMintAfterUnauthorized(t *testing.T) {
	c := testcluster.NewForTest(t, testcluster.WithTokens("old"))
	p := newProber(t, short)
	creds := c.Credentials()

	c.SetMode(testcluster.UnauthorizedOnce())
	o := probe(t, p, t.Context(), creds)
	if !kubeprobe.IsUnauthorized(o) {
		t.Fatalf("first probe: %+v", o)
	}
	if o = probe(t, p, t.Context(), creds); !o.OK() {
		t.Fatalf("second probe: %+v", o)
	}

	// A rotated token: the old one is refused, a fresh one works.
	c.RevokeToken("old")
	c.AddToken("fresh")
	if o = probe(t, p, t.Context(), creds); !kubeprobe.IsUnauthorized(o) {
		t.Fatalf("revoked token: %+v", o)
	}
	creds.Token = "fresh"
	if o = probe(t, p, t.Context(), creds); !o.OK() {
		t.Fatalf("fresh token: %+v", o)
	}
	if c.Served401() != 2 {
		t.Fatalf("Served401 = %d", c.Served401())
	}
}

// Unusable credentials are refused with every reason at once, and nothing
// is sent anywhere.
func TestProbeRefusesBadCredentials(t *testing.T) {
	c := testcluster.NewForTest(t)
	good := c.Credentials()
	plainHTTP := good
	plainHTTP.Server = strings.Replace(good.Server, "https://", "http://", 1)
	noToken := good
	noToken.Token = " "
	badCA := good
	badCA.CAData = []byte("not a certificate")
	everything := kubecred.Credentials{Server: "ftp://x", CAData: []byte("junk")}
	noHost := good
	noHost.Server = "https://"

	for name, tc := range map[string]struct {
		creds kubecred.Credentials
		want  []string
	}{
		"plain http":  {plainHTTP, []string{`scheme is "http", want https`}},
		"no token":    {noToken, []string{"token is empty"}},
		"bad CA":      {badCA, []string{"CA data holds no PEM certificate"}},
		"no host":     {noHost, []string{"no host"}},
		"no server":   {kubecred.Credentials{Token: "t"}, []string{"server URL is empty"}},
		"all at once": {everything, []string{"scheme", "CA data", "token is empty"}},
	} {
		t.Run(name, func(t *testing.T) {
			o := probe(t, newProber(t, short), t.Context(), tc.creds)
			if o.Reason != space.ReasonCredentialsUnavailable || o.Latency != 0 {
				t.Fatalf("outcome %+v", o)
			}
			for _, w := range tc.want {
				if !strings.Contains(o.Message, w) {
					t.Errorf("message %q lacks %q", o.Message, w)
				}
			}
		})
	}
	if c.Accepted() != 0 || c.Requests("/version") != 0 {
		t.Fatalf("bad credentials reached the cluster: %d connections", c.Accepted())
	}
}

func TestProbeDoesNotSendExpiredCredentials(t *testing.T) {
	c := testcluster.NewForTest(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := newProber(t, short)
	p.Now = func() time.Time { return now }
	creds := c.Credentials()
	creds.ExpiresAt = now

	o := probe(t, p, t.Context(), creds)
	if !kubeprobe.IsUnauthorized(o) || !strings.Contains(o.Message, "expired at 2026-03-01T12:00:00Z") || !o.At.Equal(now) {
		t.Fatalf("expired: %+v", o)
	}
	if c.Accepted() != 0 {
		t.Fatal("expired credentials were sent")
	}
	creds.ExpiresAt = now.Add(time.Second)
	if o := probe(t, p, t.Context(), creds); !o.OK() {
		t.Fatalf("valid for one more second: %+v", o)
	}
}

// Servers can echo anything back; the token never reaches the outcome.
func TestProbeNeverRepeatsTheToken(t *testing.T) {
	const token = "sekret-token-7f3a9"
	echo := func(r *http.Request) string { return r.Header.Get("Authorization") }
	for name, h := range map[string]http.HandlerFunc{
		"500 echo": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad: "+echo(r), http.StatusInternalServerError)
		},
		"401 echo": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, echo(r), http.StatusUnauthorized)
		},
		"version is the token": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"gitVersion":%q}`, token)
		},
		"body is the token": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, token)
		},
		"redirect with the token": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://127.0.0.1:1/"+token, http.StatusFound)
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewTLSServer(h)
			t.Cleanup(srv.Close)
			creds := kubecred.Credentials{
				Server: srv.URL,
				CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
				Token:  token,
			}
			o := probe(t, newProber(t, short), t.Context(), creds)
			if o.OK() || strings.Contains(o.Message, token) || strings.Contains(o.Message, "sekret") {
				t.Fatalf("outcome %+v", o)
			}
		})
	}
}

func TestProbeBoundsTheAnswer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"gitVersion":"v1.31.4","padding":"`))
		chunk := []byte(strings.Repeat("x", 32<<10))
		for range 1 << 10 { // 32 MiB, as fast as loopback allows
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	creds := kubecred.Credentials{
		Server: srv.URL,
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		Token:  "a-long-enough-token",
	}
	o := probe(t, newProber(t, 5*time.Second), t.Context(), creds)
	if o.Reason != space.ReasonBadResponse || !strings.Contains(o.Message, "larger than 64 KiB") {
		t.Fatalf("outcome %+v", o)
	}
}

func TestProbeVersions(t *testing.T) {
	for gv, ok := range map[string]bool{
		"v1.31.4":             true,
		"v1.29.3-eks-adc7111": true,
		"v1.30.5-gke.1014001": true,
		"1.28.9":              true,
		"v1.31":               false,
		"":                    false,
		"latest":              false,
	} {
		c := testcluster.NewForTest(t, testcluster.WithVersion(gv, "linux/arm64"))
		o := probe(t, newProber(t, short), t.Context(), c.Credentials())
		if o.OK() != ok {
			t.Errorf("gitVersion %q: %+v", gv, o)
		}
		if ok && (o.Version.GitVersion != gv || o.Version.Platform != "linux/arm64") {
			t.Errorf("gitVersion %q: version %+v", gv, o.Version)
		}
	}
}

// Probes of one cluster share a connection; a pool pushed out of the
// bounded cache closes its connections, and Close closes them all.
func TestProberReusesAndBoundsConnections(t *testing.T) {
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	clusters := make([]*testcluster.Cluster, 10)
	for i := range clusters {
		opts := []testcluster.Option{testcluster.WithCA(ca)}
		if i%2 == 0 {
			opts = append(opts, testcluster.WithHTTP2())
		}
		clusters[i] = testcluster.NewForTest(t, opts...)
	}
	baseline := runtime.NumGoroutine()

	p := &kubeprobe.Prober{Timeout: 5 * time.Second, MaxTransports: 4}
	for range 3 {
		if o := probe(t, p, t.Context(), clusters[0].Credentials()); !o.OK() {
			t.Fatalf("probe: %+v", o)
		}
	}
	if got := clusters[0].Accepted(); got != 1 {
		t.Fatalf("three probes of one cluster opened %d connections, want 1", got)
	}

	for range 2 {
		for _, c := range clusters {
			if o := probe(t, p, t.Context(), c.Credentials()); !o.OK() {
				t.Fatalf("probe: %+v", o)
			}
		}
	}
	open := func() int {
		n := 0
		for _, c := range clusters {
			n += c.OpenConns()
		}
		return n
	}
	waitFor(t, "evicted pools to close their connections", func() bool { return open() <= 4 })
	// Cycling through 10 clusters with room for 4 reconnects each time.
	if got := clusters[9].Accepted(); got != 2 {
		t.Fatalf("cluster 9 accepted %d connections, want 2", got)
	}

	p.Close()
	waitFor(t, "Close to close every connection", func() bool { return open() == 0 })
	waitFor(t, "goroutines to return to the baseline", func() bool { return runtime.NumGoroutine() <= baseline })

	// A closed Prober still probes, afresh.
	if o := probe(t, p, t.Context(), clusters[0].Credentials()); !o.OK() {
		t.Fatalf("after Close: %+v", o)
	}
	p.Close()
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, testwait.Timeout, what, cond)
}
