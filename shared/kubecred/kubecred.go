// Package kubecred is what a credential minter hands to whoever talks to a
// cluster: the API server address, the CA that signs its certificate and a
// short-lived bearer token. It imports only the standard library, so a
// minter or the API can name a credential without linking client-go.
package kubecred

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Credentials reach one cluster's API server.
type Credentials struct {
	// Server is the API server URL, https://host[:port][/path].
	Server string
	// CAData is the PEM bundle that signs the server's certificate. Empty
	// means the system roots.
	CAData []byte
	// Token is the bearer token. It is never printed or logged.
	Token string
	// ExpiresAt is when Token stops working; zero when the minter does not
	// know. A credential must never be cached past it.
	ExpiresAt time.Time
}

// Validate reports every reason the credentials cannot be used, before any
// of them is sent anywhere.
func (c Credentials) Validate() error {
	var errs []error
	switch u, err := url.Parse(c.Server); {
	case c.Server == "":
		errs = append(errs, errors.New("server URL is empty"))
	case err != nil:
		errs = append(errs, errors.New("server URL does not parse"))
	case u.Scheme != "https":
		// A bearer token over plain HTTP would travel in the clear.
		errs = append(errs, fmt.Errorf("server URL scheme is %q, want https", u.Scheme))
	case u.Host == "":
		errs = append(errs, errors.New("server URL has no host"))
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, errors.New("server URL must not carry user info, a query or a fragment"))
	}
	if len(c.CAData) > 0 && !x509.NewCertPool().AppendCertsFromPEM(c.CAData) {
		errs = append(errs, errors.New("CA data holds no PEM certificate"))
	}
	if strings.TrimSpace(c.Token) == "" {
		errs = append(errs, errors.New("token is empty"))
	}
	return errors.Join(errs...)
}

// Expired reports whether the token has stopped working at now. A credential
// without a known expiry never reports expired.
func (c Credentials) Expired(now time.Time) bool {
	return !c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt)
}

// String prints the credentials with the token redacted, so %v and %+v are
// safe in logs and error messages.
func (c Credentials) String() string {
	exp := "unknown"
	if !c.ExpiresAt.IsZero() {
		exp = c.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("{Server:%s CAData:%d bytes Token:%s ExpiresAt:%s}", c.Server, len(c.CAData), redact(c.Token), exp)
}

// GoString keeps %#v from printing the token.
func (c Credentials) GoString() string { return "kubecred.Credentials" + c.String() }

// LogValue keeps slog from printing the token.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("server", c.Server),
		slog.Int("ca_bytes", len(c.CAData)),
		slog.String("token", redact(c.Token)),
		slog.Time("expires_at", c.ExpiresAt),
	)
}

func redact(token string) string {
	if token == "" {
		return "<empty>"
	}
	return "<redacted>"
}
