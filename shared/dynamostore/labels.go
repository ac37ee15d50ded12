package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
// A listing in id order (no sort, no name search) with positive
// requirements (=, in, exists: space.Selector.Drivers) reads their
// entries: each requirement's entries, of each of its values from after
// the position (the last id listed, as in every id listing), merged in
// id order, and of those the ids every requirement takes, found by
// leapfrogging (each requirement's entries are read from the largest id
// another has reached, so a rare one lets a common one skip ahead); then
// one BatchGetItem of the spaces they name. The stored space is the
// truth (the whole selector and the other filters are checked on it),
// the entries only choose what is read. So a page costs the entries it
// reads (about 150 bytes each, some 25 a read unit) and the spaces that
// the negative requirements and other filters pass over, at any fleet
// size (BenchmarkSelectorPage); only a combination of common
// requirements that is rare reads many entries (not their spaces) per
// page, as a word search of common words does. An exists reads the
// values its key has, found by one Query of a single entry per value; a
// requirement of more than space.MaxDriverValues values is not read but
// checked on the spaces (space.ReadUnder).
//
// Problems first (sort=problems, the console's default order), the same
// labels have entries in that order too, in a partition of their own
// (pk LPROB#<org_id>, sk <key>=<value>\x01<problemKey>, keys.go), kept
// in the same transactions and also moved by a transition, whose
// transaction already writes the space, its history and the counters
// (no write in steady state: a heartbeat moves nothing). A space of more
// than maxOrderedLabels labels has one overflow entry at its position
// instead, which a listing in that order reads beside every
// requirement's entries. A selector with drivers is read under them
// there as in id order (listByProblems): a page costs its entries and
// spaces at any fleet size (BenchmarkSelectorPage, "by-problems"), not
// the spaces the sort index would pass over. Deregister is conditional
// on the position read (problem_key), whose entries it deletes.
//
// In another order (a sort), a selector whose requirements take at most
// sortFewMax spaces, found reading at most maxSortFewEntries entries,
// reads those spaces (one BatchGetItem) and sorts them itself by the
// order's key, the position being that key as in the index's listing: a
// page costs the selector's spaces, at most 100, at any fleet size. A
// selector that takes more, one of negative requirements only (!=, notin,
// !key) or whose requirements all have too many values, and any selector
// with a word search filter the spaces the listing reads: a negative
// selector matches most spaces, so it passes over few; a positive one
// in another order costs the spaces it passes over.
//
// Write costs (BenchmarkSelectorPage, writes): a registration puts two
// entries per label (one in each order) and a deregistration deletes
// them, each in the transaction it already is (2 write units an entry);
// a transition moves the entries in problems-first order (a delete and
// a put each, 4 write units a label); a labels change
// moves only the labels that change (an unmarked space, stored before
// the entries, is given every entry of its new labels), and being a
// transaction it costs the space's write twice over. A change that moves
// more entries than one transaction holds (about 45 labels changed at
// once) puts the new entries first, in transactions conditional on the
// space's version, then writes the space and deletes the old entries
// (TestLargestLabelsChange): a lost race leaves put entries that name
// labels the space does not have, or (a transition having won the race)
// a position it is not at, which a listing reads and passes over (the
// space is the truth): the former until a labels change moves them, the
// latter for good (TestSelectorListingProblemsFirst's stale entry); a
// deregistration deletes only the entries of the labels read, so such an
// entry can outlive its space, and a listing skips it as deregistered.

// entriesPerUnit is about how many label entries one read unit reads
// (4 KB, strongly consistent; an entry is about 180 bytes).
const entriesPerUnit = 20

// maxTransactItems is DynamoDB's bound on a transaction's items.
const maxTransactItems = 100

// labelEntries is sp's label entries by sort key: none once deregistered.
func (s *Store) labelEntries(sp space.Space) map[string]map[string]types.AttributeValue {
	var sks []string
	for k, v := range sp.Labels {
		sks = append(sks, labelSK(k, v, sp.ID))
	}
	return indexEntries(sp, labelsPK(sp.OrgID), sks)
}

// labelMoves is the transaction items that take before's label entries to
// after's (entryMoves: the deletes, then the puts).
func (s *Store) labelMoves(before, after space.Space) []types.TransactWriteItem {
	return s.entryMoves(s.labelEntries(before), s.labelEntries(after))
}

// maxOrderedLabels bounds the labels a space has entries of in
// problems-first order: a space of more has one overflow entry instead,
// which every selector read in that order reads (so a fleet of many
// such spaces makes those listings read them all). It is the most that
// keeps every write within a transaction's 100 items: a registration
// (7 items, 16 of words, 32 label entries in id order and these 32: 87;
// with 64 labels, 64 and one overflow entry: 88), a deregistration (8,
// 16, 32 and 32: 88), a transition (3 and 32 moved: 67) and a labels
// change, whose puts go first (prePutLabels: its space and 32 of words,
// then 32 and 32 deletes, or 64 and one: 98; with a transition's history
// and counters too, 99 at 32 labels, 101 at 33).
const maxOrderedLabels = 32

// labelOrderVersion is attrLabelOrder's value: the entries follow
// orderEntries as it is.
const labelOrderVersion = "1"

// orderEntries is sp's label entries in problems-first order by sort key
// (a label's, at its problemKey, or the overflow entry): none once
// deregistered or without labels.
func (s *Store) orderEntries(sp space.Space) map[string]map[string]types.AttributeValue {
	if len(sp.Labels) == 0 {
		return nil
	}
	pos := problemKey(sp)
	sks := []string{overflowPrefix + pos}
	if len(sp.Labels) <= maxOrderedLabels {
		sks = sks[:0]
		for k, v := range sp.Labels {
			sks = append(sks, labelPrefix(k, v)+pos)
		}
	}
	return indexEntries(sp, labelOrderPK(sp.OrgID), sks)
}

// orderMoves is the transaction items that take before's entries in
// problems-first order to after's: a transition moves them all (their
// position changes), a labels change those of the labels it changes.
// Unless marked (the entries are known to be written), every entry of
// after is put, and before's that after has not are deleted, which is
// no error where there are none.
func (s *Store) orderMoves(before, after space.Space, marked bool) []types.TransactWriteItem {
	old, next := s.orderEntries(before), s.orderEntries(after)
	if !marked {
		for sk := range next {
			delete(old, sk)
		}
	}
	return s.entryMoves(old, next)
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
// order, the ids read and not yet passed in buf.
type labelRange struct {
	// pk and prefix are its partition and what its entries begin with:
	// the rest of an entry's sort key is its position (an id, or a
	// problemKey).
	pk, prefix string
	in         *dynamodb.QueryInput
	buf        []string
	done       bool
	// reads is how often it was read: each read asks for twice the last.
	reads int
}

// labelStream is one driver's ranges: together, in id order, the spaces
// it takes.
type labelStream []*labelRange

// labelReader reads a listing's streams, counting the entries it reads:
// beyond budget (when set), a read answers errOverBudget.
type labelReader struct {
	s       *Store
	entries int
	budget  int
	// overflow, when set, is a range whose positions every stream takes
	// (the spaces of more than maxOrderedLabels labels).
	overflow *labelRange
}

// errOverBudget ends a labelReader's reads past its budget.
var errOverBudget = errors.New("the label entries to read are over budget")

// listByLabel is ListSpaces in id order for a selector with drivers
// (q.Selector): the ids that every driver read takes (space.ReadUnder),
// found by leapfrogging through the streams (each one is read from the
// largest id another has reached, so a rare driver lets a common one skip
// ahead), then their spaces, on which the whole selector and q's filters
// are checked. filter, nm and vals are the listing's filters on provider,
// type and account, which the entries carry. ok is false when no driver
// is read (the caller then filters the listing).
func (s *Store) listByLabel(ctx context.Context, org string, q space.Query, filter []string, nm []string,
	vals map[string]types.AttributeValue,
) (out []space.Space, next string, ok bool, err error) {
	streams, err := s.labelStreams(ctx, org, labelsPK(org), q.Selector, q.After, filter, nm, vals)
	if err != nil || streams == nil {
		return nil, "", false, err
	}
	out, next, err = s.listUnder(ctx, org, q, &labelReader{s: s}, streams, func(sp space.Space) string { return sp.ID })
	return out, next, true, err
}

// listByProblems is listByLabel in problems-first order (sort=problems):
// the same leapfrogging through the drivers' entries in that order
// (pk LPROB#<org>, positioned by problemKey, q.After being the last
// one listed, as in the problems index's listing), each position also
// taken from the overflow entries of the spaces of more than
// maxOrderedLabels labels; a space is listed only at its position as
// stored, so an entry left behind by a lost race is passed over. A page
// costs its entries and spaces, as in id order, plus the overflow
// entries it passes.
func (s *Store) listByProblems(ctx context.Context, org string, q space.Query, filter []string, nm []string,
	vals map[string]types.AttributeValue,
) (out []space.Space, next string, ok bool, err error) {
	pk := labelOrderPK(org)
	streams, err := s.labelStreams(ctx, org, pk, q.Selector, q.After, filter, nm, vals)
	if err != nil || streams == nil {
		return nil, "", false, err
	}
	r := &labelReader{s: s, overflow: s.labelRange(pk, overflowPrefix, q.After, filter, nm, vals)}
	out, next, err = s.listUnder(ctx, org, q, r, streams, problemKey)
	return out, next, true, err
}

// listUnder lists the spaces whose positions (pos: an id, a problemKey)
// every stream takes, after q.After, up to q.Limit: each read as
// stored, and listed only if at the position read, live, matched by the
// whole selector and kept by q's filters. next is the last one's
// position when more may follow.
func (s *Store) listUnder(ctx context.Context, org string, q space.Query, r *labelReader, streams []labelStream,
	pos func(space.Space) string,
) (out []space.Space, next string, err error) {
	out = make([]space.Space, 0, q.Limit+1)
	want := func() int { return q.Limit + 1 - len(out) }
	scanned, kept := 0, 0 // spaces read, spaces listed
	last, ended := q.After, false
	for want() > 0 && !ended {
		n := int(nextAsk(want(), scanned, kept, MaxLimit))
		var ps, ids []string
		for len(ps) < n {
			p, err := r.next(ctx, streams, last, n-len(ps))
			if err != nil {
				return nil, "", err
			}
			if p == "" {
				ended = true
				break
			}
			ps, last = append(ps, p), p
			ids = append(ids, p[strings.LastIndex(p, nameSep)+1:])
		}
		if len(ps) == 0 {
			break
		}
		got, err := s.spacesByID(ctx, org, ids)
		if err != nil {
			return nil, "", err
		}
		for i, id := range ids {
			if want() <= 0 {
				break
			}
			scanned++
			sp, found := got[id]
			if !found || sp.Deleted() || pos(sp) != ps[i] || !q.Selector.Matches(sp.Labels) ||
				!strings.HasPrefix(space.FoldName(sp.Name), q.NamePrefix) || (q.Keep != nil && !q.Keep(sp)) {
				continue // moved, relabeled or gone since the entry was read, or filtered
			}
			out = append(out, sp)
			kept++
		}
	}
	if len(out) > q.Limit {
		out = out[:q.Limit]
		return out, pos(out[len(out)-1]), nil
	}
	return out, "", nil
}

// labelStreams is the streams of sel's drivers that are read
// (readUnder), in partition pk (id order or problems first), from after
// the position after; nil when none is. filter, nm and vals are the
// listing's filters on provider, type and account.
func (s *Store) labelStreams(ctx context.Context, org, pk string, sel space.Selector, after string, filter []string, nm []string,
	vals map[string]types.AttributeValue,
) ([]labelStream, error) {
	drivers, err := s.readUnder(ctx, org, sel.Drivers())
	if err != nil || len(drivers) == 0 {
		return nil, err
	}
	streams := make([]labelStream, 0, len(drivers))
	for _, d := range drivers {
		st := labelStream{}
		for _, v := range d.Values {
			st = append(st, s.labelRange(pk, labelPrefix(d.Key, v), after, filter, nm, vals))
		}
		streams = append(streams, st)
	}
	return streams, nil
}

// labelRange is the range of entries of partition pk that begin with
// prefix, from after the position after, filtered on the listing's
// provider, type and account.
func (s *Store) labelRange(pk, prefix, after string, filter []string, nm []string, vals map[string]types.AttributeValue) *labelRange {
	rv := make(map[string]types.AttributeValue, len(vals)+2)
	for k, x := range vals {
		rv[k] = x
	}
	rv[":lpk"], rv[":lval"] = str(pk), str(prefix)
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
	if after != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{"pk": str(pk), "sk": str(prefix + after)}
	}
	return &labelRange{pk: pk, prefix: prefix, in: in}
}

// sortFewMax bounds the spaces a selector in another order than id reads
// to sort them itself (sortFew); maxSortFewEntries the entries it reads
// to find them before it gives up. Variables only so that a test can
// reach the bounds with a small fleet.
var (
	sortFewMax        = 100
	maxSortFewEntries = 1000
)

// sortFew is ListSpaces in si's order for a selector whose drivers take
// at most sortFewMax spaces (found reading at most maxSortFewEntries
// entries): they are all read (one BatchGetItem) and sorted here by si's
// key, so a page costs the selector's spaces, however few it shows and
// whatever the fleet's size, rather than the index entries a filter
// passes over. ok is false when the selector takes more, or has no
// driver: the caller then filters the index.
func (s *Store) sortFew(ctx context.Context, org string, si sortIndex, q space.Query, filter []string, nm []string,
	vals map[string]types.AttributeValue,
) (out []space.Space, next string, ok bool, err error) {
	streams, err := s.labelStreams(ctx, org, labelsPK(org), q.Selector, "", filter, nm, vals)
	if err != nil || streams == nil {
		return nil, "", false, err
	}
	r := &labelReader{s: s, budget: maxSortFewEntries}
	var ids []string
	for last := ""; len(ids) <= sortFewMax; {
		id, err := r.next(ctx, streams, last, sortFewMax+1-len(ids))
		if errors.Is(err, errOverBudget) {
			return nil, "", false, nil
		}
		if err != nil {
			return nil, "", true, err
		}
		if id == "" {
			break
		}
		ids, last = append(ids, id), id
	}
	if len(ids) > sortFewMax {
		return nil, "", false, nil
	}
	got, err := s.spacesByID(ctx, org, ids)
	if err != nil {
		return nil, "", true, err
	}
	type keyed struct {
		key string
		sp  space.Space
	}
	var all []keyed
	for _, id := range ids {
		sp, found := got[id]
		if !found || sp.Deleted() || !q.Selector.Matches(sp.Labels) ||
			!strings.HasPrefix(space.FoldName(sp.Name), q.NamePrefix) || (q.Keep != nil && !q.Keep(sp)) {
			continue
		}
		k := si.key(sp)
		if q.After != "" && ((!q.Sort.Desc() && k <= q.After) || (q.Sort.Desc() && k >= q.After)) {
			continue // on an earlier page
		}
		all = append(all, keyed{k, sp})
	}
	slices.SortFunc(all, func(a, b keyed) int {
		if q.Sort.Desc() {
			return strings.Compare(b.key, a.key)
		}
		return strings.Compare(a.key, b.key)
	})
	for _, e := range all[:min(len(all), q.Limit)] {
		out = append(out, e.sp)
	}
	if len(all) > q.Limit {
		return out, all[q.Limit-1].key, true, nil
	}
	return out, "", true, nil
}

// next is the smallest position (an id, a problemKey) above last that
// every stream takes, or that the overflow range has, "" when none is:
// each stream in turn is asked for its first position at least the
// largest reached, until all give the same. want is how many more ids
// the page may use: a range's first read asks for that many entries
// (at least a read unit's worth), and each further read for twice the
// last, up to MaxLimit. Whichever stream is common next to the others
// is read on at a growing pace, and the rare one a page at a time: the
// next-ask rule (nextAsk) would size both by the ids all of them take,
// and at first, after a handful, ask the rare one for as many as the
// common one needs.
func (r *labelReader) next(ctx context.Context, streams []labelStream, last string, want int) (string, error) {
	limit := int32(max(want, entriesPerUnit))
	t, err := r.meet(ctx, streams, last, limit)
	if err != nil || r.overflow == nil {
		return t, err
	}
	o, err := r.head(ctx, labelStream{r.overflow}, "", last, limit)
	if err != nil {
		return "", err
	}
	if o != "" && (t == "" || o < t) {
		return o, nil
	}
	return t, nil
}

// meet is the smallest position above last that every stream takes, ""
// when none is.
func (r *labelReader) meet(ctx context.Context, streams []labelStream, last string, limit int32) (string, error) {
	t, agree := last, 0
	for i := 0; agree < len(streams); i = (i + 1) % len(streams) {
		h, err := r.head(ctx, streams[i], t, last, limit)
		if err != nil || h == "" {
			return "", err
		}
		if h == t {
			agree++
		} else {
			t, agree = h, 1
		}
	}
	return t, nil
}

// head is st's smallest id at least atLeast and above last, reading its
// ranges as needed; "" when it has none.
func (r *labelReader) head(ctx context.Context, st labelStream, atLeast, last string, limit int32) (string, error) {
	best := ""
	for _, rg := range st {
		for {
			for len(rg.buf) > 0 && (rg.buf[0] < atLeast || rg.buf[0] <= last) {
				rg.buf = rg.buf[1:]
			}
			if len(rg.buf) > 0 || rg.done {
				break
			}
			if err := r.read(ctx, rg, atLeast, limit); err != nil {
				return "", err
			}
		}
		if len(rg.buf) > 0 && (best == "" || rg.buf[0] < best) {
			best = rg.buf[0]
		}
	}
	return best, nil
}

// read reads rg's next entries, from atLeast on when that is further
// than where it stopped: it starts after the id cut of its last
// character, below atLeast and above every id below it but those that
// share all its other characters, which head passes over.
func (r *labelReader) read(ctx context.Context, rg *labelRange, atLeast string, limit int32) error {
	if r.budget > 0 && r.entries >= r.budget {
		return errOverBudget
	}
	if atLeast != "" {
		seek := rg.prefix + atLeast[:len(atLeast)-1]
		if at, _ := rg.in.ExclusiveStartKey["sk"].(*types.AttributeValueMemberS); at == nil || at.Value < seek {
			rg.in.ExclusiveStartKey = map[string]types.AttributeValue{"pk": str(rg.pk), "sk": str(seek)}
		}
	}
	rg.in.Limit = aws.Int32(int32(min(int(limit)<<min(rg.reads, 10), MaxLimit)))
	rg.reads++
	page, err := r.s.db.Query(ctx, rg.in)
	if err != nil {
		return awsError("Query", err)
	}
	r.entries += int(page.ScannedCount)
	for _, item := range page.Items {
		if sk, _ := item["sk"].(*types.AttributeValueMemberS); sk != nil && strings.HasPrefix(sk.Value, rg.prefix) {
			rg.buf = append(rg.buf, sk.Value[len(rg.prefix):])
		}
	}
	rg.done = page.LastEvaluatedKey == nil
	rg.in.ExclusiveStartKey = page.LastEvaluatedKey
	return nil
}

// readUnder is the drivers a listing reads (space.ReadUnder), an exists
// driver's values found first (keyValues).
func (s *Store) readUnder(ctx context.Context, org string, drivers []space.Driver) ([]space.Driver, error) {
	for i, d := range drivers {
		if d.Exists {
			values, err := s.keyValues(ctx, org, d.Key)
			if err != nil {
				return nil, err
			}
			drivers[i].Values = values
		}
	}
	return space.ReadUnder(drivers), nil
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
