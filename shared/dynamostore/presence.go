package dynamostore

import (
	"context"
	"crypto/subtle"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// The presence channel's store (space/presence.go): the last lifecycle
// event of the agent's MQTT connection lives on the AGENT item beside the
// lease it stands in for, as presence_* attributes.

// CheckCredential answers when a valid credential of the space expires
// (space.AgentStore): the authorizer's one read, no write, so an MQTT
// connect costs no write capacity.
func (s *Store) CheckCredential(ctx context.Context, spaceID, credHash string, now time.Time) (time.Time, error) {
	item, err := s.getItem(ctx, agentKey(spaceID))
	if err != nil {
		return time.Time{}, err
	}
	if item == nil {
		return time.Time{}, space.ErrAgentAuth(errors.New("authorize: the space has no agent item (deregistered, direct or absent)"))
	}
	var it agentItem
	if err := s.decode(item, &it); err != nil {
		return time.Time{}, err
	}
	// The same rule as credentialValid: the current or the previous
	// credential, unexpired.
	for _, c := range []struct {
		hash string
		exp  int64
	}{{it.CredentialHash, it.CredentialExpires}, {it.PreviousHash, it.PreviousExpires}} {
		if c.hash != "" && subtle.ConstantTimeCompare([]byte(c.hash), []byte(credHash)) == 1 && c.exp > now.Unix() {
			return time.Unix(c.exp, 0).UTC(), nil
		}
	}
	return time.Time{}, space.ErrAgentAuth(errors.New("authorize: no such credential, or expired"))
}

// RecordPresence stores a lifecycle event if it is newer than the stored
// one (space.AgentStore): one UpdateItem whose condition is
// space.Presence.Newer, so two events racing, or one delivered twice,
// leave the newest. presence_ms, the event's time in epoch milliseconds,
// is what the condition compares times on (presence_at, RFC 3339 with
// trailing zeros cut, does not sort as a string); on an item stored
// without it, events are ordered by version alone until one is stored
// (which writes it). The item must
// exist: a deregistered space's item is gone and is not brought back.
func (s *Store) RecordPresence(ctx context.Context, spaceID string, p space.Presence) (space.PresenceRecorded, error) {
	ms := p.At.UnixMilli()
	window := space.PresenceVersionReset.Milliseconds()
	// Newer: far later wins; otherwise, unless far earlier, a higher
	// version, or at the same version a disconnect over a connect.
	byVersion := "#pv < :v"
	if !p.Connected {
		byVersion += " OR (#pv = :v AND #pc = :true)"
	}
	cond := "attribute_exists(#sid) AND (attribute_not_exists(#pv) OR #pms <= :later" +
		" OR ((attribute_not_exists(#pms) OR #pms < :earlier) AND (" + byVersion + ")))"
	names := map[string]string{"#sid": "space_id", "#pv": "presence_version", "#pc": "presence_connected",
		"#pat": "presence_at", "#pr": "presence_reason", "#pms": "presence_ms"}
	values := map[string]types.AttributeValue{":v": num(p.Version), ":c": &types.AttributeValueMemberBOOL{Value: p.Connected},
		":at": str(p.At.UTC().Format(time.RFC3339Nano)), ":ms": num(ms),
		":later": num(ms - window), ":earlier": num(ms + window)}
	update := "SET #pv = :v, #pc = :c, #pat = :at, #pms = :ms"
	if p.Reason != "" {
		update += ", #pr = :r"
		values[":r"] = str(p.Reason)
	} else {
		update += " REMOVE #pr"
	}
	if !p.Connected {
		values[":true"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: agentKey(spaceID),
		UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		item := ccf.Item
		if item == nil { // not every implementation returns it
			if item, err = s.getItem(ctx, agentKey(spaceID)); err != nil {
				return space.PresenceRecorded{}, err
			}
		}
		if item == nil {
			return space.PresenceRecorded{}, space.ErrNotFound("space")
		}
		var it agentItem
		if err := s.decode(item, &it); err != nil {
			return space.PresenceRecorded{}, err
		}
		return space.PresenceRecorded{OrgID: it.OrgID, Before: it.lease()}, nil
	}
	if err != nil {
		return space.PresenceRecorded{}, awsError("UpdateItem record presence", err)
	}
	var it agentItem
	if err := s.decode(out.Attributes, &it); err != nil {
		return space.PresenceRecorded{}, err
	}
	return space.PresenceRecorded{Stored: true, OrgID: it.OrgID, Before: it.lease()}, nil
}
