package dynamostore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An endpoint's attempts in flight: one item per endpoint (pk HOOK#<id>,
// sk INFLIGHT) holding n, the number of attempts under way, and for each
// one an attribute h_<holder> whose value is the time its hold lapses. A
// hold is taken only while n is below max, and both move in the same
// conditional UpdateItem, so they always agree; it is given back when the
// attempt ends. A holder that died (a Lambda timeout, a crash) never gives
// back: its hold lapses at its time and the next taker that finds n at max
// clears the lapsed ones. So at most max attempts of one endpoint run at
// once, whatever the number of messages, pollers and functions, and a
// slow endpoint cannot take all of them. (Top-level attributes, not a
// map: the emulator writes a nested SET path as one attribute's name.)

const (
	skInFlight = "INFLIGHT"
	nInFlight  = "n"
	holdPrefix = "h_"
	// inFlightKeep is how long an idle endpoint's item outlives its last
	// hold (TTL), so that deleted endpoints leave nothing behind.
	inFlightKeep = 24 * time.Hour
)

func inFlightKey(endpointID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(prefixWebhook + endpointID), "sk": str(skInFlight)}
}

// HoldAttempt takes one of endpointID's max places for an attempt, as
// holder (letters, digits, '-' and '_'), until until (the attempt's
// longest life); false when all are held. now judges which holds lapsed.
func (s *Store) HoldAttempt(ctx context.Context, endpointID, holder string, max int, now, until time.Time) (bool, error) {
	for range 3 {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                s.table,
			Key:                      inFlightKey(endpointID),
			UpdateExpression:         aws.String("SET #h = :until, expires_at = :exp ADD #n :one"),
			ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n < :max"),
			ExpressionAttributeNames: map[string]string{"#h": holdPrefix + holder, "#n": nInFlight},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":until": num(until.UnixMilli()), ":exp": num(until.Add(inFlightKeep).Unix()), ":max": num(int64(max)), ":one": num(1),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return true, nil
		case !errors.As(err, &ccf):
			return false, awsError("UpdateItem", err)
		}
		item := ccf.Item
		if item == nil {
			if item, err = s.getItem(ctx, inFlightKey(endpointID)); err != nil {
				return false, err
			}
		}
		cleared, err := s.clearLapsed(ctx, endpointID, item, now)
		if err != nil || !cleared {
			return false, err
		}
	}
	return false, nil
}

// clearLapsed removes the holds of item that lapsed by now, each only if
// it is still the hold read, and counts them off; it reports whether any
// was found.
func (s *Store) clearLapsed(ctx context.Context, endpointID string, item map[string]types.AttributeValue, now time.Time) (bool, error) {
	var removes, conds []string
	nm := map[string]string{"#n": nInFlight}
	vals := map[string]types.AttributeValue{}
	for attr, v := range item {
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok || !strings.HasPrefix(attr, holdPrefix) {
			continue
		}
		ms, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil || ms > now.UnixMilli() {
			continue
		}
		i := strconv.Itoa(len(removes))
		nm["#h"+i] = attr
		vals[":u"+i] = n
		removes = append(removes, "#h"+i)
		conds = append(conds, "#h"+i+" = :u"+i)
	}
	if len(removes) == 0 {
		return false, nil
	}
	vals[":gone"] = num(-int64(len(removes)))
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: inFlightKey(endpointID),
		UpdateExpression:          aws.String("REMOVE " + strings.Join(removes, ", ") + " ADD #n :gone"),
		ConditionExpression:       aws.String(strings.Join(conds, " AND ")),
		ExpressionAttributeNames:  nm,
		ExpressionAttributeValues: vals,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return false, awsError("UpdateItem", err)
	}
	// A lost race means another taker cleared them or a holder gave back:
	// the caller tries again either way.
	return true, nil
}

// ReleaseAttempt gives back holder's place.
func (s *Store) ReleaseAttempt(ctx context.Context, endpointID, holder string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: inFlightKey(endpointID),
		UpdateExpression:          aws.String("REMOVE #h ADD #n :gone"),
		ConditionExpression:       aws.String("attribute_exists(#h)"),
		ExpressionAttributeNames:  map[string]string{"#h": holdPrefix + holder, "#n": nInFlight},
		ExpressionAttributeValues: map[string]types.AttributeValue{":gone": num(-1)},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return awsError("UpdateItem", err)
	}
	// Already gone: it lapsed and another taker cleared it.
	return nil
}
