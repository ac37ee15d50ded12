package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// The deregistration fence and the probe beats: what lets a probe read and
// write no item of its space when nothing changed (space.ProbeTarget).
//
// Fence: Deregister's transaction puts FENCE#<probe shard> /
// <deleted_at>#<id> (org_id, space_id, expires_at = deleted_at +
// space.FenceRetention, the table's TTL, which only ever deletes after
// expiry). The prober reads a message's shard's entries since the
// message's space.LiveAt with one strongly consistent Query: a space
// deregistered since is refused before any cloud call. An empty answer
// costs one read unit, a message of up to probing.MaxSpaces spaces.
//
// Beats: one item, PROBE / BEAT, with beat_<shard> (the tick time of the
// newest tick of the shard that the prober handled; beat_a for the agent
// spaces, whose messages mix shards), written by the prober once a shard
// and tick, conditional on being newer. Readers see a space's last probe as
// the later of its stored probe and its shard's beat (space.Space.WithBeat),
// so an unchanged result needs no write; a stopped prober stops the beats
// and every space of the shard reads ProbeStale after StaleAfter.

// fenceSK is a fence entry's sort key: the deregistration time, fixed
// width so that it orders by time, and the space id.
func fenceSK(at time.Time, id string) string { return at.UTC().Format(histTime) + "#" + id }

// fenceItem is the fence entry of sp's deregistration at at, put in
// Deregister's transaction.
func (s *Store) fenceItem(sp space.Space, at time.Time) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName: s.table,
		Item: map[string]types.AttributeValue{
			"pk": str(prefixFence + probeShardOf(sp)), "sk": str(fenceSK(at, sp.ID)),
			"org_id": str(sp.OrgID), "space_id": str(sp.ID),
			"expires_at": num(at.Add(space.FenceRetention).Unix()),
		},
	}}
}

// Fenced returns the ids of the spaces of probe shard shard deregistered at
// or after since, read strongly consistent: the prober's one liveness read
// of a message (space.FenceCovers says how old since may be).
func (s *Store) Fenced(ctx context.Context, shard string, since time.Time) (map[string]bool, error) {
	in := &dynamodb.QueryInput{
		TableName:                s.table,
		KeyConditionExpression:   aws.String(nPK + " = :pk AND " + nSK + " >= :since"),
		ExpressionAttributeNames: names(nPK, nSK, nSpaceID),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(prefixFence + shard), ":since": str(since.UTC().Format(histTime)),
		},
		ProjectionExpression: aws.String(nSpaceID),
		ConsistentRead:       aws.Bool(true),
	}
	out := map[string]bool{}
	for {
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, awsError("Query", err)
		}
		for _, item := range page.Items {
			if v, ok := item["space_id"].(*types.AttributeValueMemberS); ok {
				out[v.Value] = true
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// AgentBeatShard is the beat of the agent spaces, whose tick messages mix
// shards.
const AgentBeatShard = "a"

// beatAttr is the beat attribute of shard ("07", or AgentBeatShard).
func beatAttr(shard string) string { return "beat_" + shard }

// Beat records that the prober handled shard's tick of tick, if it is the
// newest so far, and returns the beat it replaced (zero: none, or tick was
// not newer): the prober's StaleTicks compare the two.
func (s *Store) Beat(ctx context.Context, shard string, tick time.Time) (time.Time, error) {
	if !validBeatShard(shard) {
		return time.Time{}, &space.Error{Kind: space.KindInvalid, Message: "the probe shard is not valid",
			Fields: []space.FieldError{{Field: "shard", Reason: fmt.Sprintf("must be 00 to %02d or %s", probeShards-1, AgentBeatShard)}}}
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      map[string]types.AttributeValue{"pk": str(pkBeat), "sk": str(skBeat)},
		UpdateExpression:         aws.String("SET " + nBeat + " = :t"),
		ConditionExpression:      aws.String("attribute_not_exists(" + nBeat + ") OR " + nBeat + " < :t"),
		ExpressionAttributeNames: map[string]string{nBeat: beatAttr(shard)},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": str(tick.UTC().Format(histTime)),
		},
		ReturnValues: types.ReturnValueUpdatedOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return time.Time{}, nil // a newer tick's beat is stored
	case err != nil:
		return time.Time{}, awsError("UpdateItem", err)
	}
	prev, _ := out.Attributes[beatAttr(shard)].(*types.AttributeValueMemberS)
	if prev == nil {
		return time.Time{}, nil
	}
	t, _ := time.Parse(histTime, prev.Value)
	return t, nil
}

func validBeatShard(shard string) bool {
	if shard == AgentBeatShard {
		return true
	}
	var n int
	_, err := fmt.Sscanf(shard, "%02d", &n)
	return err == nil && len(shard) == 2 && n >= 0 && n < probeShards
}

// beatCacheFor is how long a store reuses the beats it read: readers see a
// last probe up to this much older than stored, far inside StaleAfter, and
// a busy API function reads the item a few times a minute, not once a
// request.
const beatCacheFor = 10 * time.Second

type beatCache struct {
	mu    sync.Mutex
	at    time.Time
	beats map[string]time.Time
}

// ProbeBeats returns every shard's beat (eventually consistent, and
// cached for beatCacheFor).
func (s *Store) ProbeBeats(ctx context.Context) (map[string]time.Time, error) {
	now := s.now()
	s.beats.mu.Lock()
	if s.beats.beats != nil && now.Sub(s.beats.at) < beatCacheFor && !now.Before(s.beats.at) {
		b := s.beats.beats
		s.beats.mu.Unlock()
		return b, nil
	}
	s.beats.mu.Unlock()
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: s.table,
		Key:       map[string]types.AttributeValue{"pk": str(pkBeat), "sk": str(skBeat)},
	})
	if err != nil {
		return nil, awsError("GetItem", err)
	}
	beats := map[string]time.Time{}
	for k, v := range out.Item {
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok || !strings.HasPrefix(k, "beat_") {
			continue
		}
		if t, err := time.Parse(histTime, sv.Value); err == nil {
			beats[strings.TrimPrefix(k, "beat_")] = t
		}
	}
	s.beats.mu.Lock()
	s.beats.at, s.beats.beats = now, beats
	s.beats.mu.Unlock()
	return beats, nil
}

// beatShardOf is the beat that speaks for sp.
func beatShardOf(sp space.Space) string {
	if sp.Connectivity == space.ViaAgent {
		return AgentBeatShard
	}
	return probeShard(sp.ID)
}

// observer returns what readers see of a space read now: its last probe
// raised to its shard's beat (space.Space.WithBeat).
func (s *Store) observer(ctx context.Context) (func(space.Space) space.Space, error) {
	beats, err := s.ProbeBeats(ctx)
	if err != nil {
		return nil, err
	}
	return func(sp space.Space) space.Space { return sp.WithBeat(beats[beatShardOf(sp)]) }, nil
}
