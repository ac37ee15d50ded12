package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	stampItem(ctx, item)
	return s.putNew(ctx, item, "a cloud account", a.ID)
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
	a.MarkLegacy()
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
				a.MarkLegacy()
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

// Placeholders of SaveAccount, all of one length: kumo substitutes them by
// plain string replacement, so none may be a prefix of another.
var accountNames = map[string]string{
	"#acSt": "status", "#acRs": "status_reason", "#acMs": "status_message",
	"#acVf": "verified_at", "#acCn": "connection", "#acVn": "version",
}

// SaveAccount stores a verification result: the account's status, reason,
// message, verification time and connection (an AWS external id can be
// replaced), if its stored version is a.Version-1. The space count and
// everything fixed at creation are left alone.
func (s *Store) SaveAccount(ctx context.Context, a space.CloudAccount) error {
	a.Setup = nil
	item, err := s.encode(a)
	if err != nil {
		return err
	}
	vals := map[string]types.AttributeValue{
		":st": str(string(a.Status)), ":rs": str(a.StatusReason), ":ms": str(a.StatusMessage),
		":cn": item["connection"], ":vn": num(a.Version), ":pv": num(a.Version - 1),
	}
	update := "SET #acSt = :st, #acRs = :rs, #acMs = :ms, #acCn = :cn, #acVn = :vn"
	nm := names(nPK)
	for k, v := range accountNames {
		nm[k] = v
	}
	set, remove := stampUpdate(ctx, nm, vals)
	if v, ok := item["verified_at"]; ok {
		set = append(set, "#acVf = :vf")
		vals[":vf"] = v
	} else {
		remove = append(remove, "#acVf")
	}
	for _, t := range set {
		update += ", " + t
	}
	if len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: itemKey(a.OrgID, prefixAccount+a.ID),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND #acVn = :pv"),
		ExpressionAttributeNames:  nm,
		ExpressionAttributeValues: vals,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return space.Errorf(space.KindPreconditionFailed, "the cloud account changed meanwhile; try again")
	default:
		return awsError("UpdateItem", err)
	}
}
