package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/probing"
	"spaces/shared/space"
)

// Status history items live in a partition of their own per space, so that
// reading one space's history never touches its org's partition:
//
//	pk           sk                          attributes
//	SPACE#<id>   HIST#<at, fixed width>#<to> org_id, space_id, from, to, reason,
//	                                         message, at, published (bool),
//	                                         expires_at (at + 30 days, the TTL)
//
// The time has a fixed width (nanoseconds, always nine digits) so that the
// sort key orders by time; newest first is a backward Query.
const (
	prefixHist = "HIST#"
	histTime   = "2006-01-02T15:04:05.000000000Z"

	nPublished = "#pub"
)

// historyRecord is the stored form of a transition.
type historyRecord struct {
	space.Transition
	Published bool  `json:"published"`
	ExpiresAt int64 `json:"expires_at"`
}

func spacePK(id string) string { return prefixSpace + id }

// HistoryKey is the key of a transition within its space's history; it is
// also what a history page continues after.
func HistoryKey(tr space.Transition) string {
	return tr.At.UTC().Format(histTime) + "#" + string(tr.To)
}

// ProbeTargets is ListProbeTargets in the scheduler's terms.
func (s *Store) ProbeTargets(ctx context.Context, shard int, startAfter string, limit int) ([]probing.Target, string, error) {
	ts, next, err := s.ListProbeTargets(ctx, shard, startAfter, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]probing.Target, len(ts))
	for i, t := range ts {
		out[i] = probing.Target{OrgID: t.OrgID, ID: t.ID}
	}
	return out, next, nil
}

// spaceUpdate is SaveSpace's conditional update as a transaction item.
func (s *Store) spaceUpdate(sp space.Space) (*types.Update, error) {
	probe, err := s.enc.Encode(sp.Probe)
	if err != nil {
		return nil, internal("encode probe", err)
	}
	return &types.Update{
		TableName: s.table,
		Key:       itemKey(sp.OrgID, prefixSpace+sp.ID),
		UpdateExpression: aws.String("SET " + nName + " = :name, " + nStatus + " = :status, " + nProbe + " = :probe, " +
			nUpdated + " = :upd, " + nVersion + " = :ver"),
		ConditionExpression:      aws.String("attribute_exists(" + nPK + ") AND attribute_not_exists(" + nDeleted + ") AND " + nVersion + " = :prev"),
		ExpressionAttributeNames: names(nName, nStatus, nProbe, nUpdated, nVersion, nPK, nDeleted),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":name": str(sp.Name), ":status": str(string(sp.Status)), ":probe": probe,
			":upd": str(sp.UpdatedAt.UTC().Format(time.RFC3339Nano)), ":ver": num(sp.Version), ":prev": num(sp.Version - 1),
		},
	}, nil
}

// SaveProbe stores a probe's result: like SaveSpace (only if the stored
// version is sp.Version-1 and the space is not deregistered), and, when tr
// is not nil, the transition as a history item in the same transaction, so
// that the history holds exactly the transitions that were stored.
func (s *Store) SaveProbe(ctx context.Context, sp space.Space, tr *space.Transition) error {
	if tr == nil {
		return s.SaveSpace(ctx, sp)
	}
	if sp.DeletedAt != nil {
		return internal("save probe", errors.New("a deregistration must go through Deregister"))
	}
	if tr.SpaceID != sp.ID || tr.OrgID != sp.OrgID {
		return internal("save probe", fmt.Errorf("transition of %s/%s saved with space %s/%s", tr.OrgID, tr.SpaceID, sp.OrgID, sp.ID))
	}
	upd, err := s.spaceUpdate(sp)
	if err != nil {
		return err
	}
	hist, err := s.encode(historyRecord{Transition: *tr, ExpiresAt: tr.At.Add(space.HistoryRetention).Unix()})
	if err != nil {
		return err
	}
	hist["pk"] = str(spacePK(sp.ID))
	hist["sk"] = str(prefixHist + HistoryKey(*tr))
	items := []types.TransactWriteItem{
		{Update: upd},
		{Put: &types.Put{
			TableName: s.table, Item: hist,
			ConditionExpression: aws.String("attribute_not_exists(" + nPK + ")"), ExpressionAttributeNames: names(nPK),
		}},
	}
	return s.transact(ctx, "save probe", func() ([]types.TransactWriteItem, error) { return items, nil },
		func(reasons []types.CancellationReason) error {
			switch {
			case failedCheck(reasons, 0):
				return s.whyNotWritable(ctx, sp.OrgID, sp.ID, sp.Version-1, nil)
			case failedCheck(reasons, 1):
				return internal("save probe", fmt.Errorf("space %s already has a transition at %s", sp.ID, HistoryKey(*tr)))
			}
			return nil
		})
}

// History returns up to page.Limit transitions of the space, newest first,
// older than the one whose HistoryKey is page.After, and the key to continue
// after when more may follow. It does not check that the space is live; the
// service does.
func (s *Store) History(ctx context.Context, org, id string, page space.Page) ([]space.Transition, string, error) {
	if err := checkLimit(page.Limit); err != nil {
		return nil, "", err
	}
	in := &dynamodb.QueryInput{
		TableName:                s.table,
		ScanIndexForward:         aws.Bool(false),
		ExpressionAttributeNames: names(nPK, nSK),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(spacePK(id)),
		},
	}
	if page.After == "" {
		in.KeyConditionExpression = aws.String(nPK + " = :pk AND begins_with(" + nSK + ", :prefix)")
		in.ExpressionAttributeValues[":prefix"] = str(prefixHist)
	} else {
		ts, to, ok := strings.Cut(page.After, "#")
		if _, err := time.Parse(histTime, ts); err != nil || !ok || !space.Status(to).Valid() {
			return nil, "", &space.Error{Kind: space.KindInvalid, Message: "the page is not valid",
				Fields: []space.FieldError{{Field: "cursor", Reason: "does not name a history entry"}}}
		}
		in.KeyConditionExpression = aws.String(nPK + " = :pk AND " + nSK + " BETWEEN :lo AND :hi")
		in.ExpressionAttributeValues[":lo"] = str(prefixHist)
		in.ExpressionAttributeValues[":hi"] = str(prefixHist + page.After)
	}
	out := make([]space.Transition, 0, page.Limit+1)
	for len(out) <= page.Limit {
		in.Limit = aws.Int32(int32(page.Limit + 2 - len(out)))
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", awsError("Query", err)
		}
		for _, item := range res.Items {
			var rec historyRecord
			if err := s.decode(item, &rec); err != nil {
				return nil, "", err
			}
			// BETWEEN includes the bound itself; the org check keeps a
			// forged id from reading another org's history.
			if rec.OrgID != org || (page.After != "" && HistoryKey(rec.Transition) >= page.After) {
				continue
			}
			out = append(out, rec.Transition)
		}
		if res.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	if len(out) > page.Limit {
		out = out[:page.Limit]
		return out, HistoryKey(out[len(out)-1]), nil
	}
	return out, "", nil
}

// UnpublishedTransition returns the space's newest transition if it has
// not been marked published (nil otherwise): the prober republishes it
// when a message comes back after a failed publish.
func (s *Store) UnpublishedTransition(ctx context.Context, org, id string) (*space.Transition, error) {
	res, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                s.table,
		ConsistentRead:           aws.Bool(true),
		ScanIndexForward:         aws.Bool(false),
		Limit:                    aws.Int32(1),
		KeyConditionExpression:   aws.String(nPK + " = :pk AND begins_with(" + nSK + ", :prefix)"),
		ExpressionAttributeNames: names(nPK, nSK),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(spacePK(id)), ":prefix": str(prefixHist),
		},
	})
	if err != nil {
		return nil, awsError("Query", err)
	}
	if len(res.Items) == 0 {
		return nil, nil
	}
	var rec historyRecord
	if err := s.decode(res.Items[0], &rec); err != nil {
		return nil, err
	}
	if rec.Published || rec.OrgID != org {
		return nil, nil
	}
	return &rec.Transition, nil
}

// MarkPublished records that the transition's event was published.
func (s *Store) MarkPublished(ctx context.Context, tr space.Transition) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table,
		Key: map[string]types.AttributeValue{
			"pk": str(spacePK(tr.SpaceID)), "sk": str(prefixHist + HistoryKey(tr)),
		},
		UpdateExpression:          aws.String("SET " + nPublished + " = :t"),
		ConditionExpression:       aws.String("attribute_exists(" + nPK + ")"),
		ExpressionAttributeNames:  map[string]string{nPublished: "published", nPK: "pk"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return space.ErrNotFound("status transition")
	}
	if err != nil {
		return awsError("UpdateItem", err)
	}
	return nil
}
