package local

import (
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"time"

	"spaces/infra/demo"
	"spaces/shared/console"
	"spaces/shared/space"
)

// DevSignInPath is the local stack's development sign-in: it mints a token
// for any org with the stack's development key (the one `make token` uses).
// It exists only here, never in a deployed function.
const DevSignInPath = "/console/dev/sign-in"

// DevApplySetupPath is the local demo's "apply in the simulated cloud": the
// console posts {"account_id": …} with its token, and the setup of that
// account of the caller's org is applied in the simulated cloud through
// its customers' console (POST $SIMCLOUD/console/apply-setup), which the
// browser cannot reach itself (another origin, another CA). Only the local
// stack with the demo serves it, like the development sign-in.
const DevApplySetupPath = "/console/dev/apply-setup"

// devTokenTTL matches the token make run prints.
const devTokenTTL = 12 * time.Hour

// withConsole serves the console at / and /console/ beside the API, and the
// development sign-in; every other request goes to the API unchanged.
func (st *Stack) withConsole(cfg Config, api http.Handler) http.Handler {
	cc := console.Config{SignIn: "dev", DevSignIn: DevSignInPath, RefreshSeconds: int(cfg.ConsoleRefresh / time.Second)}
	if st.Demo != nil {
		cc.DemoConnections, cc.DemoProvisioning = map[string]any{}, map[string]any{}
		for _, p := range []space.Provider{space.AWS, space.GCP, space.Azure} {
			cc.DemoConnections[string(p)] = demo.Connection(p)
			cc.DemoProvisioning[string(p)] = map[string]any{"config": demo.NewClusterConfig(p, ""), "spec": demo.ClusterSpec(p)}
		}
		cc.DevApplySetup = DevApplySetupPath
	}
	ui, signIn := st.Functions.Get("ConsoleFunction").Gateway(console.Handler(cc)), st.devSignIn(cfg.Log)
	// Routed by hand, not by a ServeMux: a mux would redirect a
	// non-canonical path (//spaces) before the API could refuse it.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p != "/" && path.Clean(p) != p:
			api.ServeHTTP(w, r) // its 404 problem
		case r.Method == http.MethodGet && (p == "/" || strings.HasPrefix(p, "/console/")):
			ui.ServeHTTP(w, r)
		case r.Method == http.MethodPost && p == DevSignInPath:
			signIn.ServeHTTP(w, r)
		case r.Method == http.MethodPost && p == DevApplySetupPath && st.Demo != nil:
			st.devApplySetup(api).ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// devSignIn answers {"org": "acme"} with {"access_token": …, "expires_in": …}.
// The token goes only into the response body: nothing logs it. Only an
// application/json body is taken: a browser sends that cross-origin only
// after a CORS preflight this server never grants, so another page cannot
// mint a token with a text/plain or form post.
func (st *Stack) devSignIn(log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !devJSON(w, r) {
			return
		}
		var in struct {
			Org string `json:"org"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
		if err := dec.Decode(&in); err != nil {
			devProblem(w, r, http.StatusBadRequest, "malformed-request", "body", "the body must be a JSON object like {\"org\": \"acme\"}")
			return
		}
		token, err := st.Signer.Mint(strings.TrimSpace(in.Org), "console-dev", nil, devTokenTTL)
		if err != nil {
			devProblem(w, r, http.StatusUnprocessableEntity, "invalid-fields", "org", strings.TrimPrefix(err.Error(), "auth: cannot mint token: "))
			return
		}
		log.Info("development sign-in", "org_id", in.Org)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": int(devTokenTTL / time.Second)})
	})
}

// devApplySetup reads the account through the API with the caller's own
// Authorization (so only an account of the caller's org, answered exactly
// as POST /cloud-accounts answers it), then hands it to the simulated
// cloud's console. It answers 204, or the API's problem, or a problem
// with the simulated cloud's refusal.
func (st *Stack) devApplySetup(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !devJSON(w, r) {
			return
		}
		var in struct {
			AccountID string `json:"account_id"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&in); err != nil || !space.ValidID(in.AccountID) {
			devProblem(w, r, http.StatusBadRequest, "malformed-request", "account_id", "the body must be a JSON object like {\"account_id\": \"<uuid>\"}")
			return
		}
		get := httptest.NewRequestWithContext(r.Context(), http.MethodGet, "/cloud-accounts/"+in.AccountID, nil)
		get.Header.Set("Authorization", r.Header.Get("Authorization"))
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, get)
		if rec.Code != http.StatusOK {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		res, err := st.Demo.Cloud.HTTPClient().Post(st.Demo.Cloud.URL+"/console/apply-setup", "application/json", rec.Body)
		if err != nil {
			devProblem(w, r, http.StatusBadGateway, "bad-gateway", "account_id", "the simulated cloud could not be reached: "+err.Error())
			return
		}
		defer res.Body.Close()
		if res.StatusCode/100 != 2 {
			var refusal struct {
				Error string `json:"error"`
			}
			_ = json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&refusal)
			devProblem(w, r, http.StatusUnprocessableEntity, "invalid-fields", "account_id", "the simulated cloud refused the setup: "+refusal.Error)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// devProblem is an RFC 9457 problem of the API's types (httpapi/problem.go),
// naming the field to fix.
func devProblem(w http.ResponseWriter, r *http.Request, code int, slug, field, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "urn:spaces:problem:" + slug, "title": http.StatusText(code), "status": code,
		"detail": detail, "instance": r.URL.Path, "errors": []map[string]string{{"field": field, "reason": detail}}})
}

// devJSON sets the development routes' headers and takes only an
// application/json body (a cross-origin browser post of one needs a CORS
// preflight this server never grants); otherwise it answers 415 and false.
func devJSON(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		devProblem(w, r, http.StatusUnsupportedMediaType, "unsupported-media-type", "Content-Type", "the body must be application/json")
		return false
	}
	return true
}
