// Package api assembles the REST API from its parts the same way in every
// process that serves it: the api Lambda and the local stack differ only in
// how callers are authenticated, where AWS is and how clouds are reached.
package api

import (
	"log/slog"
	"time"

	"spaces"
	"spaces/shared/auth"
	"spaces/shared/config"
	"spaces/shared/cursor"
	"spaces/shared/httpapi"
	"spaces/shared/kubens"
	"spaces/shared/mint"
	"spaces/shared/probing"
	"spaces/shared/provisioning"
	"spaces/shared/space"
	"spaces/shared/wiring"
)

// Settings are the api function's configuration.
type Settings struct {
	wiring.Common
	// CursorSecretARN names the Secrets Manager secret whose values seal
	// pagination cursors; CursorSecret and PreviousCursorSecret are its
	// current and previous value (after a rotation, cursors sealed with the
	// previous one still open).
	CursorSecretARN      string
	CursorSecret         string
	PreviousCursorSecret string
	ProbeQueue           string // where registration probes are sent ("": none)
	RevisionsQueue       string // where deployment revisions are queued
	ProvisioningQueue    string // where provisioning jobs' steps are queued
}

// Read reads the api function's settings.
func Read(env *config.Env) Settings {
	return Settings{Common: wiring.ReadCommon(env), CursorSecretARN: env.Required("CURSOR_SECRET_ARN"),
		ProbeQueue: env.Required("PROBE_QUEUE_URL"), RevisionsQueue: env.Required("REVISIONS_QUEUE_URL"),
		ProvisioningQueue: env.Required("PROVISIONING_QUEUE_URL")}
}

// Options are the parts that differ between processes.
type Options struct {
	Auth auth.Authenticator
	// Minter reaches the clouds; nil means none is reachable.
	Minter *mint.Minter
	Log    *slog.Logger
	Now    func() time.Time
}

// New returns the assembled API and the domain service behind it.
func New(a wiring.AWS, s Settings, o Options) (*httpapi.API, *space.Service, error) {
	var previous [][]byte
	if s.PreviousCursorSecret != "" {
		previous = append(previous, cursor.KeyFromSecret(s.PreviousCursorSecret))
	}
	cursors, err := cursor.New(cursor.KeyFromSecret(s.CursorSecret), previous...)
	if err != nil {
		return nil, nil, err
	}
	store := a.Store(s.Table)
	svc := space.NewService(store, s.StaleAfter)
	if o.Now != nil {
		svc.Now = o.Now
	}
	api := &httpapi.API{
		Spaces:  svc,
		Auth:    o.Auth,
		Cursors: cursors,
		Log:     o.Log,
		OpenAPI: spaces.OpenAPI,
		// Environments and autoscaler policies live in the same table.
		Bindings: &space.Bindings{Spaces: svc, Store: store},
	}
	if s.ProbeQueue != "" {
		api.Probes = probing.Enqueuer{Queue: wiring.ProbeQueue{Q: a.Queue(s.ProbeQueue)}}
	}
	api.Revisions = &space.Revisions{Bindings: api.Bindings, Store: store, Queue: wiring.RevisionQueue{Q: a.Queue(s.RevisionsQueue)}}
	if s.ProvisioningQueue != "" {
		api.Jobs = provisioning.NewJobs(store, store, wiring.ProvisioningQueue{Q: a.Queue(s.ProvisioningQueue)})
		if o.Now != nil {
			api.Jobs.Now = o.Now
		}
	}
	// Without a minter no cloud is reachable: registrations are not checked
	// against the cloud and the discovery routes answer 503.
	if o.Minter != nil {
		svc.Clusters = o.Minter
		svc.Verifier, svc.Trust = o.Minter, o.Minter.Trust
		api.Discovery = &httpapi.Discovery{
			Namespaces: &kubens.Service{Spaces: svc, Minter: o.Minter},
			Clusters:   o.Minter,
			Claims:     store,
		}
	}
	return api, svc, nil
}
