// Package registry assembles the REST API from its parts the same way in
// every process that serves it: the api Lambda and the local stack differ
// only in how callers are authenticated and how clouds are reached.
package registry

import (
	"log/slog"
	"time"

	"spaces"
	"spaces/shared/auth"
	"spaces/shared/cursor"
	"spaces/shared/dynamostore"
	"spaces/shared/httpapi"
	"spaces/shared/kubens"
	"spaces/shared/mint"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// Options are the parts.
type Options struct {
	Store *dynamostore.Store
	// Minter reaches the clouds; nil means none is reachable.
	Minter     *mint.Minter
	Auth       auth.Authenticator
	Cursors    *cursor.Codec
	Log        *slog.Logger
	StaleAfter time.Duration
	// Probes asks for a probe of each newly registered space (optional).
	Probes probing.Enqueuer
	// Revisions queues deployment revisions (nil: the revision routes answer
	// 503).
	Revisions space.RevisionQueue
	Now       func() time.Time
}

// API returns the assembled API and the domain service behind it.
func API(o Options) (*httpapi.API, *space.Service) {
	svc := space.NewService(o.Store, o.StaleAfter)
	if o.Now != nil {
		svc.Now = o.Now
	}
	api := &httpapi.API{
		Spaces:  svc,
		Auth:    o.Auth,
		Cursors: o.Cursors,
		Log:     o.Log,
		OpenAPI: spaces.OpenAPI,
		Probes:  o.Probes,
		// Environments and autoscaler policies live in the same table.
		Bindings: &space.Bindings{Spaces: svc, Store: o.Store},
	}
	api.Revisions = &space.Revisions{Bindings: api.Bindings, Store: o.Store, Queue: o.Revisions}
	// Without a minter no cloud is reachable: registrations are not checked
	// against the cloud and the discovery routes answer 503.
	if o.Minter != nil {
		svc.Clusters = o.Minter
		svc.Verifier, svc.Trust = o.Minter, o.Minter.Trust
		api.Discovery = &httpapi.Discovery{
			Namespaces: &kubens.Service{Spaces: svc, Minter: o.Minter},
			Clusters:   o.Minter,
			Claims:     o.Store,
		}
	}
	return api, svc
}
