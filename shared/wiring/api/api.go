// Package api assembles the catalog REST API from its parts the same way in
// every process that serves it: the api Lambda and the local stack differ
// only in how callers are authenticated, where AWS is and how clouds are
// asked. It links neither client-go nor a cloud SDK: the registration check
// and the first verification of a new account go through Options.Cloud (the
// discovery function, shared/cloudcall), and the routes that need a cluster
// or a cloud's listing are wiring/discovery's.
package api

import (
	"log/slog"
	"time"

	"spaces"
	"spaces/shared/auth"
	"spaces/shared/awsclient"
	"spaces/shared/cloudcall"
	"spaces/shared/config"
	"spaces/shared/cursor"
	"spaces/shared/httpapi"
	"spaces/shared/probing"
	"spaces/shared/provisioning"
	"spaces/shared/space"
	"spaces/shared/webhook"
	"spaces/shared/webhooks"
	"spaces/shared/wiring/parts"
)

// Settings are the api function's configuration.
type Settings struct {
	parts.Common
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
	// DiscoveryFunction is the function the cloud questions are invoked on
	// ("": no cloud is reachable).
	DiscoveryFunction string
	Clouds            parts.Clouds // who customers' clouds are told to trust
	// WebhookKey is the KMS key that seals webhook secrets ("": the
	// webhook routes answer 503).
	WebhookKey string
	// WebhookQueue is the webhook delivery queue, where test events are
	// sent ("": they answer 503).
	WebhookQueue string
	// AllowLoopbackWebhooks lets webhook endpoints be on loopback: set by
	// the local stack only, never read from the environment.
	AllowLoopbackWebhooks bool
}

// Read reads the api function's settings.
func Read(env *config.Env) Settings {
	return Settings{Common: parts.ReadCommon(env), CursorSecretARN: env.Required("CURSOR_SECRET_ARN"),
		ProbeQueue: env.Required("PROBE_QUEUE_URL"), RevisionsQueue: env.Required("REVISIONS_QUEUE_URL"),
		ProvisioningQueue: env.Required("PROVISIONING_QUEUE_URL"),
		DiscoveryFunction: env.Required("DISCOVERY_FUNCTION"), Clouds: parts.ReadClouds(env),
		WebhookKey: env.String("WEBHOOK_SEALER_ARN", ""), WebhookQueue: env.String("WEBHOOK_QUEUE_URL", "")}
}

// Cloud answers the catalog's questions for a cloud: does a cluster exist,
// does an account's cloud trust the org.
type Cloud interface {
	space.ClusterChecker
	space.AccountVerifier
}

// Options are the parts that differ between processes.
type Options struct {
	Auth auth.Authenticator
	// Cloud asks the clouds; nil means none is reachable (registrations are
	// not checked, accounts stay pending). Deployed, it is
	// CloudCall(a, s).
	Cloud Cloud
	// Trust, when set, is who customers' clouds are told to trust, in
	// place of the settings' (the local stack's simulated clouds').
	Trust *space.TrustConfig
	Log   *slog.Logger
	Now   func() time.Time
}

// New returns the assembled API and the domain service behind it.
func New(a parts.AWS, s Settings, o Options) (*httpapi.API, *space.Service, error) {
	var previous [][]byte
	if s.PreviousCursorSecret != "" {
		previous = append(previous, cursor.KeyFromSecret(s.PreviousCursorSecret))
	}
	cursors, err := cursor.New(cursor.KeyFromSecret(s.CursorSecret), previous...)
	if err != nil {
		return nil, nil, err
	}
	store := a.Store(s.Table, a.Sealer(s.WebhookKey)...)
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
		Agents: &space.Agents{Store: store, Spaces: store, Now: svc.Now, Cadence: s.LeaseCadence,
			Work: store, Revisions: store},
	}
	if s.ProbeQueue != "" {
		api.Probes = probing.Enqueuer{Queue: parts.ProbeQueue{Q: a.Queue(s.ProbeQueue)}}
	}
	api.Activity = store
	api.Revisions = &space.Revisions{Bindings: api.Bindings, Store: store, Queue: parts.RevisionQueue{Q: a.Queue(s.RevisionsQueue)}}
	if s.ProvisioningQueue != "" {
		api.Jobs = provisioning.NewJobs(store, store, parts.ProvisioningQueue{Q: a.Queue(s.ProvisioningQueue)})
		if o.Now != nil {
			api.Jobs.Now = o.Now
		}
	}
	if s.WebhookKey != "" {
		api.Webhooks = &space.Webhooks{Store: store, Rules: space.WebhookRules{AllowLoopback: s.AllowLoopbackWebhooks},
			Hosts: webhook.Guard{AllowLoopback: s.AllowLoopbackWebhooks}, Now: svc.Now, NewID: svc.NewID,
			NewSecret: space.NewWebhookSecret, Events: store}
		if s.WebhookQueue != "" {
			api.Webhooks.Queue = webhooks.Enqueuer{Queue: parts.DeliveryQueue{Q: a.Queue(s.WebhookQueue)}}
		}
	}
	svc.Trust = s.Clouds.Trust()
	if o.Trust != nil {
		svc.Trust = *o.Trust
	}
	if o.Cloud != nil {
		svc.Clusters, svc.Verifier = o.Cloud, o.Cloud
	}
	return api, svc, nil
}

// CloudCall is the deployed Cloud: a synchronous Invoke of the discovery
// function ("" when s names none).
func CloudCall(a parts.AWS, s Settings) Cloud {
	if s.DiscoveryFunction == "" {
		return nil
	}
	return cloudcall.Client{Lambda: awsclient.Lambda(a.Config, a.Endpoint), Function: s.DiscoveryFunction}
}
