package dynamostore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// The fleet counts (space.Counts) live in counter items COUNT#<shard> of the
// org's partition, one per probe shard of the space counted (countSK), so
// that the org's registrations, deregistrations and transitions spread over
// 16 items instead of contending for one inside their transactions. Each
// counter item holds number attributes: total, status_<status>,
// provider_<provider>, account_<cloud account id>, minor_<major.minor>
// (the space's current Kubernetes minor version, when known) and, for
// synthetic spaces, synthetic_<status> as well.
//
// Register adds 1 to total, status, provider and account in its
// transaction; Deregister subtracts them (conditional on the status read,
// so a concurrent transition cannot make it subtract the wrong one); a
// status change (UpdateSpace with a transition) moves 1 from the old status
// to the new in its transaction. A heartbeat or a failure count changes no
// status and touches no counter, so the counters add nothing to probing's cost.
// Reading the counts is one Query of the 16 small items.
//
// The version counters: a space item carries counted_minor, the minor it
// is counted under (absent: under none, the version unknown, or a space
// stored before the version counters, which Backfill counts). A write that
// changes the space's minor (a probe that sees an upgrade, rarely) moves 1
// from minor_<counted_minor> to minor_<new> and sets counted_minor in one
// transaction conditional on the counted_minor it decremented; Register
// counts and marks, Deregister uncounts and unmarks. A probe that changes
// no minor (a heartbeat, a patch release) writes as before: no counter, no
// transaction. The spaces of unknown version are total less the minors'
// sum, so a space counted under none is never counted twice.
const (
	attrTotal      = "total"
	attrStatusPre  = "status_"
	attrProvPre    = "provider_"
	attrAccountPre = "account_"
	attrSynthPre   = "synthetic_"
	attrMinorPre   = "minor_"
	// attrCounted is the space item's counted minor (see above).
	attrCounted = "counted_minor"
)

// countedMinor is the minor a space item is counted under ("" for none).
func countedMinor(item map[string]types.AttributeValue) string {
	if v, ok := item[attrCounted].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// minorMove is the counter deltas moving a space from minor from to minor
// to ("" for none on either side).
func minorMove(from, to string) [][2]string {
	var d [][2]string
	if from != "" {
		d = append(d, [2]string{attrMinorPre + from, "-1"})
	}
	if to != "" {
		d = append(d, [2]string{attrMinorPre + to, "1"})
	}
	return d
}

// countDelta is the Update of a space's counter item adding each delta
// (attribute name -> amount). Placeholders are #fc<i> and :fc<i>, fewer than
// ten, so none is a prefix of another (see the expression names).
func (s *Store) countDelta(org, spaceID string, deltas [][2]string) types.TransactWriteItem {
	var adds []string
	nm := map[string]string{}
	vals := map[string]types.AttributeValue{}
	for i, d := range deltas {
		n, v := "#fc"+strconv.Itoa(i), ":fc"+strconv.Itoa(i)
		adds = append(adds, n+" "+v)
		nm[n] = d[0]
		vals[v] = &types.AttributeValueMemberN{Value: d[1]}
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: s.table, Key: itemKey(org, countSK(spaceID)),
		UpdateExpression:          aws.String("ADD " + strings.Join(adds, ", ")),
		ExpressionAttributeNames:  nm,
		ExpressionAttributeValues: vals,
	}}
}

// countSpace is the counter update that adds (sign "1") or removes ("-1")
// sp in its current status, and under minor (its counted minor; "" for
// none).
func (s *Store) countSpace(sp space.Space, sign, minor string) types.TransactWriteItem {
	d := [][2]string{
		{attrTotal, sign},
		{attrStatusPre + string(sp.Status), sign},
		{attrProvPre + string(sp.Provider), sign},
		{attrAccountPre + sp.CloudAccountID, sign},
	}
	if sp.Synthetic {
		d = append(d, [2]string{attrSynthPre + string(sp.Status), sign})
	}
	if minor != "" {
		d = append(d, [2]string{attrMinorPre + minor, sign})
	}
	return s.countDelta(sp.OrgID, sp.ID, d)
}

// countTransition moves sp from status from to status to (tr nil: no
// status change) and adds the minor deltas (nil: no version change), in
// one update of its counter item (a transaction may touch an item once).
func (s *Store) countTransition(sp space.Space, tr *space.Transition, minor [][2]string) types.TransactWriteItem {
	var d [][2]string
	if tr != nil {
		from, to := tr.From, tr.To
		d = append(d, [2]string{attrStatusPre + string(from), "-1"}, [2]string{attrStatusPre + string(to), "1"})
		if sp.Synthetic {
			d = append(d, [2]string{attrSynthPre + string(from), "-1"}, [2]string{attrSynthPre + string(to), "1"})
		}
	}
	return s.countDelta(sp.OrgID, sp.ID, append(d, minor...))
}

// Counts sums org's counter items: one strongly consistent Query (the 16
// items are a few hundred bytes each, one page).
func (s *Store) Counts(ctx context.Context, org string) (space.Counts, error) {
	c := space.NewCounts()
	in := &dynamodb.QueryInput{
		TableName:                 s.table,
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String(nPK + " = :pk AND begins_with(" + nSK + ", :prefix)"),
		ExpressionAttributeNames:  names(nPK, nSK),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(orgPK(org)), ":prefix": str(prefixCount)},
	}
	for {
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return space.Counts{}, awsError("Query", err)
		}
		for _, item := range page.Items {
			for k, v := range item {
				nv, ok := v.(*types.AttributeValueMemberN)
				if !ok {
					continue
				}
				n, err := strconv.ParseInt(nv.Value, 10, 64)
				if err != nil {
					return space.Counts{}, internal("counts", fmt.Errorf("counter %s is %q", k, nv.Value))
				}
				switch {
				case k == attrTotal:
					c.Total += n
				case strings.HasPrefix(k, attrStatusPre):
					c.ByStatus[space.Status(strings.TrimPrefix(k, attrStatusPre))] += n
				case strings.HasPrefix(k, attrProvPre):
					c.ByProvider[space.Provider(strings.TrimPrefix(k, attrProvPre))] += n
				case strings.HasPrefix(k, attrAccountPre):
					c.ByAccount[strings.TrimPrefix(k, attrAccountPre)] += n
				case strings.HasPrefix(k, attrMinorPre):
					c.ByVersion[strings.TrimPrefix(k, attrMinorPre)] += n
				case strings.HasPrefix(k, attrSynthPre):
					c.Synthetic.ByStatus[space.Status(strings.TrimPrefix(k, attrSynthPre))] += n
					c.Synthetic.Total += n
				}
			}
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	// An account or a minor whose last space went away keeps a 0
	// counter; only those in use are listed.
	for id, n := range c.ByAccount {
		if n == 0 {
			delete(c.ByAccount, id)
		}
	}
	c.VersionUnknown = c.Total
	for m, n := range c.ByVersion {
		c.VersionUnknown -= n
		if n == 0 {
			delete(c.ByVersion, m)
		}
	}
	return c, nil
}
