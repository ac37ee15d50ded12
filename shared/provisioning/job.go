// Package provisioning is the second way a space comes to be: a job that
// creates a cluster in a connected cloud account (space.ClusterCreator) and,
// once it is ready, registers it through the same code as POST /spaces.
//
// Creation takes 10-20 minutes on real clouds, longer than any Lambda may
// wait, so a job is a durable state machine: the job item holds the state
// and the cloud's operation, and one queue message per step drives it
// (Provisioner.Step). The rules are here, pure (the step table Next, the
// validation, Cancel and Retry); the store, queue and bus are ports.
//
// In AWS every job is one chain of requests (its queue invokes the
// provisioner, which sends the job's next message to the same queue), and
// Lambda stops such a chain at 16 invocations unless the function allows
// the loop: the template sets RecursiveLoop: Allow on the provisioner, and
// the guard is the job's own: a duplicated chain ends at its next step (a
// message for an older version is dropped), a creation fails after Policy.MaxWait and a step
// after MaxErrors failures in a row. Simpler to operate than a design
// that does not chain (a ticker scanning for due jobs): one trigger, no
// index of live jobs, the whole rhythm in the step table.
//
//	queued ─▶ creating ─▶ waiting-ready ─▶ registering ─▶ succeeded
//	              │              │               │
//	              └──────────────┴───────────────┴──▶ failed ─(retry)─▶ the failed step
//	queued, creating, waiting-ready, failed ─(cancel)─▶ canceled
//
// It imports no AWS or HTTP package.
package provisioning

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"spaces/shared/space"
)

// State is where a job is in its life.
type State string

// Job states.
const (
	Queued       State = "queued"
	Creating     State = "creating"
	WaitingReady State = "waiting-ready"
	Registering  State = "registering"
	Succeeded    State = "succeeded"
	Failed       State = "failed"
	Canceled     State = "canceled"
)

// States lists every state in the order a job passes them.
var States = []State{Queued, Creating, WaitingReady, Registering, Succeeded, Failed, Canceled}

// Terminal reports whether no delivery moves a job in s any more (a failed
// job moves again only when retried).
func (s State) Terminal() bool { return s == Succeeded || s == Failed || s == Canceled }

// Job is one provisioning job.
type Job struct {
	ID    string `json:"id"`
	OrgID string `json:"org_id"`
	// Name is the space's name once registered (default: the cluster name).
	Name           string            `json:"name,omitempty"`
	Provider       space.Provider    `json:"provider"`
	CloudAccountID string            `json:"cloud_account_id"`
	Config         space.Config      `json:"config"`
	Spec           space.ClusterSpec `json:"spec"`
	State          State             `json:"state"`
	// Operation is the cloud's handle on the creation, once started.
	Operation *space.CloudOperation `json:"operation,omitempty"`
	// CloudStatus is the cloud's own word for the creation's state.
	CloudStatus string `json:"cloud_status,omitempty"`
	// SpaceID is the registered space, once succeeded.
	SpaceID string   `json:"space_id,omitempty"`
	Failure *Failure `json:"failure,omitempty"`
	// LeftInCloud says, on a canceled job, what the cloud still holds.
	LeftInCloud string `json:"left_in_cloud,omitempty"`
	Steps       []Step `json:"steps"`
	// Since is when the job entered its state (a creation's time limit
	// counts from it).
	Since time.Time `json:"state_since"`
	// Polls counts the cloud polls; Errors the transient failures in a row
	// of the current step.
	Polls     int       `json:"polls"`
	Errors    int       `json:"consecutive_errors"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
}

// Step is one entry of a job's progress: a state entered, or a change of
// the cloud's status within it.
type Step struct {
	State       State     `json:"state"`
	At          time.Time `json:"at"`
	CloudStatus string    `json:"cloud_status,omitempty"`
	Message     string    `json:"message,omitempty"`
}

// Failure says why a job failed.
type Failure struct {
	// Step is the state the job was in when it failed; a retry resumes there.
	Step    State  `json:"step"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Retryable reports whether a retry can succeed as the job stands (a
	// cloud's refusal of the spec, or a cluster registered meanwhile,
	// cannot).
	Retryable bool `json:"retryable"`
}

// Reasons of a failure besides the cloud's own (space.ReasonCloudRefused).
const (
	ReasonTimedOut        = "TimedOut"
	ReasonStepKeptFailing = "StepKeptFailing"
	ReasonAccount         = "CloudAccountUnusable"
	ReasonRegistration    = "RegistrationRefused"
)

// MaxSteps bounds the steps kept on a job (the oldest go first), so that a
// job polled for an hour stays a small item.
const MaxSteps = 40

// JobVersioned stamps jobs for space.Run.
var JobVersioned = space.Versioned[Job]{What: "provisioning job",
	Version: func(j *Job) *int64 { return &j.Version }, Stamp: func(j *Job) *time.Time { return &j.UpdatedAt }}

// Identity is the cluster identity the job claims in its org: the one a
// space registered from it will hold.
func (j Job) Identity() string { return space.Identity(j.Provider, j.Config) }

// RegisterInput is what the job registers once the cluster is ready: the
// very input of POST /spaces.
func (j Job) RegisterInput() space.RegisterInput {
	return space.RegisterInput{Name: j.Name, Provider: j.Provider, SpaceType: space.TypeKubernetes,
		CloudAccountID: j.CloudAccountID, Config: j.Config, JobID: j.ID}
}

// RegistrationKey is the Idempotency-Key the job registers its space
// under: a redelivered "cluster ready" replays the first registration
// instead of registering twice.
func (j Job) RegistrationKey() string { return "provisioning-job:" + j.ID }

func (j *Job) enter(s State, at time.Time, cloudStatus, msg string) {
	j.State, j.Errors, j.Since = s, 0, at
	j.addStep(Step{State: s, At: at, CloudStatus: cloudStatus, Message: msg})
}

func (j *Job) addStep(st Step) {
	j.Steps = append(j.Steps, st)
	if len(j.Steps) > MaxSteps {
		j.Steps = slices.Delete(j.Steps, 1, len(j.Steps)-MaxSteps+1) // keep "queued"
	}
}

// Policy is the rhythm of a job.
type Policy struct {
	// PollInterval is the wait between two polls of a creation.
	PollInterval time.Duration
	// MaxErrors is how many transient failures in a row fail the job.
	MaxErrors int
	// MaxWait is how long a creation may take before the job fails.
	MaxWait time.Duration
}

// Defaults of Policy.
const (
	DefaultPollInterval = 30 * time.Second
	DefaultMaxErrors    = 5
	DefaultMaxWait      = 60 * time.Minute
)

// WithDefaults fills the zero fields.
func (p Policy) WithDefaults() Policy {
	if p.PollInterval <= 0 {
		p.PollInterval = DefaultPollInterval
	}
	if p.MaxErrors <= 0 {
		p.MaxErrors = DefaultMaxErrors
	}
	if p.MaxWait <= 0 {
		p.MaxWait = DefaultMaxWait
	}
	return p
}

// backoff is the wait after the n-th transient failure in a row.
func (p Policy) backoff(n int) time.Duration {
	return min(p.PollInterval<<max(n-1, 0), 15*time.Minute) // SQS's longest delay
}

// Action is what one delivery does for a job in a given state.
type Action int

// Actions.
const (
	// ActNothing: the job is terminal; the delivery is acknowledged.
	ActNothing Action = iota
	// ActBegin: queued → creating, no cloud call.
	ActBegin
	// ActStartCreate: ClusterCreator.StartCreate with the job id as token.
	ActStartCreate
	// ActAdvance: ClusterCreator.Advance of the stored operation.
	ActAdvance
	// ActRegister: register the space (space.Service.Register, keyed by
	// RegistrationKey), probe it at once.
	ActRegister
)

// ActionFor is the step table's first column: the call a delivery makes.
func ActionFor(s State) Action {
	switch s {
	case Queued:
		return ActBegin
	case Creating:
		return ActStartCreate
	case WaitingReady:
		return ActAdvance
	case Registering:
		return ActRegister
	default:
		return ActNothing
	}
}

// Outcome is what the step's call returned.
type Outcome struct {
	// Progress is the creator's answer (ActStartCreate, ActAdvance).
	Progress space.CreateProgress
	// SpaceID is the registered space (ActRegister).
	SpaceID string
	// Err is the call's failure, if any.
	Err error
}

// Next is the step table: the job after o at now, and the delay before the
// next delivery (meaningful only when the result is not terminal).
//
//	state          call          outcome                      next state      next delivery
//	queued         -             -                            creating        at once
//	creating       StartCreate   under way                    waiting-ready   after PollInterval
//	creating       StartCreate   done                         registering     at once
//	waiting-ready  Advance       under way                    waiting-ready   after PollInterval
//	waiting-ready  Advance       under way, past MaxWait      failed (retryable)
//	waiting-ready  Advance       done                         registering     at once
//	registering    Register      space id                     succeeded
//	creating..     any           refused (KindInvalid, ...)   failed
//	creating..     any           unavailable / internal       same state      after a doubling backoff;
//	                                                          failed (retryable) after MaxErrors in a row
func Next(j Job, o Outcome, now time.Time, p Policy) (Job, time.Duration) {
	p = p.WithDefaults()
	now = now.UTC()
	j.Steps = slices.Clone(j.Steps)
	if o.Err != nil {
		if transient(o.Err) {
			j.Errors++
			if j.Errors >= p.MaxErrors {
				return fail(j, now, ReasonStepKeptFailing, fmt.Sprintf("%d attempts in a row failed; the last: %s", j.Errors, message(o.Err)), true), 0
			}
			return j, p.backoff(j.Errors)
		}
		return refused(j, now, o.Err), 0
	}
	switch j.State {
	case Queued:
		j.enter(Creating, now, "", "")
		return j, 0
	case Creating, WaitingReady:
		if j.State == WaitingReady {
			j.Polls++
		}
		op := o.Progress.Operation
		changed := j.Operation == nil || *j.Operation != op || j.CloudStatus != o.Progress.Status
		j.Operation, j.CloudStatus = &op, o.Progress.Status
		switch {
		case o.Progress.Done:
			j.enter(Registering, now, o.Progress.Status, "the cluster is ready")
			return j, 0
		case j.State == Creating:
			j.enter(WaitingReady, now, o.Progress.Status, "the cloud is creating "+op.Stage)
		case now.Sub(j.Since) > p.MaxWait:
			return fail(j, now, ReasonTimedOut, fmt.Sprintf("the cluster was not ready after %s (cloud status %s)", p.MaxWait, o.Progress.Status), true), 0
		default:
			j.Errors = 0
			if changed {
				j.addStep(Step{State: WaitingReady, At: now, CloudStatus: o.Progress.Status, Message: "the cloud is creating " + op.Stage})
			}
		}
		return j, p.PollInterval
	case Registering:
		j.SpaceID = o.SpaceID
		j.enter(Succeeded, now, "", "registered as space "+o.SpaceID)
		return j, 0
	}
	return j, 0
}

// transient reports failures worth trying again as they are: the cloud or
// the store unavailable, or an unclassified error.
func transient(err error) bool {
	k := space.KindOf(err)
	return k == space.KindUnavailable || k == space.KindInternal
}

func message(err error) string {
	var e *space.Error
	if errors.As(err, &e) {
		msg := e.Message
		for _, f := range e.Fields {
			msg += "; " + f.Field + ": " + f.Reason
		}
		return msg
	}
	return err.Error()
}

// refused fails j on a refusal: the cloud's (its reason and words kept), an
// account that cannot be used, or a registration refused.
func refused(j Job, now time.Time, err error) Job {
	var e *space.Error
	reason := ""
	if errors.As(err, &e) {
		reason = e.Reason
	}
	retryable := true
	switch {
	case reason == space.ReasonCloudRefused:
		// The same spec would be refused again: fix it in a new job.
		retryable = false
	case j.State == Registering && space.KindOf(err) == space.KindConflict:
		// The cluster was registered meanwhile (or its key reused).
		reason, retryable = ReasonRegistration, false
	case reason == "" && j.State == Registering:
		reason = ReasonRegistration
	case reason == "":
		reason = string(j.State)
	}
	return fail(j, now, reason, message(err), retryable)
}

func fail(j Job, now time.Time, reason, msg string, retryable bool) Job {
	j.Steps = slices.Clone(j.Steps)
	f := &Failure{Step: j.State, Reason: reason, Message: space.FailureReason(msg), Retryable: retryable}
	j.Failure = f
	j.enter(Failed, now, j.CloudStatus, msg)
	j.Errors = 0
	return j
}

// Poisoned fails a job whose message kept failing (the queue's last
// receive): the job shows failed instead of staying stuck.
func Poisoned(j Job, now time.Time, receives int) Job {
	return fail(j, now.UTC(), ReasonStepKeptFailing,
		fmt.Sprintf("the %s step failed on %d deliveries; see the provisioner's logs", j.State, receives), true)
}

const retriedMessage = "retried"

// Retry sends a failed job back to the step it failed in (queued and
// creating start the creation again with the same token, which the cloud
// holds unique). Anything else is a conflict.
func Retry(j Job, now time.Time) (Job, error) {
	if j.State != Failed || j.Failure == nil {
		return j, space.Errorf(space.KindConflict, "only a failed provisioning job can be retried; this one is %s", j.State)
	}
	j.Steps = slices.Clone(j.Steps)
	to := j.Failure.Step
	if to == Queued {
		to = Creating
	}
	j.Failure = nil
	j.enter(to, now.UTC(), "", retriedMessage)
	return j, nil
}

// ReasonRegistering is the reason of a cancel refused while registering.
const ReasonRegistering = "Registering"

// Cancel stops a job that has not succeeded and says what it left in the
// cloud: Spaces never deletes a cluster it may have started.
func Cancel(j Job, now time.Time) (Job, error) {
	switch j.State {
	case Succeeded, Canceled:
		return j, space.Errorf(space.KindConflict, "the provisioning job is %s and cannot be canceled", j.State)
	case Registering:
		// The space may be registered already: deregister it instead once
		// the job has succeeded.
		return j, &space.Error{Kind: space.KindConflict, Reason: ReasonRegistering,
			Message: "the cluster is ready and being registered; once the job has succeeded, deregister its space (DELETE /spaces/{id}) if it is not wanted"}
	}
	j.Steps = slices.Clone(j.Steps)
	j.LeftInCloud = LeftInCloud(j)
	j.enter(Canceled, now.UTC(), j.CloudStatus, j.LeftInCloud)
	return j, nil
}

// LeftInCloud describes what a job has made the cloud hold.
func LeftInCloud(j Job) string {
	what := fmt.Sprintf("%s cluster %q", j.Provider, j.Config["clusterName"])
	switch {
	case j.Operation != nil:
		return fmt.Sprintf("the %s is being created or exists in the cloud account (cloud status %s, operation %s %s); Spaces does not delete it: delete it in the cloud if it is not wanted",
			what, j.CloudStatus, j.Operation.Stage, j.Operation.ID)
	case j.State == Creating || (j.State == Failed && j.Failure != nil && j.Failure.Step == Creating):
		return "the create call for the " + what + " may have reached the cloud; check the cloud account and delete the cluster if it exists and is not wanted"
	default:
		return "nothing: the cloud was never called"
	}
}

// WebhookEvent is the event of a job's stored change from before to after:
// provisioning_job.succeeded or .failed when it entered that state (a
// failed job retried and failed again is a new event), or false.
func WebhookEvent(before, after Job) (space.EventType, space.JobEventData, bool) {
	t, ok := map[State]space.EventType{Succeeded: space.EventJobSucceeded, Failed: space.EventJobFailed}[after.State]
	if !ok || before.State == after.State || after.ID == "" || after.OrgID == "" {
		return "", space.JobEventData{}, false
	}
	d := space.JobEventData{JobID: after.ID, Name: after.Name, Provider: after.Provider, CloudAccountID: after.CloudAccountID,
		State: string(after.State), At: after.Since.UTC()}
	if after.State == Succeeded {
		d.SpaceID = after.SpaceID
	}
	if f := after.Failure; f != nil && after.State == Failed {
		d.Failure = &space.JobFailureData{Step: string(f.Step), Reason: f.Reason, Message: f.Message, Retryable: f.Retryable}
	}
	return t, d, true
}

// Activity is the activity a stored change of a job makes: its creation
// (before is nil), a retry (failed, then not) or its cancellation.
func Activity(before *Job, after Job) (space.ActivityKind, bool) {
	switch {
	case before == nil:
		return space.ActivityJobCreated, true
	case before.State == Failed && after.State != Failed && after.State != Canceled:
		return space.ActivityJobRetried, true
	case before.State != Canceled && after.State == Canceled:
		return space.ActivityJobCanceled, true
	}
	return "", false
}
