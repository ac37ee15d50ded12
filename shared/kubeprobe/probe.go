// Package kubeprobe checks that a cluster's API server answers: one
// GET /version through client-go's discovery client, under a hard timeout,
// classified into the domain's probe reasons; ProbeWithCertificate also
// answers the serving certificate's notAfter and issuer from that request's
// own TLS handshake (TestProbeWithCertificate). It is the Kubernetes adapter
// behind the prober function; only functions that probe link it (and with it
// client-go).
package kubeprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"spaces/shared/kubecred"
	"spaces/shared/space"
	"spaces/shared/tracing/tracehttp"
)

const (
	// DefaultTimeout bounds a probe when Prober.Timeout is zero.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxTransports bounds the connection pools a Prober keeps when
	// Prober.MaxTransports is zero.
	DefaultMaxTransports = 256

	// maxVersionBody bounds what a probe reads: a real /version answer is a
	// few hundred bytes, and a server that streams more must not fill memory
	// before the timeout.
	maxVersionBody = 64 << 10
	// maxMessage bounds an outcome's message.
	maxMessage = 256
)

// Prober probes API servers. The zero value is ready to use; a Prober is
// safe for concurrent use and should be shared, so that probes of the same
// cluster reuse one TLS connection.
type Prober struct {
	// Timeout bounds one probe end to end: dial, TLS handshake, request and
	// reading the answer (default DefaultTimeout).
	Timeout time.Duration
	// MaxTransports bounds the cached connection pools, one per cluster (API
	// server host and CA). The least recently used pool beyond the bound has
	// its connections closed, so the open connections, file descriptors and
	// goroutines a Prober holds stay bounded however many clusters it probes
	// (default DefaultMaxTransports).
	MaxTransports int
	// Now reads the clock (default time.Now).
	Now func() time.Time

	cache transportCache
}

// Probe sends GET /version to the server with creds and classifies the
// answer. It returns within Timeout (or ctx's deadline, if sooner) whatever
// the server does. A failed probe is a result, not an error: the outcome
// carries the reason and a short message that never contains the token.
//
// Credentials that cannot be used are CredentialsUnavailable and expired
// ones Unauthorized; neither is sent.
//
// The outcome carries the serving certificate (Outcome.Certificate) as
// ProbeWithCertificate answers it: the prober stores it as a fact of the
// space, written only when it changes (space.NeedsWrite).
func (p *Prober) Probe(ctx context.Context, creds kubecred.Credentials) space.Outcome {
	o, _ := p.ProbeWithCertificate(ctx, creds)
	return o
}

// ProbeWithCertificate is Probe that also answers the serving certificate
// the API server presented on the connection that carried the GET /version
// (any answer: a 401 has shown it too), or nil when no answer came back
// (unreachable, timed out, a handshake that failed verification, or
// credentials that were not sent).
func (p *Prober) ProbeWithCertificate(ctx context.Context, creds kubecred.Credentials) (space.Outcome, *ServingCertificate) {
	var c certCapture
	o := p.probe(ctx, creds, &c)
	o.Certificate = c.get()
	return o, o.Certificate
}

func (p *Prober) probe(ctx context.Context, creds kubecred.Credentials, capture *certCapture) space.Outcome {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	timeout := p.timeout()
	out := space.Outcome{At: now().UTC()}
	fail := func(reason, msg string) space.Outcome {
		out.Reason, out.Message = reason, scrub(msg, creds.Token)
		return out
	}

	if err := creds.Validate(); err != nil {
		return fail(space.ReasonCredentialsUnavailable, "credentials are not usable: "+strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if creds.Expired(out.At) {
		return fail(space.ReasonUnauthorized, "credentials expired at "+creds.ExpiresAt.UTC().Format(time.RFC3339)+"; not sent")
	}
	u, _ := url.Parse(creds.Server) // Validate parsed it
	host := u.Host

	cfg := &rest.Config{
		Host:            creds.Server,
		BearerToken:     creds.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: creds.CAData},
		Timeout:         timeout,
		UserAgent:       "spaces-prober",
	}
	tr, err := p.cache.acquire(transportKey(host, creds.CAData), p.maxTransports(), func() (*http.Transport, error) {
		tlsConf, err := rest.TLSConfigFor(cfg)
		if err != nil {
			return nil, err
		}
		return newTransport(tlsConf, timeout), nil
	})
	if err != nil {
		return fail(space.ReasonCredentialsUnavailable, "credentials are not usable: "+err.Error())
	}
	defer p.cache.release(tr)

	// The shared pool holds no credential: the token is added per probe, on
	// top of it, so a pool can outlive any token.
	var base http.RoundTripper = limitBody{rt: tr.rt, max: maxVersionBody}
	if capture != nil {
		capture.rt = base
		base = capture
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, base)
	if err != nil {
		return fail(space.ReasonCredentialsUnavailable, "credentials are not usable: "+err.Error())
	}
	// A span per GET /version under the probe's (shared/tracing).
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, &http.Client{Transport: tracehttp.Transport(rt), Timeout: timeout})
	if err != nil {
		return fail(space.ReasonCredentialsUnavailable, "credentials are not usable: "+err.Error())
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	// This is DiscoveryClient.ServerVersion with retries off: client-go
	// retries a GET that met a reset or EOF up to ten times a second apart,
	// which would turn a refusing cluster into a Timeout after the whole
	// budget. The prober re-probes on its own schedule.
	body, err := dc.RESTClient().Get().AbsPath("/version").MaxRetries(0).Do(ctx).Raw()
	out.Latency = time.Since(start)
	if err != nil {
		reason, msg := classify(ctx, err, host, timeout)
		return fail(reason, msg)
	}
	v, msg := parseVersion(body)
	if v == nil {
		return fail(space.ReasonBadResponse, msg)
	}
	out.Version = v
	return out
}

// IsUnauthorized reports whether the cluster refused the credentials (401,
// 403, or expired before sending): the prober should mint fresh credentials
// and probe once more before counting a failure. A 403 rarely heals with a
// new token, but one extra mint is cheap and the retry is bounded to one.
func IsUnauthorized(o space.Outcome) bool { return o.Reason == space.ReasonUnauthorized }

// Close closes the idle connections of every cached pool and empties the
// cache; probes in flight finish normally and later probes start afresh.
func (p *Prober) Close() { p.cache.closeAll() }

func (p *Prober) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

func (p *Prober) maxTransports() int {
	if p.MaxTransports > 0 {
		return p.MaxTransports
	}
	return DefaultMaxTransports
}

// parseVersion accepts a /version body with a semantic gitVersion.
func parseVersion(body []byte) (*space.ServerVersion, string) {
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, "the /version answer is not valid JSON: " + err.Error()
	}
	if info.GitVersion == "" {
		return nil, "the /version answer has no gitVersion"
	}
	if _, err := utilversion.ParseSemantic(info.GitVersion); err != nil {
		return nil, fmt.Sprintf("gitVersion %q is not a semantic version", clip(info.GitVersion, 64))
	}
	return &space.ServerVersion{GitVersion: info.GitVersion, Platform: info.Platform}, ""
}

// minSecret is the shortest token scrub looks for: a shorter string occurs
// in ordinary words, and no real cluster token (an EKS presigned URL, a GKE
// access token, an AKS JWT) is anywhere near that short.
const minSecret = 8

// scrub removes the token from msg, wherever it came from (a server can
// echo anything back), and bounds its length.
func scrub(msg, token string) string {
	if len(token) >= minSecret {
		msg = strings.ReplaceAll(msg, token, "[redacted]")
	}
	return clip(msg, maxMessage)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
