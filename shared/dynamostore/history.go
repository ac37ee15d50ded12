package dynamostore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

const nPublished = "#pub"

// historyRecord is the stored form of a transition.
type historyRecord struct {
	space.Transition
	Published bool  `json:"published"`
	ExpiresAt int64 `json:"expires_at"`
}

// historyPut is the Put of a transition's history item, only if absent.
func (s *Store) historyPut(tr space.Transition) (types.TransactWriteItem, error) {
	hist, err := s.encode(historyRecord{Transition: tr, ExpiresAt: tr.At.Add(space.HistoryRetention).Unix()})
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	hist["pk"] = str(spacePK(tr.SpaceID))
	hist["sk"] = str(prefixHist + HistoryKey(tr))
	return types.TransactWriteItem{Put: &types.Put{
		TableName: s.table, Item: hist,
		ConditionExpression: aws.String("attribute_not_exists(" + nPK + ")"), ExpressionAttributeNames: names(nPK),
	}}, nil
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
