// Package agents assembles the agent function (functions/agent) and the
// presence function (functions/presence). The agent function serves the routes
// an in-cluster agent calls (httpapi.AgentRoutes: the bootstrap exchange,
// credential and lease renewal, and the reports of the work its lease
// answers carry: namespaces listed and created, revisions applied), on
// the function's own URL, not the HTTP API. They take no JWT, so anyone
// may call them; served by a function of their own, whatever their
// traffic holds that function's reserved concurrency and none of the
// catalog API's. It needs only the table and the probe queue: no cursor
// key, no cloud.
//
// The presence function is the presence channel's (space/presence.go):
// IoT Core's custom authorizer for the agents' MQTT connections
// (Authorize) and the consumer of their lifecycle events (Presence), on
// the same use cases but a function of its own, so that a flood of the
// agent function's public URL refuses no connection and delays no event;
// Lambda tells the event shapes apart.
package agents

import (
	"log/slog"
	"net/http"
	"time"

	"spaces/shared/config"
	"spaces/shared/httpapi"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/wiring/parts"
)

// Settings are the agent function's configuration.
type Settings struct {
	parts.Common
	ProbeQueue string // where a first renewal's check is sent ("": none)
	// Presence is the MQTT presence channel: AGENT_MQTT_ENDPOINT (""
	// turns it off: no presence block in credential answers),
	// AGENT_AUTHORIZER_NAME, AGENT_CLIENT_PREFIX and, when the
	// authorizer signs tokens, AGENT_SIGNING_PARAM.
	Presence space.PresenceConfig
	// TokenKey is the KMS key that signs agents' presence tokens
	// (AGENT_SIGNER_ARN; the agent function's, which issues
	// credentials; required when AGENT_SIGNING_PARAM is set there).
	TokenKey string
	// MetricsNamespace is the stack's CloudWatch namespace
	// (METRICS_NAMESPACE; empty: metrics.Namespace).
	MetricsNamespace string
	// Wakes is IoT Core's data plane (IOT_DATA_ENDPOINT), where a space's
	// MQTT connection is ended when its credentials are revoked ("": at
	// the authorizer's next refresh).
	Wakes parts.Wakes
}

// Read reads the agent function's settings.
func Read(env *config.Env) Settings {
	s := Settings{Common: parts.ReadCommon(env), ProbeQueue: env.Required("PROBE_QUEUE_URL"),
		Presence: space.PresenceConfig{Endpoint: env.String("AGENT_MQTT_ENDPOINT", ""),
			Authorizer: env.String("AGENT_AUTHORIZER_NAME", ""), ClientPrefix: env.String("AGENT_CLIENT_PREFIX", ""),
			TokenKeyName: env.String("AGENT_SIGNING_PARAM", "")},
		TokenKey:         env.String("AGENT_SIGNER_ARN", ""),
		MetricsNamespace: env.String("METRICS_NAMESPACE", ""), Wakes: parts.ReadWakes(env)}
	if s.Presence.Endpoint != "" { // told to agents: both must be there
		s.Presence.Authorizer = env.Required("AGENT_AUTHORIZER_NAME")
		s.Presence.ClientPrefix = env.Required("AGENT_CLIENT_PREFIX")
	}
	return s
}

// Options are the parts that differ between processes.
type Options struct {
	Log *slog.Logger
	Now func() time.Time
}

// New returns the agent routes' handler.
func New(a parts.AWS, s Settings, o Options) http.Handler { return NewHandlers(a, s, o).HTTP }

// Handlers are the agent channel's three handlers on one set of use
// cases: HTTP (the agent routes, the agent function's), Authorize and
// Presence (presence.go, the presence function's).
type Handlers struct {
	HTTP   http.Handler
	agents *space.Agents
	prefix string
	log    *slog.Logger
}

// NewHandlers assembles the agent function.
func NewHandlers(a parts.AWS, s Settings, o Options) *Handlers {
	store := a.Store(s.Table)
	now := o.Now
	if now == nil {
		now = time.Now
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	agents := &space.Agents{Store: store, Spaces: store, Now: now, Cadence: s.LeaseCadence,
		Work: store, Revisions: store, Presence: s.Presence, Connections: a.Connections(s.Wakes),
		Signer: a.TokenSigner(s.TokenKey)}
	h := &httpapi.API{AgentSide: true, Log: o.Log, Agents: agents, MetricsNamespace: s.MetricsNamespace}
	if s.ProbeQueue != "" {
		probes := probing.Enqueuer{Queue: parts.ProbeQueue{Q: a.Queue(s.ProbeQueue)}}
		h.Probes, agents.Recheck = probes, probes
	}
	return &Handlers{HTTP: h.Handler(), agents: agents, prefix: s.Presence.ClientPrefix, log: log}
}
