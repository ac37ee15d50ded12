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
// Every revision write is conditional on its version, and a revision that is
// no longer pending is acknowledged untouched, so redelivered messages do
// nothing twice.
package revisions

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/shared/kubecred"
	"spaces/shared/space"
	"spaces/shared/sqsqueue"
)

// Message is the body of a revision message.
type Message struct {
	OrgID      string `json:"org_id"`
	RevisionID string `json:"revision_id"`
}

// Queue enqueues revisions on the revisions queue (space.RevisionQueue).
type Queue struct{ Q *sqsqueue.Queue }

// EnqueueRevision sends one message.
func (q Queue) EnqueueRevision(ctx context.Context, org, id string) error {
	body, _ := json.Marshal(Message{OrgID: org, RevisionID: id}) // two strings cannot fail
	if err := q.Q.Send(ctx, []sqsqueue.Message{{Body: string(body)}}); err != nil {
		return &space.Error{Kind: space.KindUnavailable, Message: "the revision could not be queued", Err: err}
	}
	return nil
}

// Store is what a claim reads and writes.
type Store interface {
	GetRevision(ctx context.Context, org, id string) (space.Revision, error)
	SaveRevision(ctx context.Context, r space.Revision) error
	SpaceAsClaimed(ctx context.Context, org, id string) (space.Space, bool, error)
}

// Applier applies manifests to a cluster (kubeapply.Applier).
type Applier interface {
	Apply(ctx context.Context, c kubecred.Credentials, namespace string, manifests []map[string]any) error
}

// SQSAPI is the part of the SQS client a claim uses.
type SQSAPI interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// DefaultBackoff is the wait before the first retry against a space that is
// not active; it doubles with each attempt.
const DefaultBackoff = 30 * time.Second

// Claimer claims revisions.
type Claimer struct {
	Store    Store
	Minter   kubecred.Minter
	Applier  Applier
	SQS      SQSAPI
	QueueURL string
	DLQURL   string
	// Backoff is the first retry's wait (default DefaultBackoff; SQS counts
	// whole seconds, so below a second means at once).
	Backoff    time.Duration
	StaleAfter time.Duration
	Now        func() time.Time
	Log        *slog.Logger
}

// HandleSQS claims each message; the ones to retry (later, or after an
// infrastructure failure) are reported as batch item failures.
func (c *Claimer) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, r := range ev.Records {
		if !c.claim(ctx, r) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp, nil
}

// claim handles one message and reports whether it may be deleted.
func (c *Claimer) claim(ctx context.Context, r events.SQSMessage) bool {
	log := c.log().With("message_id", r.MessageId)
	var m Message
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil || m.OrgID == "" || m.RevisionID == "" {
		log.Error("malformed revision message: dropped", "body", r.Body)
		return true
	}
	log = log.With("org_id", m.OrgID, "revision_id", m.RevisionID)
	rev, err := c.Store.GetRevision(ctx, m.OrgID, m.RevisionID)
	if space.KindOf(err) == space.KindNotFound {
		log.Warn("revision not found: dropped")
		return true
	}
	if err != nil {
		log.Error("cannot read the revision", "error", err.Error())
		return false
	}
	if rev.State != space.RevisionPending {
		return true // claimed before: a redelivery
	}
	sp, found, err := c.Store.SpaceAsClaimed(ctx, m.OrgID, rev.SpaceID)
	if err != nil {
		log.Error("cannot read the space", "error", err.Error())
		return false
	}
	decision, reason := space.DecideClaim(sp.Observed(c.now(), c.StaleAfter), found, rev.Attempts)
	next := rev
	next.Version++
	next.UpdatedAt = c.now()
	switch decision {
	case space.ClaimDeploy:
		creds, err := c.Minter.Mint(ctx, sp)
		if err != nil {
			log.Error("cannot mint credentials; retried", "error", err.Error())
			return false
		}
		if err := c.Applier.Apply(ctx, creds, rev.Namespace, rev.Manifests); err != nil {
			next.State, next.Reason = space.RevisionFailed, space.FailureReason(err.Error())
		} else {
			next.State, next.Reason = space.RevisionDeployed, ""
		}
	case space.ClaimRetry:
		next.Attempts++
		next.Reason = reason
		if !c.save(ctx, log, next) {
			return false
		}
		delay := c.backoff(next.Attempts)
		if _, err := c.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(c.QueueURL), ReceiptHandle: aws.String(r.ReceiptHandle), VisibilityTimeout: int32(delay / time.Second),
		}); err != nil {
			log.Warn("cannot delay the retry; the queue's visibility timeout applies", "error", err.Error())
		}
		log.Info("space not active: revision retried later", "attempts", next.Attempts, "after", delay.String())
		return false
	case space.ClaimStop:
		next.Attempts++
		next.State, next.Reason = space.RevisionStopped, reason
	case space.ClaimDeadLetter:
		if _, err := c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(c.DLQURL), MessageBody: aws.String(r.Body)}); err != nil {
			log.Error("cannot send to the dead-letter queue; retried", "error", err.Error())
			return false
		}
		next.State, next.Reason = space.RevisionDeadLettered, reason
	}
	if !c.save(ctx, log, next) {
		return false
	}
	log.Info("revision claimed", "state", next.State, "reason", next.Reason)
	return true
}

// save writes the claimed revision: true when written or when another claim
// moved it first (nothing left to do), false to retry.
func (c *Claimer) save(ctx context.Context, log *slog.Logger, r space.Revision) bool {
	switch err := c.Store.SaveRevision(ctx, r); {
	case err == nil:
		return true
	case space.KindOf(err) == space.KindPreconditionFailed:
		log.Info("revision moved by another claim")
		return true
	default:
		log.Error("cannot save the revision", "error", err.Error())
		return false
	}
}

func (c *Claimer) backoff(attempt int) time.Duration {
	b := c.Backoff
	if b <= 0 {
		b = DefaultBackoff
	}
	d := b << max(attempt-1, 0)
	return min(d, 12*time.Hour) // SQS's maximum visibility timeout
}

func (c *Claimer) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

func (c *Claimer) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}
