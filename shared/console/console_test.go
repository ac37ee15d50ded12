package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The page may connect to its own origin (the API's), the issuer and the
// issuer's token endpoint, and to nothing else: no scheme-wide source
// such as "https:", whatever the configuration.
func TestConnectSrcNamesOnlyTheOrigins(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"local development sign-in", Config{SignIn: "dev", DevSignIn: "/console/dev/sign-in"}, "'self'"},
		{"issuer serving its own token endpoint", Config{SignIn: "oidc", Issuer: "https://login.example.com/tenant/", ClientID: "c"},
			"'self' https://login.example.com"},
		{"token endpoint on another host", Config{SignIn: "oidc", Issuer: "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc", ClientID: "c",
			TokenEndpoint: "https://spaces.auth.eu-west-1.amazoncognito.com/oauth2/token"},
			"'self' https://cognito-idp.eu-west-1.amazonaws.com https://spaces.auth.eu-west-1.amazoncognito.com"},
		{"token endpoint on the issuer's origin", Config{SignIn: "oidc", Issuer: "https://login.example.com", ClientID: "c",
			TokenEndpoint: "https://login.example.com/oauth2/token"}, "'self' https://login.example.com"},
		{"a test issuer on loopback", Config{SignIn: "oidc", Issuer: "http://127.0.0.1:5556/dex", ClientID: "c"}, "'self' http://127.0.0.1:5556"},
	} {
		rec := httptest.NewRecorder()
		Handler(tc.cfg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		csp := rec.Header().Get("Content-Security-Policy")
		var connect string
		for d := range strings.SplitSeq(csp, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(d), "connect-src "); ok {
				connect = v
			}
		}
		if rec.Code != http.StatusOK || connect != tc.want {
			t.Errorf("%s: %d, connect-src %q, want %q (CSP %q)", tc.name, rec.Code, connect, tc.want, csp)
		}
	}
}

// The page carries its configuration and names its stylesheet and script
// with their version: asked with that version they are cached for good,
// anything else (the page, an old version, a module) is revalidated at each
// use against its ETag, and a matching If-None-Match gets 304 and no body.
func TestCachingOfTheFiles(t *testing.T) {
	h := Handler(Config{SignIn: "dev", DevSignIn: "/console/dev/sign-in", RefreshSeconds: 7})
	get := func(target string, header ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Header().Get("Content-Security-Policy") == "" || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no CSP or nosniff: %v", target, rec.Header())
		}
		return rec
	}
	page := get("/")
	body := page.Body.String()
	if page.Code != http.StatusOK || page.Header().Get("Cache-Control") != "no-cache" || page.Header().Get("ETag") == "" {
		t.Fatalf("GET /: %d, Cache-Control %q, ETag %q", page.Code, page.Header().Get("Cache-Control"), page.Header().Get("ETag"))
	}
	if !strings.Contains(body, `<meta name="spaces-config" content="{&#34;sign_in&#34;:&#34;dev&#34;,&#34;dev_sign_in&#34;:&#34;/console/dev/sign-in&#34;,&#34;refresh_seconds&#34;:7}">`) {
		t.Errorf("the page does not carry its configuration:\n%s", body)
	}
	for _, asset := range []string{"app.css", "bundle.js"} {
		i := strings.Index(body, `"/console/`+asset+`?v=`)
		if i < 0 {
			t.Errorf("the page does not name %s with its version:\n%s", asset, body)
			continue
		}
		ref := body[i+1 : i+1+strings.Index(body[i+1:], `"`)]
		v := ref[strings.Index(ref, "?v=")+3:]
		res := get(ref)
		if res.Code != http.StatusOK || res.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" || res.Header().Get("ETag") != `"`+v+`"` {
			t.Errorf("GET %s: %d, Cache-Control %q, ETag %q", ref, res.Code, res.Header().Get("Cache-Control"), res.Header().Get("ETag"))
		}
		old := get("/console/" + asset + "?v=0000000000000000")
		if old.Code != http.StatusOK || old.Header().Get("Cache-Control") != "no-cache" || old.Body.Len() != res.Body.Len() {
			t.Errorf("GET %s with another version: %d, Cache-Control %q (want the current file, revalidated)", asset, old.Code, old.Header().Get("Cache-Control"))
		}
		same := get("/console/"+asset, "If-None-Match", res.Header().Get("ETag"))
		if same.Code != http.StatusNotModified || same.Body.Len() != 0 {
			t.Errorf("GET %s If-None-Match its ETag: %d, %d bytes", asset, same.Code, same.Body.Len())
		}
	}
	if res := get("/", "If-None-Match", page.Header().Get("ETag")); res.Code != http.StatusNotModified {
		t.Errorf("GET / If-None-Match its ETag: %d", res.Code)
	}
	if res := get("/console/app.js"); res.Code != http.StatusOK || res.Header().Get("Content-Type") != "text/javascript; charset=utf-8" || res.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("GET /console/app.js (a module, still served): %d %v", res.Code, res.Header())
	}
	if res := get("/console/config.json"); res.Code != http.StatusOK || !strings.Contains(res.Body.String(), `"refresh_seconds":7`) {
		t.Errorf("GET /console/config.json: %d %s", res.Code, res.Body)
	}
	if res := get("/console/nope.js"); res.Code != http.StatusNotFound {
		t.Errorf("GET /console/nope.js: %d", res.Code)
	}
}
