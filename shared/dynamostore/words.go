package dynamostore

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// Searching names by word prefix (space.NameWords). A registered space has
// one small item per word of its name in its org's search partition
// (pk WORD#<org_id>, sk <word>\x01<name_lc>\x01<id>, keys.go), which the
// writes of the space keep in the same transaction: Register puts them,
// a rename deletes the entries of the old name and puts those of the new
// one (an entry both have stays), Deregister deletes them. Each of those
// transactions is conditional on the space (registered, at the version
// or, for Deregister, the status and name read), so a retried or racing
// write cannot leave an entry for a deregistered space or a former name.
// The entries live in the base table, not an index: a search is a strongly
// consistent Query, so a space is found as soon as it is registered.
//
// A search reads the entries under its driving word (space.DrivingWord)
// with begins_with on the sort key: entries in word order, then name
// order, so a page costs the entries it reads (about 200 bytes each) and
// one BatchGetItem of their spaces, whatever the org's size. A space that
// matches through two words is listed once, at the first of them
// (space.FirstWordWith), which needs no memory of earlier pages. The
// position after a page is the word read under and the last listed
// space's entry (its sort key), which the API seals in its cursor. Provider, type and account (fixed at
// registration, so never rewritten) filter the entries before their spaces
// are read, and so does the folded name in an entry's key: a name that
// lacks one of the search words cannot match. The other search words, the
// name prefix and the caller's Keep then filter the spaces read. So a
// search of several words reads every entry of its longest word until the
// page is full: one whose longest word is common and whose whole is rare
// ("billing-dev-0000" among 5,000 billing spaces) would read those 5,000
// entries, though not their spaces; hence a search of several words first
// reads up to 100 entries of each word and is read under the word with the
// fewest when one has no more than that (fewestEntries), which costs a few
// read units on its first page (its position names the word for the
// next ones). Only a search all of whose words have more than 100 entries
// and whose combination is rare still reads its longest word's entries
// (BenchmarkWordSearch).
//
// The entries are computed from the name by space.NameWords: a change to
// its rules needs a backfill that moves every space's entries, since a
// rename deletes the entries its old name has under the rules of the code
// that runs it.

// wordsVersion is attrWordEntries' value: the entries follow
// space.NameWords as it is.
const wordsVersion = "1"

// wordEntries is sp's search entries by sort key: none once deregistered.
func (s *Store) wordEntries(sp space.Space) map[string]map[string]types.AttributeValue {
	var sks []string
	for _, w := range space.NameWords(sp.Name) {
		sks = append(sks, wordSK(w, sp))
	}
	return indexEntries(sp, wordsPK(sp.OrgID), sks)
}

// indexEntries is a live space's entries in one of its org's index
// partitions (its words, its labels) by sort key: each carries the
// filters a listing applies before reading any space (provider, type,
// account). A deregistered space has none.
func indexEntries(sp space.Space, pk string, sks []string) map[string]map[string]types.AttributeValue {
	if sp.DeletedAt != nil || sp.OrgID == "" {
		return nil
	}
	out := make(map[string]map[string]types.AttributeValue, len(sks))
	for _, sk := range sks {
		out[sk] = map[string]types.AttributeValue{
			"pk": str(pk), "sk": str(sk),
			attrNames[nProv]: str(string(sp.Provider)), attrNames[nType]: str(sp.SpaceType), attrNames[nAccount]: str(sp.CloudAccountID),
		}
	}
	return out
}

// wordMoves is the transaction items that take before's search entries to
// after's: a delete for each entry only before has, a put for each only
// after has (a registration moves from no space, a deregistration to
// none). Deleting an entry that is not there (a space stored before the
// entries, not backfilled yet) is no error.
func (s *Store) wordMoves(before, after space.Space) []types.TransactWriteItem {
	return s.entryMoves(s.wordEntries(before), s.wordEntries(after))
}

// entryMoves is the transaction items that take the entries old to next
// (each by sort key): a delete for each only old has, then a put for each
// only next has.
func (s *Store) entryMoves(old, next map[string]map[string]types.AttributeValue) []types.TransactWriteItem {
	var items []types.TransactWriteItem
	for _, sk := range slices.Sorted(maps.Keys(old)) {
		if _, stays := next[sk]; !stays {
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: s.table,
				Key: map[string]types.AttributeValue{"pk": old[sk]["pk"], "sk": old[sk]["sk"]}}})
		}
	}
	for _, sk := range slices.Sorted(maps.Keys(next)) {
		if _, had := old[sk]; !had {
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: s.table, Item: next[sk]}})
		}
	}
	return items
}

// searchWords is ListSpaces for a word search (q.Search): filter, nm and
// vals are the listing's filters on provider, type and account.
func (s *Store) searchWords(ctx context.Context, org string, q space.Query, filter []string, nm []string,
	vals map[string]types.AttributeValue,
) ([]space.Space, string, error) {
	d, after := space.DrivingWord(q.Search), ""
	if d == "" {
		return nil, "", space.Errorf(space.KindInvalid, "a search needs a word")
	}
	if q.After != "" {
		// The position names the word the search is read under, chosen
		// on its first page, and the entry after which it goes on.
		w, sk, ok := strings.Cut(q.After, posSep)
		if !ok || !slices.Contains(q.Search, w) || !strings.HasPrefix(sk, w) || strings.Count(sk, nameSep) != 2 {
			return nil, "", space.Errorf(space.KindInvalid, "the position does not belong to this search")
		}
		d, after = w, sk
	} else if len(q.Search) > 1 {
		var err error
		if d, err = s.fewestEntries(ctx, org, q.Search); err != nil {
			return nil, "", err
		}
	}
	vals[":wpk"], vals[":word"] = str(wordsPK(org)), str(d)
	in := &dynamodb.QueryInput{
		TableName:                 s.table,
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String(nPK + " = :wpk AND begins_with(" + nSK + ", :word)"),
		ExpressionAttributeNames:  names(append(nm, nPK, nSK)...),
		ExpressionAttributeValues: vals,
	}
	if len(filter) > 0 {
		in.FilterExpression = aws.String(strings.Join(filter, " AND "))
	}
	if after != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{"pk": str(wordsPK(org)), "sk": str(after)}
	}
	out := make([]space.Space, 0, q.Limit+1)
	var at []string // each listed space's entry
	want := func() int { return q.Limit + 1 - len(out) }
	scanned, kept := 0, 0
	for want() > 0 {
		in.Limit = aws.Int32(nextAsk(want(), scanned, kept, MaxLimit))
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", awsError("Query", err)
		}
		scanned += int(page.ScannedCount) - len(page.Items)
		type entry struct{ sk, word, id string }
		entries := make([]entry, 0, len(page.Items))
		var ids []string
		for _, item := range page.Items {
			sk, _ := item["sk"].(*types.AttributeValueMemberS)
			if sk == nil {
				continue
			}
			parts := strings.Split(sk.Value, nameSep)
			if len(parts) != 3 || !containsAll(parts[1], q.Search) {
				// Every word of a name is in its folded name, so a space
				// whose folded name lacks one of the search words cannot
				// match: it is not read.
				scanned++
				continue
			}
			entries = append(entries, entry{sk.Value, parts[0], parts[2]})
			if !slices.Contains(ids, parts[2]) {
				ids = append(ids, parts[2])
			}
		}
		got, err := s.spacesByID(ctx, org, ids)
		if err != nil {
			return nil, "", err
		}
		for _, e := range entries {
			if want() <= 0 {
				break
			}
			scanned++
			sp, ok := got[e.id]
			if !ok || sp.Deleted() || wordSK(e.word, sp) != e.sk {
				continue // gone or renamed since the entry was read
			}
			words := space.NameWords(sp.Name)
			if space.FirstWordWith(words, d) != e.word || !space.MatchesWords(words, q.Search) ||
				!strings.HasPrefix(space.FoldName(sp.Name), q.NamePrefix) || (q.Keep != nil && !q.Keep(sp)) {
				continue
			}
			out, at = append(out, sp), append(at, e.sk)
			kept++
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	if len(out) > q.Limit {
		return out[:q.Limit], d + posSep + at[q.Limit-1], nil
	}
	return out, "", nil
}

// posSep ends the driving word in a search's position: below every
// character a word or a name holds.
const posSep = "\x02"

// probeEntries is how many entries of each word a search of several
// words reads to choose the one to read under.
const probeEntries = 100

// fewestEntries is the search word with the fewest entries, if one has at
// most probeEntries (each word's first probeEntries entries are read,
// eventually consistent: a choice, not an answer), else
// space.DrivingWord's: the search is then read under a word it knows to
// be rare, whatever its length.
func (s *Store) fewestEntries(ctx context.Context, org string, search []string) (string, error) {
	best, fewest := space.DrivingWord(search), probeEntries+1
	for _, w := range search {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 s.table,
			KeyConditionExpression:    aws.String(nPK + " = :wpk AND begins_with(" + nSK + ", :word)"),
			ExpressionAttributeNames:  names(nPK, nSK),
			ExpressionAttributeValues: map[string]types.AttributeValue{":wpk": str(wordsPK(org)), ":word": str(w)},
			Limit:                     aws.Int32(probeEntries),
		})
		if err != nil {
			return "", awsError("Query", err)
		}
		if out.LastEvaluatedKey == nil && len(out.Items) < fewest {
			best, fewest = w, len(out.Items)
		}
	}
	return best, nil
}

// containsAll reports whether each of words is in nameLC.
func containsAll(nameLC string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(nameLC, w) {
			return false
		}
	}
	return true
}

// spacesByID reads org's spaces of ids, strongly consistent, as observed.
func (s *Store) spacesByID(ctx context.Context, org string, ids []string) (map[string]space.Space, error) {
	got := map[string]space.Space{}
	if len(ids) == 0 {
		return got, nil
	}
	keys := make([]map[string]types.AttributeValue, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, itemKey(org, prefixSpace+id))
	}
	if err := s.batchGetAll(ctx, keys, got); err != nil {
		return nil, err
	}
	observe, err := s.observer(ctx)
	if err != nil {
		return nil, err
	}
	for id, sp := range got {
		if sp.OrgID != org {
			delete(got, id)
			continue
		}
		got[id] = observe(sp)
	}
	return got, nil
}
