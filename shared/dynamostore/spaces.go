package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// idemRecord is the stored form of a space.Idempotency.
type idemRecord struct {
	Key       string      `json:"key"`
	Hash      string      `json:"hash"`
	Space     space.Space `json:"space"`
	ExpiresAt int64       `json:"expires_at"`
}

// claimRecord is the stored form of an identity claim.
type claimRecord struct {
	SpaceID string `json:"space_id"`
}

// spaceItem is the item of a space. probe_shard is set only on registered,
// non-synthetic spaces, which is what makes the probe index sparse.
func (s *Store) spaceItem(sp space.Space) (map[string]types.AttributeValue, error) {
	item, err := s.encode(sp)
	if err != nil {
		return nil, err
	}
	item["pk"] = str(orgPK(sp.OrgID))
	item["sk"] = str(prefixSpace + sp.ID)
	if !sp.Synthetic && sp.DeletedAt == nil {
		item["probe_shard"] = str(probeShardOf(sp))
		item["pd"] = str(space.DigestOf(sp).String())
	}
	if sp.DeletedAt == nil {
		setNameAttrs(item, sp)
		item[attrWordEntries] = str(wordsVersion)             // written by Register (words.go)
		item[attrLabelEntries] = str(labelsDigest(sp.Labels)) // and these (labels.go)
		item[attrLabelOrder] = str(labelOrderVersion)         // and these in problems-first order
		if m := sp.MinorVersion(); m != "" {
			item[attrCounted] = str(m) // counted so by Register (counts.go)
		}
	}
	return item, nil
}

// Register stores sp, claims its identity in the org and counts it against
// its cloud account in one transaction (see space.Store).
func (s *Store) Register(ctx context.Context, sp space.Space, idem space.Idempotency) error {
	if err := checkRegistration(sp, idem); err != nil {
		return err
	}
	put, err := s.registerSpace(sp)
	if err != nil {
		return err
	}
	stampItem(ctx, put.Put.Item)
	items := []types.TransactWriteItem{
		regSpace:    put,
		regClaim:    s.registerClaim(sp),
		regAccount:  s.registerOnAccount(sp),
		regJobClaim: s.registerNoJobClaim(sp),
	}
	if idem.Key != "" {
		rec, err := s.registerIdempotency(sp.OrgID, idem)
		if err != nil {
			return err
		}
		items = append(items, rec) // regIdem
	}
	// The kubeauth grant goes last so that the indexes above stay fixed;
	// registering and granting are one fact (see grants.go).
	grant, err := s.grantItem(sp)
	if err != nil {
		return err
	}
	items = append(items, grant, s.countSpace(sp, "1", sp.MinorVersion()))
	// The name's search entries (words.go), last: at most
	// space.MaxNameWords puts.
	items = append(items, s.wordMoves(space.Space{}, sp)...)
	// And its labels' entries (labels.go): at most space.MaxLabels puts,
	// which with the above stays within a transaction's 100 items.
	items = append(items, s.labelMoves(space.Space{}, sp)...)
	// And in problems-first order: at most maxOrderedLabels puts, or one
	// (labels.go says why that fits).
	items = append(items, s.orderMoves(space.Space{}, sp, true)...)
	return s.transact(ctx, "register", func() ([]types.TransactWriteItem, error) { return items, nil },
		func(reasons []types.CancellationReason) error { return s.registerRefused(ctx, sp, idem, reasons) })
}

// A registration's transaction items by index, which its cancellation
// reasons share; regIdem is there only with an Idempotency-Key.
const (
	regSpace = iota
	regClaim
	regAccount
	regJobClaim
	regIdem
)

// itemAbsent is the condition on an item that must not exist yet.
const itemAbsent = "attribute_not_exists(" + nPK + ")"

// checkRegistration refuses what no transaction should be tried for.
func checkRegistration(sp space.Space, idem space.Idempotency) error {
	if sp.DeletedAt != nil {
		return internal("register", errors.New("the space is already deregistered"))
	}
	if len(idem.Key) > maxKeyLen {
		return &space.Error{Kind: space.KindInvalid, Message: "the Idempotency-Key is not valid",
			Fields: []space.FieldError{{Field: "Idempotency-Key", Reason: fmt.Sprintf("must be at most %d characters", maxKeyLen)}}}
	}
	return nil
}

// registerSpace puts the space, under an id not taken yet.
func (s *Store) registerSpace(sp space.Space) (types.TransactWriteItem, error) {
	item, err := s.spaceItem(sp)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: s.table, Item: item,
		ConditionExpression: aws.String(itemAbsent), ExpressionAttributeNames: names(nPK),
	}}, nil
}

// registerClaim claims the cluster's identity in the org, only if no space
// holds it; a refusal returns the holder.
func (s *Store) registerClaim(sp space.Space) types.TransactWriteItem {
	claim := itemKey(sp.OrgID, prefixClaim+sp.Identity())
	claim["space_id"] = str(sp.ID)
	return types.TransactWriteItem{Put: &types.Put{
		TableName: s.table, Item: claim,
		ConditionExpression: aws.String(itemAbsent), ExpressionAttributeNames: names(nPK),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// registerOnAccount counts the space against its cloud account, which must
// be a live one of the space's provider. The count is what lets
// DeleteAccount refuse an account in use; the account's own version is left
// alone (counting is not an edit).
func (s *Store) registerOnAccount(sp space.Space) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: s.table, Key: itemKey(sp.OrgID, prefixAccount+sp.CloudAccountID),
		UpdateExpression:         aws.String("ADD " + nCount + " :one"),
		ConditionExpression:      aws.String("attribute_exists(" + nPK + ") AND attribute_not_exists(" + nDeleted + ") AND " + nProv + " = :prov"),
		ExpressionAttributeNames: names(nPK, nCount, nDeleted, nProv),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": num(1), ":prov": str(string(sp.Provider)),
		},
	}}
}

// registerNoJobClaim checks that no provisioning job claims the identity.
// One claim rule for every path that takes a cluster: a live (or failed,
// retryable) provisioning job's claim keeps every registration out,
// synthetic ones too, but the job's own.
func (s *Store) registerNoJobClaim(sp space.Space) types.TransactWriteItem {
	c := &types.ConditionCheck{
		TableName: s.table, Key: itemKey(sp.OrgID, prefixJobClaim+sp.Identity()),
		ConditionExpression: aws.String(itemAbsent), ExpressionAttributeNames: names(nPK),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if sp.JobID != "" {
		c.ConditionExpression = aws.String(itemAbsent + " OR " + nJobID + " = :job")
		c.ExpressionAttributeNames = names(nPK, nJobID)
		c.ExpressionAttributeValues = map[string]types.AttributeValue{":job": str(sp.JobID)}
	}
	return types.TransactWriteItem{ConditionCheck: c}
}

// registerIdempotency puts the Idempotency-Key's record, only if absent or
// expired: an expired record may linger until DynamoDB's TTL sweep removes
// it, and no longer holds the key.
func (s *Store) registerIdempotency(org string, idem space.Idempotency) (types.TransactWriteItem, error) {
	rec, err := s.encode(idemRecord{Key: idem.Key, Hash: idem.Hash, Space: idem.Space,
		ExpiresAt: s.now().Add(IdempotencyTTL).Unix()})
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	for k, v := range itemKey(org, prefixIdem+idem.Key) {
		rec[k] = v
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: s.table, Item: rec,
		ConditionExpression:                 aws.String(itemAbsent + " OR " + nExpires + " < :now"),
		ExpressionAttributeNames:            names(nPK, nExpires),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(s.now().Unix())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}, nil
}

// registerRefused says why a registration's transaction was canceled, the
// Idempotency-Key first; errRetry when what refused it is gone meanwhile,
// nil when no condition failed.
func (s *Store) registerRefused(ctx context.Context, sp space.Space, idem space.Idempotency, reasons []types.CancellationReason) error {
	switch {
	case idem.Key != "" && failedCheck(reasons, regIdem):
		// A replay answers with the first result even though the claim
		// (held by that first registration) failed too.
		rec, found, err := s.idempotencyRecord(ctx, sp.OrgID, idem.Key, reasons[regIdem].Item)
		if err != nil {
			return err
		}
		if found {
			return &space.ReplayError{Record: space.Idempotency{Key: rec.Key, Hash: rec.Hash, Space: rec.Space}}
		}
		return errRetry // the record expired or vanished meanwhile
	case failedCheck(reasons, regAccount):
		return &space.Error{Kind: space.KindInvalid, Message: "the space is not valid", Fields: []space.FieldError{{
			Field: "cloud_account_id", Reason: fmt.Sprintf("no %s cloud account with this id in the org", sp.Provider),
		}}}
	case failedCheck(reasons, regJobClaim):
		job, err := s.jobClaimHolder(ctx, sp.OrgID, sp.Identity(), reasons[regJobClaim].Item)
		if err != nil {
			return err
		}
		if job == "" {
			return errRetry // released meanwhile
		}
		return jobClaimConflict(job)
	case failedCheck(reasons, regClaim):
		holder, err := s.claimHolder(ctx, sp.OrgID, sp.Identity(), reasons[regClaim].Item)
		if err != nil {
			return err
		}
		if holder != "" {
			return &space.Error{Kind: space.KindConflict, ExistingID: holder,
				Message: "this cluster is already registered in the org as space " + holder}
		}
		return errRetry // deregistered meanwhile: the identity is free again
	case failedCheck(reasons, regSpace):
		return internal("register", fmt.Errorf("space id %s is already taken", sp.ID))
	}
	return nil
}

// idempotencyRecord returns the unexpired record of key, from a cancellation
// reason's item when DynamoDB returned it, else read consistently.
func (s *Store) idempotencyRecord(ctx context.Context, org, key string, item map[string]types.AttributeValue) (idemRecord, bool, error) {
	if item == nil {
		var err error
		if item, err = s.getItem(ctx, itemKey(org, prefixIdem+key)); err != nil {
			return idemRecord{}, false, err
		}
	}
	if item == nil {
		return idemRecord{}, false, nil
	}
	var rec idemRecord
	if err := s.decode(item, &rec); err != nil {
		return idemRecord{}, false, err
	}
	return rec, rec.ExpiresAt >= s.now().Unix(), nil
}

// claimHolder returns the id of the space holding identity ("" if none).
func (s *Store) claimHolder(ctx context.Context, org, identity string, item map[string]types.AttributeValue) (string, error) {
	if item == nil {
		var err error
		if item, err = s.getItem(ctx, itemKey(org, prefixClaim+identity)); err != nil {
			return "", err
		}
	}
	if item == nil {
		return "", nil
	}
	var c claimRecord
	if err := s.decode(item, &c); err != nil {
		return "", err
	}
	return c.SpaceID, nil
}

// GetSpace returns a live space of org as readers see it: its last probe
// raised to its shard's beat (fence.go).
func (s *Store) GetSpace(ctx context.Context, org, id string) (space.Space, error) {
	sp, err := s.LiveSpace(ctx, org, id)
	if err != nil {
		return sp, err
	}
	observe, err := s.observer(ctx)
	if err != nil {
		return space.Space{}, err
	}
	return observe(sp), nil
}

// LiveSpace returns a live space of org as stored, read strongly
// consistent: the liveness check of a probe that reads its space, and the
// read of a versioned update (nothing a reader is shown is written back).
func (s *Store) LiveSpace(ctx context.Context, org, id string) (space.Space, error) {
	sp, found, err := s.readSpace(ctx, org, id)
	if err != nil {
		return space.Space{}, err
	}
	if !found {
		return space.Space{}, space.ErrNotFound("space")
	}
	if sp.Deleted() {
		return space.Space{}, space.ErrDeregistered(sp)
	}
	return sp, nil
}

// readSpace reads a space item, deleted or not, strongly consistent.
func (s *Store) readSpace(ctx context.Context, org, id string) (space.Space, bool, error) {
	item, err := s.getItem(ctx, itemKey(org, prefixSpace+id))
	if err != nil || item == nil {
		return space.Space{}, false, err
	}
	var sp space.Space
	if err := s.decodeSpace(item, &sp); err != nil {
		return space.Space{}, false, err
	}
	return sp, true, nil
}

// ListSpaces returns org's live spaces matching q, ordered by id, and the id
// to continue after when more may follow.
func (s *Store) ListSpaces(ctx context.Context, org string, q space.Query) ([]space.Space, string, error) {
	if err := checkLimit(q.Limit); err != nil {
		return nil, "", err
	}
	filter := []string{"attribute_not_exists(" + nDeleted + ")"}
	nm := []string{nDeleted}
	vals := map[string]types.AttributeValue{}
	eq := func(placeholder, value string) {
		if value == "" {
			return
		}
		v := ":" + placeholder[1:]
		filter = append(filter, placeholder+" = "+v)
		nm = append(nm, placeholder)
		vals[v] = str(value)
	}
	eq(nProv, string(q.Provider))
	eq(nType, q.SpaceType)
	eq(nAccount, q.CloudAccountID)
	if len(q.Search) > 0 {
		// A word search has its own order: the word matched, then name.
		return s.searchWords(ctx, org, q, filter[1:], nm[1:], vals)
	}
	if q.Sort == "" && !q.Selector.Empty() {
		// In id order, a selector is read under its requirements when it
		// can be (labels.go).
		out, next, ok, err := s.listByLabel(ctx, org, q, filter[1:], nm[1:], vals)
		if ok || err != nil {
			return out, next, err
		}
	}
	if q.Sort == space.SortProblems && !q.Selector.Empty() {
		// Problems first, likewise, under its entries in that order
		// (labels.go).
		out, next, ok, err := s.listByProblems(ctx, org, q, slices.Clone(filter[1:]), slices.Clone(nm[1:]), maps.Clone(vals))
		if ok || err != nil {
			return out, next, err
		}
	}
	if si, ok := sortIndexes[q.Sort.Base()]; ok && !q.Selector.Empty() {
		// In another order, a selector that takes few spaces sorts them
		// itself (labels.go).
		out, next, ok, err := s.sortFew(ctx, org, si, q, slices.Clone(filter[1:]), slices.Clone(nm[1:]), maps.Clone(vals))
		if ok || err != nil {
			return out, next, err
		}
	}
	nameFilters(q, &filter, &nm, vals)
	if si, ok := sortIndexes[q.Sort.Base()]; ok {
		// The names and registered indexes hold only live spaces.
		return s.listByIndex(ctx, org, si, q, filter[1:], nm[1:], vals)
	}

	observe, err := s.observer(ctx)
	if err != nil {
		return nil, "", err
	}
	out := make([]space.Space, 0, q.Limit+1)
	err = s.queryOrg(ctx, org, prefixSpace, q.After, strings.Join(filter, " AND "), nm, vals,
		func() int { return q.Limit + 1 - len(out) },
		func(item map[string]types.AttributeValue) error {
			var sp space.Space
			if err := s.decodeSpace(item, &sp); err != nil {
				return err
			}
			sp = observe(sp)
			if sp.ID <= q.After || (q.Keep != nil && !q.Keep(sp)) {
				return nil
			}
			out = append(out, sp)
			return nil
		})
	if err != nil {
		return nil, "", err
	}
	if len(out) > q.Limit {
		out = out[:q.Limit]
		return out, out[len(out)-1].ID, nil
	}
	return out, "", nil
}

// queryOrg reads the items of org whose sort key starts with prefix, in
// order, after the item prefix+after, handing each to add until want()
// reaches 0 or the partition ends. DynamoDB's Limit counts the items read
// before the filter.
func (s *Store) queryOrg(ctx context.Context, org, prefix, after, filter string, filterNames []string,
	vals map[string]types.AttributeValue, want func() int, add func(map[string]types.AttributeValue) error,
) error {
	values := map[string]types.AttributeValue{":pk": str(orgPK(org)), ":prefix": str(prefix)}
	for k, v := range vals {
		values[k] = v
	}
	in := &dynamodb.QueryInput{
		TableName:                 s.table,
		KeyConditionExpression:    aws.String(nPK + " = :pk AND begins_with(" + nSK + ", :prefix)"),
		ExpressionAttributeNames:  names(append([]string{nPK, nSK}, filterNames...)...),
		ExpressionAttributeValues: values,
	}
	if filter != "" {
		in.FilterExpression = aws.String(filter)
	}
	if after != "" {
		// DynamoDB starts after this key whether or not an item has it (and
		// so does the patched emulator; the callers' id > after check keeps
		// the answer right on an emulator that restarts instead).
		in.ExclusiveStartKey = itemKey(org, prefix+after)
	}
	scanned, kept := 0, 0
	for {
		n := want()
		if n <= 0 {
			return nil
		}
		in.Limit = aws.Int32(nextAsk(n, scanned, kept, MaxLimit))
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return awsError("Query", err)
		}
		scanned += int(page.ScannedCount)
		for _, item := range page.Items {
			before := want()
			if before <= 0 {
				return nil
			}
			if err := add(item); err != nil {
				return err
			}
			if want() < before {
				kept++
			}
		}
		if page.LastEvaluatedKey == nil {
			return nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// UpdateSpace changes a live space (see space.Update): its mutable fields
// (name, labels, status, probe, updated_at, version) are written only if the
// stored version is the one read and the space is not deregistered, together
// with the status transition, if the change makes one, in its history and on
// the fleet counters. Identity,
// account, type and the synthetic flag are fixed at registration, so the
// claim, the account count and the probe shard stay as they were.
func (s *Store) UpdateSpace(ctx context.Context, org, id string, u space.Update[space.Space]) (space.Updated[space.Space], error) {
	// The minor the stored item is counted under, as last read here; a
	// caller's own read (u.Read, the prober's) is taken to be counted under
	// its current minor, as every write since the version counters leaves
	// it, and a write that finds otherwise loses its condition and reads.
	// Likewise whether its label entries are written (labels.go); a
	// caller's own read is taken to be unmarked, so that a labels change
	// puts every entry.
	var counted *string
	marked := entryMarks{}
	return space.Run(ctx, space.SpaceVersioned, u,
		func(ctx context.Context) (space.Space, error) {
			sp, c, m, err := s.liveSpaceRead(ctx, org, id)
			counted, marked = &c, m
			return sp, err
		},
		func(ctx context.Context, before, after space.Space) error {
			c := before.MinorVersion()
			if counted != nil {
				c = *counted
			}
			return s.writeSpace(ctx, before, after, c, marked)
		})
}

// liveSpaceCounted is LiveSpace and the minor the item is counted under.
func (s *Store) liveSpaceCounted(ctx context.Context, org, id string) (space.Space, string, error) {
	sp, counted, _, err := s.liveSpaceRead(ctx, org, id)
	return sp, counted, err
}

// entryMarks is which of a space's label entries are known to be written
// (labels.go): in id order (attrLabelEntries), in problems-first order
// (attrLabelOrder).
type entryMarks struct{ labels, order bool }

// liveSpaceRead is liveSpaceCounted and which of the item's label entries
// are written.
func (s *Store) liveSpaceRead(ctx context.Context, org, id string) (space.Space, string, entryMarks, error) {
	item, err := s.getItem(ctx, itemKey(org, prefixSpace+id))
	if err != nil {
		return space.Space{}, "", entryMarks{}, err
	}
	if item == nil {
		return space.Space{}, "", entryMarks{}, space.ErrNotFound("space")
	}
	var sp space.Space
	if err := s.decodeSpace(item, &sp); err != nil {
		return space.Space{}, "", entryMarks{}, err
	}
	if sp.Deleted() {
		return space.Space{}, "", entryMarks{}, space.ErrDeregistered(sp)
	}
	var m entryMarks
	_, m.labels = item[attrLabelEntries]
	_, m.order = item[attrLabelOrder]
	return sp, countedMinor(item), m, nil
}

// writeSpace is UpdateSpace's conditional write; counted is the minor the
// stored item is counted under (counts.go), marked which of its label
// entries are written (labels.go).
func (s *Store) writeSpace(ctx context.Context, before, after space.Space, counted string, marked entryMarks) error {
	if after.DeletedAt != nil {
		return internal("update space", errors.New("a deregistration must go through Deregister"))
	}
	probe, err := s.enc.Encode(after.Probe)
	if err != nil {
		return internal("encode probe", err)
	}
	upd := &types.Update{
		TableName: s.table,
		Key:       itemKey(after.OrgID, prefixSpace+after.ID),
		UpdateExpression: aws.String("SET " + nName + " = :name, " + nStatus + " = :status, " + nProbe + " = :probe, " +
			nUpdated + " = :upd, " + nVersion + " = :ver"),
		ConditionExpression:      aws.String("attribute_exists(" + nPK + ") AND attribute_not_exists(" + nDeleted + ") AND " + nVersion + " = :prev"),
		ExpressionAttributeNames: names(nName, nStatus, nProbe, nUpdated, nVersion, nPK, nDeleted),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":name": str(after.Name), ":status": str(string(after.Status)), ":probe": probe,
			":upd": str(after.UpdatedAt.UTC().Format(time.RFC3339Nano)), ":ver": num(after.Version), ":prev": num(before.Version),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if !after.Synthetic {
		// The probe index's digest follows every write (its version does).
		*upd.UpdateExpression += ", " + nDigest + " = :pd"
		upd.ExpressionAttributeNames[nDigest] = attrNames[nDigest]
		upd.ExpressionAttributeValues[":pd"] = str(space.DigestOf(after).String())
	}
	if after.Name != before.Name {
		// Only a rename moves the space in the names index (names.go).
		*upd.UpdateExpression += ", " + nNameLC + " = :nlc, " + nNameKey + " = :nkey"
		upd.ExpressionAttributeNames[nNameLC], upd.ExpressionAttributeNames[nNameKey] = attrNames[nNameLC], attrNames[nNameKey]
		upd.ExpressionAttributeValues[":nlc"] = str(space.FoldName(after.Name))
		upd.ExpressionAttributeValues[":nkey"] = str(nameKey(after))
	}
	// A rename moves its search entries (words.go) in the transaction
	// below, conditional on this update. It leaves the marker as it is:
	// a space stored before the entries has none of its old name's to
	// delete, and keeps to the backfill, which puts every entry of the
	// name it then has.
	words := s.wordMoves(before, after)
	// A labels change moves its labels' entries likewise (labels.go);
	// an unmarked space has none yet, so it is given every entry of its
	// new labels.
	var labels []types.TransactWriteItem
	if !maps.Equal(after.Labels, before.Labels) {
		from := before
		if !marked.labels {
			from = space.Space{}
		}
		labels = s.labelMoves(from, after)
	}
	// A labels change or a transition moves its entries in problems-first
	// order (labels.go), which are then written: the marker says so.
	orderMoved := !maps.Equal(after.Labels, before.Labels) || problemKey(after) != problemKey(before)
	if orderMoved {
		labels = append(labels, s.orderMoves(before, after, marked.order)...)
	}
	if after.Name != before.Name || after.Status != before.Status {
		// A rename or a status change moves it in the status index; a
		// heartbeat leaves it.
		*upd.UpdateExpression += ", " + nStatusKey + " = :skey"
		upd.ExpressionAttributeNames[nStatusKey] = attrNames[nStatusKey]
		upd.ExpressionAttributeValues[":skey"] = str(statusKey(after))
	}
	set, remove := stampUpdate(ctx, upd.ExpressionAttributeNames, upd.ExpressionAttributeValues)
	if k := sinceKey(after); k != sinceKey(before) {
		// Only a transition moves it in the since index.
		*upd.UpdateExpression += ", " + nSinceKey + " = :sincek"
		upd.ExpressionAttributeNames[nSinceKey] = attrNames[nSinceKey]
		upd.ExpressionAttributeValues[":sincek"] = str(k)
	}
	if k := problemKey(after); k != problemKey(before) {
		// Only a transition moves it in the problems index.
		*upd.UpdateExpression += ", " + nProbKey + " = :probk"
		upd.ExpressionAttributeNames[nProbKey] = attrNames[nProbKey]
		upd.ExpressionAttributeValues[":probk"] = str(k)
	}
	if orderMoved {
		*upd.UpdateExpression += ", " + nLabelOrd + " = :lord"
		upd.ExpressionAttributeNames[nLabelOrd] = attrNames[nLabelOrd]
		upd.ExpressionAttributeValues[":lord"] = str(labelOrderVersion)
	}
	setNotices := !after.Notices.Equal(before.Notices) && !after.Notices.IsZero()
	if setNotices {
		// Only an announcement (or a reset) writes the notices.
		nv, err := s.enc.Encode(after.Notices)
		if err != nil {
			return internal("encode notices", err)
		}
		*upd.UpdateExpression += ", " + nNotices + " = :nt"
		upd.ExpressionAttributeNames[nNotices] = attrNames[nNotices]
		upd.ExpressionAttributeValues[":nt"] = nv
	}
	if !maps.Equal(after.Labels, before.Labels) {
		// Only a labels change writes them; no labels is no attribute,
		// as Register stores it (omitempty).
		upd.ExpressionAttributeNames[nLabels] = attrNames[nLabels]
		if len(after.Labels) == 0 {
			remove = append(remove, nLabels)
		} else {
			lv, err := s.enc.Encode(after.Labels)
			if err != nil {
				return internal("encode labels", err)
			}
			set = append(set, nLabels+" = :lbl")
			upd.ExpressionAttributeValues[":lbl"] = lv
		}
		// The marker names the labels whose entries are written.
		set = append(set, nLabelsMk+" = :lbmk")
		upd.ExpressionAttributeNames[nLabelsMk] = attrNames[nLabelsMk]
		upd.ExpressionAttributeValues[":lbmk"] = str(labelsDigest(after.Labels))
	}
	// A new minor moves the version counters from the counted one, in a
	// transaction whose condition is that the item is counted as read.
	var minor [][2]string
	if to, moved := space.VersionMove(counted, after); moved {
		minor = minorMove(counted, to)
		if counted == "" {
			*upd.ConditionExpression += " AND attribute_not_exists(" + nCounted + ")"
		} else {
			*upd.ConditionExpression += " AND " + nCounted + " = :mino"
			upd.ExpressionAttributeValues[":mino"] = str(counted)
		}
		upd.ExpressionAttributeNames[nCounted] = attrNames[nCounted]
		if to == "" {
			remove = append(remove, nCounted)
		} else {
			*upd.UpdateExpression += ", " + nCounted + " = :minn"
			upd.ExpressionAttributeValues[":minn"] = str(to)
		}
	}
	if !after.Notices.Equal(before.Notices) && !setNotices {
		// Every marker reset: no attribute, as before any announcement.
		upd.ExpressionAttributeNames[nNotices] = attrNames[nNotices]
		remove = append(remove, nNotices)
	}
	for _, t := range set {
		*upd.UpdateExpression += ", " + t
	}
	if len(remove) > 0 {
		*upd.UpdateExpression += " REMOVE " + strings.Join(remove, ", ")
	}
	tr := space.TransitionOf(before, after)
	if tr == nil && minor == nil && len(words) == 0 && len(labels) == 0 {
		// The common case (a heartbeat, a failure count): a plain UpdateItem,
		// half the write units of a transaction.
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: upd.TableName, Key: upd.Key, UpdateExpression: upd.UpdateExpression,
			ConditionExpression: upd.ConditionExpression, ExpressionAttributeNames: upd.ExpressionAttributeNames,
			ExpressionAttributeValues: upd.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: upd.ReturnValuesOnConditionCheckFailure,
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ccf):
			return s.whyNotWritable(ctx, after.OrgID, after.ID, before.Version, ccf.Item)
		default:
			return awsError("UpdateItem", err)
		}
	}
	// A status change: the space and its history item in one transaction,
	// so that the history holds exactly the transitions that were stored.
	// The fleet counts move with the status and the minor, in the same
	// transaction.
	items := []types.TransactWriteItem{{Update: upd}}
	if tr != nil {
		hist, err := s.historyPut(*tr)
		if err != nil {
			return err
		}
		items = append(items, hist)
	}
	if tr != nil || minor != nil {
		items = append(items, s.countTransition(after, tr, minor))
	}
	items = append(items, words...)
	if len(items)+len(labels) > maxTransactItems {
		// More entries than the transaction holds: the new ones first.
		if labels, err = s.prePutLabels(ctx, after, before.Version, labels, maxTransactItems-len(items)); err != nil {
			return err
		}
	}
	items = append(items, labels...)
	return s.transact(ctx, "update space", func() ([]types.TransactWriteItem, error) { return items, nil },
		func(reasons []types.CancellationReason) error {
			switch {
			case failedCheck(reasons, 0):
				return s.whyNotCounted(ctx, after, before.Version, counted, reasons[0].Item)
			case tr != nil && failedCheck(reasons, 1):
				return internal("update space", fmt.Errorf("space %s already has a transition at %s", after.ID, HistoryKey(*tr)))
			}
			return nil
		})
}

// whyNotCounted is whyNotWritable for a write that also required the item
// to be counted under counted: at the version read but counted otherwise
// (a backfill meanwhile, or a caller's read taken as counted), it is
// KindPreconditionFailed too, so that space.Run reads it again.
func (s *Store) whyNotCounted(ctx context.Context, after space.Space, want int64, counted string, item map[string]types.AttributeValue) error {
	if item == nil {
		var err error
		if item, err = s.getItem(ctx, itemKey(after.OrgID, prefixSpace+after.ID)); err != nil {
			return err
		}
	}
	if item != nil && countedMinor(item) != counted {
		var sp space.Space
		if err := s.decode(item, &sp); err != nil {
			return err
		}
		if !sp.Deleted() && sp.Version == want {
			return space.Errorf(space.KindPreconditionFailed, "the space is counted under another version than read")
		}
	}
	return s.whyNotWritable(ctx, after.OrgID, after.ID, want, item)
}

// whyNotWritable tells why a conditional write on a space failed: it is gone
// (KindNotFound) or at another version (KindPreconditionFailed). item is the
// old item when DynamoDB returned it.
func (s *Store) whyNotWritable(ctx context.Context, org, id string, want int64, item map[string]types.AttributeValue) error {
	var sp space.Space
	if item == nil {
		var found bool
		var err error
		if sp, found, err = s.readSpace(ctx, org, id); err != nil {
			return err
		}
		if !found {
			return space.ErrNotFound("space")
		}
	} else if err := s.decodeSpace(item, &sp); err != nil {
		return err
	}
	if sp.Deleted() {
		return space.ErrNotFound("space")
	}
	if sp.Version != want {
		return space.ErrChanged("space", sp.Version, want)
	}
	return internal("conditional write", fmt.Errorf("space %s at version %d failed its condition", id, want))
}

// Deregister marks the space deleted, deletes its identity claim and
// releases its account count and grant in one transaction, if the space is at
// version (0: any); see space.Store. It returns the space as deregistered
// (without a version, a write that raced it may have moved the version one
// further than shown).
func (s *Store) Deregister(ctx context.Context, org, id string, version int64, at time.Time, by string) (space.Space, error) {
	at = at.UTC()
	run := func() (space.Updated[space.Space], error) {
		var counted string
		return space.Run(ctx, space.SpaceVersioned, space.Update[space.Space]{IfVersion: version, At: at,
			Apply: func(sp space.Space) (space.Space, error) { sp.DeletedAt, sp.DeletedBy = &at, by; return sp, nil }},
			func(ctx context.Context) (sp space.Space, err error) {
				sp, counted, err = s.liveSpaceCounted(ctx, org, id)
				return sp, err
			},
			func(ctx context.Context, before, after space.Space) error {
				return s.writeDeregistration(ctx, before, after, counted, version != 0)
			})
	}
	res, err := run()
	// Unpinned, only a status change (a transition, which its counters
	// must see) can fail the write: each lost race is one more transition,
	// and a probe result must not hold a deregistration up, so it keeps
	// reading again beyond Run's own attempts.
	for i := 1; i < deregisterRuns && version == 0 && space.KindOf(err) == space.KindPreconditionFailed; i++ {
		res, err = run()
	}
	return res.After, err
}

// deregisterRuns bounds the rounds of an unpinned Deregister (each Run
// makes space.UpdateAttempts).
const deregisterRuns = 4

// writeDeregistration is Deregister's transaction. Unless pinned to the
// version read, it wins over any concurrent write of the live space (a probe
// result must not hold a deregistration up), bumping the version in place.
func (s *Store) writeDeregistration(ctx context.Context, before, after space.Space, counted string, pinned bool) error {
	const (
		iSpace = iota
		iClaim
		iAccount
	)
	org, id := after.OrgID, after.ID
	// The status read is the one uncounted below: a transition committed
	// meanwhile fails the condition (and bumped the version, so Run reads
	// again).
	// Likewise the counted minor (counts.go): a version change committed
	// meanwhile fails it.
	cond := "attribute_exists(" + nPK + ") AND attribute_not_exists(" + nDeleted + ") AND " + nStatus + " = :st"
	vals := map[string]types.AttributeValue{":at": str(after.DeletedAt.Format(time.RFC3339Nano)), ":one": num(1),
		":st": str(string(before.Status)), ":by": str(after.DeletedBy)}
	if counted == "" {
		cond += " AND attribute_not_exists(" + nCounted + ")"
	} else {
		cond += " AND " + nCounted + " = :mino"
		vals[":mino"] = str(counted)
	}
	// And the name read, whose search entries it deletes (words.go): a
	// rename committed meanwhile fails it.
	cond += " AND " + nName + " = :nm"
	vals[":nm"] = str(before.Name)
	nm := names(nDeleted, nDeletedBy, nUpdated, nVersion, nShard, nDigest, nPK, nStatus, nNameLC, nNameKey, nRegKey, nStatusKey, nSinceKey, nProbKey, nCounted, nName, nWords, nLabelsMk, nLabelOrd)
	// And the labels read, whose entries it deletes (labels.go): a labels
	// change committed meanwhile fails it.
	cond += " AND (" + nLabelsMk + " = :lbmk OR attribute_not_exists(" + nLabelsMk + "))"
	vals[":lbmk"] = str(labelsDigest(before.Labels))
	// And the position read, where its entries in problems-first order
	// are: a transition there and back committed meanwhile fails it.
	cond += " AND (" + nProbKey + " = :probk OR attribute_not_exists(" + nProbKey + "))"
	vals[":probk"] = str(problemKey(before))
	if pinned {
		cond += " AND " + nVersion + " = :prev"
		vals[":prev"] = num(before.Version)
	}
	set := []string{nDeleted + " = :at", nDeletedBy + " = :by", nUpdated + " = :at", nVersion + " = " + nVersion + " + :one"}
	// Removing probe_shard takes the space out of the probe index: a late
	// probe can no longer even be scheduled. Removing name_key, reg_key,
	// status_key, since_key and problem_key takes it out of the names,
	// registered, status, since and problems indexes; counted_minor goes
	// with its count.
	remove := []string{nShard, nDigest, nNameLC, nNameKey, nRegKey, nStatusKey, nSinceKey, nProbKey, nCounted, nWords, nLabelsMk, nLabelOrd}
	stampSet, stampRemove := stampUpdate(ctx, nm, vals)
	set, remove = append(set, stampSet...), append(remove, stampRemove...)
	items := []types.TransactWriteItem{
		iSpace: {Update: &types.Update{
			TableName: s.table, Key: itemKey(org, prefixSpace+id),
			UpdateExpression:                    aws.String("SET " + strings.Join(set, ", ") + " REMOVE " + strings.Join(remove, ", ")),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            nm,
			ExpressionAttributeValues:           vals,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		// The identity and the account are immutable, so what was read
		// names the right claim and account.
		iClaim: {Delete: &types.Delete{
			TableName: s.table, Key: itemKey(org, prefixClaim+before.Identity()),
			ConditionExpression:       aws.String(nSpaceID + " = :id"),
			ExpressionAttributeNames:  names(nSpaceID),
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(id)},
		}},
		iAccount: {Update: &types.Update{
			TableName: s.table, Key: itemKey(org, prefixAccount+before.CloudAccountID),
			UpdateExpression:          aws.String("ADD " + nCount + " :dec"),
			ConditionExpression:       aws.String("attribute_exists(" + nPK + ")"),
			ExpressionAttributeNames:  names(nCount, nPK),
			ExpressionAttributeValues: map[string]types.AttributeValue{":dec": num(-1)},
		}},
		// Last, so the indexes above stay fixed: no credential can be
		// minted for the space once this commits (see grants.go).
		s.revokeGrantItem(org, id),
		// And every token of its agent (agents.go) is refused from now on.
		s.revokeAgentItem(id),
		s.revokeAgentNSItem(id),
		s.countSpace(before, "-1", counted),
	}
	if !before.Synthetic {
		// The prober refuses the space from now on without reading it:
		// its message's fence read finds this entry (fence.go).
		items = append(items, s.fenceItem(before, *after.DeletedAt))
	}
	// The name's search entries go (words.go).
	items = append(items, s.wordMoves(before, after)...)
	// And its labels' entries (labels.go).
	items = append(items, s.labelMoves(before, after)...)
	// And in problems-first order.
	items = append(items, s.orderMoves(before, after, true)...)
	return s.transact(ctx, "deregister", func() ([]types.TransactWriteItem, error) { return items, nil },
		func(reasons []types.CancellationReason) error {
			switch {
			case failedCheck(reasons, iSpace):
				return s.whyNotCounted(ctx, after, before.Version, counted, reasons[iSpace].Item)
			case failedCheck(reasons, iClaim):
				return internal("deregister", fmt.Errorf("the identity claim of space %s is missing or held by another space", id))
			case failedCheck(reasons, iAccount):
				return internal("deregister", fmt.Errorf("the cloud account %s of space %s is missing", before.CloudAccountID, id))
			}
			return nil
		})
}
