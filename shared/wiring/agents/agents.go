// Package agents assembles the agent function (functions/agent): the routes
// an in-cluster agent calls (httpapi.AgentRoutes: the bootstrap exchange,
// credential and lease renewal, and the reports of the work its lease
// answers carry: namespaces listed and created, revisions applied). They
// take no gateway JWT, so
// anyone may call them; served by a function of their own, whatever their
// traffic holds that function's reserved concurrency and none of the
// catalog API's. It needs only the table and the probe queue: no cursor
// key, no cloud.
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
}

// Read reads the agent function's settings.
func Read(env *config.Env) Settings {
	return Settings{Common: parts.ReadCommon(env), ProbeQueue: env.Required("PROBE_QUEUE_URL")}
}

// Options are the parts that differ between processes.
type Options struct {
	Log *slog.Logger
	Now func() time.Time
}

// New returns the agent routes' handler.
func New(a parts.AWS, s Settings, o Options) http.Handler {
	store := a.Store(s.Table)
	now := o.Now
	if now == nil {
		now = time.Now
	}
	h := &httpapi.API{AgentSide: true, Log: o.Log,
		Agents: &space.Agents{Store: store, Spaces: store, Now: now, Cadence: s.LeaseCadence,
			Work: store, Revisions: store}}
	if s.ProbeQueue != "" {
		h.Probes = probing.Enqueuer{Queue: parts.ProbeQueue{Q: a.Queue(s.ProbeQueue)}}
	}
	return h.Handler()
}
