package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"spaces/shared/auth"
	"spaces/shared/metrics"
	"spaces/shared/space"
)

// The agent's routes. An in-cluster agent of an agent-mode space calls
// these, never a user: they take no platform JWT (they are on the agent
// function's URL, not the HTTP API) but the agent's own secret, in the Authorization
// header only (gateways and proxies log paths and queries). The secret
// names its one space; a request naming another is answered 404, the same
// as a space that does not exist. Each is authenticated by its first
// conditional write, whose condition is the secret's hash: no read comes
// first (dynamostore/agents.go).
var agentRoutes = []agentRoute{
	{"POST", "/agent/exchange", (*API).agentExchange},
	{"POST", "/agent/credential", (*API).agentRenew},
	{"PUT", "/agent/spaces/{spaceID}/lease", (*API).agentLease},
	// The agent's reports of the work its lease answer carried.
	{"PUT", "/agent/spaces/{spaceID}/namespaces", (*API).agentNamespaces},
	{"PUT", "/agent/spaces/{spaceID}/revisions/{revisionID}", (*API).agentRevision},
}

type agentRoute struct {
	method, path string
	handle       func(*API, http.ResponseWriter, *http.Request, string) error
}

// AgentRoutes lists the agent's routes as "METHOD /path".
func AgentRoutes() []string {
	var out []string
	for _, rt := range agentRoutes {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

// agent wraps an agent route: it reads the agent's secret from the one
// "Authorization: Bearer <token>" header (refused otherwise) and hands it
// to h; the token itself is never logged.
func (a *API) agent(h func(*API, http.ResponseWriter, *http.Request, string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.Agents == nil {
			writeError(w, r, space.Errorf(space.KindUnavailable, "agents are not served here"))
			return
		}
		vals := r.Header.Values("Authorization")
		scheme, token, ok := strings.Cut(strings.Join(vals, ","), " ")
		if len(vals) != 1 || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			writeError(w, r, space.ErrAgentAuth(errors.New("no single Authorization: Bearer header")))
			return
		}
		if id := r.PathValue("spaceID"); id != "" {
			addLogAttrs(r.Context(), slog.String("id", id))
		}
		if err := h(a, w, r, token); err != nil {
			if errors.Is(err, space.ErrBootstrapReused) {
				logger(r.Context()).WarnContext(r.Context(), "a used bootstrap token was presented again; someone holds a copy of it")
			}
			if errors.Is(err, space.ErrClusterMismatch) {
				logger(r.Context()).WarnContext(r.Context(), "an agent credential was presented from a cluster other than its own; someone holds a copy of it", "error", err.Error())
			}
			if errors.Is(err, space.ErrCredentialReused) {
				// Counted, and alarmed (AgentCredentialReuseAlarm): someone
				// holds a copy of the agent's credential.
				logger(r.Context()).WarnContext(r.Context(), "a superseded agent credential was presented; someone holds a copy of it")
				(&metrics.Emitter{Log: logger(r.Context()), Namespace: a.MetricsNamespace}).Emit(r.Context(),
					"a superseded agent credential was presented; every credential of the space is revoked: reinstall its agent with a new bootstrap",
					nil, nil, metrics.Metric{Name: "AgentCredentialReuse", Unit: metrics.Count, Value: 1})
				if err := a.Agents.EndRevoked(r.Context(), token); err != nil {
					// Refused at the authorizer's next refresh all the same.
					logger(r.Context()).WarnContext(r.Context(), "cannot end the revoked space's MQTT connection", "error", err.Error())
				}
			}
			writeError(w, r, err)
		}
	})
}

// agentExchange: the body is optional, {"cluster": {...}}: the cluster
// the credential is bound to (space.ClusterBinding). Small, as the lease's.
func (a *API) agentExchange(w http.ResponseWriter, r *http.Request, token string) error {
	var b *space.ClusterBinding
	if r.ContentLength != 0 {
		if r.ContentLength > maxLeaseBody {
			return &httpError{status: http.StatusRequestEntityTooLarge, detail: fmt.Sprintf("the request body is larger than %d bytes", maxLeaseBody), field: "body"}
		}
		if err := readObjectMax(w, r, maxLeaseBody, map[string]any{"cluster": &b}); err != nil {
			return err
		}
	}
	return a.agentCredential(w, r, token, func(ctx context.Context, token string) (space.AgentCredential, error) {
		c, err := a.Agents.ExchangeBound(ctx, token, b)
		if err == nil && c.TokenSignature == "" && a.Agents.Presence.Endpoint != "" && a.Agents.Presence.TokenKeyName != "" {
			// The bootstrap is spent, so the credential is answered
			// unsigned (the agent renews it before it connects): said
			// here, since nothing else would show KMS refusing.
			logger(ctx).ErrorContext(ctx, "the agent token key did not sign an exchanged credential: answered unsigned", "space_id", c.SpaceID)
		}
		return c, err
	})
}

func (a *API) agentRenew(w http.ResponseWriter, r *http.Request, token string) error {
	if err := emptyBody(r); err != nil {
		return err
	}
	return a.agentCredential(w, r, token, a.Agents.Renew)
}

// agentCredential answers a new agent credential, got from the bootstrap
// (exchange) or from the credential it replaces (renew).
func (a *API) agentCredential(w http.ResponseWriter, r *http.Request, token string,
	issue func(context.Context, string) (space.AgentCredential, error)) error {
	c, err := issue(r.Context(), token)
	if err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("id", c.SpaceID))
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, "application/json", c)
	return nil
}

// maxLeaseBody bounds a lease report's body: its fields are a few short
// strings (space.LeaseReport.Validate: 64 bytes each).
const maxLeaseBody = 4 << 10

// leaseAnswer tells the agent its cadence, the work waiting for it and
// the presence channel to hold.
type leaseAnswer struct {
	LeaseIntervalSeconds int                     `json:"lease_interval_seconds"`
	Work                 space.AgentWork         `json:"work"`
	Presence             *space.PresenceEndpoint `json:"presence,omitempty"`
}

func (a *API) agentLease(w http.ResponseWriter, r *http.Request, token string) error {
	// The credential's form and space first (no read): a body is read
	// for a credential of this space only; the renewal's write checks it.
	if t, err := space.ParseAgentCredential(token); err != nil {
		return err
	} else if t.SpaceID != r.PathValue("spaceID") {
		return space.ErrNotFound("space")
	}
	// Its body is read before the renewal's write authenticates it, so
	// it is small: an anonymous caller costs no more than maxLeaseBody
	// read and a refused conditional write.
	if r.ContentLength > maxLeaseBody {
		return &httpError{status: http.StatusRequestEntityTooLarge, detail: fmt.Sprintf("the request body is larger than %d bytes", maxLeaseBody), field: "body"}
	}
	var rep space.LeaseReport
	if err := readObjectMax(w, r, maxLeaseBody, map[string]any{"agent_version": &rep.AgentVersion, "server_version": &rep.ServerVersion, "nodes": &rep.Nodes,
		"cluster": &rep.Cluster}); err != nil {
		return err
	}
	res, err := a.Agents.RenewLease(r.Context(), token, r.PathValue("spaceID"), rep)
	if err != nil {
		return err
	}
	if res.Lapsed && a.Probes != nil {
		// The first renewal, or the first after a lapse: evaluate the
		// status now rather than at the next tick. Best effort.
		if err := a.Probes.ProbeRegistered(r.Context(), space.Space{ID: r.PathValue("spaceID"), OrgID: res.OrgID}); err != nil {
			logger(r.Context()).WarnContext(r.Context(), "cannot enqueue a lease check", "error", err.Error())
		}
	}
	writeJSON(w, http.StatusOK, "application/json", leaseAnswer{LeaseIntervalSeconds: int(a.Agents.Cadence.Interval().Seconds()), Work: res.Work, Presence: res.Presence})
	return nil
}

// agentNamespaces: the agent's namespaces report, the cluster's whole
// list after the creates it was handed, with each create's outcome.
func (a *API) agentNamespaces(w http.ResponseWriter, r *http.Request, token string) error {
	// The credential first: a body is read for its own agent only.
	if err := a.Agents.Authenticate(r.Context(), token, r.PathValue("spaceID")); err != nil {
		return err
	}
	var rep space.NamespacesReport
	if err := readObjectMax(w, r, space.MaxNamespacesReportBody, map[string]any{"items": &rep.Items, "creates": &rep.Creates}); err != nil {
		return err
	}
	if err := a.Agents.ReportNamespaces(r.Context(), token, r.PathValue("spaceID"), rep); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// agentRevision: the agent's result of a revision handed to it.
func (a *API) agentRevision(w http.ResponseWriter, r *http.Request, token string) error {
	if err := a.Agents.Authenticate(r.Context(), token, r.PathValue("spaceID")); err != nil {
		return err
	}
	var rep space.RevisionReport
	if err := readObject(w, r, map[string]any{"version": &rep.Version, "error": &rep.Error}); err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("revision_id", r.PathValue("revisionID")))
	if err := a.Agents.ReportRevision(r.Context(), token, r.PathValue("spaceID"), r.PathValue("revisionID"), rep); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// emptyBody refuses a body on the routes that take none: nothing is read
// from it, and a client sending one is mistaken.
func emptyBody(r *http.Request) error {
	if r.ContentLength > 0 || len(r.TransferEncoding) > 0 {
		return &space.Error{Kind: space.KindMalformed, Message: "this request takes no body",
			Fields: []space.FieldError{{Field: "body", Reason: "must be empty"}}}
	}
	return nil
}

// reissueBootstrap answers a new one-time bootstrap for one of the
// caller's agent spaces (the first expired unused, or the agent is
// reinstalled); the agent's current credential keeps working until the
// new bootstrap is exchanged.
func (a *API) reissueBootstrap(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if a.Agents == nil {
		return space.Errorf(space.KindUnavailable, "agents are not served here")
	}
	if err := emptyBody(r); err != nil {
		return err
	}
	b, err := a.Agents.Reissue(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, "application/json", answerBootstrap(b))
	return nil
}

// registered is a registration's answer: the space, and for an agent
// space its one-time bootstrap.
type registered struct {
	spaceBody
	AgentBootstrap *bootstrapAnswer `json:"agent_bootstrap,omitempty"`
}
