package local

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/shared/console"
)

// fakeIssuer is an OpenID provider for one test: discovery, an authorize
// endpoint that signs the user straight in, and a token endpoint that
// checks the PKCE verifier against the challenge before it hands out an
// access token minted with the stack's key (which the stack verifies).
type fakeIssuer struct {
	t        *testing.T
	srv      *httptest.Server
	clientID string
	mint     func() string
	mu       sync.Mutex
	codes    map[string]string // code -> S256 challenge
	redirect string
	seen     []string // what the authorize and token endpoints were sent
}

func newFakeIssuer(t *testing.T, clientID string, mint func() string) *fakeIssuer {
	f := &fakeIssuer{t: t, clientID: clientID, mint: mint, codes: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": f.srv.URL, "authorization_endpoint": f.srv.URL + "/authorize", "token_endpoint": f.srv.URL + "/token"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seen = append(f.seen, "authorize "+r.URL.RawQuery)
		if q.Get("response_type") != "code" || q.Get("client_id") != f.clientID || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		code := uuid.NewString()
		f.codes[code] = q.Get("code_challenge")
		f.redirect = q.Get("redirect_uri")
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("OPTIONS /token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_ = r.ParseForm()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seen = append(f.seen, "token "+r.PostForm.Encode())
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		challenge, ok := f.codes[r.PostForm.Get("code")]
		delete(f.codes, r.PostForm.Get("code"))
		if !ok || challenge != base64.RawURLEncoding.EncodeToString(sum[:]) || r.PostForm.Get("grant_type") != "authorization_code" ||
			r.PostForm.Get("client_id") != f.clientID || r.PostForm.Get("redirect_uri") != f.redirect {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": f.mint(), "token_type": "Bearer", "expires_in": 3600})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// The deployed sign-in in a real browser: the console, configured for OIDC
// the way functions/console configures it, sends the user to the issuer
// with a PKCE challenge, takes the code back, strips it from the address
// bar, exchanges it with the verifier, and calls the API with the token.
func TestConsoleOIDCSignIn(t *testing.T) {
	st := startStack(t)
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	c.must(201, c.do("POST", "/spaces", registerBody("aws", c.account("aws"), "oidc-1")))
	var token string
	issuer := newFakeIssuer(t, "spaces-console", func() string {
		var err error
		if token, err = st.Signer.Mint(org, "oidc-user", nil, time.Hour); err != nil {
			t.Error(err)
		}
		return token
	})
	ui := console.Handler(console.Config{SignIn: "oidc", Issuer: issuer.srv.URL, ClientID: "spaces-console", Audience: "spaces-api"})
	proxy := newConsoleProxy(t, st, ui)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = 30 * time.Second

	p.run("open the console", chromedp.Navigate(p.base+"/#/spaces"))
	p.until("the sign-in button", `!!document.querySelector('.signin button')`, wait)
	p.run("sign in", chromedp.Click(chromedp.CSS(".signin button")))
	p.untilAcrossLoads("the list after the sign-in", `!!document.querySelector('tr[data-name="oidc-1"]')`, wait)
	if href := p.eval(`location.href`); strings.Contains(href, "code=") || strings.Contains(href, "state=") || !strings.HasSuffix(href, "#/spaces") {
		t.Errorf("after the sign-in the address is %s", href)
	}
	if got := p.eval(`document.getElementById('org').textContent`); got != "org "+org {
		t.Errorf("signed in as %q, want org %s", got, org)
	}
	issuer.mu.Lock()
	seen := append([]string(nil), issuer.seen...)
	issuer.mu.Unlock()
	if len(seen) != 2 || !strings.Contains(seen[0], "audience=spaces-api") || !strings.Contains(seen[1], "code_verifier=") {
		t.Errorf("the issuer was sent %v", seen)
	}
	requests, _ := proxy.stats()
	for _, r := range requests {
		if token != "" && strings.Contains(r, token) {
			t.Errorf("the token is in a request line: %s", r)
		}
	}
}
