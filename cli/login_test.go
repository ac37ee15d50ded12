package cli

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/local"
)

// issuer is an OpenID provider for one test: discovery, an authorize
// endpoint that signs the user straight in (or refuses, or answers with
// another state), and a token endpoint that checks the PKCE verifier
// against the challenge, the client and the redirect before it hands out
// an access token minted with the stack's key.
type issuer struct {
	srv       *httptest.Server
	mint      func() string
	mu        sync.Mutex
	codes     map[string][2]string // code -> challenge, redirect
	refuse    bool
	badState  bool
	exchanges int
}

func newIssuer(t *testing.T, mint func() string) *issuer {
	is := &issuer{mint: mint, codes: map[string][2]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.srv.URL, "authorization_endpoint": is.srv.URL + "/authorize", "token_endpoint": is.srv.URL + "/token"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		is.mu.Lock()
		defer is.mu.Unlock()
		if q.Get("response_type") != "code" || q.Get("client_id") != "spaces-cli" || q.Get("code_challenge_method") != "S256" ||
			q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("audience") != "spaces-api" || !strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") {
			http.Error(w, "bad authorization request: "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		back := url.Values{"state": {q.Get("state")}}
		switch {
		case is.refuse:
			back.Set("error", "access_denied")
			back.Set("error_description", "the user said no")
		case is.badState:
			back.Set("state", "forged")
			back.Set("code", "forged")
		default:
			code := uuid.NewString()
			is.codes[code] = [2]string{q.Get("code_challenge"), q.Get("redirect_uri")}
			back.Set("code", code)
		}
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+back.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		is.exchanges++
		want, ok := is.codes[r.FormValue("code")]
		delete(is.codes, r.FormValue("code"))
		sum := sha256.Sum256([]byte(r.FormValue("code_verifier")))
		if !ok || r.FormValue("grant_type") != "authorization_code" || r.FormValue("client_id") != "spaces-cli" ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != want[0] || r.FormValue("redirect_uri") != want[1] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": is.mint(), "token_type": "Bearer", "expires_in": 3600})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// TestCLILoginOIDC: against a server whose console signs in with an OpenID
// provider, spaces login runs the authorization code flow with PKCE through
// a loopback redirect (the test's "browser" follows the printed URL), keeps
// the access token, and the next command uses it; a refusal, and an answer
// whose state is not the request's (which is turned away while the sign-in
// waits on, until its timeout: exit 5), keep nothing.
func TestCLILoginOIDC(t *testing.T) {
	t.Parallel()
	prefix := fmt.Sprintf("o%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := local.Start(context.Background(), local.Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names: func(id string) string { return prefix + id },
		Log:   slog.New(slog.DiscardHandler), Probing: local.ProbingConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	org := "org-" + uuid.NewString()[:8]
	is := newIssuer(t, func() string {
		tok, err := st.Signer.Mint(org, "oidc-user", nil, time.Hour)
		if err != nil {
			t.Error(err)
		}
		return tok
	})
	// The deployed console's config, in front of the local API.
	api, _ := url.Parse(st.APIURL)
	proxy := httputil.NewSingleHostReverseProxy(api)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/console/config.json" {
			_ = json.NewEncoder(w).Encode(map[string]string{"sign_in": "oidc", "issuer": is.srv.URL, "client_id": "spaces-cli", "audience": "spaces-api"})
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	c := newCLI(t, http.DefaultClient)
	browser := func(u string) error {
		go func() { // the user's browser: follows the redirects back to the loopback
			res, err := http.Get(u)
			if err == nil {
				res.Body.Close()
			}
		}()
		return nil
	}
	login := func(args ...string) (string, string, int) {
		var out, errOut strings.Builder
		code := Main(context.Background(), append([]string{"login", "--server", front.URL}, args...), Env{
			Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
			ConfigDir: c.dir, HTTPClient: http.DefaultClient, OpenURL: browser,
		})
		return out.String(), errOut.String(), code
	}
	cfgPath := filepath.Join(c.dir, "config.json")

	set := func(refuse, badState bool) {
		is.mu.Lock()
		is.refuse, is.badState = refuse, badState
		is.mu.Unlock()
	}
	set(true, false)
	if _, errOut, code := login(); code != ExitError || !strings.Contains(errOut, "the user said no") {
		t.Fatalf("refused sign-in: exit %d: %s", code, errOut)
	}
	set(false, true)
	if _, errOut, code := login("--timeout", "2s"); code != ExitTimeout || !strings.Contains(errOut, "no sign-in came back") {
		t.Fatalf("forged state: exit %d: %s", code, errOut)
	}
	is.mu.Lock()
	exchanges := is.exchanges
	is.mu.Unlock()
	if _, err := os.Stat(cfgPath); !os.IsNotExist(err) || exchanges != 0 {
		t.Fatalf("after failed sign-ins: config %v, %d token exchanges", err, exchanges)
	}
	c.exits(ExitUsage, "drop --org", "login", "--server", front.URL, "--org", org)

	set(false, false)
	out, errOut, code := login()
	if code != ExitOK || !strings.Contains(out, "signed in to "+front.URL) || !strings.Contains(errOut, is.srv.URL+"/authorize?") {
		t.Fatalf("sign-in: exit %d\n%s%s", code, out, errOut)
	}
	var kept config
	raw, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(raw, &kept); err != nil || kept.Server != front.URL || kept.Token == "" || kept.ExpiresAt.IsZero() {
		t.Fatalf("kept %s (%v)", raw, err)
	}
	if fi, err := os.Stat(cfgPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config mode: %v %v", fi, err)
	}
	if got := decode[[]map[string]any](t, c.ok("list", "-o", "json")); len(got) != 0 {
		t.Fatalf("a new org lists %v", got)
	}
	c.ok("logout")
	c.exits(ExitAuth, "not signed in", "list", "--server", front.URL)
}
