package webhook

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"spaces/shared/space"
)

// receiver is a loopback HTTPS server recording what it gets.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
	answer func(w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{answer: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.bodies, rc.heads = append(rc.bodies, b), append(rc.heads, r.Header.Clone())
		rc.mu.Unlock()
		rc.answer(w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) count() int { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.bodies) }

func clientFor(rc *receiver, allowLoopback bool) *Client {
	roots := rc.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	return NewClient(Guard{AllowLoopback: allowLoopback}, roots)
}

// TestSignatureVerifiesWithTheReferenceLibrary: a delivery's headers and
// body verify with the Standard Webhooks reference library (not with this
// package's signer), with either secret during a rotation, and not with
// another secret or another body.
func TestSignatureVerifiesWithTheReferenceLibrary(t *testing.T) {
	rc := newReceiver(t)
	c := clientFor(rc, true)
	current, previous, stranger := space.NewWebhookSecret(), space.NewWebhookSecret(), space.NewWebhookSecret()
	ts := time.Now()
	body, err := Body(space.EventSpaceRegistered, ts, map[string]string{"space_id": "x"})
	if err != nil {
		t.Fatal(err)
	}
	a := c.Send(t.Context(), rc.srv.URL+"/hook", "msg_1", body, []string{current, previous})
	if a.Verdict != space.Delivered || a.Status != 204 || rc.count() != 1 {
		t.Fatalf("attempt %+v, %d received", a, rc.count())
	}
	h, got := rc.heads[0], rc.bodies[0]
	if h.Get("webhook-id") != "msg_1" || len(strings.Fields(h.Get("webhook-signature"))) != 2 {
		t.Fatalf("headers %v", h)
	}
	for name, s := range map[string]string{"current": current, "previous": previous} {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got, h); err != nil {
			t.Errorf("the %s secret does not verify: %v", name, err)
		}
		if err := wh.Verify(append([]byte(" "), got...), h); err == nil {
			t.Errorf("the %s secret verifies another body", name)
		}
	}
	wh, _ := standardwebhooks.NewWebhook(stranger)
	if err := wh.Verify(got, h); err == nil {
		t.Error("another secret verifies the delivery")
	}
	if !strings.HasPrefix(string(got), `{"type":"space.registered","timestamp":"`) {
		t.Errorf("body %s", got)
	}
}

// TestVerdicts: each kind of answer is judged as the schedule needs it; a
// redirect is an answer, never followed; an answer's body is kept only as
// a short excerpt.
func TestVerdicts(t *testing.T) {
	rc := newReceiver(t)
	var followed atomic.Int64
	target := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Add(1) }))
	defer target.Close()
	secret := []string{space.NewWebhookSecret()}
	for _, c := range []struct {
		name       string
		answer     func(w http.ResponseWriter)
		status     int
		verdict    space.DeliveryVerdict
		retryAfter time.Duration
	}{
		{"2xx", func(w http.ResponseWriter) { w.WriteHeader(200) }, 200, space.Delivered, 0},
		{"5xx", func(w http.ResponseWriter) { w.WriteHeader(502) }, 502, space.RetryLater, 0},
		{"429 seconds", func(w http.ResponseWriter) { w.Header().Set("Retry-After", "7"); w.WriteHeader(429) }, 429, space.RetryLater, 7 * time.Second},
		{"410", func(w http.ResponseWriter) { w.WriteHeader(410) }, 410, space.Gone, 0},
		{"404", func(w http.ResponseWriter) { w.WriteHeader(404) }, 404, space.Rejected, 0},
		{"401", func(w http.ResponseWriter) { w.WriteHeader(401) }, 401, space.Rejected, 0},
		{"redirect", func(w http.ResponseWriter) { w.Header().Set("Location", target.URL); w.WriteHeader(307) }, 307, space.Rejected, 0},
		{"long body", func(w http.ResponseWriter) { w.WriteHeader(500); _, _ = w.Write([]byte(strings.Repeat("x", 10000))) }, 500, space.RetryLater, 0},
	} {
		rc.answer = func(w http.ResponseWriter, _ *http.Request) { c.answer(w) }
		a := clientFor(rc, true).Send(t.Context(), rc.srv.URL, "msg_v", []byte(`{}`), secret)
		if a.Status != c.status || a.Verdict != c.verdict || a.RetryAfter != c.retryAfter {
			t.Errorf("%s: %+v; want %d %s retry-after %s", c.name, a, c.status, c.verdict, c.retryAfter)
		}
		if len(a.Error) > excerptLen {
			t.Errorf("%s: error excerpt of %d bytes", c.name, len(a.Error))
		}
	}
	if followed.Load() != 0 {
		t.Errorf("a redirect was followed %d times", followed.Load())
	}
}

// TestTimeoutAndConnectionErrorsRetry: no answer in time, and no server,
// are retried later (status 0), with what went wrong.
func TestTimeoutAndConnectionErrorsRetry(t *testing.T) {
	rc := newReceiver(t)
	release := make(chan struct{})
	rc.answer = func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	defer close(release)
	c := clientFor(rc, true)
	c.timeout = 50 * time.Millisecond
	a := c.Send(t.Context(), rc.srv.URL, "msg_t", []byte(`{}`), []string{space.NewWebhookSecret()})
	if a.Status != 0 || a.Verdict != space.RetryLater || !strings.Contains(a.Error, "deadline") && !strings.Contains(a.Error, "timeout") {
		t.Errorf("timeout: %+v", a)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	a = clientFor(rc, true).Send(t.Context(), "https://"+addr+"/", "msg_c", []byte(`{}`), []string{space.NewWebhookSecret()})
	if a.Status != 0 || a.Verdict != space.RetryLater || a.Error == "" {
		t.Errorf("connection refused: %+v", a)
	}
}

// TestGuardRefusesEveryRule: a host that resolves to an address of each
// refused kind is refused at creation (Refusal) and at connection
// (DialContext), and nothing is dialed.
func TestGuardRefusesEveryRule(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "10.1.2.3": "private", "192.168.1.1": "private", "fd12::1": "private",
		"169.254.169.254": "metadata", "fd00:ec2::254": "private", "169.254.10.10": "link-local", "fe80::1": "link-local",
		"239.1.1.1": "multicast", "0.0.0.0": "unspecified", "::": "unspecified", "100.64.1.1": "carrier-grade",
	} {
		dialed := 0
		g := Guard{Lookup: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr(addr)}, nil
		},
			dial: func(context.Context, string, string) (net.Conn, error) { dialed++; return nil, errors.New("dialed") }}
		r, err := g.Refusal(t.Context(), "hooks.example.com")
		if err != nil || !strings.Contains(r, want) {
			t.Errorf("Refusal for %s: %q %v; want %s", addr, r, err, want)
		}
		_, err = g.DialContext(t.Context(), "tcp", "hooks.example.com:443")
		if !errors.Is(err, ErrRefused) || dialed != 0 {
			t.Errorf("DialContext to %s: %v, dialed %d", addr, err, dialed)
		}
	}
	// A host with one public and one private address is refused whole.
	g := Guard{Lookup: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.1")}, nil
	}}
	if r, _ := g.Refusal(t.Context(), "mixed.example.com"); r == "" {
		t.Error("a host with a private address among its answers is allowed")
	}
	// Loopback is allowed only when the stack allows it.
	rc := newReceiver(t)
	a := clientFor(rc, false).Send(t.Context(), rc.srv.URL, "msg_l", []byte(`{}`), []string{space.NewWebhookSecret()})
	if a.Verdict != space.RetryLater || !strings.Contains(a.Error, "refused address") || rc.count() != 0 {
		t.Errorf("loopback without the local stack's leave: %+v, %d received", a, rc.count())
	}
	// The socket's own check (Control) refuses a literal refused address
	// whatever dialed it.
	if err := (Guard{}).control("tcp4", "10.0.0.1:443", nil); !errors.Is(err, ErrRefused) {
		t.Errorf("control: %v", err)
	}
	if err := (Guard{}).control("tcp4", "93.184.216.34:443", nil); err != nil {
		t.Errorf("control refuses a public address: %v", err)
	}
}

// TestGuardDialsTheCheckedAddress: a resolver that answers a public
// address, then loopback (DNS rebinding), is asked once per connection, and
// the connection goes to the address that was checked, never to a second
// answer.
func TestGuardDialsTheCheckedAddress(t *testing.T) {
	var lookups atomic.Int64
	var dialed []string
	g := Guard{
		Lookup: func(context.Context, string) ([]netip.Addr, error) {
			if lookups.Add(1) == 1 {
				return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		dial: func(_ context.Context, _, addr string) (net.Conn, error) {
			dialed = append(dialed, addr)
			a, b := net.Pipe()
			b.Close()
			return a, nil
		},
	}
	if _, err := g.DialContext(t.Context(), "tcp", "rebind.example.com:443"); err != nil {
		t.Fatal(err)
	}
	if lookups.Load() != 1 || len(dialed) != 1 || dialed[0] != "93.184.216.34:443" {
		t.Fatalf("lookups %d, dialed %v; want one lookup and the checked address", lookups.Load(), dialed)
	}
	// The next connection resolves again and is refused: the rebound
	// answer is checked, not trusted from before.
	if _, err := g.DialContext(t.Context(), "tcp", "rebind.example.com:443"); !errors.Is(err, ErrRefused) || len(dialed) != 1 {
		t.Fatalf("rebound answer: %v, dialed %v", err, dialed)
	}
}
