package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

var _ space.RevisionStore = (*Store)(nil)

// CreateRevision stores a new revision.
func (s *Store) CreateRevision(ctx context.Context, r space.Revision) error {
	item, err := s.encode(r)
	if err != nil {
		return err
	}
	for k, v := range itemKey(r.OrgID, prefixRevision+r.ID) {
		item[k] = v
	}
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
			item, err := s.encode(after)
			if err != nil {
				return err
			}
			for k, v := range itemKey(after.OrgID, prefixRevision+after.ID) {
				item[k] = v
			}
			return s.putVersioned(ctx, "revision", s.versionedPut(item, before.Version), before.Version)
		})
}

// SpaceAsClaimed returns a space item of org whether or not it is
// deregistered (found is false when there is none): the revision claim must
// tell "deregistered" from "unknown".
func (s *Store) SpaceAsClaimed(ctx context.Context, org, id string) (space.Space, bool, error) {
	return s.readSpace(ctx, org, id)
}
