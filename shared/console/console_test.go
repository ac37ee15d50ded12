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
