// Package httpapi is Spaces' REST API: a plain net/http ServeMux with Go 1.22
// method and path patterns, served locally by net/http and in AWS through the
// API Gateway v2 proxy adapter. Handlers parse and validate requests, call the
// domain service, and render JSON or RFC 9457 problems; they hold no business
// rules of their own.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"

	"spaces/shared/auth"
	"spaces/shared/budget"
	"spaces/shared/cursor"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// API wires the handlers to their dependencies.
type API struct {
	Spaces *space.Service
	// Bindings serves environments and autoscaler policies (nil: 503).
	Bindings *space.Bindings
	// Revisions pushes and retries deployment revisions (nil or without a
	// queue: 503).
	Revisions *space.Revisions
	// Jobs creates and reads provisioning jobs (nil or without a queue: 503).
	Jobs    *provisioning.Jobs
	Auth    auth.Authenticator
	Cursors *cursor.Codec
	Log     *slog.Logger
	// OpenAPI is served at GET /openapi.yaml without authentication.
	OpenAPI   []byte
	Discovery *Discovery // namespace discovery and the cluster picker (discovery.go); nil: 503
	// ClusterSide serves only the routes that reach into clouds and
	// clusters (ClusterRoutes): the discovery function's handler. The
	// catalog API serves them too; the gateway never sends it these.
	ClusterSide bool
	// AgentSide serves only the agent's routes (AgentRoutes): the agent
	// function's handler, on its own function URL, so that traffic on
	// these unauthenticated routes holds that function's concurrency,
	// never the catalog's. No other handler serves them: they are not on
	// the gateway.
	AgentSide bool
	// MetricsNamespace is where the agent routes' metrics go (empty:
	// metrics.Namespace): AgentCredentialReuse.
	MetricsNamespace string
	// Agents serves agent-mode spaces' bootstrap, credentials and leases
	// (agent.go); nil: 503, and agent registrations are refused.
	Agents *space.Agents
	// Webhooks serves the org's webhook endpoints (webhooks.go); nil: 503.
	Webhooks *space.Webhooks
	// Activity serves the org's audit trail (activity.go); nil: 503.
	Activity space.ActivityLog
	// Probes, when set, is asked to probe each newly registered space at once
	// instead of at the next minute tick.
	Probes interface {
		ProbeRegistered(ctx context.Context, s space.Space) error
	}
}

type route struct {
	method, path string
	handle       func(*API, http.ResponseWriter, *http.Request, auth.Principal) error
}

// routes is the one list of authenticated routes; Routes and Handler derive
// from it, and a test checks template.yaml declares exactly these.
var routes = slices.Concat(catalogRoutes, clusterRoutes)

// clusterRoutes need a cloud SDK or client-go: functions/discovery serves
// them (the gateway routes them there), never the catalog API.
var clusterRoutes = []route{
	{"GET", "/cloud-accounts/{id}/clusters", (*API).listClusters},
	{"POST", "/cloud-accounts/{id}/verify", (*API).verifyAccount},
	{"GET", "/space-discovery/{spaceID}/namespaces", (*API).listNamespaces},
	{"POST", "/space-discovery/{spaceID}/namespaces", (*API).createNamespace},
}

var catalogRoutes = []route{
	{"GET", "/spaces", (*API).listSpaces},
	{"POST", "/spaces", (*API).registerSpace},
	{"GET", "/spaces/{id}", (*API).getSpace},
	{"PATCH", "/spaces/{id}/status", (*API).patchStatus},
	{"PUT", "/spaces/{id}/labels", (*API).putLabels},
	{"DELETE", "/spaces/{id}", (*API).deregisterSpace},
	{"GET", "/cloud-accounts", (*API).listAccounts},
	{"POST", "/cloud-accounts", (*API).createAccount},
	{"GET", "/cloud-accounts/{id}", (*API).getAccount},
	{"DELETE", "/cloud-accounts/{id}", (*API).deleteAccount},
	{"GET", "/spaces/{id}/status-history", (*API).statusHistory},
	{"GET", "/space-counts", (*API).spaceCounts},
	{"GET", "/activity", (*API).listActivity},
	{"GET", "/environments", (*API).listEnvironments},
	{"POST", "/environments", (*API).createEnvironment},
	{"GET", "/environments/{id}", (*API).getEnvironment},
	{"PUT", "/environments/{id}/space", (*API).rebindEnvironment},
	{"GET", "/autoscaler-policies", (*API).listPolicies},
	{"POST", "/autoscaler-policies", (*API).createPolicy},
	{"GET", "/autoscaler-policies/{id}", (*API).getPolicy},
	{"DELETE", "/autoscaler-policies/{id}", (*API).deletePolicy},
	{"POST", "/environments/{id}/revisions", (*API).pushRevision},
	{"GET", "/environments/{id}/revisions", (*API).listRevisions},
	{"GET", "/revisions", (*API).listOrgRevisions},
	{"GET", "/revisions/{id}", (*API).getRevision},
	{"POST", "/revisions/{id}/retry", (*API).retryRevision},
	{"GET", "/provisioning-jobs", (*API).listJobs},
	{"POST", "/provisioning-jobs", (*API).createJob},
	{"GET", "/provisioning-jobs/{id}", (*API).getJob},
	{"DELETE", "/provisioning-jobs/{id}", (*API).cancelJob},
	{"POST", "/provisioning-jobs/{id}/retry", (*API).retryJob},
	{"POST", "/spaces/{id}/agent-bootstrap", (*API).reissueBootstrap},
	{"GET", "/webhook-endpoints", (*API).listWebhooks},
	{"POST", "/webhook-endpoints", (*API).createWebhook},
	{"GET", "/webhook-endpoints/{id}", (*API).getWebhook},
	{"PATCH", "/webhook-endpoints/{id}", (*API).patchWebhook},
	{"DELETE", "/webhook-endpoints/{id}", (*API).deleteWebhook},
	{"POST", "/webhook-endpoints/{id}/pause", (*API).pauseWebhook},
	{"POST", "/webhook-endpoints/{id}/resume", (*API).resumeWebhook},
	{"POST", "/webhook-endpoints/{id}/rotate-secret", (*API).rotateWebhookSecret},
	{"GET", "/webhook-endpoints/{id}/deliveries", (*API).webhookDeliveries},
	{"POST", "/webhook-endpoints/{id}/test", (*API).testWebhook},
	{"POST", "/webhook-endpoints/{id}/deliveries/{delivery_id}/replay", (*API).replayWebhookDelivery},
	{"POST", "/webhook-endpoints/{id}/replay", (*API).replayWebhookSince},
}

// PublicRoutes need no token.
var PublicRoutes = []string{"GET /openapi.yaml"}

// Routes lists every route the API serves as "METHOD /path", public ones
// included.
func Routes() []string {
	out := append([]string(nil), PublicRoutes...)
	for _, rt := range routes {
		out = append(out, rt.method+" "+rt.path)
	}
	return append(out, AgentRoutes()...)
}

// ClusterRoutes lists, as "METHOD /path", the routes functions/discovery
// serves: the gateway (and the local stack) send these there.
func ClusterRoutes() []string {
	var out []string
	for _, rt := range clusterRoutes {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

// Handler returns the API as one http.Handler.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	serve := routes
	switch {
	case a.ClusterSide:
		serve = clusterRoutes
	case a.AgentSide:
		serve = nil
	}
	for _, rt := range serve {
		mux.Handle(rt.method+" "+rt.path, a.authenticated(rt.handle))
	}
	if a.AgentSide {
		for _, rt := range agentRoutes {
			mux.Handle(rt.method+" "+rt.path, a.agent(rt.handle))
		}
	}
	if !a.ClusterSide && !a.AgentSide {
		mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(a.OpenAPI)
		})
	}
	log := a.Log
	if log == nil {
		log = slog.Default()
	}
	// Whatever a request waits on gives up a reserve before the function's
	// own timeout, so that it answers a problem, never a timeout. Outermost:
	// it copies the request, and observe must see the very request the mux
	// stamps with its route pattern.
	return budget.Handler(observe(log, problems(mux)), budget.APIReserve)
}

func (a *API) authenticated(h func(*API, http.ResponseWriter, *http.Request, auth.Principal) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Auth.Authenticate(r)
		if err != nil {
			writeError(w, r, err)
			return
		}
		// Who made the request, on every line it logs (writes included).
		addLogAttrs(r.Context(), slog.String("org_id", p.OrgID), slog.String("sub", p.Subject))
		// And on every item it writes that the audit trail reads.
		r = r.WithContext(space.WithStamp(r.Context(), space.Stamp{Subject: p.Subject, RequestID: requestID(r.Context())}))
		if id := r.PathValue("id"); id != "" {
			addLogAttrs(r.Context(), slog.String("id", id))
		}
		if id := r.PathValue("spaceID"); id != "" {
			addLogAttrs(r.Context(), slog.String("id", id))
		}
		if err := h(a, w, r, p); err != nil {
			writeError(w, r, err)
		}
	})
}

// problems answers unknown routes and wrong methods with problem documents
// instead of the mux's plain-text replies.
func problems(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The mux would redirect a non-canonical path (//x, /./x, /a/../b)
		// with an HTML body; no route has such a path, so it is a 404.
		if !canonical(r.URL.Path) {
			writeError(w, r, &httpError{status: http.StatusNotFound, detail: "no such route; the path is not in canonical form"})
			return
		}
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// The mux's own 404/405 reply is captured only for its status and
		// Allow header.
		rec := &discard{header: http.Header{}}
		mux.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		// Anything but a wrong method is an unknown route, including paths
		// the mux would redirect to a cleaned form (//x, /a/../b).
		code, detail := http.StatusNotFound, "no such route"
		if rec.code == http.StatusMethodNotAllowed {
			code, detail = rec.code, "this route does not accept "+r.Method
		}
		writeError(w, r, &httpError{status: code, detail: detail})
	})
}

// canonical reports whether p is what path.Clean makes of it (a trailing
// slash aside).
func canonical(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

type discard struct {
	header http.Header
	code   int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }
