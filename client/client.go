package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
)

// Options configure New; the zero value is usable.
type Options struct {
	// Token is the bearer token sent on every call (none when empty), or
	// TokenSource when it can change (a refreshed sign-in).
	Token       string
	TokenSource func(ctx context.Context) (string, error)
	// HTTPClient sends the requests (default http.DefaultClient); the
	// retries wrap it.
	HTTPClient Doer
	// Retry is how retryable calls are retried.
	Retry Retry
	// UserAgent is sent as User-Agent when set.
	UserAgent string
}

// API is the generated client with the hand-written layer's transport:
// every call of ClientWithResponses, authenticated, retried when
// idempotent, with an Idempotency-Key on every create that takes one.
type API struct {
	*ClientWithResponses
	// Server is the base URL calls go to.
	Server string
}

// New returns the client of the API at server (for the local stack
// http://127.0.0.1:8080; deployed, the stack's ApiUrl output).
func New(server string, o Options) (*API, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("client: the server must be an http(s) URL, got " + server)
	}
	next := o.HTTPClient
	if next == nil {
		next = http.DefaultClient
	}
	base := strings.TrimSuffix(u.Path, "/")
	c, err := NewClientWithResponses(server,
		WithHTTPClient(&retrying{next: next, retry: o.Retry.withDefaults()}),
		WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
			token := o.Token
			if o.TokenSource != nil {
				if token, err = o.TokenSource(ctx); err != nil {
					return err
				}
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			if o.UserAgent != "" {
				req.Header.Set("User-Agent", o.UserAgent)
			}
			// The key is set once, before the first send: every retry of
			// this request carries the same one, so the API answers a
			// replay rather than creating twice.
			if req.Header.Get("Idempotency-Key") == "" && takesIdempotencyKey(req.Method, strings.TrimPrefix(req.URL.Path, base)) {
				req.Header.Set("Idempotency-Key", uuid.NewString())
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return &API{ClientWithResponses: c, Server: server}, nil
}
