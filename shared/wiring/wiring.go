// Package wiring builds each workflow (scheduler, prober, cascade, revision
// claims) from its settings and adapters, once: the Lambda mains and the
// local stack call the same constructors, so the local stack runs exactly
// what AWS runs and differs only in where AWS is (the emulator) and how
// clouds and clusters are reached (passed in). The parts they share (where
// AWS is, the common settings, the bridges between the use cases' ports and
// the generic adapters) are wiring/parts', which the catalog API builds from
// without linking what the workflows here publish with (EventBridge).
//
// It links no client-go and no cloud SDK: the prober's Checker, the
// claimer's Applier and every Minter are passed in, so that the scheduler
// and the cascade, which build from here too, stay small. The catalog
// API's assembly is wiring/api (which links neither either); what needs a
// minter or client-go to answer a route is wiring/discovery's.
package wiring

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"spaces/shared/cascade"
	"spaces/shared/config"
	"spaces/shared/dynamostore"
	"spaces/shared/eventbus"
	"spaces/shared/kubecred"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/provisioning"
	"spaces/shared/revisions"
	"spaces/shared/space"
	"spaces/shared/sqsqueue"
	"spaces/shared/tracing"
	"spaces/shared/webhook"
	"spaces/shared/webhooks"
	"spaces/shared/wiring/parts"
)

// publisher publishes to one EventBridge bus.
func publisher(a parts.AWS, bus string) *eventbus.Publisher {
	return eventbus.New(eventbus.NewClient(a.Config, a.Endpoint), bus)
}

// Redelivery postpones revision messages on their queue and dead-letters
// them to the DLQ (revisions.Redelivery).
type Redelivery struct{ Queue, DLQ *sqsqueue.Queue }

// Postpone delays the message's next delivery.
func (r Redelivery) Postpone(ctx context.Context, receiptHandle string, d time.Duration) error {
	return r.Queue.Postpone(ctx, receiptHandle, d)
}

// DeadLetter sends the body to the DLQ.
func (r Redelivery) DeadLetter(ctx context.Context, body string) error {
	return r.DLQ.Send(ctx, []sqsqueue.Message{{Body: body}})
}

// SchedulerSettings configure the minute fan-out.
type SchedulerSettings struct {
	Table      string
	ProbeQueue string
	Interval   time.Duration
	// MetricsNamespace is the stack's CloudWatch namespace (empty:
	// metrics.Namespace).
	MetricsNamespace string
}

// ReadScheduler reads the scheduler's settings.
func ReadScheduler(env *config.Env) SchedulerSettings {
	return SchedulerSettings{Table: env.Required("TABLE_NAME"), ProbeQueue: env.Required("PROBE_QUEUE_URL"),
		Interval: env.Duration("PROBE_INTERVAL", space.DefaultProbeInterval), MetricsNamespace: env.String("METRICS_NAMESPACE", "")}
}

// Scheduler builds the fan-out.
func Scheduler(a parts.AWS, s SchedulerSettings, log *slog.Logger) *probing.Scheduler {
	return probing.NewScheduler(probing.Scheduler{
		Targets: a.Store(s.Table), Queue: parts.ProbeQueue{Q: a.Queue(s.ProbeQueue)}, Interval: s.Interval,
		Metrics: &metrics.Emitter{Log: log, Namespace: s.MetricsNamespace}, Log: log,
	})
}

// ProberSettings configure the prober.
type ProberSettings struct {
	parts.Common
	ProbeQueue string
	EventBus   string
	// Interval is the probe interval; a short one (locally) shortens the
	// re-probe rhythm with it.
	Interval time.Duration
	// MetricsNamespace is the stack's CloudWatch namespace (empty:
	// metrics.Namespace).
	MetricsNamespace string
}

// ReadProber reads the prober's settings and checks that a healthy space
// cannot read as stale between its shard's beats.
func ReadProber(env *config.Env) (ProberSettings, error) {
	s := ProberSettings{Common: parts.ReadCommon(env), ProbeQueue: env.Required("PROBE_QUEUE_URL"), EventBus: env.Required("EVENT_BUS_NAME"),
		Interval: space.DefaultProbeInterval, MetricsNamespace: env.String("METRICS_NAMESPACE", "")}
	return s, probing.CheckStaleAfter(s.Interval, s.StaleAfter)
}

// Prober builds the prober; minter and checker reach the clouds and the
// clusters.
func Prober(a parts.AWS, s ProberSettings, minter kubecred.Minter, checker probing.Checker, log *slog.Logger) *probing.Prober {
	store := a.Store(s.Table)
	return probing.NewProber(probing.Prober{
		Store: store, Leases: store, Minter: minter, Checker: checker,
		Events: publisher(a, s.EventBus), Queue: parts.ProbeQueue{Q: a.Queue(s.ProbeQueue)},
		StaleAfter: s.StaleAfter, Metrics: &metrics.Emitter{Log: log, Namespace: s.MetricsNamespace}, Log: log,
		LeaseCadence: s.LeaseCadence,
		MinGap:       min(probing.DefaultMinGap, s.Interval/3),
		ReprobeDelay: min(probing.DefaultReprobeDelay, s.Interval/5),
	})
}

// CascadeSettings configure the deregistration cascade.
type CascadeSettings struct {
	Table    string
	EventBus string
	Wakes    parts.Wakes
}

// ReadCascade reads the cascade's settings.
func ReadCascade(env *config.Env) CascadeSettings {
	return CascadeSettings{Table: env.Required("TABLE_NAME"), EventBus: env.Required("EVENT_BUS_NAME"), Wakes: parts.ReadWakes(env)}
}

// Cascade builds the cascade.
func Cascade(a parts.AWS, s CascadeSettings, log *slog.Logger) *cascade.Cascade {
	return cascade.New(cascade.Cascade{Store: a.Store(s.Table), Events: publisher(a, s.EventBus), Log: log,
		Agents: a.Waker(s.Wakes), Connections: a.Connections(s.Wakes)})
}

// ClaimerSettings configure the revision claims.
type ClaimerSettings struct {
	parts.Common
	RevisionsQueue string
	RevisionsDLQ   string
	// Backoff is the first retry's wait (0: revisions.DefaultBackoff).
	Backoff time.Duration
	Wakes   parts.Wakes
}

// ReadClaimer reads the claimer's settings.
func ReadClaimer(env *config.Env) ClaimerSettings {
	return ClaimerSettings{Common: parts.ReadCommon(env), RevisionsQueue: env.Required("REVISIONS_QUEUE_URL"),
		RevisionsDLQ: env.Required("REVISIONS_DLQ_URL"), Wakes: parts.ReadWakes(env)}
}

// Claimer builds the revision claimer; minter and applier reach the
// clusters.
func Claimer(a parts.AWS, s ClaimerSettings, minter kubecred.Minter, applier revisions.Applier, log *slog.Logger) *revisions.Claimer {
	store := a.Store(s.Table)
	return revisions.NewClaimer(revisions.Claimer{
		Store: claimStore{store, parts.WakingWork(store, a.Waker(s.Wakes), log)}, Minter: minter, Applier: applier,
		Queue:   Redelivery{Queue: a.Queue(s.RevisionsQueue), DLQ: a.Queue(s.RevisionsDLQ)},
		Backoff: s.Backoff, StaleAfter: s.StaleAfter, Log: log,
		// Two of the agents' lease intervals and a margin.
		AgentWait: 2*s.LeaseCadence.Interval() + 10*time.Second,
	})
}

// claimStore is the claimer's store, whose revisions handed to agents
// wake them (parts.WakingWork).
type claimStore struct {
	*dynamostore.Store
	work space.AgentWorkStore
}

func (c claimStore) HandRevision(ctx context.Context, r space.Revision) error {
	return c.work.HandRevision(ctx, r)
}

// ProvisionerSettings configure the provisioning jobs' steps.
type ProvisionerSettings struct {
	parts.Common
	ProvisioningQueue string
	EventBus          string
	ProbeQueue        string
	// PollInterval is the wait between two polls of a creation.
	PollInterval time.Duration
	// MaxReceives must be the queue's maxReceiveCount (template.yaml).
	MaxReceives int
}

// ReadProvisioner reads the provisioner's settings.
func ReadProvisioner(env *config.Env) ProvisionerSettings {
	return ProvisionerSettings{Common: parts.ReadCommon(env), ProvisioningQueue: env.Required("PROVISIONING_QUEUE_URL"),
		EventBus: env.Required("EVENT_BUS_NAME"), ProbeQueue: env.Required("PROBE_QUEUE_URL"),
		PollInterval: env.Duration("POLL_INTERVAL", provisioning.DefaultPollInterval),
		MaxReceives:  env.Int("MAX_RECEIVES", provisioning.DefaultMaxReceives)}
}

// Provisioner builds the provisioner. creator reaches the clouds as each
// org's connected identity; checker (nil: none) is the registration's
// cloud check, as for POST /spaces.
func Provisioner(a parts.AWS, s ProvisionerSettings, creator space.ClusterCreator, checker space.ClusterChecker, log *slog.Logger) *Provisioning {
	store := a.Store(s.Table)
	svc := space.NewService(store, s.StaleAfter)
	svc.Clusters = checker
	q := parts.ProvisioningQueue{Q: a.Queue(s.ProvisioningQueue)}
	p := &Provisioning{Provisioner: provisioning.NewProvisioner(provisioning.Provisioner{
		Store: store, Accounts: store, Creator: creator, Spaces: svc,
		Events: publisher(a, s.EventBus), Queue: q, Redeliver: q,
		Policy:      provisioning.Policy{PollInterval: s.PollInterval},
		MaxReceives: s.MaxReceives, Log: log,
	})}
	if s.ProbeQueue != "" {
		p.Provisioner.Probes = probing.Enqueuer{Queue: parts.ProbeQueue{Q: a.Queue(s.ProbeQueue)}}
	}
	return p
}

// Provisioning is the provisioner behind Lambda's SQS source.
type Provisioning struct{ *provisioning.Provisioner }

// HandleSQS runs one step per record and reports the records to redeliver.
func (p *Provisioning) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, r := range ev.Records {
		n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
		// Each step continues the trace of the request or step that queued it.
		mctx, end := tracing.Message(ctx, "provision", r.MessageAttributes)
		ok := p.Step(mctx, provisioning.Delivery{MessageID: r.MessageId, ReceiptHandle: r.ReceiptHandle, Body: r.Body, ReceiveCount: n})
		end(nil)
		if !ok {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp, nil
}

// WebhooksSettings configure the webhook deliveries.
type WebhooksSettings struct {
	Table string
	// Queue is the delivery queue's URL.
	Queue string
	// SealerKey is the KMS key that seals the endpoints' secrets.
	SealerKey string
	// InFlight bounds one endpoint's attempts under way at once
	// (template's WebhookEndpointInFlight; 0: webhooks.DefaultInFlight).
	InFlight int
	// AllowLoopback lets endpoints be on loopback: the local stack only,
	// never read from the environment.
	AllowLoopback bool
	// Roots, when set, are the TLS roots receivers are trusted by (the
	// local stack's tests: a loopback receiver's CA); nil: the system's.
	Roots *tls.Config
}

// ReadWebhooks reads the webhook function's settings.
func ReadWebhooks(env *config.Env) WebhooksSettings {
	return WebhooksSettings{Table: env.Required("TABLE_NAME"), Queue: env.Required("WEBHOOK_QUEUE_URL"),
		SealerKey: env.Required("WEBHOOK_SEALER_ARN"), InFlight: env.Int("WEBHOOK_IN_FLIGHT", webhooks.DefaultInFlight)}
}

// Webhooks builds the fan-out and the deliverer.
func Webhooks(a parts.AWS, s WebhooksSettings, log *slog.Logger) (*webhooks.Fanout, *webhooks.Deliverer) {
	store := a.Store(s.Table, a.Sealer(s.SealerKey)...)
	q := parts.DeliveryQueue{Q: a.Queue(s.Queue)}
	eps := &space.Webhooks{Store: store, Rules: space.WebhookRules{AllowLoopback: s.AllowLoopback}, Now: time.Now}
	return &webhooks.Fanout{Store: store, Queue: q, Activity: store, Log: log},
		&webhooks.Deliverer{Store: store, Sender: webhook.NewClient(webhook.Guard{AllowLoopback: s.AllowLoopback}, s.Roots),
			Queue: q, Endpoints: eps, Now: time.Now, InFlight: s.InFlight, Log: log}
}
