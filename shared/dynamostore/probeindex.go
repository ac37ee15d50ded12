package dynamostore

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// ProbeShards is the number of shards of the probe index; shards are
// numbered 0..ProbeShards()-1.
func (s *Store) ProbeShards() int { return probeShards }

// The probe index holds, beside its keys (probe_shard, sk) and the
// table's (pk), one attribute: the space's probe digest, pd
// (space.ProbeDigest, template.yaml's INCLUDE). A target carries it: the
// prober probes from it and tells a change from it without reading the
// space. It changes only when the space is written, which a probe does
// only on a change (space.NeedsWrite), so the index is written with the
// table, not with the probes; and it is short, since the scheduler reads
// every space's entry every minute (BENCHMARKS.md, "Probing on the
// current tree").
var probeAttrs = []string{nPK, nSK, nShard, nDigest}

// ProbeTargets returns up to limit registered, non-synthetic spaces of
// every org in shard, ordered by id after startAfter, and the id to continue
// after when more may follow, each with what the index carries of it. The
// index is eventually consistent: a space registered or deregistered a
// moment ago may be missing or still listed (the deregistration fence,
// fence.go, covers the latter: space.ProbeIndexLag), and a space written a
// moment ago may be listed as before (its version then fails the prober's
// conditional write, which reads the space again).
func (s *Store) ProbeTargets(ctx context.Context, shard int, startAfter string, limit int) ([]space.ProbeTarget, string, error) {
	return s.probeTargets(ctx, shard, "", startAfter, limit)
}

// AgentProbeTargets is ProbeTargets for the agent spaces of shard, which
// the index keeps apart (agentShardPrefix).
func (s *Store) AgentProbeTargets(ctx context.Context, shard int, startAfter string, limit int) ([]space.ProbeTarget, string, error) {
	return s.probeTargets(ctx, shard, agentShardPrefix, startAfter, limit)
}

func (s *Store) probeTargets(ctx context.Context, shard int, prefix, startAfter string, limit int) ([]space.ProbeTarget, string, error) {
	if shard < 0 || shard >= probeShards {
		return nil, "", &space.Error{Kind: space.KindInvalid, Message: "the probe shard is not valid",
			Fields: []space.FieldError{{Field: "shard", Reason: fmt.Sprintf("must be between 0 and %d", probeShards-1)}}}
	}
	if err := checkLimit(limit); err != nil {
		return nil, "", err
	}
	key := nShard + " = :shard"
	vals := map[string]types.AttributeValue{":shard": str(fmt.Sprintf("%s%02d", prefix, shard))}
	if startAfter != "" {
		// A key condition rather than ExclusiveStartKey: an index start key
		// needs the table key too, which the caller does not have.
		key += " AND " + nSK + " > :after"
		vals[":after"] = str(prefixSpace + startAfter)
	}
	in := &dynamodb.QueryInput{
		TableName:                 s.table,
		IndexName:                 aws.String(probeIndex),
		KeyConditionExpression:    aws.String(key),
		ProjectionExpression:      aws.String(strings.Join(probeAttrs, ", ")),
		ExpressionAttributeNames:  names(probeAttrs...),
		ExpressionAttributeValues: vals,
	}
	out := make([]space.ProbeTarget, 0, limit+1)
	for len(out) <= limit {
		in.Limit = aws.Int32(int32(limit + 1 - len(out)))
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", awsError("Query", err)
		}
		for _, item := range page.Items {
			out = append(out, probeTarget(item))
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	if len(out) > limit {
		out = out[:limit]
		return out, out[len(out)-1].ID, nil
	}
	return out, "", nil
}

// probeTarget is the target an index entry names. An entry whose digest is
// missing or cannot be read (an item written before digests, a format this
// build does not know) names its space by ids only: the prober reads it.
func probeTarget(item map[string]types.AttributeValue) space.ProbeTarget {
	text := func(name string) string {
		v, _ := item[name].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	t := space.ProbeTarget{OrgID: strings.TrimPrefix(text("pk"), prefixOrg), ID: strings.TrimPrefix(text("sk"), prefixSpace),
		Shard: text("probe_shard")}
	if d, err := space.ParseDigest(text("pd")); err == nil {
		t.Digest = &d
	}
	return t
}
