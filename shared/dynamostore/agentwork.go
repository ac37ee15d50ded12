package dynamostore

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// The work waiting for an agent (space/agentwork.go) lives in its AGENT
// item, so that the lease renewal's one conditional write returns it with
// the item it replaced (agents.go): when a user last asked for the list
// (ns_wanted_at) and when the agent last reported one (ns_observed_at);
// each pending namespace create is an attribute of its own,
// nsc_<name> = its labels, and each revision handed to the agent one too,
// rev_<id> = the version handed. Attributes of their own rather than
// entries of a map: each write sets or removes exactly one, by name, with
// conditions on that one alone (attribute_not_exists, equality), and
// removing one that is gone does nothing. The last reported list is a
// separate item (agentNSKey, keys.go), so that its size never weighs on the lease
// renewals' write units (an UpdateItem costs by the larger of the item
// before and after:
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html#write-operation-consumption).
const (
	prefixCreate = "nsc_"
	prefixHanded = "rev_"
)

var _ space.AgentWorkStore = (*Store)(nil)

// agentNSItem is the stored list.
type agentNSItem struct {
	ObservedAt *time.Time              `json:"observed_at,omitempty"`
	Items      []space.Namespace       `json:"items"`
	Failed     []space.FailedNamespace `json:"failed,omitempty"`
}

// credentialValid is the lease's authentication condition (agents.go):
// the presented hash is the current credential, unexpired, or the
// previous one, unexpired and while the current has not been used
// (last_used_hash, which the lease and the renewal set, is then the
// previous itself: it is absent, the previous or the current): after the
// agent used its new credential, only a copy presents the old one.
const credentialValid = "((#ch = :h AND #cexp > :now) OR (#ph = :h AND #pexp > :now AND (attribute_not_exists(#lu) OR #lu = :h)))"

func credentialNames(m map[string]string) map[string]string {
	m["#ch"], m["#cexp"], m["#ph"], m["#pexp"] = "credential_hash", "credential_expires_at", "previous_hash", "previous_expires_at"
	m["#lu"] = "last_used_hash"
	return m
}

// agentWork reads the work attributes of an AGENT item.
func (s *Store) agentWork(item map[string]types.AttributeValue) (map[string]space.NamespaceCreate, map[string]int64, error) {
	creates, handed := map[string]space.NamespaceCreate{}, map[string]int64{}
	for k, v := range item {
		switch {
		case strings.HasPrefix(k, prefixCreate):
			c := space.NamespaceCreate{Name: strings.TrimPrefix(k, prefixCreate), Labels: map[string]string{}}
			if err := s.dec.Decode(v, &c.Labels); err != nil {
				return nil, nil, internal("decode item", err)
			}
			creates[c.Name] = c
		case strings.HasPrefix(k, prefixHanded):
			var ver int64
			if err := s.dec.Decode(v, &ver); err != nil {
				return nil, nil, internal("decode item", fmt.Errorf("%s: %w", k, err))
			}
			handed[strings.TrimPrefix(k, prefixHanded)] = ver
		}
	}
	return creates, handed, nil
}

// RequestNamespace records a pending create (space.AgentWorkStore). The
// bound on pending creates is the caller's (from the item it read). Two
// conflicts are this write's: a create of that name already pending (the
// AGENT item's condition), and a namespace the agent last reported. The
// list is another item, read first; the transaction holds only while it
// is still the one read (its observed_ns unchanged), so a report landing
// between the read and the write (one that carried out a create of this
// name and removed it from the pending ones) makes it read again, and the
// create is refused as existing, rather than asked for twice.
func (s *Store) RequestNamespace(ctx context.Context, org, spaceID string, c space.NamespaceCreate) error {
	labels, err := s.enc.Encode(c.Labels)
	if err != nil {
		return internal("encode item", err)
	}
	return s.transact(ctx, "request namespace", func() ([]types.TransactWriteItem, error) {
		nsItem, err := s.getItem(ctx, agentNSKey(spaceID))
		if err != nil {
			return nil, err
		}
		listed := &types.ConditionCheck{TableName: s.table, Key: agentNSKey(spaceID),
			ConditionExpression: aws.String("attribute_not_exists(#ons)"), ExpressionAttributeNames: map[string]string{"#ons": "observed_ns"}}
		if nsItem != nil {
			var ns agentNSItem
			if err := s.decode(nsItem, &ns); err != nil {
				return nil, err
			}
			for _, n := range ns.Items {
				if n.Name == c.Name {
					return nil, &space.Error{Kind: space.KindConflict, Message: "the namespace already exists (as the agent last reported)"}
				}
			}
			if v, ok := nsItem["observed_ns"]; ok {
				listed.ConditionExpression = aws.String("#ons = :ns")
				listed.ExpressionAttributeValues = map[string]types.AttributeValue{":ns": v}
			}
		}
		return []types.TransactWriteItem{
			{Update: &types.Update{TableName: s.table, Key: agentKey(spaceID),
				UpdateExpression:                    aws.String("SET #k = :v"),
				ConditionExpression:                 aws.String("#org = :org AND attribute_not_exists(#k)"),
				ExpressionAttributeNames:            map[string]string{"#org": "org_id", "#k": prefixCreate + c.Name},
				ExpressionAttributeValues:           map[string]types.AttributeValue{":org": str(org), ":v": labels},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			{ConditionCheck: listed},
		}, nil
	}, func(reasons []types.CancellationReason) error {
		switch {
		case failedCheck(reasons, 0):
			return s.entryRefused(ctx, org, spaceID, reasons[0].Item,
				&space.Error{Kind: space.KindConflict, Message: "a create of this namespace is already waiting for the agent"})
		case failedCheck(reasons, 1):
			return errRetry // a new list: read it again
		}
		return nil
	})
}

// HandRevision records r as its space's agent's to apply
// (space.AgentWorkStore); setting it again is harmless.
func (s *Store) HandRevision(ctx context.Context, r space.Revision) error {
	return s.agentEntry(ctx, r.OrgID, r.SpaceID, "SET #k = :v", "", prefixHanded+r.ID, num(r.Version), nil)
}

// agentEntry writes one work attribute k of org's space's AGENT item,
// under cond when given (refused explains it failing). A missing item
// (the space is deregistered, or not org's) is not found.
func (s *Store) agentEntry(ctx context.Context, org, spaceID, update, cond, k string, v types.AttributeValue, refused error) error {
	c := "#org = :org"
	if cond != "" {
		c += " AND " + cond
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: agentKey(spaceID),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(c),
		ExpressionAttributeNames:            map[string]string{"#org": "org_id", "#k": k},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":org": str(org), ":v": v},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		if err != nil {
			return awsError("UpdateItem agent work", err)
		}
		return nil
	}
	return s.entryRefused(ctx, org, spaceID, ccf.Item, refused)
}

// entryRefused explains a failed condition on org's space's AGENT item
// from the item (read if the refusal did not carry it): not found when
// the item is missing or another org's, else refused (nil: not found).
func (s *Store) entryRefused(ctx context.Context, org, spaceID string, item map[string]types.AttributeValue, refused error) error {
	if item == nil {
		var err error
		if item, err = s.getItem(ctx, agentKey(spaceID)); err != nil {
			return err
		}
	}
	var it agentItem
	if item != nil {
		if err := s.decode(item, &it); err != nil {
			return err
		}
	}
	if item == nil || it.OrgID != org || refused == nil {
		return space.ErrNotFound("space")
	}
	return refused
}

// WantNamespaces records a user's ask for the list (space.AgentWorkStore).
func (s *Store) WantNamespaces(ctx context.Context, org, spaceID string, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: agentKey(spaceID),
		// A user's ask lifts the unasked-report limit (ReportNamespaces).
		UpdateExpression:          aws.String("SET #w = :now REMOVE #ls"),
		ConditionExpression:       aws.String("#org = :org"),
		ExpressionAttributeNames:  map[string]string{"#w": "ns_wanted_at", "#org": "org_id", "#ls": "ns_list_s"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": str(now.UTC().Format(time.RFC3339Nano)), ":org": str(org)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return space.ErrNotFound("space")
	}
	if err != nil {
		return awsError("UpdateItem want namespaces", err)
	}
	return nil
}

// ReportedNamespaces reads the agent's last list and the pending creates
// (space.AgentWorkStore).
func (s *Store) ReportedNamespaces(ctx context.Context, org, spaceID string) (space.NamespaceList, error) {
	item, err := s.getItem(ctx, agentKey(spaceID))
	if err != nil {
		return space.NamespaceList{}, err
	}
	var it agentItem
	if item != nil {
		if err := s.decode(item, &it); err != nil {
			return space.NamespaceList{}, err
		}
	}
	if item == nil || it.OrgID != org {
		return space.NamespaceList{}, space.ErrNotFound("space")
	}
	out := space.NamespaceList{Items: []space.Namespace{}}
	creates, _, err := s.agentWork(item)
	if err != nil {
		return space.NamespaceList{}, err
	}
	for _, name := range slices.Sorted(maps.Keys(creates)) {
		out.Pending = append(out.Pending, creates[name])
	}
	nsItem, err := s.getItem(ctx, agentNSKey(spaceID))
	if err != nil || nsItem == nil {
		return out, err
	}
	var ns agentNSItem
	if err := s.decode(nsItem, &ns); err != nil {
		return space.NamespaceList{}, err
	}
	out.ObservedAt, out.Failed = ns.ObservedAt, ns.Failed
	if it.NSObservedAt != nil && (out.ObservedAt == nil || it.NSObservedAt.After(*out.ObservedAt)) {
		out.ObservedAt = it.NSObservedAt // an unchanged report moves only this
	}
	if ns.Items != nil {
		out.Items = ns.Items
	}
	return out, nil
}

// ReportNamespaces stores an agent's list (space.AgentWorkStore).
//
// A report answering no create whose list hashes as the stored one
// (ns_hash) is one UpdateItem of the AGENT item (about 1 write unit): the
// time observed moves, which settles a user's ask, and the list item is
// not written. Any other is one transaction whose first write is
// authenticated like the lease (and drops the creates the report answers:
// removing one no longer there does nothing, so a repeated report changes
// nothing more), and, when it answers no create, holds to
// space.ReportInterval since the last list written (ns_list_s; a user's
// ask removes it); the second writes the list, unless the one stored is
// newer (by when its handling began, observed_ns; a tie goes to the later
// write): a report whose write lands late, after its invocation timed out
// and a newer report was stored, changes nothing, where it would bring
// back a list without the namespaces created since.
func (s *Store) ReportNamespaces(ctx context.Context, spaceID, credHash string, r space.NamespacesReport, now time.Time) error {
	at := now.UTC()
	hash := r.Hash()
	nowS := str(at.Format(time.RFC3339Nano))
	if len(r.Creates) == 0 {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: s.table, Key: agentKey(spaceID),
			UpdateExpression:         aws.String("SET #obs = :obs"),
			ConditionExpression:      aws.String(credentialValid + " AND #nh = :nh"),
			ExpressionAttributeNames: credentialNames(map[string]string{"#obs": "ns_observed_at", "#nh": "ns_hash"}),
			ExpressionAttributeValues: map[string]types.AttributeValue{":obs": nowS, ":nh": str(hash),
				":h": str(credHash), ":now": num(at.Unix())},
		})
		var ccf *types.ConditionalCheckFailedException
		if err == nil {
			return nil
		} else if !errors.As(err, &ccf) {
			return awsError("UpdateItem report namespaces", err)
		}
		// Changed, or the credential is refused: the transaction tells.
	}
	list := agentNSItem{ObservedAt: &at, Items: r.Namespaces()}
	for _, c := range r.Creates {
		if c.Error != "" {
			list.Failed = append(list.Failed, space.FailedNamespace{Name: c.Name, Message: c.Error, At: at})
		}
	}
	if list.Items == nil {
		list.Items = []space.Namespace{}
	}
	v, err := s.encode(list)
	if err != nil {
		return err
	}
	// Each outcome answers a pending create: one never requested (or
	// answered already) fails the condition and nothing is stored.
	update, cond := "SET #obs = :obs, #nh = :nh, #ls = :ls", credentialValid
	nm := credentialNames(map[string]string{"#obs": "ns_observed_at", "#nh": "ns_hash", "#ls": "ns_list_s"})
	vals := map[string]types.AttributeValue{":now": num(at.Unix()), ":h": str(credHash), ":obs": nowS,
		":nh": str(hash), ":ls": num(at.Unix())}
	for i, c := range r.Creates {
		p := "#c" + strconv.Itoa(i)
		nm[p] = prefixCreate + c.Name
		cond += " AND attribute_exists(" + p + ")"
		if i == 0 {
			update += " REMOVE " + p
		} else {
			update += ", " + p
		}
	}
	if len(r.Creates) == 0 { // unasked: at most one list a ReportInterval
		cond += " AND (attribute_not_exists(#ls) OR #ls <= :cut)"
		vals[":cut"] = num(at.Add(-space.ReportInterval).Unix())
	}
	set := "SET #items = :items, #oat = :now, #ons = :ns"
	setNames := map[string]string{"#items": "items", "#oat": "observed_at", "#ons": "observed_ns"}
	setVals := map[string]types.AttributeValue{":items": v["items"], ":now": nowS, ":ns": num(at.UnixNano())}
	if len(r.Creates) > 0 { // the outcome of this report's creates replaces the last
		set += ", #failed = :failed"
		setNames["#failed"] = "failed"
		setVals[":failed"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
		if f, ok := v["failed"]; ok {
			setVals[":failed"] = f
		}
	}
	items := []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: s.table, Key: agentKey(spaceID),
			UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames:            nm,
			ExpressionAttributeValues:           vals,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		{Update: &types.Update{
			TableName: s.table, Key: agentNSKey(spaceID),
			UpdateExpression: aws.String(set), ExpressionAttributeNames: setNames, ExpressionAttributeValues: setVals,
			ConditionExpression: aws.String("attribute_not_exists(#ons) OR #ons <= :ns"),
		}},
	}
	err = s.transact(ctx, "report namespaces", func() ([]types.TransactWriteItem, error) { return items, nil },
		func(reasons []types.CancellationReason) error {
			switch {
			case failedCheck(reasons, 0):
				return s.reportRefused(ctx, spaceID, reasons[0].Item, credHash, at, r.Creates)
			case failedCheck(reasons, 1):
				return errSuperseded
			}
			return nil
		})
	if errors.Is(err, errSuperseded) { // authenticated, and nothing to store
		return nil
	}
	return err
}

var errSuperseded = errors.New("a newer report is stored")

// reportRefused explains a namespaces report's failed condition from the
// AGENT item old (read if the refusal did not carry it): the credential,
// an outcome of a create not pending, or too soon after the last list.
func (s *Store) reportRefused(ctx context.Context, spaceID string, old map[string]types.AttributeValue, credHash string, now time.Time, creates []space.CreateOutcome) error {
	refused := space.ErrAgentAuth(errors.New("report namespaces: no such credential, or expired"))
	if old == nil { // not every DynamoDB answers the item: read it
		var err error
		if old, err = s.getItem(ctx, agentKey(spaceID)); err != nil {
			return err
		}
	}
	var it agentItem
	if old == nil || s.decode(old, &it) != nil || !it.credentialValidCT(credHash, now) {
		return refused
	}
	var missing []string
	for _, c := range creates {
		if _, ok := old[prefixCreate+c.Name]; !ok {
			missing = append(missing, c.Name)
		}
	}
	if len(missing) > 0 {
		return space.ErrNotRequested(missing)
	}
	if it.NSObservedAt != nil && it.NSObservedAt.After(now) {
		return errSuperseded // a newer report was handled: this late one has nothing to do
	}
	if len(creates) == 0 && it.NSListAt != 0 {
		return space.ErrReportTooSoon(max(time.Unix(it.NSListAt, 0).Add(space.ReportInterval).Sub(now), time.Second))
	}
	return refused
}

// credentialValidCT is credentialValid's condition in Go, comparing hashes
// in constant time.
func (it agentItem) credentialValidCT(credHash string, now time.Time) bool {
	same := func(h string) bool { return h != "" && subtle.ConstantTimeCompare([]byte(h), []byte(credHash)) == 1 }
	return (same(it.CredentialHash) && it.CredentialExpires > now.Unix()) ||
		(same(it.PreviousHash) && it.PreviousExpires > now.Unix() && !it.currentUsed())
}

// currentUsed: the current credential has authenticated a lease or a
// renewal, so the previous one is superseded.
func (it agentItem) currentUsed() bool {
	return it.LastUsedHash != "" && it.LastUsedHash == it.CredentialHash
}

// reused tells whether credHash is a superseded credential of the item:
// the previous after the current was used, or the one before the
// previous. Expiry does not matter: either is a copy.
func (it agentItem) reused(credHash string) bool {
	same := func(h string) bool { return h != "" && subtle.ConstantTimeCompare([]byte(h), []byte(credHash)) == 1 }
	return (same(it.PreviousHash) && it.currentUsed()) || same(it.SupersededHash)
}

// ForgetHanded drops a handed revision that moved on (space.AgentWorkStore).
func (s *Store) ForgetHanded(ctx context.Context, spaceID, revID string, version int64) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: agentKey(spaceID),
		UpdateExpression:          aws.String("REMOVE #k"),
		ConditionExpression:       aws.String("#k = :v"),
		ExpressionAttributeNames:  map[string]string{"#k": prefixHanded + revID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(version)},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return awsError("UpdateItem forget handed", err)
	}
	return nil
}

// TakeHanded drops a handed revision the agent reports on
// (space.AgentWorkStore): one write, conditional on the credential (as
// the lease) and on the revision being handed at that version.
func (s *Store) TakeHanded(ctx context.Context, spaceID, credHash, revID string, version int64, now time.Time) (string, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: agentKey(spaceID),
		UpdateExpression:                    aws.String("REMOVE #k"),
		ConditionExpression:                 aws.String(credentialValid + " AND #k = :v"),
		ExpressionAttributeNames:            credentialNames(map[string]string{"#k": prefixHanded + revID}),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":v": num(version), ":h": str(credHash), ":now": num(now.Unix())},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		item := ccf.Item
		if item == nil {
			if item, err = s.getItem(ctx, agentKey(spaceID)); err != nil {
				return "", err
			}
		}
		var it agentItem
		if item != nil {
			if err := s.decode(item, &it); err != nil {
				return "", err
			}
		}
		// Authenticated, but nothing to take: a repeated report.
		if item != nil && it.credentialValid(credHash, now) {
			return "", space.ErrNotAwaited()
		}
		return "", space.ErrAgentAuth(errors.New("report revision: no such credential, or expired"))
	}
	if err != nil {
		return "", awsError("UpdateItem take handed", err)
	}
	var it agentItem
	if err := s.decode(out.Attributes, &it); err != nil {
		return "", err
	}
	return it.OrgID, nil
}

// credentialValid is credentialValid's condition, in Go (for explaining a
// refusal only).
func (it agentItem) credentialValid(hash string, now time.Time) bool {
	return it.credentialValidCT(hash, now)
}

// revokeAgentNSItem is the second Delete Deregister adds.
func (s *Store) revokeAgentNSItem(id string) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{TableName: s.table, Key: agentNSKey(id)}}
}
