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

// accountCount is the registered-space count kept on an account item.
type accountCount struct {
	SpaceCount int64 `json:"space_count"`
}

// CreateAccount stores a new account with no space counted against it.
func (s *Store) CreateAccount(ctx context.Context, a space.CloudAccount) error {
	item, err := s.encode(a)
	if err != nil {
		return err
	}
	for k, v := range itemKey(a.OrgID, prefixAccount+a.ID) {
		item[k] = v
	}
	item["space_count"] = num(0)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: s.table, Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(" + nPK + ")"),
		ExpressionAttributeNames: names(nPK),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return space.Errorf(space.KindConflict, "a cloud account with id %s already exists", a.ID)
	default:
		return awsError("PutItem", err)
	}
}

// GetAccount returns an account of org.
func (s *Store) GetAccount(ctx context.Context, org, id string) (space.CloudAccount, error) {
	item, err := s.getItem(ctx, itemKey(org, prefixAccount+id))
	if err != nil {
		return space.CloudAccount{}, err
	}
	if item == nil {
		return space.CloudAccount{}, space.ErrNotFound("cloud account")
	}
	var a space.CloudAccount
	if err := s.decode(item, &a); err != nil {
		return space.CloudAccount{}, err
	}
	return a, nil
}

// ListAccounts returns org's accounts ordered by id, after page.After, and
// the id to continue after when more may follow.
func (s *Store) ListAccounts(ctx context.Context, org string, page space.Page) ([]space.CloudAccount, string, error) {
	if err := checkLimit(page.Limit); err != nil {
		return nil, "", err
	}
	out := make([]space.CloudAccount, 0, page.Limit+1)
	err := s.queryOrg(ctx, org, prefixAccount, page.After, "", nil, nil,
		func() int { return page.Limit + 1 - len(out) },
		func(item map[string]types.AttributeValue) error {
			var a space.CloudAccount
			if err := s.decode(item, &a); err != nil {
				return err
			}
			if a.ID > page.After {
				out = append(out, a)
			}
			return nil
		})
	if err != nil {
		return nil, "", err
	}
	if len(out) > page.Limit {
		out = out[:page.Limit]
		return out, out[len(out)-1].ID, nil
	}
	return out, "", nil
}

// DeleteAccount removes an account no registered space counts against.
func (s *Store) DeleteAccount(ctx context.Context, org, id string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           s.table,
		Key:                                 itemKey(org, prefixAccount+id),
		ConditionExpression:                 aws.String("attribute_exists(" + nPK + ") AND (attribute_not_exists(" + nCount + ") OR " + nCount + " = :zero)"),
		ExpressionAttributeNames:            names(nPK, nCount),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":zero": num(0)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &ccf):
		return awsError("DeleteItem", err)
	}
	item := ccf.Item
	if item == nil {
		if item, err = s.getItem(ctx, itemKey(org, prefixAccount+id)); err != nil {
			return err
		}
	}
	if item == nil {
		return space.ErrNotFound("cloud account")
	}
	var c accountCount
	if err := s.decode(item, &c); err != nil {
		return err
	}
	spaces := "spaces"
	if c.SpaceCount == 1 {
		spaces = "space"
	}
	return &space.Error{Kind: space.KindConflict,
		Message: fmt.Sprintf("the cloud account is used by %d registered %s", c.SpaceCount, spaces)}
}
