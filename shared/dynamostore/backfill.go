package dynamostore

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// Backfilling the listing indexes. The sparse GSIs "names", "registered",
// "status", "since", "problems", "env-revisions" and "stopped-revisions" hold only items that
// carry their key attributes, which the writes that added each index put
// on every item they write; "probe-digest" lists a space without its
// digest (pd) by ids only, which the prober then reads every minute. A table that held data before those writes
// existed has spaces and revisions without them: invisible in those
// orders. Backfill writes the missing attributes, computed by the same
// functions the writes use (setNameAttrs, space.DigestOf, revKey,
// stoppedKey), on every
// registered space and every revision that lacks one.
//
// Each write is conditional on the item's version (and, for a space, on
// it being registered still), so a concurrent write is never undone: on a
// lost race the item is read again and done again, or skipped if the
// concurrent write has put the attributes itself (every space and
// revision write does) or deregistered the space (its tombstone must stay
// out of the indexes). Running it twice, or beside the live service, is
// safe; a second run finds nothing to do.
//
// It also counts the spaces stored before the version counters
// (counts.go): a registered space with a known minor and no counted_minor
// gets both, counted_minor and 1 on minor_<minor>, in one transaction
// conditional on its version and on it being uncounted still; a live write
// that changes the minor meanwhile counts it itself (it sees no
// counted_minor) and the backfill's condition fails. Until then such a
// space is counted among the unknown versions.
//
// And it gives a registered space without word_entries its name's search
// entries (words.go) and the marker, in one transaction conditional on its
// version and on it being registered and unmarked still; a rename
// meanwhile moves the version, so the space is read again and given the
// entries of its new name (a rename of an unmarked space puts its new
// name's entries but leaves the marker to the backfill). Until then such
// a space is found by a word search only if renamed since.
//
// Likewise a registered space without label_entries gets its labels'
// entries (labels.go) and the marker; a labels change of an unmarked
// space moves the entries of the labels it changes and leaves the marker
// to the backfill. Until then such a space is listed by a selector read
// under a label it had before the entries only if that label changed
// since (a selector read in another order, or filtered, finds it).
//
// And a registered space without label_order gets its labels' entries in
// problems-first order (labels.go) and the marker, likewise; a
// transition or a labels change of an unmarked space writes them and the
// marker itself. Until then such a space is listed by a selector
// problems first only if it moved since.

// BackfillReport is what one segment of Backfill saw and did.
type BackfillReport struct {
	Scanned   int // items read by the scan (the whole segment)
	Spaces    int // spaces given their name, registration and status keys
	Revisions int // revisions given rev_key (and stopped_key while stopped)
	Counted   int // spaces counted under their Kubernetes minor version
	Words     int // spaces given their name's search entries
	Labels    int // spaces given their labels' entries
	Ordered   int // spaces given their labels' entries in problems-first order
	Retried   int // writes that lost a race and were done again
}

// Add sums reports of several segments.
func (r *BackfillReport) Add(o BackfillReport) {
	r.Scanned, r.Spaces, r.Revisions, r.Retried = r.Scanned+o.Scanned, r.Spaces+o.Spaces, r.Revisions+o.Revisions, r.Retried+o.Retried
	r.Counted += o.Counted
	r.Words += o.Words
	r.Labels += o.Labels
	r.Ordered += o.Ordered
}

// backfillRaces bounds how often one item is done again after losing a
// race to the live service.
const backfillRaces = 5

// Backfill scans segment of totalSegments (a parallel Scan: run every
// segment, at once or one after another) and writes the missing listing
// keys. It reads the whole segment, eventually consistent (half a read
// unit per 4 KB); a missed item is one written meanwhile, which the write
// itself gave its keys.
func (s *Store) Backfill(ctx context.Context, segment, totalSegments int) (BackfillReport, error) {
	var rep BackfillReport
	in := &dynamodb.ScanInput{
		TableName: s.table,
		// Only what lacks a key; the scan still reads (and bills) the rest.
		FilterExpression: aws.String("(begins_with(#sk, :space) AND attribute_not_exists(#del) AND " +
			"(attribute_not_exists(#nkey) OR attribute_not_exists(#rkey) OR attribute_not_exists(#ordst) OR attribute_not_exists(#nlc) OR attribute_not_exists(#since) OR attribute_not_exists(#words) OR attribute_not_exists(#lbe) OR attribute_not_exists(#lord) OR attribute_not_exists(#probk) OR " +
			"(attribute_exists(#shard) AND attribute_not_exists(#pd)) OR attribute_not_exists(#minr))) OR " +
			"(begins_with(#sk, :rev) AND (attribute_not_exists(#revkey) OR (#pstate = :stopped AND attribute_not_exists(#stopkey))))"),
		ExpressionAttributeNames: map[string]string{"#sk": "sk", "#del": "deleted_at", "#nkey": "name_key", "#rkey": "reg_key",
			"#ordst": "status_key", "#nlc": "name_lc", "#shard": "probe_shard", "#pd": "pd", "#revkey": "rev_key", "#pstate": "state", "#stopkey": "stopped_key", "#minr": attrCounted, "#since": "since_key", "#words": attrWordEntries, "#lbe": attrLabelEntries, "#lord": attrLabelOrder, "#probk": "problem_key"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":space": str(prefixSpace), ":rev": str(prefixRevision),
			":stopped": str(string(space.RevisionStopped))},
		Segment: aws.Int32(int32(segment)), TotalSegments: aws.Int32(int32(totalSegments)),
	}
	p := dynamodb.NewScanPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return rep, awsError("Scan", err)
		}
		rep.Scanned += int(page.ScannedCount)
		for _, item := range page.Items {
			if err := s.backfillItem(ctx, item, &rep); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// backfillItem writes one scanned item's missing keys, reading it again
// after a lost race.
func (s *Store) backfillItem(ctx context.Context, item map[string]types.AttributeValue, rep *BackfillReport) error {
	key := map[string]types.AttributeValue{"pk": item["pk"], "sk": item["sk"]}
	for race := 0; ; race++ {
		done, err := s.backfillOnce(ctx, key, item, rep)
		if err == nil || !done {
			return err
		}
		if race == backfillRaces {
			return unavailable("the backfill kept losing races on one item; run it again", err)
		}
		rep.Retried++
		if item, err = s.getItem(ctx, key); err != nil {
			return err
		}
		if item == nil {
			return nil
		}
	}
}

// backfillOnce writes item's keys if it still lacks them; raced reports a
// lost condition (the item changed since it was read).
func (s *Store) backfillOnce(ctx context.Context, key, item map[string]types.AttributeValue, rep *BackfillReport) (raced bool, err error) {
	sk, _ := item["sk"].(*types.AttributeValueMemberS)
	if sk == nil {
		return false, nil
	}
	var (
		set      map[string]types.AttributeValue
		cond     = "#ver = :prev"
		names    = map[string]string{"#ver": "version"}
		count    *int
		revision = strings.HasPrefix(sk.Value, prefixRevision)
	)
	if revision {
		var r space.Revision
		if err := s.decode(item, &r); err != nil {
			return false, err
		}
		set = map[string]types.AttributeValue{"rev_key": str(revKey(r))}
		if r.State == space.RevisionStopped {
			set["stopped_key"] = str(stoppedKey(r))
		}
		count = &rep.Revisions
	} else {
		var sp space.Space
		if err := s.decodeSpace(item, &sp); err != nil {
			return false, err
		}
		if sp.Deleted() {
			return false, nil // a tombstone stays out of the listings
		}
		if m := sp.MinorVersion(); m != "" && countedMinor(item) == "" {
			// Counted under its minor: the marker and the counter at once.
			if raced, err := s.backfillMarked(ctx, key, item, nCounted, str(m), s.countDelta(sp.OrgID, sp.ID, minorMove("", m))); err != nil {
				return raced, err
			}
			rep.Counted++
		}
		if _, marked := item[attrWordEntries]; !marked {
			// A rename meanwhile wrote its own entries.
			if raced, err := s.backfillMarked(ctx, key, item, nWords, str(wordsVersion), s.wordMoves(space.Space{}, sp)...); err != nil {
				return raced, err
			}
			rep.Words++
		}
		if _, marked := item[attrLabelEntries]; !marked {
			// A labels change meanwhile moves the version.
			if raced, err := s.backfillMarked(ctx, key, item, nLabelsMk, str(labelsDigest(sp.Labels)), s.labelMoves(space.Space{}, sp)...); err != nil {
				return raced, err
			}
			rep.Labels++
		}
		if _, marked := item[attrLabelOrder]; !marked {
			// A transition or a labels change meanwhile wrote its own.
			if raced, err := s.backfillMarked(ctx, key, item, nLabelOrd, str(labelOrderVersion), s.orderMoves(space.Space{}, sp, false)...); err != nil {
				return raced, err
			}
			rep.Ordered++
		}
		set = map[string]types.AttributeValue{}
		setNameAttrs(set, sp)
		if !sp.Synthetic {
			set["pd"] = str(space.DigestOf(sp).String())
		}
		cond += " AND attribute_not_exists(#del)"
		names["#del"] = "deleted_at"
		count = &rep.Spaces
	}
	missing := false
	expr := "SET "
	values := map[string]types.AttributeValue{":prev": item["version"]}
	i := 0
	for attr, v := range set {
		if _, has := item[attr]; has {
			continue
		}
		missing = true
		if i > 0 {
			expr += ", "
		}
		ph, vh := "#b"+string(rune('a'+i)), ":b"+string(rune('a'+i))
		expr += ph + " = " + vh
		names[ph], values[vh] = attr, v
		i++
	}
	if !missing {
		return false, nil
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: key, UpdateExpression: aws.String(expr),
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true, err
	}
	if err != nil {
		return false, awsError("UpdateItem backfill", err)
	}
	*count++
	return false, nil
}

// backfillMarked writes what a space stored before some entries or
// counters lacks (items) with its marker (the attribute name placeholder n
// set to v), in one transaction, only if the space is at the version
// read, registered and unmarked still; raced says it was not, and the
// space should be read again.
func (s *Store) backfillMarked(ctx context.Context, key, item map[string]types.AttributeValue, n string, v types.AttributeValue, items ...types.TransactWriteItem) (raced bool, err error) {
	items = append([]types.TransactWriteItem{{Update: &types.Update{TableName: s.table, Key: key,
		UpdateExpression:          aws.String("SET " + n + " = :mark"),
		ConditionExpression:       aws.String(nVersion + " = :prev AND attribute_not_exists(" + nDeleted + ") AND attribute_not_exists(" + n + ")"),
		ExpressionAttributeNames:  names(n, nVersion, nDeleted),
		ExpressionAttributeValues: map[string]types.AttributeValue{":mark": v, ":prev": item["version"]},
	}}}, items...)
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if reasons, ok := canceled(err); ok && (failedCheck(reasons, 0) || conflicted(reasons)) {
		return true, err
	}
	if err != nil {
		return false, awsError("TransactWriteItems backfill", err)
	}
	return false, nil
}
