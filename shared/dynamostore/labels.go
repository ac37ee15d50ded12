package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// Listing by label selector. A registered space has one small item per
// label in its org's label partition (pk LABEL#<org_id>, sk
// <key>=<value>\x01<id>, keys.go), which the writes of the space keep in
// the same transaction, as the name's search entries (words.go): Register
// puts them, a labels change deletes the entries of the labels it drops or
// changes and puts those of the labels it adds or changes (a label kept
// as it was is not written), Deregister deletes them. Each of those
// transactions is conditional on the space (absent; at the version read;
// for Deregister, on the labels read: the marker label_entries, a digest
// of the labels whose entries are written), so a
// retried or racing write cannot leave an entry of a deregistered space or
// of a label it no longer has. They live in the base table: a listing is a
// strongly consistent Query, so a space is found by its labels as soon as
// they are stored.
//
// A listing in id order (no sort, no name search) with a positive
// requirement (=, in, exists: space.Selector.Drivers) is read under one of
// them, its driver: the entries of each of the driver's values from after
// the position (the last id listed, as in every id listing), merged in id
// order, then one BatchGetItem of the spaces they name; the stored space
// is the truth (the whole selector and the other filters are checked on
// it), the entries only choose what is read. So a page costs its
// driver's entries (about 150 bytes each) and the spaces they name that
// the other requirements pass over, at any fleet size
// (BenchmarkSelectorPage). An exists driver reads under the values its
// key has, found by one Query of a single entry per value; a driver of
// more than space.MaxDriverValues values cannot drive. With several
// drivers, each one's entries are counted first (up to probeEntries,
// eventually consistent), and the listing reads under the one with the
// fewest (space.ChooseDriver): any driver lists the same spaces, so the
// choice is made again on every page and the position stays an id.
//
// A selector of negative requirements only (!=, notin, !key), or whose
// drivers all have too many values, and a selector in another order (a
// sort, a word search) filter the spaces the listing reads: a negative
// selector matches most spaces, so it passes over few; a positive one in
// another order costs the spaces it passes over.
//
// Write costs (BenchmarkSelectorPage, writes): a registration puts one
// entry per label and a deregistration deletes them, each in the
// transaction it already is (2 write units an entry); a labels change
// moves only the labels that change, and being a transaction it costs the
// space's write twice over. A change that moves more entries than one
// transaction holds (about 45 labels changed at once) puts the new
// entries first, in transactions conditional on the space's version, then
// writes the space and deletes the old entries: a lost race leaves put
// entries that name labels the space does not have, which a listing reads
// and passes over (the space is the truth) until a labels change moves
// them or the space is deregistered... which deletes only the entries of
// the labels read, so such an entry outlives the space; a listing skips
// it as deregistered.

// maxTransactItems is DynamoDB's bound on a transaction's items.
const maxTransactItems = 100

// labelEntries is sp's label entries by sort key: none once deregistered.
func (s *Store) labelEntries(sp space.Space) map[string]map[string]types.AttributeValue {
	if sp.DeletedAt != nil || sp.OrgID == "" {
		return nil
	}
	out := map[string]map[string]types.AttributeValue{}
	for k, v := range sp.Labels {
		sk := labelSK(k, v, sp.ID)
		out[sk] = map[string]types.AttributeValue{
			"pk": str(labelsPK(sp.OrgID)), "sk": str(sk),
			attrNames[nProv]: str(string(sp.Provider)), attrNames[nType]: str(sp.SpaceType), attrNames[nAccount]: str(sp.CloudAccountID),
		}
	}
	return out
}

// labelMoves is the transaction items that take before's label entries to
// after's (entryMoves: the deletes, then the puts).
func (s *Store) labelMoves(before, after space.Space) []types.TransactWriteItem {
	return s.entryMoves(s.labelEntries(before), s.labelEntries(after))
}

// labelsDigest is the marker of a space whose entries are those of
// labels: a digest of them, so that a write conditional on the labels read
// (Deregister, which deletes their entries) fails when a labels change
// committed meanwhile. A condition on the labels map itself would do in
// DynamoDB; the emulator compares no maps, nor paths through keys that
// hold '.'.
func labelsDigest(labels map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		h.Write([]byte(k + "=" + labels[k] + nameSep))
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// prePutLabels writes the puts of a labels change too large for one
// transaction beside the space's write, in transactions conditional on
// the space being registered at version prev, and answers the rest.
func (s *Store) prePutLabels(ctx context.Context, after space.Space, prev int64, items []types.TransactWriteItem, room int) ([]types.TransactWriteItem, error) {
	for len(items) > room {
		var puts []types.TransactWriteItem
		rest := items[:0:0]
		for _, it := range items {
			if it.Put != nil && len(puts) < maxTransactItems-1 && len(items)-len(puts) > room {
				puts = append(puts, it)
				continue
			}
			rest = append(rest, it)
		}
		if len(puts) == 0 {
			return nil, internal("update space", fmt.Errorf("a labels change of %d entries does not fit a transaction", len(items)))
		}
		check := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: s.table,
			Key:                       itemKey(after.OrgID, prefixSpace+after.ID),
			ConditionExpression:       aws.String("attribute_exists(" + nPK + ") AND attribute_not_exists(" + nDeleted + ") AND " + nVersion + " = :prev"),
			ExpressionAttributeNames:  names(nPK, nDeleted, nVersion),
			ExpressionAttributeValues: map[string]types.AttributeValue{":prev": num(prev)},
		}}
		err := s.transact(ctx, "put label entries", func() ([]types.TransactWriteItem, error) {
			return append([]types.TransactWriteItem{check}, puts...), nil
		}, func(reasons []types.CancellationReason) error {
			if failedCheck(reasons, 0) {
				return s.whyNotWritable(ctx, after.OrgID, after.ID, prev, nil)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		items = rest
	}
	return items, nil
}

// labelRange is one value's entries in a listing by label: read in id
// order from after the position, ids not yet merged in buf.
type labelRange struct {
	in   *dynamodb.QueryInput
	buf  []string
	done bool
}

// listByLabel is ListSpaces in id order for a selector with a driver
// (q.Selector): filter, nm and vals are the listing's filters on provider,
// type and account, which the entries carry. ok is false when no driver
// can drive (the caller then filters the listing).
func (s *Store) listByLabel(ctx context.Context, org string, q space.Query, filter []string, nm []string,
	vals map[string]types.AttributeValue,
) (out []space.Space, next string, ok bool, err error) {
	d, ok, err := s.chooseDriver(ctx, org, q.Selector.Drivers())
	if err != nil || !ok {
		return nil, "", ok, err
	}
	vals[":lpk"] = str(labelsPK(org))
	ranges := make([]*labelRange, 0, len(d.Values))
	for _, v := range d.Values {
		rv := make(map[string]types.AttributeValue, len(vals)+1)
		for k, x := range vals {
			rv[k] = x
		}
		rv[":lval"] = str(labelPrefix(d.Key, v))
		in := &dynamodb.QueryInput{
			TableName:                 s.table,
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String(nPK + " = :lpk AND begins_with(" + nSK + ", :lval)"),
			ExpressionAttributeNames:  names(append(slices.Clone(nm), nPK, nSK)...),
			ExpressionAttributeValues: rv,
		}
		if len(filter) > 0 {
			in.FilterExpression = aws.String(strings.Join(filter, " AND "))
		}
		if q.After != "" {
			in.ExclusiveStartKey = map[string]types.AttributeValue{"pk": str(labelsPK(org)), "sk": str(labelSK(d.Key, v, q.After))}
		}
		ranges = append(ranges, &labelRange{in: in})
	}
	out = make([]space.Space, 0, q.Limit+1)
	want := func() int { return q.Limit + 1 - len(out) }
	scanned, kept := 0, 0
	for want() > 0 {
		ask := nextAsk(want(), scanned, kept, MaxLimit)
		for _, r := range ranges {
			if len(r.buf) > 0 || r.done {
				continue
			}
			r.in.Limit = aws.Int32(ask)
			page, err := s.db.Query(ctx, r.in)
			if err != nil {
				return nil, "", true, awsError("Query", err)
			}
			scanned += int(page.ScannedCount) - len(page.Items)
			for _, item := range page.Items {
				if sk, _ := item["sk"].(*types.AttributeValueMemberS); sk != nil {
					r.buf = append(r.buf, sk.Value[strings.LastIndex(sk.Value, nameSep)+1:])
				}
			}
			r.done = page.LastEvaluatedKey == nil
			r.in.ExclusiveStartKey = page.LastEvaluatedKey
		}
		// The ids up to the smallest last id of the ranges that have more
		// are all there are up to it: those are merged, ask at most.
		bound, waiting := "", false
		for _, r := range ranges {
			switch {
			case r.done:
			case len(r.buf) == 0:
				waiting = true // its read was all filtered out: read on
			case bound == "" || r.buf[len(r.buf)-1] < bound:
				bound = r.buf[len(r.buf)-1]
			}
		}
		if waiting {
			continue
		}
		var ids []string
		for len(ids) < int(ask) {
			var least *labelRange
			for _, r := range ranges {
				if len(r.buf) > 0 && (bound == "" || r.buf[0] <= bound) && (least == nil || r.buf[0] < least.buf[0]) {
					least = r
				}
			}
			if least == nil {
				break
			}
			if len(ids) == 0 || ids[len(ids)-1] != least.buf[0] {
				ids = append(ids, least.buf[0])
			}
			least.buf = least.buf[1:]
		}
		if len(ids) == 0 {
			break // every range is read to its end
		}
		got, err := s.spacesByID(ctx, org, ids)
		if err != nil {
			return nil, "", true, err
		}
		for _, id := range ids {
			if want() <= 0 {
				break
			}
			scanned++
			sp, found := got[id]
			if !found || sp.Deleted() || !d.Takes(sp.Labels) || !q.Selector.Matches(sp.Labels) ||
				!strings.HasPrefix(space.FoldName(sp.Name), q.NamePrefix) || (q.Keep != nil && !q.Keep(sp)) {
				continue // relabeled or gone since the entry was read, or filtered
			}
			out = append(out, sp)
			kept++
		}
	}
	if len(out) > q.Limit {
		out = out[:q.Limit]
		return out, out[len(out)-1].ID, true, nil
	}
	return out, "", true, nil
}

// chooseDriver is the driver a listing is read under, its values found
// (an exists driver's, the values its key has); ok is false when none can
// drive. With several drivers, each one's entries are counted first.
func (s *Store) chooseDriver(ctx context.Context, org string, drivers []space.Driver) (space.Driver, bool, error) {
	counts := make([]space.DriverCount, len(drivers))
	for i, d := range drivers {
		if len(d.Values) > space.MaxDriverValues {
			counts[i].Unusable = true
			continue
		}
		if len(drivers) == 1 {
			break // nothing to choose from
		}
		var prefixes []string
		if d.Exists {
			prefixes = []string{d.Key + "="}
		}
		for _, v := range d.Values {
			prefixes = append(prefixes, labelPrefix(d.Key, v))
		}
		counts[i].Complete = true
		for _, p := range prefixes {
			out, err := s.db.Query(ctx, &dynamodb.QueryInput{
				TableName:                 s.table,
				KeyConditionExpression:    aws.String(nPK + " = :lpk AND begins_with(" + nSK + ", :lp)"),
				ExpressionAttributeNames:  names(nPK, nSK),
				ExpressionAttributeValues: map[string]types.AttributeValue{":lpk": str(labelsPK(org)), ":lp": str(p)},
				Limit:                     aws.Int32(probeEntries),
				Select:                    types.SelectCount,
			})
			if err != nil {
				return space.Driver{}, false, awsError("Query", err)
			}
			counts[i].Entries += int(out.Count)
			counts[i].Complete = counts[i].Complete && out.LastEvaluatedKey == nil
		}
	}
	for {
		i := space.ChooseDriver(counts)
		if i < 0 {
			return space.Driver{}, false, nil
		}
		d := drivers[i]
		if !d.Exists {
			return d, true, nil
		}
		values, err := s.keyValues(ctx, org, d.Key)
		if err != nil {
			return space.Driver{}, false, err
		}
		if len(values) <= space.MaxDriverValues {
			d.Values = values
			return d, true, nil
		}
		counts[i].Unusable = true
	}
}

// keyValues is the values key has among org's labels, up to one more
// than space.MaxDriverValues: one Query of a single entry per value, each
// starting past the last value found.
func (s *Store) keyValues(ctx context.Context, org, key string) ([]string, error) {
	var values []string
	lo := key + "="
	for len(values) <= space.MaxDriverValues {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                s.table,
			ConsistentRead:           aws.Bool(true),
			KeyConditionExpression:   aws.String(nPK + " = :lpk AND " + nSK + " BETWEEN :lo AND :hi"),
			ExpressionAttributeNames: names(nPK, nSK),
			// Every value is below \x7f (letters, digits, '-', '_', '.').
			ExpressionAttributeValues: map[string]types.AttributeValue{":lpk": str(labelsPK(org)), ":lo": str(lo), ":hi": str(key + "=\x7f")},
			Limit:                     aws.Int32(1),
		})
		if err != nil {
			return nil, awsError("Query", err)
		}
		if len(out.Items) == 0 {
			break
		}
		sk, _ := out.Items[0]["sk"].(*types.AttributeValueMemberS)
		if sk == nil {
			break
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(sk.Value, key+"="), nameSep)
		values = append(values, v)
		// Past every entry of v: \x02 is above the separator and below
		// every character a longer value goes on with.
		lo = key + "=" + v + "\x02"
	}
	return values, nil
}

// backfillLabels writes the label entries of a space stored before them,
// with the marker, only if the space is at the version read, registered
// and unmarked still (a labels change meanwhile moves the version).
func (s *Store) backfillLabels(ctx context.Context, key, item map[string]types.AttributeValue, sp space.Space) (raced bool, err error) {
	items := []types.TransactWriteItem{{Update: &types.Update{TableName: s.table, Key: key,
		UpdateExpression:          aws.String("SET " + nLabelsMk + " = :lv"),
		ConditionExpression:       aws.String(nVersion + " = :prev AND attribute_not_exists(" + nDeleted + ") AND attribute_not_exists(" + nLabelsMk + ")"),
		ExpressionAttributeNames:  names(nLabelsMk, nVersion, nDeleted),
		ExpressionAttributeValues: map[string]types.AttributeValue{":lv": str(labelsDigest(sp.Labels)), ":prev": item["version"]},
	}}}
	items = append(items, s.labelMoves(space.Space{}, sp)...)
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if reasons, ok := canceled(err); ok && (failedCheck(reasons, 0) || conflicted(reasons)) {
		return true, err
	}
	if err != nil {
		return false, awsError("TransactWriteItems backfill", err)
	}
	return false, nil
}
