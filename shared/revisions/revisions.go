// Package revisions claims queued deployment revisions (functions/revisions):
// one SQS message per revision, {org_id, revision_id}. A claim reads the
// revision and the space it was pushed to, decides with space.DecideClaim
// and then
//
//   - deploys: mints credentials and server-side-applies the manifests into
//     the environment's namespace; the revision becomes deployed, or failed
//     with the cluster's message;
//   - retries later: the space is inactive or unknown; the attempt is
//     counted on the revision and the message comes back after a backoff
//     (ChangeMessageVisibility, then reported as a batch item failure);
//   - stops: the third such claim; the revision is stopped "Space inactive"
//     and can be retried (POST /revisions/{id}/retry) once the space is
//     active;
//   - dead-letters: the space is deregistered; the message is sent to the
//     dead-letter queue at this claim (the queue's redrive would only move it
//     after maxReceiveCount receives) and the revision is dead-lettered
//     "Space deregistered". The DLQ send comes first: a crash after it
//     re-claims a still pending revision and sends again (a duplicate in the
//     DLQ), never loses it.
//
// An agent space's API server is not reachable from here: a claim that would
// deploy to one hands the revision to its agent instead (Store.HandRevision:
// its id and version in the space's AGENT item, which the agent's next lease
// renewal answers; see space/agentwork.go). The revision stays pending, and
// the message comes back after AgentWait: by then the agent's report has
// usually set it deployed or failed (acknowledged untouched); if not, the
// same rules decide again (an inactive space counts an attempt and stops at
// the third, a deregistered one dead-letters, an active one is handed again
// and waited for), so a revision handed to an agent that went away does not
// stay pending for ever. One that renews its lease but never reports (an old
// agent version) is handed until the queue's redrive moves the message to
// the dead-letter queue (maxReceiveCount), whose alarm fires.
//
// Every revision write is conditional on its version, and a revision that is
// no longer pending is acknowledged untouched, so redelivered messages do
// nothing twice.
package revisions

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"spaces/shared/kubecred"
	"spaces/shared/space"
)

// Message is the body of a revision message.
type Message struct {
	OrgID      string `json:"org_id"`
	RevisionID string `json:"revision_id"`
}

// Encode is the message's JSON body.
func (m Message) Encode() string {
	b, _ := json.Marshal(m) // two strings cannot fail
	return string(b)
}

// Store is what a claim reads and writes.
type Store interface {
	GetRevision(ctx context.Context, org, id string) (space.Revision, error)
	UpdateRevision(ctx context.Context, org, id string, u space.Update[space.Revision]) (space.Updated[space.Revision], error)
	SpaceAsClaimed(ctx context.Context, org, id string) (space.Space, bool, error)
	// HandRevision gives a revision of an agent space to its agent
	// (space.AgentWorkStore).
	HandRevision(ctx context.Context, r space.Revision) error
}

// Applier applies manifests to a cluster (kubeapply.Applier).
type Applier interface {
	Apply(ctx context.Context, c kubecred.Credentials, namespace string, manifests []map[string]any) error
}

// Redelivery is what a claim asks of the queue besides acknowledging a
// message (the SQS adapter implements it).
type Redelivery interface {
	// Postpone makes the message come back after d.
	Postpone(ctx context.Context, receiptHandle string, d time.Duration) error
	// DeadLetter sends the body to the dead-letter queue.
	DeadLetter(ctx context.Context, body string) error
}

// Delivery is one received revision message.
type Delivery struct {
	MessageID     string
	ReceiptHandle string
	Body          string
}

// DefaultBackoff is the wait before the first retry against a space that is
// not active; it doubles with each attempt.
const DefaultBackoff = 30 * time.Second

// DefaultAgentWait is how long a revision handed to an agent waits before
// its message is looked at again: two lease intervals (space.LeaseInterval)
// and a margin, time for the agent to renew, apply and report.
const DefaultAgentWait = 2*space.LeaseInterval + 10*time.Second

// Claimer claims revisions.
type Claimer struct {
	Store   Store
	Minter  kubecred.Minter
	Applier Applier
	Queue   Redelivery
	// Backoff is the first retry's wait (default DefaultBackoff; SQS counts
	// whole seconds, so below a second means at once).
	Backoff time.Duration
	// AgentWait is how long a revision handed to an agent waits before its
	// message comes back (default DefaultAgentWait).
	AgentWait  time.Duration
	StaleAfter time.Duration
	Now        func() time.Time
	Log        *slog.Logger
}

// NewClaimer returns a claimer with the defaults set.
func NewClaimer(c Claimer) *Claimer {
	if c.Backoff <= 0 {
		c.Backoff = DefaultBackoff
	}
	if c.AgentWait <= 0 {
		c.AgentWait = DefaultAgentWait
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return &c
}

// errClaimed: another claim moved the revision first.
var errClaimed = errors.New("claimed by another delivery")

// Claim handles one message and reports whether it may be deleted (false:
// it comes back, later or after an infrastructure failure).
func (c *Claimer) Claim(ctx context.Context, d Delivery) bool {
	log := c.Log.With("message_id", d.MessageID)
	var m Message
	if err := json.Unmarshal([]byte(d.Body), &m); err != nil || m.OrgID == "" || m.RevisionID == "" {
		log.ErrorContext(ctx, "malformed revision message: dropped", "body", d.Body)
		return true
	}
	log = log.With("org_id", m.OrgID, "revision_id", m.RevisionID)
	rev, err := c.Store.GetRevision(ctx, m.OrgID, m.RevisionID)
	if space.KindOf(err) == space.KindNotFound {
		log.WarnContext(ctx, "revision not found: dropped")
		return true
	}
	if err != nil {
		log.ErrorContext(ctx, "cannot read the revision", "error", err.Error())
		return false
	}
	if rev.State != space.RevisionPending {
		return true // claimed before: a redelivery
	}
	sp, found, err := c.Store.SpaceAsClaimed(ctx, m.OrgID, rev.SpaceID)
	if err != nil {
		log.ErrorContext(ctx, "cannot read the space", "error", err.Error())
		return false
	}
	decision, reason := space.DecideClaim(sp.Observed(c.Now(), c.StaleAfter), found, rev.Attempts)
	state, attempts := rev.State, rev.Attempts
	switch decision {
	case space.ClaimDeploy:
		if sp.Connectivity == space.ViaAgent {
			return c.handToAgent(ctx, log, d, rev)
		}
		creds, err := c.Minter.Mint(ctx, sp)
		if err != nil {
			log.ErrorContext(ctx, "cannot mint credentials; retried", "error", err.Error())
			return false
		}
		if err := c.Applier.Apply(ctx, creds, rev.Namespace, rev.Manifests); err != nil {
			state, reason = space.RevisionFailed, space.FailureReason(err.Error())
		} else {
			state, reason = space.RevisionDeployed, ""
		}
	case space.ClaimRetry:
		attempts++
		if !c.save(ctx, log, rev, state, reason, attempts) {
			return false
		}
		delay := c.backoff(attempts)
		if err := c.Queue.Postpone(ctx, d.ReceiptHandle, delay); err != nil {
			log.WarnContext(ctx, "cannot delay the retry; the queue's visibility timeout applies", "error", err.Error())
		}
		log.InfoContext(ctx, "space not active: revision retried later", "attempts", attempts, "after", delay.String())
		return false
	case space.ClaimStop:
		attempts++
		state = space.RevisionStopped
	case space.ClaimDeadLetter:
		if err := c.Queue.DeadLetter(ctx, d.Body); err != nil {
			log.ErrorContext(ctx, "cannot send to the dead-letter queue; retried", "error", err.Error())
			return false
		}
		state = space.RevisionDeadLettered
	}
	if !c.save(ctx, log, rev, state, reason, attempts) {
		return false
	}
	log.InfoContext(ctx, "revision claimed", "state", state, "reason", reason)
	return true
}

// handToAgent gives the revision to its space's agent and has the message
// come back after AgentWait (false: not deleted).
func (c *Claimer) handToAgent(ctx context.Context, log *slog.Logger, d Delivery, rev space.Revision) bool {
	if err := c.Store.HandRevision(ctx, rev); err != nil {
		// Not found: deregistered since the read; the next claim
		// dead-letters it.
		log.WarnContext(ctx, "cannot hand the revision to the agent; retried", "error", err.Error())
		return false
	}
	if err := c.Queue.Postpone(ctx, d.ReceiptHandle, c.AgentWait); err != nil {
		log.WarnContext(ctx, "cannot delay the check; the queue's visibility timeout applies", "error", err.Error())
	}
	log.InfoContext(ctx, "revision handed to the space's agent", "version", rev.Version, "check_after", c.AgentWait.String())
	return false
}

// save writes the claim's outcome on the revision as read: true when
// written or when another claim moved it first (nothing left to do), false
// to retry.
func (c *Claimer) save(ctx context.Context, log *slog.Logger, rev space.Revision, state space.RevisionState, reason string, attempts int) bool {
	_, err := c.Store.UpdateRevision(ctx, rev.OrgID, rev.ID, space.Update[space.Revision]{At: c.Now(), Read: &rev,
		Apply: func(r space.Revision) (space.Revision, error) {
			if r.Version != rev.Version {
				return r, errClaimed
			}
			r.State, r.Reason, r.Attempts = state, reason, attempts
			return r, nil
		}})
	switch {
	case err == nil:
		return true
	case errors.Is(err, errClaimed):
		log.InfoContext(ctx, "revision moved by another claim")
		return true
	default:
		log.ErrorContext(ctx, "cannot save the revision", "error", err.Error())
		return false
	}
}

func (c *Claimer) backoff(attempt int) time.Duration {
	d := c.Backoff << max(attempt-1, 0)
	return min(d, 12*time.Hour) // SQS's maximum visibility timeout
}
