// Package console serves the web console: a static single-page app (plain
// HTML, CSS and JavaScript modules in static/, embedded at build time, no
// runtime CDN) that is a client of the public API only, and the small config
// document that tells it how to sign in. It holds no secret and verifies no
// token: every call the page makes goes to the API, which does.
//
// The API function does not link this package; functions/console serves it
// in AWS, and the local stack mounts it beside the API.
package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
)

//go:embed static
var static embed.FS

// Files are the console's files as served under /console/ (index.html is
// also served at /).
func Files() fs.FS {
	sub, _ := fs.Sub(static, "static")
	return sub
}

// Routes are the console's routes in the template's (API Gateway) syntax;
// they take no authorizer, since the page must load before its user signs in.
var Routes = []string{"GET /", "GET /console/{proxy+}"}

// Config is what the page learns from GET /console/config.json.
type Config struct {
	// SignIn is "dev" (the local stack's development sign-in for any org)
	// or "oidc" (authorization code with PKCE against Issuer).
	SignIn   string `json:"sign_in"`
	Issuer   string `json:"issuer,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	Audience string `json:"audience,omitempty"`
	// Scope requested at sign-in (default "openid").
	Scope string `json:"scope,omitempty"`
	// TokenEndpoint is the issuer's token endpoint when it is on another
	// origin than the issuer (Cognito's hosted domain): the page posts the
	// code there, so the CSP must name that origin. The page itself still
	// reads the endpoint from the issuer's discovery document.
	TokenEndpoint string `json:"-"`
	// DevSignIn is the local stack's sign-in path (SignIn "dev" only).
	DevSignIn string `json:"dev_sign_in,omitempty"`
	// RefreshSeconds is how often lists and details poll (default 5).
	RefreshSeconds int `json:"refresh_seconds,omitempty"`
	// DemoConnections, locally, are the demo accounts' connections per
	// provider, offered as "use the demo account".
	DemoConnections map[string]any `json:"demo_connections,omitempty"`
	// DemoProvisioning, locally, is per provider a cluster the demo's cloud
	// creates (identity config and spec, cluster name aside), offered by
	// the provisioning form as "use the local demo network".
	DemoProvisioning map[string]any `json:"demo_provisioning,omitempty"`
	// DevApplySetup, locally with the demo only, is the route that applies
	// an account's setup in the simulated cloud, as its customer would in
	// theirs (the trust setup card's "Apply in the simulated cloud").
	DevApplySetup string `json:"dev_apply_setup,omitempty"`
}

// Handler serves GET / (the page), GET /console/config.json and the files
// under /console/. Anything else under /console/ is 404.
func Handler(cfg Config) http.Handler {
	if cfg.RefreshSeconds == 0 {
		cfg.RefreshSeconds = 5
	}
	doc, _ := json.Marshal(cfg)
	files := Files()
	csp := contentSecurityPolicy(cfg)
	mux := http.NewServeMux()
	serve := func(w http.ResponseWriter, name string) {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			http.NotFound(w, nil)
			return
		}
		ct := mime.TypeByExtension(path.Ext(name))
		if strings.HasSuffix(name, ".js") {
			ct = "text/javascript; charset=utf-8" // some systems map .js elsewhere
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(b)
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		headers(w, csp)
		serve(w, "index.html")
	})
	mux.HandleFunc("GET /console/config.json", func(w http.ResponseWriter, r *http.Request) {
		headers(w, csp)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	})
	mux.HandleFunc("GET /console/{file...}", func(w http.ResponseWriter, r *http.Request) {
		headers(w, csp)
		name := r.PathValue("file")
		if !fs.ValidPath(name) || name == "." {
			http.NotFound(w, r)
			return
		}
		serve(w, name)
	})
	return mux
}

// headers: no caching surprises (the files change with every deployment and
// are small), no referrer (an authorization code never leaks through one),
// no framing, and a CSP that allows only this origin's scripts and styles.
func headers(w http.ResponseWriter, csp string) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", csp)
}

// contentSecurityPolicy: the page connects to its own origin, which is the
// API's (the console is served by the API's own HTTP API, or locally
// beside the API: every API call is a same-origin path, whatever domain
// the API has), to the issuer (discovery) and to its token endpoint;
// nowhere else, so a script injected despite everything could not send a
// token to any other host.
func contentSecurityPolicy(cfg Config) string {
	connect := []string{"'self'"}
	for _, raw := range []string{cfg.Issuer, cfg.TokenEndpoint} {
		if o := origin(raw); o != "" && !slices.Contains(connect, o) {
			connect = append(connect, o)
		}
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src " + strings.Join(connect, " ") +
		"; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}

// origin is scheme://host[:port] of an absolute URL, or "".
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
