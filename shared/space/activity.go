package space

import (
	"context"
	"maps"
	"time"
)

// ActivityKind names what an entry of an org's audit trail records.
type ActivityKind string

// The kinds of activity, each read from the stored change that made it
// (dynamostore.ActivityOf), never from the code path that wrote it.
const (
	ActivitySpaceRegistered   ActivityKind = "space.registered"
	ActivitySpaceDeregistered ActivityKind = "space.deregistered"
	ActivitySpaceRelabeled    ActivityKind = "space.relabeled"
	ActivityAccountConnected  ActivityKind = "cloud_account.connected"
	ActivityAccountVerified   ActivityKind = "cloud_account.verified"
	ActivityRevisionPushed    ActivityKind = "revision.pushed"
	ActivityRevisionRetried   ActivityKind = "revision.retried"
	ActivityJobCreated        ActivityKind = "provisioning_job.created"
	ActivityJobRetried        ActivityKind = "provisioning_job.retried"
	ActivityJobCanceled       ActivityKind = "provisioning_job.canceled"
)

// ActivityKinds lists every kind, in the order the API documents them.
var ActivityKinds = []ActivityKind{ActivitySpaceRegistered, ActivitySpaceDeregistered, ActivitySpaceRelabeled,
	ActivityAccountConnected, ActivityAccountVerified, ActivityRevisionPushed, ActivityRevisionRetried,
	ActivityJobCreated, ActivityJobRetried, ActivityJobCanceled}

// ActivityRetention is how long an entry is kept (the table's TTL removes
// it; reads skip one past it before TTL does).
const ActivityRetention = 90 * 24 * time.Hour

// Who made a change. An entry without an actor was made by Spaces itself
// (a provisioning job registering its cluster, say).
const (
	ActorUser   = "user"
	ActorSystem = "system"
)

// Activity is one entry of an org's audit trail. It names what changed
// and who changed it, and carries nothing else of the item: no secret, no
// connection, no manifest, no job settings.
type Activity struct {
	ID    string       `json:"id"`
	OrgID string       `json:"org_id"`
	Kind  ActivityKind `json:"kind"`
	At    time.Time    `json:"at"`
	// ActorType is ActorUser or ActorSystem; Actor is the user's subject.
	ActorType string `json:"actor_type"`
	Actor     string `json:"actor,omitempty"`
	// RequestID is the API request that made the change.
	RequestID string `json:"request_id,omitempty"`
	// ResourceType is space, cloud_account, revision or provisioning_job.
	ResourceType string `json:"resource_type"`
	ResourceID   string `json:"resource_id"`
	ResourceName string `json:"resource_name,omitempty"`
	SpaceID      string `json:"space_id,omitempty"`
	// EnvironmentID is a revision's environment.
	EnvironmentID string `json:"environment_id,omitempty"`
	// Labels are a space's labels after a registration or a relabel.
	Labels map[string]string `json:"labels,omitempty"`
	// Status is a verification's outcome (an account's status).
	Status string `json:"status,omitempty"`
}

// ActivityQuery is one page of an org's activity, newest first, narrowed
// by each filter that is set.
type ActivityQuery struct {
	Page
	Actor   string
	Kind    ActivityKind
	SpaceID string
}

// ActivityLog reads an org's activity; After is the position the previous
// page returned.
type ActivityLog interface {
	ListActivity(ctx context.Context, org string, q ActivityQuery) ([]Activity, string, error)
}

// Stamp is who makes the writes of a request: the caller's subject and the
// request's id. The store records it on the items it writes, so that the
// table's stream carries it to the audit trail.
type Stamp struct {
	Subject   string
	RequestID string
}

type stampKey struct{}

// WithStamp returns ctx carrying s.
func WithStamp(ctx context.Context, s Stamp) context.Context {
	return context.WithValue(ctx, stampKey{}, s)
}

// StampOf returns the stamp ctx carries, if any: a request's writes carry
// one even when its token names no subject.
func StampOf(ctx context.Context) (Stamp, bool) {
	s, ok := ctx.Value(stampKey{}).(Stamp)
	return s, ok && (s.Subject != "" || s.RequestID != "")
}

// SpaceActivity is the activity a stored change of a space makes: its
// registration (before is nil), its deregistration, or a change of its
// labels.
func SpaceActivity(before *Space, after Space) (ActivityKind, bool) {
	switch {
	case before == nil:
		return ActivitySpaceRegistered, !after.Deleted()
	case !before.Deleted() && after.Deleted():
		return ActivitySpaceDeregistered, true
	case !before.Deleted() && !after.Deleted() && !maps.Equal(before.Labels, after.Labels):
		return ActivitySpaceRelabeled, true
	}
	return "", false
}

// AccountActivity is the activity a stored change of a cloud account
// makes: its connection (before is nil), or a verification (which alone
// moves its version).
func AccountActivity(before *CloudAccount, after CloudAccount) (ActivityKind, bool) {
	switch {
	case before == nil:
		return ActivityAccountConnected, true
	case after.Version != before.Version:
		return ActivityAccountVerified, true
	}
	return "", false
}

// RevisionActivity is the activity a stored change of a revision makes:
// its push (before is nil), or a retry (stopped back to pending).
func RevisionActivity(before *RevisionSummary, after RevisionSummary) (ActivityKind, bool) {
	switch {
	case before == nil:
		return ActivityRevisionPushed, true
	case before.State == RevisionStopped && after.State == RevisionPending:
		return ActivityRevisionRetried, true
	}
	return "", false
}
