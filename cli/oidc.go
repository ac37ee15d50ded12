package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// oidcSignIn is the authorization code flow with PKCE (S256) of a native
// app (RFC 8252): the redirect comes back to a listener on a loopback port
// of this machine, which takes one answer whose state matches, and the
// code is exchanged with the verifier. The provider is the console's:
// its issuer, client id, scope and audience from /console/config.json.
func (a *app) oidcSignIn(ctx context.Context, stderr io.Writer, sc signInConfig, port int, timeout time.Duration) (config, error) {
	if sc.Issuer == "" || sc.ClientID == "" {
		return config{}, errors.New("the server's sign-in names no issuer or client id")
	}
	meta, err := a.discover(ctx, sc.Issuer)
	if err != nil {
		return config{}, err
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return config{}, fmt.Errorf("the sign-in's loopback listener: %w", err)
	}
	defer ln.Close()
	scope := sc.Scope
	if scope == "" {
		scope = "openid"
	}
	conf := oauth2.Config{
		ClientID:    sc.ClientID,
		Endpoint:    oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: fmt.Sprintf("http://%s/callback", ln.Addr().String()),
		Scopes:      strings.Fields(scope),
	}
	verifier, state := oauth2.GenerateVerifier(), randomString()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if sc.Audience != "" {
		opts = append(opts, oauth2.SetAuthURLParam("audience", sc.Audience))
	}

	type answer struct {
		code string
		err  error
	}
	answers := make(chan answer, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		var ans answer
		switch {
		case q.Get("state") != state:
			// Not this sign-in's answer (another tab, a forged link):
			// refused, and the sign-in waits on.
			http.Error(w, "This sign-in answer does not match the request: sign in again.", http.StatusBadRequest)
			return
		case q.Get("error") != "":
			ans.err = fmt.Errorf("the identity provider refused the sign-in: %s %s", q.Get("error"), q.Get("error_description"))
		case q.Get("code") == "":
			ans.err = errors.New("the identity provider answered no code")
		default:
			ans.code = q.Get("code")
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ans.err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintln(w, ans.err)
		} else {
			fmt.Fprintln(w, "Signed in to Spaces: you can close this tab and go back to the terminal.")
		}
		select {
		case answers <- ans:
		default:
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	url := conf.AuthCodeURL(state, opts...)
	fmt.Fprintf(stderr, "Open this URL in a browser to sign in:\n\n  %s\n\nWaiting for the sign-in (%s)…\n", url, timeout)
	if a.env.OpenURL != nil {
		if err := a.env.OpenURL(url); err != nil {
			return config{}, err
		}
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var ans answer
	select {
	case ans = <-answers:
	case <-wait.Done():
		if ctx.Err() != nil {
			return config{}, ctx.Err()
		}
		return config{}, timeoutError{fmt.Errorf("no sign-in came back within %s", timeout)}
	}
	if ans.err != nil {
		return config{}, ans.err
	}
	tok, err := conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, a.env.HTTPClient), ans.code, oauth2.VerifierOption(verifier))
	if err != nil {
		return config{}, fmt.Errorf("the token exchange: %w", err)
	}
	return config{Token: tok.AccessToken, ExpiresAt: tok.Expiry.UTC().Truncate(time.Second)}, nil
}

type oidcMeta struct {
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
}

func (a *app) discover(ctx context.Context, issuer string) (oidcMeta, error) {
	var m oidcMeta
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return m, err
	}
	res, err := a.env.HTTPClient.Do(req)
	if err != nil {
		return m, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return m, fmt.Errorf("the issuer's discovery document answered %d", res.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&m); err != nil {
		return m, fmt.Errorf("the issuer's discovery document: %w", err)
	}
	if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
		return m, errors.New("the issuer's discovery document names no authorization or token endpoint")
	}
	return m, nil
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
