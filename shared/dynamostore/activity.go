package dynamostore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/provisioning"
	"spaces/shared/space"
)

var _ space.ActivityLog = (*Store)(nil)

// ActivityOf reads a record of the table's stream as an entry of its org's
// audit trail: a space's INSERT (registered), the MODIFY that sets its
// deleted_at (deregistered) or changes its labels (relabeled), a cloud
// account's INSERT (connected) or the MODIFY that moves its version (a
// verification), a revision's INSERT (pushed) or MODIFY from stopped to
// pending (retried), a job's INSERT, retry and cancellation. The actor is
// the new image's stamp (stamp.go; a deregistration's deleted_by); none is
// Spaces itself. Each entry is built from a few named fields only: a
// revision is decoded without its manifests, an account without reading
// its connection, a job without its settings. The id is "act_" and the
// record's event id, the same for every read of the record, so a record
// delivered again is recorded once (RecordActivity).
func (s *Store) ActivityOf(r events.DynamoDBEventRecord) (space.Activity, bool) {
	pk, _ := r.Change.Keys["pk"]
	sk, _ := r.Change.Keys["sk"]
	if pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString || r.EventID == "" ||
		!strings.HasPrefix(pk.String(), prefixOrg) {
		return space.Activity{}, false
	}
	insert := r.EventName == string(events.DynamoDBOperationTypeInsert)
	if !insert && r.EventName != string(events.DynamoDBOperationTypeModify) {
		return space.Activity{}, false
	}
	oldImg, newImg := streamImage(r.Change.OldImage), streamImage(r.Change.NewImage)
	var stamp struct {
		ChangedBy string `json:"changed_by"`
		RequestID string `json:"request_id"`
	}
	if s.decode(newImg, &stamp) != nil {
		return space.Activity{}, false
	}
	a := space.Activity{ID: "act_" + r.EventID, Actor: stamp.ChangedBy, RequestID: stamp.RequestID}
	var kind space.ActivityKind
	var ok bool
	switch k := sk.String(); {
	case strings.HasPrefix(k, prefixSpace):
		var before, after space.Space
		if s.decode(newImg, &after) != nil || (!insert && s.decode(oldImg, &before) != nil) {
			return space.Activity{}, false
		}
		bp := &before
		if insert {
			bp = nil
		}
		if kind, ok = space.SpaceActivity(bp, after); !ok {
			return space.Activity{}, false
		}
		a.OrgID, a.ResourceType, a.ResourceID, a.ResourceName, a.SpaceID = after.OrgID, "space", after.ID, after.Name, after.ID
		switch kind {
		case space.ActivitySpaceRegistered:
			a.At, a.Labels = after.CreatedAt, after.Labels
		case space.ActivitySpaceDeregistered:
			a.At, a.Actor = *after.DeletedAt, after.DeletedBy
		default:
			a.At, a.Labels = after.UpdatedAt, after.Labels
		}
	case strings.HasPrefix(k, prefixAccount):
		// Only these fields: the connection (an external id, a role) and
		// the setup are never decoded.
		type accountFields struct {
			ID         string              `json:"id"`
			OrgID      string              `json:"org_id"`
			Provider   space.Provider      `json:"provider"`
			Name       string              `json:"name"`
			Status     space.AccountStatus `json:"status"`
			VerifiedAt *time.Time          `json:"verified_at"`
			CreatedAt  time.Time           `json:"created_at"`
			Version    int64               `json:"version"`
		}
		var before, after accountFields
		if s.decode(newImg, &after) != nil || (!insert && s.decode(oldImg, &before) != nil) {
			return space.Activity{}, false
		}
		var bp *space.CloudAccount
		if !insert {
			bp = &space.CloudAccount{Version: before.Version}
		}
		if kind, ok = space.AccountActivity(bp, space.CloudAccount{Version: after.Version}); !ok {
			return space.Activity{}, false
		}
		a.OrgID, a.ResourceType, a.ResourceID, a.ResourceName = after.OrgID, "cloud_account", after.ID, after.Name
		a.At = after.CreatedAt
		if kind == space.ActivityAccountVerified {
			a.Status = string(after.Status)
			// A failed verification stores no time of its own: the change's.
			switch at := r.Change.ApproximateCreationDateTime.UTC(); {
			case after.VerifiedAt != nil:
				a.At = *after.VerifiedAt
			case !at.IsZero() && at.Unix() > 0:
				a.At = at
			}
		}
	case strings.HasPrefix(k, prefixRevision):
		// Decoded as summaries: the manifests are never read.
		var before, after space.RevisionSummary
		if s.decode(newImg, &after) != nil || (!insert && s.decode(oldImg, &before) != nil) {
			return space.Activity{}, false
		}
		bp := &before
		if insert {
			bp = nil
		}
		if kind, ok = space.RevisionActivity(bp, after); !ok {
			return space.Activity{}, false
		}
		a.OrgID, a.ResourceType, a.ResourceID = after.OrgID, "revision", after.ID
		a.SpaceID, a.EnvironmentID, a.At = after.SpaceID, after.EnvironmentID, after.UpdatedAt
		if insert {
			a.At = after.CreatedAt
		}
	case strings.HasPrefix(k, prefixJob) && !strings.HasPrefix(k, prefixJobClaim) && !strings.HasPrefix(k, prefixJobIdem):
		// Only these fields: the job's spec and settings are never decoded.
		type jobFields struct {
			ID        string             `json:"id"`
			OrgID     string             `json:"org_id"`
			Name      string             `json:"name"`
			State     provisioning.State `json:"state"`
			SpaceID   string             `json:"space_id"`
			CreatedAt time.Time          `json:"created_at"`
			UpdatedAt time.Time          `json:"updated_at"`
		}
		var before, after jobFields
		if s.decode(newImg, &after) != nil || (!insert && s.decode(oldImg, &before) != nil) {
			return space.Activity{}, false
		}
		var bp *provisioning.Job
		if !insert {
			bp = &provisioning.Job{State: before.State}
		}
		if kind, ok = provisioning.Activity(bp, provisioning.Job{State: after.State}); !ok {
			return space.Activity{}, false
		}
		a.OrgID, a.ResourceType, a.ResourceID, a.ResourceName = after.OrgID, "provisioning_job", after.ID, after.Name
		a.SpaceID, a.At = after.SpaceID, after.UpdatedAt
		if insert {
			a.At = after.CreatedAt
		}
	default:
		return space.Activity{}, false
	}
	if a.OrgID == "" || a.ResourceID == "" {
		return space.Activity{}, false
	}
	a.Kind, a.At = kind, a.At.UTC()
	a.ActorType = space.ActorUser
	if a.Actor == "" && a.RequestID == "" {
		a.ActorType = space.ActorSystem
	}
	return a, true
}

// An org's trail is kept in the order its entries were recorded, not by
// their times: an entry recorded late (its stream record delivered again
// after a failure, an hour on) carries its change's time but is placed
// above everything recorded before it, so a reader who reads the first
// page again finds it there, never behind a page already read. The one
// exception: two recordings at the same moment in two processes (two
// stream shards) may be stored in the other order than their positions,
// the second a moment below the first, still at the top of the first
// page (the console puts such an entry in its place). Its position is its
// recording time, fixed width, then its id:
// activityKey. A record delivered again must not record its entry twice,
// at a second position: the entry is put in one transaction with a marker
// keyed by its id (ACTID#<org>, <id>) that must not exist yet.

// errRecorded says the entry's marker exists: it was recorded already.
var errRecorded = errors.New("activity entry recorded already")

// monotonic hands out recording times that only move forward in this
// process, even when the clock steps back or two entries share a tick.
type monotonic struct {
	mu   sync.Mutex
	last time.Time
}

func (m *monotonic) next(now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now = now.UTC(); !now.After(m.last) {
		now = m.last.Add(time.Nanosecond)
	}
	m.last = now
	return now
}

// activityKey is an entry's position in its org's trail (see above); a
// page continues after its last entry's.
func activityKey(recorded time.Time, id string) string {
	return recorded.UTC().Format(histTime) + "#" + id
}

// RecordActivity puts an entry in its org's trail, to expire after
// space.ActivityRetention, at the top of the trail: recorded now. Recording
// it again (a stream record delivered again) writes nothing.
func (s *Store) RecordActivity(ctx context.Context, a space.Activity) error {
	item, err := s.encode(a)
	if err != nil {
		return err
	}
	expires := num(a.At.Add(space.ActivityRetention).Unix())
	item["pk"] = str(prefixActivity + a.OrgID)
	item["expires_at"] = expires
	marker := map[string]types.AttributeValue{"pk": str(prefixActivityID + a.OrgID), "sk": str(a.ID), "expires_at": expires}
	const iMarker = 0
	err = s.transact(ctx, "record activity", func() ([]types.TransactWriteItem, error) {
		// A new position each attempt: an attempt that lost a race is
		// placed above what was recorded meanwhile.
		item["sk"] = str(activityKey(s.recorded.next(s.now()), a.ID))
		return []types.TransactWriteItem{
			iMarker: {Put: &types.Put{TableName: s.table, Item: marker,
				ConditionExpression: aws.String("attribute_not_exists(" + nPK + ")"), ExpressionAttributeNames: names(nPK)}},
			{Put: &types.Put{TableName: s.table, Item: item}},
		}, nil
	}, func(reasons []types.CancellationReason) error {
		if failedCheck(reasons, iMarker) {
			return errRecorded
		}
		return nil
	})
	if errors.Is(err, errRecorded) {
		return nil
	}
	return err
}

// ListActivity returns org's entries latest recorded first, narrowed by q's
// filters: at most q.Limit, and the position to continue after when more
// may follow. Only org's partition is read; an entry past its retention
// that TTL has not removed yet is skipped. The filters are applied by
// DynamoDB as it reads (a FilterExpression): a rare actor costs the read
// of the entries between its own.
func (s *Store) ListActivity(ctx context.Context, org string, q space.ActivityQuery) ([]space.Activity, string, error) {
	if err := checkLimit(q.Limit); err != nil {
		return nil, "", err
	}
	filter := []string{"(attribute_not_exists(" + nExpires + ") OR " + nExpires + " > :now)"}
	nm := names(nPK, nExpires)
	vals := map[string]types.AttributeValue{":pk": str(prefixActivity + org), ":now": num(s.now().Unix())}
	if q.Actor != "" {
		filter = append(filter, "#actor = :actor")
		nm["#actor"] = "actor"
		vals[":actor"] = str(q.Actor)
	}
	if q.Kind != "" {
		filter = append(filter, "#kind = :kind")
		nm["#kind"] = "kind"
		vals[":kind"] = str(string(q.Kind))
	}
	if q.SpaceID != "" {
		filter = append(filter, nSpaceID+" = :space")
		nm[nSpaceID] = attrNames[nSpaceID]
		vals[":space"] = str(q.SpaceID)
	}
	in := &dynamodb.QueryInput{TableName: s.table, ScanIndexForward: aws.Bool(false),
		KeyConditionExpression:    aws.String(nPK + " = :pk"),
		FilterExpression:          aws.String(strings.Join(filter, " AND ")),
		ExpressionAttributeNames:  nm,
		ExpressionAttributeValues: vals}
	if q.Actor == "" && q.Kind == "" && q.SpaceID == "" {
		// Unfiltered, a page is the next limit+1 items (expired ones aside).
		in.Limit = aws.Int32(int32(q.Limit + 1))
	}
	if q.After != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{"pk": str(prefixActivity + org), "sk": str(q.After)}
	}
	return queryPage[space.Activity](ctx, s, in, q.Limit)
}
