package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"spaces/shared/space"
)

// Timeout bounds one attempt, connection to last byte of the answer.
const Timeout = 10 * time.Second

// excerptLen bounds what is kept of an answer's body or an error: enough
// to tell what went wrong, never the receiver's whole page.
const excerptLen = 256

// Body is the Standard Webhooks payload: the event type, when it happened
// and its data.
func Body(t space.EventType, at time.Time, data any) ([]byte, error) {
	return json.Marshal(struct {
		Type      space.EventType `json:"type"`
		Timestamp string          `json:"timestamp"`
		Data      any             `json:"data"`
	}{t, at.UTC().Format(time.RFC3339Nano), data})
}

// Sign is the webhook-signature header: "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" for each secret, space-separated (during a rotation,
// one per secret). A secret is "whsec_" and the base64 of its key.
func Sign(id string, ts time.Time, body []byte, secrets []string) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("no signing secret")
	}
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, space.WebhookSecretPrefix))
		if err != nil {
			return "", fmt.Errorf("signing secret %d is not base64", i)
		}
		m := hmac.New(sha256.New, key)
		fmt.Fprintf(m, "%s.%d.", id, ts.Unix())
		m.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return strings.Join(sigs, " "), nil
}

// Client makes attempts. Build it with NewClient.
type Client struct {
	http    *http.Client
	now     func() time.Time
	timeout time.Duration
}

// NewClient returns the one client that reaches endpoints: every
// connection through g (resolve, check, dial the checked address), no
// proxy, no redirect followed (a 3xx is the answer), Timeout per attempt,
// no connection reused across endpoints' hosts beyond the transport's
// per-host pool. roots, when set, are the CAs trusted (tests: a local
// receiver's); nil is the system's.
func NewClient(g Guard, roots *tls.Config) *Client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            g.DialContext,
		TLSClientConfig:        roots,
		TLSHandshakeTimeout:    Timeout,
		ResponseHeaderTimeout:  Timeout,
		MaxResponseHeaderBytes: 16 << 10,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	return &Client{http: &http.Client{Transport: tr, Timeout: Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, now: time.Now, timeout: Timeout}
}

// SetClock makes the client take its time (each attempt's, and
// webhook-timestamp's) from now: tests on a virtual clock.
func (c *Client) SetClock(now func() time.Time) { c.now = now }

// Attempt is one delivery attempt as the log keeps it.
type Attempt struct {
	At time.Time `json:"at"`
	// Status is the answer's status code; 0 when there was none (a
	// timeout, a refused address, a connection error).
	Status    int                   `json:"status"`
	LatencyMS int64                 `json:"latency_ms"`
	Verdict   space.DeliveryVerdict `json:"verdict"`
	// Error is an excerpt of what went wrong: the connection's error, or
	// the start of a non-2xx answer's body.
	Error string `json:"error,omitempty"`
	// RetryAfter is what a 429 or 503 asked for.
	RetryAfter time.Duration `json:"-"`
}

// Send makes one attempt: POST body to url with the Standard Webhooks
// headers, signed with secrets. webhook-timestamp is the attempt's time
// (receivers refuse one far from their clock), not the event's: the body
// carries that.
func (c *Client) Send(ctx context.Context, url, id string, body []byte, secrets []string) Attempt {
	start := c.now()
	ts := start
	a := Attempt{At: start.UTC()}
	sig, err := Sign(id, ts, body, secrets)
	if err != nil {
		a.Verdict, a.Error = space.Rejected, err.Error()
		return a
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		a.Verdict, a.Error = space.Rejected, excerpt(err.Error())
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Spaces-Webhooks/1")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	res, err := c.http.Do(req)
	if err != nil {
		a.LatencyMS = c.now().Sub(start).Milliseconds()
		a.Verdict, a.Error = space.RetryLater, excerpt(describe(err))
		return a
	}
	defer res.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(res.Body, excerptLen))
	// The rest is drained (bounded) so that the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	a.LatencyMS = c.now().Sub(start).Milliseconds()
	a.Status = res.StatusCode
	a.Verdict = space.ClassifyDelivery(res.StatusCode)
	if a.Verdict != space.Delivered {
		a.Error = excerpt(string(head))
		if a.Error == "" {
			a.Error = res.Status
		}
	}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		a.RetryAfter = retryAfter(res.Header.Get("Retry-After"), c.now())
	}
	return a
}

// describe names a connection failure without the request's URL (the log
// shows the endpoint already).
func describe(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			err = inner
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout: " + err.Error()
	}
	return err.Error()
}

// retryAfter reads Retry-After: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func excerpt(s string) string {
	if len(s) > excerptLen {
		s = s[:excerptLen]
	}
	return strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s), string(utf8.RuneError))
}
