package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
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
	err := s.getDecoded(ctx, org, prefixRevision+id, "revision", &r)
	return r, err
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
			_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item,
				ConditionExpression:                 aws.String("attribute_exists(" + nPK + ") AND " + nVersion + " = :prev"),
				ExpressionAttributeNames:            names(nPK, nVersion),
				ExpressionAttributeValues:           map[string]types.AttributeValue{":prev": num(before.Version)},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
			var ccf *types.ConditionalCheckFailedException
			switch {
			case err == nil:
				return nil
			case errors.As(err, &ccf):
				var stored space.Revision
				if err := s.decode(ccf.Item, &stored); err != nil {
					return err
				}
				return space.ErrChanged("revision", stored.Version, before.Version)
			default:
				return awsError("PutItem", err)
			}
		})
}

// SpaceAsClaimed returns a space item of org whether or not it is
// deregistered (found is false when there is none): the revision claim must
// tell "deregistered" from "unknown".
func (s *Store) SpaceAsClaimed(ctx context.Context, org, id string) (space.Space, bool, error) {
	return s.readSpace(ctx, org, id)
}
