package dynamostore

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// Searching and sorting by name. A live space carries name_lc (its name
// folded, space.FoldName) and name_key (name_lc, nameSep, id); the sparse
// GSI "names" (org_id HASH, name_key RANGE, INCLUDE name_lc, provider,
// space_type, cloud_account_id) holds exactly the registered spaces, in
// name order within each org. Deregistration removes both attributes.
//
// The index projects nothing that a probe changes, so a heartbeat or a
// transition never writes to it (only a registration, a rename and a
// deregistration do): DynamoDB writes an index only when an item's indexed
// or projected attributes change, and is eventually consistent, a write
// propagating to it within a fraction of a second under normal conditions
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html,
// "Synchronizing data between tables and global secondary indexes" and
// "Write activity for global secondary indexes"). A page by name is one Query of the index (name
// prefix as key condition; provider, type and account as filter on the
// projected attributes) and one BatchGetItem of the page's
// spaces, strongly consistent, which the status filters and pickers then
// see whole.
//
// The indexes' names and their range keys (nameKey, regKey, statusKey,
// sinceKey, problemKey) are
// in keys.go.
const (
	// batchGetMax is BatchGetItem's limit of keys per request.
	batchGetMax = 100
)

// indexReadMax bounds the index entries one Query of a listing reads when
// its filter is selective: 10,000 entries of the names index (about 150
// bytes each) stay under DynamoDB's 1 MB page.
const indexReadMax = 10000

// setNameAttrs adds a live space's ordering attributes to its item.
func setNameAttrs(item map[string]types.AttributeValue, s space.Space) {
	item["name_lc"] = str(space.FoldName(s.Name))
	item["name_key"] = str(nameKey(s))
	item["reg_key"] = str(regKey(s))
	item["status_key"] = str(statusKey(s))
	item["since_key"] = str(sinceKey(s))
	item["problem_key"] = str(problemKey(s))
}

// sortIndex is the index, key attribute and position function of an order.
type sortIndex struct {
	index, attr, placeholder string
	key                      func(space.Space) string
}

// sortIndexes are the orders listed from an index.
var sortIndexes = map[space.Sort]sortIndex{
	space.SortName:        {namesIndex, "name_key", nNameKey, nameKey},
	space.SortRegistered:  {registeredIndex, "reg_key", nRegKey, regKey},
	space.SortStatus:      {statusIndex, "status_key", nStatusKey, statusKey},
	space.SortStatusSince: {sinceIndex, "since_key", nSinceKey, sinceKey},
	space.SortProblems:    {problemsIndex, "problem_key", nProbKey, problemKey},
}

// nameFilters adds q's name prefix to a filter on name_lc (a word search
// reads the search entries instead, words.go).
func nameFilters(q space.Query, filter *[]string, nm *[]string, vals map[string]types.AttributeValue) {
	if q.NamePrefix != "" {
		*filter = append(*filter, "begins_with("+nNameLC+", :nprefix)")
		vals[":nprefix"] = str(q.NamePrefix)
		*nm = append(*nm, nNameLC)
	}
}

// listByIndex is ListSpaces in the order of si (name or registration):
// q.After is the key of the last space returned.
func (s *Store) listByIndex(ctx context.Context, org string, si sortIndex, q space.Query, filter []string, nm []string,
	vals map[string]types.AttributeValue,
) ([]space.Space, string, error) {
	key := nOrg + " = :org"
	vals[":org"] = str(org)
	nm = append(nm, nOrg)
	nm = append(nm, si.placeholder)
	if q.NamePrefix != "" && si.index == namesIndex {
		// The prefix narrows the key range: no space outside it is read.
		key += " AND begins_with(" + nNameKey + ", :nkprefix)"
		vals[":nkprefix"] = str(q.NamePrefix)
	} else {
		// Every name_key is at least nameSep (a name starts with no
		// control character), so in DynamoDB this bounds nothing; the
		// emulator answers an index Query from the table's items, and this
		// keeps out the org's items that have no name_key (links,
		// history), as the sparse index does.
		key += " AND " + si.placeholder + " >= :nkmin"
		vals[":nkmin"] = str(nameSep)
	}
	in := &dynamodb.QueryInput{
		TableName:                 s.table,
		IndexName:                 aws.String(si.index),
		KeyConditionExpression:    aws.String(key),
		ExpressionAttributeNames:  names(nm...),
		ExpressionAttributeValues: vals,
		ScanIndexForward:          aws.Bool(!q.Sort.Desc()),
	}
	if len(filter) > 0 {
		in.FilterExpression = aws.String(strings.Join(filter, " AND "))
	}
	if q.After != "" {
		id := q.After[strings.LastIndex(q.After, nameSep)+1:]
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			"org_id": str(org), si.attr: str(q.After), "pk": str(orgPK(org)), "sk": str(prefixSpace + id),
		}
	}
	out := make([]space.Space, 0, q.Limit+1)
	want := func() int { return q.Limit + 1 - len(out) }
	scanned, kept := 0, 0
	for want() > 0 {
		// A selective filter passes over many entries per match:
		// the index is read up to indexReadMax entries a request (DynamoDB
		// ends a page at 1 MB anyway), and only the matches are fetched.
		// Reading more per request costs no more read units (they are by
		// the bytes read) and saves round trips, one after another. Not so
		// when q.Keep judges whole spaces (label selectors): every entry
		// read is then fetched, and a smaller read wastes less.
		most := indexReadMax
		if q.Keep != nil {
			most = MaxLimit
		}
		in.Limit = aws.Int32(nextAsk(want(), scanned, kept, most))
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", awsError("Query", err)
		}
		// Entries the filter passed over count as read, so that a selective
		// search asks for more next time.
		scanned += int(page.ScannedCount) - len(page.Items)
		items, err := s.batchGetSpaces(ctx, org, page.Items)
		if err != nil {
			return nil, "", err
		}
		for _, sp := range items {
			scanned++
			if want() <= 0 {
				break
			}
			if sp.Deleted() || (q.Keep != nil && !q.Keep(sp)) {
				continue
			}
			out = append(out, sp)
			kept++
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	if len(out) > q.Limit {
		out = out[:q.Limit]
		return out, si.key(out[len(out)-1]), nil
	}
	return out, "", nil
}

// nextAsk is how many entries a listing's next read asks for: what is
// still wanted, and once its filters have shown how few of the entries
// read they keep (kept of scanned), proportionally more, so that a
// selective filter costs a few requests rather than one per handful of
// entries; MaxLimit when they have kept none yet. Never more than most
// (what one request may read), never less than want. The one rule of the
// listings that filter what they read: by id (queryOrg), by an index
// (listByIndex), by word (searchWords) and by label (listByLabel).
func nextAsk(want, scanned, kept, most int) int32 {
	ask := want
	switch {
	case kept > 0:
		ask = want * scanned / kept
	case scanned > 0:
		ask = MaxLimit
	}
	return int32(max(want, min(ask, most)))
}

// batchGetSpaces reads the spaces the index entries name, strongly
// consistent, in the entries' order; a space gone since is left out.
func (s *Store) batchGetSpaces(ctx context.Context, org string, entries []map[string]types.AttributeValue) ([]space.Space, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	keys := make([]map[string]types.AttributeValue, 0, len(entries))
	for _, e := range entries {
		keys = append(keys, map[string]types.AttributeValue{"pk": e["pk"], "sk": e["sk"]})
	}
	got := map[string]space.Space{}
	if err := s.batchGetAll(ctx, keys, got); err != nil {
		return nil, err
	}
	observe, err := s.observer(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]space.Space, 0, len(entries))
	for _, e := range entries {
		sk, _ := e["sk"].(*types.AttributeValueMemberS)
		if sk == nil {
			continue
		}
		if sp, ok := got[strings.TrimPrefix(sk.Value, prefixSpace)]; ok && sp.OrgID == org {
			out = append(out, observe(sp))
		}
	}
	return out, nil
}

// batchGetAll reads the spaces of keys into got, by id, batchGetMax a
// request.
func (s *Store) batchGetAll(ctx context.Context, keys []map[string]types.AttributeValue, got map[string]space.Space) error {
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), batchGetMax)]
		keys = keys[len(chunk):]
		if err := s.batchGet(ctx, chunk, got); err != nil {
			return err
		}
	}
	return nil
}

// batchGet reads up to batchGetMax spaces into got, by id.
func (s *Store) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, got map[string]space.Space) error {
	req := map[string]types.KeysAndAttributes{*s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for len(req) > 0 {
		res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return awsError("BatchGetItem", err)
		}
		for _, item := range res.Responses[*s.table] {
			var sp space.Space
			if err := s.decodeSpace(item, &sp); err != nil {
				return err
			}
			got[sp.ID] = sp
		}
		// Unprocessed keys (throttling) are asked again; the SDK's retryer
		// spaces the requests.
		req = res.UnprocessedKeys
	}
	return nil
}
