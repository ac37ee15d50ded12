package provisioning

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"spaces/shared/space"
)

// Registrar registers a space: space.Service.Register, the code path of
// POST /spaces (claim, grant, count, probe index in one transaction).
type Registrar interface {
	Register(ctx context.Context, org string, in space.RegisterInput, idemKey string) (space.Space, bool, error)
}

// Prober probes a newly registered space at once (probing.Enqueuer).
type Prober interface {
	ProbeRegistered(ctx context.Context, s space.Space) error
}

// Events announces a job's end ("Provisioning Job Succeeded" / "Failed").
type Events interface {
	PublishJob(ctx context.Context, j Job) error
}

// Redelivery postpones a received message.
type Redelivery interface {
	Postpone(ctx context.Context, receiptHandle string, d time.Duration) error
}

// Delivery is one received provisioning message.
type Delivery struct {
	MessageID     string
	ReceiptHandle string
	Body          string
	// ReceiveCount is SQS's ApproximateReceiveCount (1 on the first).
	ReceiveCount int
}

// Provisioner runs one step of a job per delivery.
//
// At-least-once delivery is assumed, so every step is safe to repeat: the
// creator's calls are idempotent on the job id (EKS's client request token,
// the cluster name on GKE and AKS); the registration is keyed by the job id
// (Job.RegistrationKey); and every job write is conditional on the version
// the delivery read. A step's next delivery is sent before its write: a
// crash between the two leaves the current message to be redelivered (the
// step is repeated, harmlessly) and a next one for a version that then
// exists, never a job that no message drives. Deliveries for an older
// version are dropped, so duplicates collapse; one for a version not yet
// written is postponed until the write lands.
type Provisioner struct {
	Store     Store
	Accounts  Accounts
	Creator   space.ClusterCreator
	Spaces    Registrar
	Probes    Prober // nil: the minute tick probes the new space
	Events    Events
	Queue     Queue
	Redeliver Redelivery
	Policy    Policy
	// MaxReceives is the queue's maxReceiveCount: the delivery that
	// reaches it fails the job instead of letting the message go to the
	// dead-letter queue with the job stuck.
	MaxReceives int
	Now         func() time.Time
	Log         *slog.Logger
}

// Defaults.
const (
	DefaultMaxReceives = 5
	// FutureWait is how long a delivery that ran ahead of its job's write
	// waits; NotFoundReceives how many receives one gets for an absent job
	// or a version not yet written (the write follows the send by
	// milliseconds).
	FutureWait       = 2 * time.Second
	NotFoundReceives = 3
)

// NewProvisioner returns p with the defaults set.
func NewProvisioner(p Provisioner) *Provisioner {
	p.Policy = p.Policy.WithDefaults()
	if p.MaxReceives <= 0 {
		p.MaxReceives = DefaultMaxReceives
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
	return &p
}

// Step handles one delivery and reports whether it may be deleted (false:
// it comes back after the visibility timeout or a postponement).
func (p *Provisioner) Step(ctx context.Context, d Delivery) bool {
	log := p.Log.With("message_id", d.MessageID)
	d.ReceiveCount = max(d.ReceiveCount, 1)
	var m Message
	if err := json.Unmarshal([]byte(d.Body), &m); err != nil || !space.ValidID(m.JobID) || m.OrgID == "" || m.Version < 1 {
		log.Error("malformed provisioning message: dropped", "body", d.Body)
		return true
	}
	log = log.With("org_id", m.OrgID, "job_id", m.JobID, "version", m.Version)
	j, err := p.Store.GetJob(ctx, m.OrgID, m.JobID)
	switch {
	case space.KindOf(err) == space.KindNotFound && d.ReceiveCount < NotFoundReceives:
		p.postpone(ctx, log, d, FutureWait)
		return false
	case space.KindOf(err) == space.KindNotFound:
		log.Info("no such job (its creation was refused or never stored): dropped")
		return true
	case err != nil:
		log.Error("cannot read the job", "error", err.Error())
		return false
	case m.Version < j.Version:
		log.Info("a duplicate delivery: the job is already at a later version", "job_version", j.Version)
		return true
	case m.Version > j.Version && d.ReceiveCount < NotFoundReceives:
		p.postpone(ctx, log, d, FutureWait)
		return false
	case m.Version > j.Version:
		// The write this message was sent for never landed: the delivery
		// that sent it is redelivered and sends another.
		log.Info("a delivery for a version never written: dropped", "job_version", j.Version)
		return true
	case j.State.Terminal():
		// Checked after the versions: a retry's message is sent before the
		// write that takes the job out of failed, and must wait for it.
		return true
	}
	log = log.With("state", j.State)
	now := p.Now()
	if d.ReceiveCount >= p.MaxReceives {
		// The last delivery SQS makes before the dead-letter queue: the job
		// says failed, retryable, rather than waiting forever.
		log.Error("the step kept failing: the job fails", "receives", d.ReceiveCount)
		return p.finish(ctx, log, j, Poisoned(j, now, d.ReceiveCount), 0)
	}
	o, retryLater := p.call(ctx, log, j)
	if retryLater {
		return false
	}
	next, delay := Next(j, o, now, p.Policy)
	return p.finish(ctx, log, j, next, delay)
}

// call makes the step's one call and returns its outcome; retryLater means
// the delivery should simply come back (the store could not be read).
func (p *Provisioner) call(ctx context.Context, log *slog.Logger, j Job) (Outcome, bool) {
	switch ActionFor(j.State) {
	case ActBegin:
		return Outcome{}, false
	case ActStartCreate, ActAdvance:
		acct, err := p.Accounts.GetAccount(ctx, j.OrgID, j.CloudAccountID)
		switch {
		case space.KindOf(err) == space.KindNotFound || (err == nil && acct.Provider != j.Provider):
			return Outcome{Err: &space.Error{Kind: space.KindInvalid, Reason: ReasonAccount,
				Message: "the job's cloud account no longer exists in the org"}}, false
		case err != nil:
			log.Error("cannot read the cloud account", "error", err.Error())
			return Outcome{}, true
		case !acct.Ready():
			return Outcome{Err: acct.NotReady("")}, false
		}
		var pr space.CreateProgress
		if j.State == Creating {
			pr, err = p.Creator.StartCreate(ctx, acct, j.Config, j.Spec, j.ID)
		} else {
			op := space.CloudOperation{}
			if j.Operation != nil {
				op = *j.Operation
			}
			pr, err = p.Creator.Advance(ctx, acct, j.Config, j.Spec, j.ID, op)
		}
		if err != nil {
			log.Warn("the cloud call failed", "error", err.Error())
		}
		return Outcome{Progress: pr, Err: err}, false
	case ActRegister:
		s, replayed, err := p.Spaces.Register(ctx, j.OrgID, j.RegisterInput(), j.RegistrationKey())
		if err != nil {
			log.Warn("the registration failed", "error", err.Error())
			return Outcome{Err: err}, false
		}
		log.Info("the cluster is registered", "space_id", s.ID, "replayed", replayed)
		// Also on a replay: the delivery that registered may have stopped
		// before asking for the probe. Best effort, as POST /spaces does.
		if p.Probes != nil {
			if err := p.Probes.ProbeRegistered(ctx, s); err != nil {
				log.Warn("cannot enqueue the registration probe", "error", err.Error())
			}
		}
		return Outcome{SpaceID: s.ID}, false
	}
	return Outcome{}, false
}

// finish sends the next delivery (or announces the end), then writes next
// over j. It reports whether the current delivery may be deleted.
func (p *Provisioner) finish(ctx context.Context, log *slog.Logger, j, next Job, delay time.Duration) bool {
	if next.State.Terminal() {
		// Announced before the write: a crash between the two announces
		// twice (consumers dedupe on the job id), never not at all.
		if err := p.Events.PublishJob(ctx, next); err != nil {
			log.Error("cannot publish the job's end; retried", "error", err.Error())
			return false
		}
	} else if err := p.Queue.Enqueue(ctx, Message{OrgID: j.OrgID, JobID: j.ID, Version: j.Version + 1}, delay); err != nil {
		log.Error("cannot queue the next step; retried", "error", err.Error())
		return false
	}
	_, err := p.Store.UpdateJob(ctx, j.OrgID, j.ID, space.Update[Job]{At: p.Now(), Read: &j, IfVersion: j.Version,
		Apply: func(Job) (Job, error) { return next, nil }})
	switch {
	case err == nil:
		log.Info("step done", "next_state", next.State, "after", delay.String())
		return true
	case space.KindOf(err) == space.KindPreconditionFailed:
		// Canceled, retried or stepped by another delivery meanwhile: its
		// own message carries on.
		log.Info("the job moved meanwhile; this delivery ends")
		return true
	default:
		log.Error("cannot save the job; retried", "error", err.Error())
		return false
	}
}

func (p *Provisioner) postpone(ctx context.Context, log *slog.Logger, d Delivery, wait time.Duration) {
	if err := p.Redeliver.Postpone(ctx, d.ReceiptHandle, wait); err != nil {
		log.Warn("cannot postpone; the queue's visibility timeout applies", "error", err.Error())
	}
}

// Unconfigured is the creator of a process that reaches no cloud able to
// create clusters: every call is unavailable, so jobs fail retryable after
// Policy.MaxErrors attempts instead of waiting forever.
type Unconfigured struct{}

func (Unconfigured) err() error {
	return &space.Error{Kind: space.KindUnavailable, Reason: space.ReasonCloudUnavailable,
		Message: "no cluster creator is configured in this deployment"}
}

// StartCreate is always unavailable.
func (u Unconfigured) StartCreate(context.Context, space.CloudAccount, space.Config, space.ClusterSpec, string) (space.CreateProgress, error) {
	return space.CreateProgress{}, u.err()
}

// Advance is always unavailable.
func (u Unconfigured) Advance(context.Context, space.CloudAccount, space.Config, space.ClusterSpec, string, space.CloudOperation) (space.CreateProgress, error) {
	return space.CreateProgress{}, u.err()
}
