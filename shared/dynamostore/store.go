// Package dynamostore implements space.Store on one DynamoDB table (the
// template's SpacesTable).
//
// Where every item lives and what it holds is keys.go; why each access
// pattern is shaped as it is, below.
//
// # Access patterns
//
//   - get a space or account: GetItem, strongly consistent; a deleted space is
//     not found.
//   - list an org's spaces or accounts in id order: Query pk = ORG#<org> AND
//     begins_with(sk, SPACE#|ACCOUNT#), filtering deleted spaces and the
//     equality filters on the server, starting after the last id returned.
//   - register: one transaction puts the space and the identity claim (both
//     only if absent), adds 1 to the account's space_count (only if the account
//     exists for the same provider), checks that no provisioning job claims
//     the cluster (but the registering job), with an Idempotency-Key puts the
//     key's record (only if absent or expired), puts the kubeauth grant,
//     counts the space on the fleet counters and puts its name's search
//     entries (words.go).
//   - save a space (status, probe): UpdateItem of the mutable fields, only if
//     the stored version is the previous one and the space is not deleted; a
//     status change is one transaction with its history item, the fleet
//     counters' move and its label entries' move in problems-first order,
//     a rename one with its search entries' move, a labels change one with
//     its label entries' move (in both orders).
//   - deregister: one transaction marks the space deleted (on the status
//     read, and the version too when pinned by If-Match), deletes the claim,
//     subtracts 1 from the account's space_count, deletes the grant and the
//     agent's AGENT and AGENTNS items, uncounts the space, puts its
//     deregistration fence entry and deletes its search and label
//     entries (on the name and labels read).
//   - delete an account: DeleteItem only if no space counts against it.
//   - the fleet counts: the org's COUNT# counter items, kept inside the
//     register, deregister, transition and minor-version-change
//     transactions, read with one Query (counts.go).
//   - list by name, by registration, by status, by status since or
//     problems first, search names by prefix: Query the sparse names,
//     registered, status, since or problems index, then one BatchGetItem
//     of the page (names.go).
//   - search names by word prefix: one strongly consistent Query of the
//     org's WORD# partition under one of the search's words, then one
//     BatchGetItem of the page (words.go): a page costs the entries and
//     spaces it reads, at any fleet size (BenchmarkWordSearch).
//   - list by label selector in id order: strongly consistent Queries of
//     the org's LABEL# partition under the values of its positive
//     requirements, merged and intersected in id order, then one
//     BatchGetItem of the page (labels.go): a page costs the entries and
//     spaces it reads, at any fleet size (BenchmarkSelectorPage).
//   - list by label selector problems first: the same, under the org's
//     LPROB# partition, whose entries are in that order, and its
//     overflow entries (labels.go).
//
// # Which filters are page-proportional
//
// A page costs what it shows when an index or key range narrows the read:
// every order, name_prefix in name order, a word search (one of
// several words is read under its word with the fewest entries when one
// has at most 100: only a rare combination of words that each have more
// reads more than a page's entries, not their spaces), and a label
// selector in id order with a positive requirement (=, in, exists; the
// entries of each are read and the ids all of them take are fetched; an
// `in` of more than space.MaxDriverValues values, or an exists whose key
// has more values, is checked on the spaces instead), whose page costs
// its requirements' entries and the spaces the negative requirements
// pass over; problems first, the same selector read under its entries
// in that order; in another order, a selector whose requirements take at most
// 100 spaces, whose page costs those spaces (labels.go,
// BenchmarkSelectorPage). Every other filter is applied to
// the spaces a page reads, and its cost grows with what it passes over,
// that is with the fleet for a rare match: status (in orders other than by
// status), synthetic, version, support and certificate windows,
// name_prefix outside name order, and label selectors in another order
// than id or problems first that take more than 100 spaces or with a word search (BenchmarkFleetCost: 167 RRU for a first page
// in name order of a selector matching a third of 10,000; in id order,
// before the label entries, 414.5 RRU for one matching 1 in 100) or of
// negative requirements only (!=, notin, !key: they match most spaces, so
// a page passes over few, but a selector that matches few, such as
// `env!=prod` where nearly every space is prod, reads on until the page
// is full or the org ends).
//   - the prober's scheduler: Query the probe index shard by shard (it
//     projects what a probe needs: probeindex.go).
//   - the prober: one strongly consistent Query of a shard's
//     deregistration fence a message, an UpdateItem of the shard's beat a
//     shard and tick, and a write of the space only on a change (fence.go).
//   - an environment's revisions, the org's stopped revisions: one Query
//     of the env-revisions or stopped-revisions index, newest first
//     (revisions.go).
//   - bind an environment or policy (create, re-bind): one transaction of a
//     ConditionCheck that the space is registered, the item (version check)
//     and its link(s).
//   - the cascade: Query pk = SPACE#<id> (consistent), then one conditional
//     UpdateItem per environment (gate, only if still bound and not gated)
//     and per policy (detach, only if applied), a DeleteItem of the grant,
//     and the CASCADE# marker (only if absent) once the event is published.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"spaces/shared/backoff"
	"spaces/shared/space"
)

const (
	// MaxLimit is the largest page a list returns.
	MaxLimit = 1000
	// IdempotencyTTL is how long an Idempotency-Key is remembered.
	IdempotencyTTL = 24 * time.Hour
	// maxKeyLen bounds an Idempotency-Key so that its sort key stays far below
	// DynamoDB's 1 KiB limit.
	maxKeyLen = 255

	// Transactions that collide with concurrent ones (TransactionConflict)
	// are retried this many times with jittered backoff.
	maxAttempts = 8
	backoffBase = 10 * time.Millisecond
)

// Expression attribute names. kumo substitutes placeholders with plain
// string replacement, so no placeholder may be a prefix of another.
const (
	nPK      = "#pk"
	nSK      = "#sk"
	nVersion = "#ver"
	nDeleted = "#del"
	nUpdated = "#upd"
	nShard   = "#shard"
	nCount   = "#cnt"
	nProv    = "#prov"
	nType    = "#typ"
	nAccount = "#acct"
	nSpaceID = "#sid"
	nExpires = "#exp"
	nID      = "#id"
	nOrg     = "#org"
	nName    = "#name"
	nStatus  = "#status"
	nProbe   = "#probe"
	nGate    = "#gate"
	nPState  = "#pstate"
	nPReason = "#preason"
	nJobID   = "#jobid"
	nNameLC  = "#nlc"
	nNameKey = "#nkey"
	// Not "#del...": kumo would substitute nDeleted inside it.
	nDeletedBy = "#byw"
	nRegKey    = "#rkey"
	nStatusKey = "#ordst"
	nLabels    = "#lbl"
	nConfig    = "#cfg"
	nConn      = "#conn"
	nBeat      = "#beat"
	nDigest    = "#pd"
	nCounted   = "#minr"
	nSinceKey  = "#since"
	nNotices   = "#nt"
	nWords     = "#zwords"
	nLabelsMk  = "#zlabels"
	nLabelOrd  = "#zorder"
	nProbKey   = "#probk"
)

var attrNames = map[string]string{
	nPK: "pk", nSK: "sk", nVersion: "version", nDeleted: "deleted_at", nUpdated: "updated_at",
	nShard: "probe_shard", nCount: "space_count", nProv: "provider", nType: "space_type",
	nAccount: "cloud_account_id", nSpaceID: "space_id", nExpires: "expires_at", nID: "id", nJobID: "job_id",
	nOrg: "org_id", nName: "name", nStatus: "status", nProbe: "probe",
	nGate: "gate", nPState: "state", nPReason: "state_reason",
	nNameLC: "name_lc", nNameKey: "name_key", nDeletedBy: "deleted_by", nRegKey: "reg_key",
	nStatusKey: "status_key", nLabels: "labels", nConfig: "config", nConn: "connectivity",
	nDigest: "pd", nCounted: attrCounted, nSinceKey: "since_key", nNotices: attrNotices,
	nWords: attrWordEntries, nLabelsMk: attrLabelEntries, nLabelOrd: attrLabelOrder,
	nProbKey: "problem_key",
}

// names returns the ExpressionAttributeNames for the given placeholders
// (DynamoDB rejects names an expression does not use).
func names(placeholders ...string) map[string]string {
	m := make(map[string]string, len(placeholders))
	for _, p := range placeholders {
		m[p] = attrNames[p]
	}
	return m
}

// Store is a space.Store on one DynamoDB table. It is safe for concurrent use.
type Store struct {
	db    *dynamodb.Client
	table *string
	now   func() time.Time
	enc   *attributevalue.Encoder
	dec   *attributevalue.Decoder
	beats beatCache
	// sealer seals webhook secrets (webhooks.go).
	sealer Sealer
	// recorded orders the activity entries this store records (activity.go).
	recorded monotonic
}

var _ space.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock used for idempotency expiry (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns a Store on table.
func New(db *dynamodb.Client, table string, opts ...Option) *Store {
	s := &Store{
		db:    db,
		table: aws.String(table),
		now:   time.Now,
		// The json tags are the attribute names: one naming for the API, the
		// table and the stream records the cascade reads.
		enc: attributevalue.NewEncoder(func(o *attributevalue.EncoderOptions) { o.TagKey = "json" }),
		dec: attributevalue.NewDecoder(func(o *attributevalue.DecoderOptions) { o.TagKey = "json" }),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// versionIs is the condition of a versioned write (space.Run): the item
// exists and is still the version read, bound as :prev.
const versionIs = "attribute_exists(" + nPK + ") AND " + nVersion + " = :prev"

// versionedPut replaces item only over its stored version prev; a failed
// condition returns the item it saw (changedFrom explains it).
func (s *Store) versionedPut(item map[string]types.AttributeValue, prev int64) *types.Put {
	return &types.Put{TableName: s.table, Item: item,
		ConditionExpression:                 aws.String(versionIs),
		ExpressionAttributeNames:            names(nPK, nVersion),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":prev": num(prev)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
}

// putVersioned writes p (versionedPut) on its own; a lost race is
// space.ErrChanged naming what.
func (s *Store) putVersioned(ctx context.Context, what string, p *types.Put, prev int64) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item,
		ConditionExpression: p.ConditionExpression, ExpressionAttributeNames: p.ExpressionAttributeNames,
		ExpressionAttributeValues:           p.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return s.changedFrom(what, ccf.Item, prev)
	default:
		return awsError("PutItem", err)
	}
}

// changedFrom answers a versioned write whose condition failed: old is the
// item the condition saw (nil when it is gone).
func (s *Store) changedFrom(what string, old map[string]types.AttributeValue, prev int64) error {
	var stored struct {
		Version int64 `json:"version"`
	}
	if old != nil {
		if err := s.decode(old, &stored); err != nil {
			return err
		}
	}
	return space.ErrChanged(what, stored.Version, prev)
}

// encode marshals v (a struct with json tags) into an item.
func (s *Store) encode(v any) (map[string]types.AttributeValue, error) {
	av, err := s.enc.Encode(v)
	if err != nil {
		return nil, internal("encode item", err)
	}
	m, ok := av.(*types.AttributeValueMemberM)
	if !ok {
		return nil, internal("encode item", fmt.Errorf("%T is not a map", av))
	}
	return m.Value, nil
}

// attrNotices holds a space's announced inventory thresholds
// (space.Notices): an attribute of its own, since the space's json tags
// name its API body too and the notices are no part of it.
const attrNotices = "notices"

// decodeSpace decodes a space item, its notices included.
func (s *Store) decodeSpace(item map[string]types.AttributeValue, sp *space.Space) error {
	if err := s.decode(item, sp); err != nil {
		return err
	}
	if m, ok := item[attrNotices].(*types.AttributeValueMemberM); ok {
		if err := s.dec.Decode(m, &sp.Notices); err != nil {
			return internal("decode notices", err)
		}
	}
	return nil
}

func (s *Store) decode(item map[string]types.AttributeValue, v any) error {
	if err := s.dec.Decode(&types.AttributeValueMemberM{Value: item}, v); err != nil {
		return internal("decode item", err)
	}
	return nil
}

func checkLimit(limit int) error {
	if limit < 1 || limit > MaxLimit {
		return &space.Error{Kind: space.KindInvalid, Message: "the page is not valid",
			Fields: []space.FieldError{{Field: "limit", Reason: fmt.Sprintf("must be between 1 and %d", MaxLimit)}}}
	}
	return nil
}

// getItem reads one item, strongly consistent; nil when absent.
func (s *Store) getItem(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, awsError("GetItem", err)
	}
	return out.Item, nil
}

// putNew stores item only if its key is free; a taken key is a conflict
// that names what and id.
func (s *Store) putNew(ctx context.Context, item map[string]types.AttributeValue, what, id string) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(" + nPK + ")"),
		ExpressionAttributeNames: names(nPK)})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return space.Errorf(space.KindConflict, "%s with id %s already exists", what, id)
	default:
		return awsError("PutItem", err)
	}
}

// canceled returns the cancellation reasons of a canceled transaction.
func canceled(err error) ([]types.CancellationReason, bool) {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		return tce.CancellationReasons, true
	}
	return nil, false
}

// failedCheck reports whether transaction item i failed its condition.
func failedCheck(reasons []types.CancellationReason, i int) bool {
	return i < len(reasons) && aws.ToString(reasons[i].Code) == "ConditionalCheckFailed"
}

// conflicted reports whether the transaction lost a race with another one
// (and should be retried) rather than failing a condition.
func conflicted(reasons []types.CancellationReason) bool {
	for _, r := range reasons {
		if aws.ToString(r.Code) == "TransactionConflict" {
			return true
		}
	}
	return false
}

// errRetry, returned by a transaction's explain function, means the
// cancellation was a race worth trying again (after a backoff).
var errRetry = errors.New("retry the transaction")

// transact is the one retry policy of the store's transactions: it writes the
// items build returns, and on a cancellation asks explain what the reasons
// mean. explain returns the error to answer with, errRetry to try again
// (rebuilding the items), or nil when the reasons are not its own, in which
// case a transaction conflict is retried and anything else is reported. At
// most maxAttempts tries, with jittered backoff between them.
func (s *Store) transact(ctx context.Context, op string, build func() ([]types.TransactWriteItem, error),
	explain func([]types.CancellationReason) error) error {
	for attempt := 1; ; attempt++ {
		items, err := build()
		if err != nil {
			return err
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil
		}
		reasons, ok := canceled(err)
		if !ok {
			return awsError("TransactWriteItems", err)
		}
		switch why := explain(reasons); {
		case errors.Is(why, errRetry), why == nil && conflicted(reasons):
		case why != nil:
			return why
		default:
			return awsError("TransactWriteItems", err)
		}
		if attempt == maxAttempts {
			return unavailable("the registry store is busy", fmt.Errorf("%s: %d attempts: %w", op, attempt, err))
		}
		if err := backoff.Wait(ctx, backoffBase, attempt); err != nil {
			return unavailable("the registry store is busy", err)
		}
	}
}

func internal(msg string, err error) *space.Error {
	return &space.Error{Kind: space.KindInternal, Message: "the registry store failed", Err: fmt.Errorf("%s: %w", msg, err)}
}

func unavailable(msg string, err error) *space.Error {
	return &space.Error{Kind: space.KindUnavailable, Message: msg, Err: err}
}

// awsError maps an SDK error: throttling, server-side and network failures
// (and timeouts) are KindUnavailable, anything else KindInternal; the cause
// is kept for the log.
func awsError(op string, err error) error {
	cause := fmt.Errorf("dynamodb %s: %w", op, err)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return unavailable("the registry store did not answer in time", cause)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
			"LimitExceededException", "InternalServerError", "ServiceUnavailable", "TransactionInProgressException":
			return unavailable("the registry store is unavailable", cause)
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		return unavailable("the registry store is unavailable", cause)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return unavailable("the registry store is unavailable", cause)
	}
	return &space.Error{Kind: space.KindInternal, Message: "the registry store failed", Err: cause}
}

// queryPage reads up to limit items of T in the order the Query in reads
// them, going on past pages a filter left short, and answers the sk of the
// page's last item when more follow (where the next page starts).
func queryPage[T any](ctx context.Context, s *Store, in *dynamodb.QueryInput, limit int) ([]T, string, error) {
	var out []T
	var keys []string
	for len(out) <= limit {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", awsError("Query", err)
		}
		for _, item := range res.Items {
			var a T
			if err := s.decode(item, &a); err != nil {
				return nil, "", err
			}
			sk, _ := item["sk"].(*types.AttributeValueMemberS)
			out, keys = append(out, a), append(keys, sk.Value)
		}
		if res.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	if len(out) > limit {
		return out[:limit], keys[limit-1], nil
	}
	return out, "", nil
}
