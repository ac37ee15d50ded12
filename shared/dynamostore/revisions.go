package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

var _ space.RevisionStore = (*Store)(nil)

// CreateRevision stores a new revision.
func (s *Store) CreateRevision(ctx context.Context, r space.Revision) error {
	item, err := s.revisionItem(r)
	if err != nil {
		return err
	}
	stampItem(ctx, item)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item,
		ConditionExpression: aws.String("attribute_not_exists(" + nPK + ")"), ExpressionAttributeNames: names(nPK)})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return internal("create revision", fmt.Errorf("revision id %s is already taken", r.ID))
	default:
		return awsError("PutItem", err)
	}
}

// GetRevision returns one revision of org.
func (s *Store) GetRevision(ctx context.Context, org, id string) (space.Revision, error) {
	var r space.Revision
	item, err := s.getItem(ctx, itemKey(org, prefixRevision+id))
	if err != nil {
		return r, err
	}
	if item == nil {
		return r, space.ErrNotFound("revision")
	}
	if err := revisionDecoder.Decode(&types.AttributeValueMemberM{Value: item}, &r); err != nil {
		return r, internal("decode item", err)
	}
	for _, m := range r.Manifests {
		exactNumbers(m)
	}
	return r, nil
}

// revisionDecoder keeps manifest numbers as they were pushed: the default
// decoder turns them into float64, which changes integers above 2^53.
var revisionDecoder = attributevalue.NewDecoder(func(o *attributevalue.DecoderOptions) {
	o.TagKey, o.UseNumber = "json", true
})

// exactNumbers turns the decoder's attributevalue.Number (which encodes to
// JSON as a string) into json.Number (which encodes as the number).
func exactNumbers(v any) any {
	switch v := v.(type) {
	case attributevalue.Number:
		return json.Number(v)
	case map[string]any:
		for k, e := range v {
			v[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = exactNumbers(e)
		}
	}
	return v
}

// UpdateRevision changes a revision (see space.Update): it is replaced only
// if its stored version is the one read.
func (s *Store) UpdateRevision(ctx context.Context, org, id string, u space.Update[space.Revision]) (space.Updated[space.Revision], error) {
	return space.Run(ctx, space.RevisionVersioned, u,
		func(ctx context.Context) (space.Revision, error) { return s.GetRevision(ctx, org, id) },
		func(ctx context.Context, before, after space.Revision) error {
			item, err := s.revisionItem(after)
			if err != nil {
				return err
			}
			stampItem(ctx, item)
			return s.putVersioned(ctx, "revision", s.versionedPut(item, before.Version), before.Version)
		})
}

// SpaceAsClaimed returns a space item of org whether or not it is
// deregistered (found is false when there is none): the revision claim must
// tell "deregistered" from "unknown".
// Its last probe is as readers see it (GetSpace).
func (s *Store) SpaceAsClaimed(ctx context.Context, org, id string) (space.Space, bool, error) {
	sp, found, err := s.readSpace(ctx, org, id)
	if err != nil || !found {
		return sp, found, err
	}
	observe, err := s.observer(ctx)
	if err != nil {
		return space.Space{}, false, err
	}
	return observe(sp), true, nil
}

// Listing revisions. A revision item carries rev_key (its creation time,
// fixed width, and its id), which puts it in the GSI "env-revisions"
// (environment_id HASH, rev_key RANGE): an environment's revisions in
// creation order. While stopped it also carries stopped_key (the time it
// stopped and its id), which puts it in the sparse GSI "stopped-revisions"
// (org_id HASH, stopped_key RANGE): the org's stopped revisions. Every write
// of a revision replaces the whole item (revisionItem), so leaving the
// stopped state removes stopped_key and the index entry with it. Both
// indexes project the summary's attributes only (never the manifests), and
// a page is one Query of an index, newest first: DynamoDB writes an index
// entry whenever an item's indexed or projected attributes change, and an
// index is eventually consistent, so a revision pushed or re-enqueued a
// moment ago may show its previous state for a fraction of a second
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html,
// "Synchronizing data between tables and global secondary indexes").
// The indexes' names and range keys (revKey, stoppedKey) are in keys.go.

// summaryAttrs are the attributes a listing reads: the indexes' projection
// (template.yaml) and the Query's ProjectionExpression, so that the
// emulator, which answers an index Query with whole items, returns (and
// awscost meters) what DynamoDB's index holds.
var summaryAttrs = []string{"id", "org_id", "environment_id", "space_id", "namespace", "state", "reason",
	"attempts", "created_at", "updated_at", "version", "rev_key", "stopped_key"}

// revisionItem is the item of r with its keys and index attributes.
func (s *Store) revisionItem(r space.Revision) (map[string]types.AttributeValue, error) {
	item, err := s.encode(r)
	if err != nil {
		return nil, err
	}
	for k, v := range itemKey(r.OrgID, prefixRevision+r.ID) {
		item[k] = v
	}
	item["rev_key"] = str(revKey(r))
	if r.State == space.RevisionStopped {
		item["stopped_key"] = str(stoppedKey(r))
	}
	return item, nil
}

// ListRevisions pages through the environment's revisions, newest first;
// page.After is the rev_key of the last one returned. The caller has
// checked that the environment is org's; the org check here keeps a
// forged id from reading another org's revisions all the same.
func (s *Store) ListRevisions(ctx context.Context, org, envID string, page space.Page) ([]space.RevisionSummary, string, error) {
	return s.listRevisions(ctx, org, envRevisionsIndex, "environment_id", envID, "rev_key", page)
}

// StoppedRevisions pages through org's stopped revisions, the most
// recently stopped first; page.After is the stopped_key of the last one
// returned.
func (s *Store) StoppedRevisions(ctx context.Context, org string, page space.Page) ([]space.RevisionSummary, string, error) {
	return s.listRevisions(ctx, org, stoppedRevisionsIndex, "org_id", org, "stopped_key", page)
}

// listRevisions is one page of a revisions index whose hash attribute is
// hash = value, in descending order of its range attribute.
func (s *Store) listRevisions(ctx context.Context, org, index, hash, value, rng string, page space.Page) ([]space.RevisionSummary, string, error) {
	if err := checkLimit(page.Limit); err != nil {
		return nil, "", err
	}
	// Placeholders of one width (kumo substitutes them as plain strings:
	// none may be a prefix of another).
	nm := map[string]string{"#kh": hash, "#kr": rng}
	proj := make([]string, len(summaryAttrs))
	for i, a := range summaryAttrs {
		p := fmt.Sprintf("#p%c", 'a'+i)
		nm[p], proj[i] = a, p
	}
	in := &dynamodb.QueryInput{
		TableName:                 s.table,
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String("#kh = :h"),
		ProjectionExpression:      aws.String(strings.Join(proj, ", ")),
		ExpressionAttributeNames:  nm,
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": str(value)},
		ScanIndexForward:          aws.Bool(false),
	}
	if page.After != "" {
		ts, id, ok := strings.Cut(page.After, "#")
		if _, err := time.Parse(histTime, ts); err != nil || !ok || !space.ValidID(id) {
			return nil, "", &space.Error{Kind: space.KindInvalid, Message: "the page is not valid",
				Fields: []space.FieldError{{Field: "cursor", Reason: "does not name a revision"}}}
		}
		// A GSI's start key holds the index's key and the table's.
		in.ExclusiveStartKey = map[string]types.AttributeValue{hash: str(value), rng: str(page.After),
			"pk": str(orgPK(org)), "sk": str(prefixRevision + id)}
	}
	out := make([]space.RevisionSummary, 0, page.Limit+1)
	var last []string // the range key of each item in out
	for len(out) <= page.Limit {
		in.Limit = aws.Int32(int32(page.Limit + 1 - len(out)))
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", awsError("Query", err)
		}
		for _, item := range res.Items {
			var r struct {
				space.RevisionSummary
				RevKey     string `json:"rev_key"`
				StoppedKey string `json:"stopped_key"`
			}
			if err := s.decode(item, &r); err != nil {
				return nil, "", err
			}
			if r.OrgID != org {
				continue
			}
			out = append(out, r.RevisionSummary)
			last = append(last, map[string]string{"rev_key": r.RevKey, "stopped_key": r.StoppedKey}[rng])
		}
		if res.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	if len(out) > page.Limit {
		return out[:page.Limit], last[page.Limit-1], nil
	}
	return out, "", nil
}
