package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// spaceRegistered is the ConditionCheck that the space is registered in org
// when the transaction commits.
func (s *Store) spaceRegistered(org, spaceID string) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: s.table, Key: itemKey(org, prefixSpace+spaceID),
		ConditionExpression:      aws.String("attribute_exists(" + nPK + ") AND attribute_not_exists(" + nDeleted + ")"),
		ExpressionAttributeNames: names(nPK, nDeleted),
	}}
}

func (s *Store) linkPut(org, spaceID, sk string) types.TransactWriteItem {
	item := linkKey(spaceID, sk)
	item["org_id"] = str(org)
	return types.TransactWriteItem{Put: &types.Put{TableName: s.table, Item: item}}
}

// createBound writes a new item bound to spaceID with its link.
func (s *Store) createBound(ctx context.Context, op, org, spaceID, sk string, v any) error {
	item, err := s.encode(v)
	if err != nil {
		return err
	}
	for k, av := range itemKey(org, sk) {
		item[k] = av
	}
	const (
		iSpace = iota
		iItem
	)
	items := []types.TransactWriteItem{
		iSpace: s.spaceRegistered(org, spaceID),
		iItem: {Put: &types.Put{TableName: s.table, Item: item,
			ConditionExpression: aws.String("attribute_not_exists(" + nPK + ")"), ExpressionAttributeNames: names(nPK)}},
		s.linkPut(org, spaceID, sk),
	}
	return s.transact(ctx, op, func() ([]types.TransactWriteItem, error) { return items, nil },
		func(reasons []types.CancellationReason) error {
			switch {
			case failedCheck(reasons, iSpace):
				return space.ErrSpaceNotBindable()
			case failedCheck(reasons, iItem):
				return internal(op, fmt.Errorf("id %s is already taken", sk))
			}
			return nil
		})
}

// CreateEnvironment stores a new environment and its link (see the file doc).
func (s *Store) CreateEnvironment(ctx context.Context, e space.Environment) error {
	return s.createBound(ctx, "create environment", e.OrgID, e.SpaceID, prefixEnv+e.ID, e)
}

// CreatePolicy stores a new autoscaler policy and its link.
func (s *Store) CreatePolicy(ctx context.Context, p space.AutoscalerPolicy) error {
	return s.createBound(ctx, "create policy", p.OrgID, p.SpaceID, prefixPolicy+p.ID, p)
}

// getDecoded reads one item of org into v, strongly consistent.
func (s *Store) getDecoded(ctx context.Context, org, sk, what string, v any) error {
	item, err := s.getItem(ctx, itemKey(org, sk))
	if err != nil {
		return err
	}
	if item == nil {
		return space.ErrNotFound(what)
	}
	return s.decode(item, v)
}

// GetEnvironment returns one environment of org.
func (s *Store) GetEnvironment(ctx context.Context, org, id string) (space.Environment, error) {
	var e space.Environment
	err := s.getDecoded(ctx, org, prefixEnv+id, "environment", &e)
	return e, err
}

// GetPolicy returns one autoscaler policy of org.
func (s *Store) GetPolicy(ctx context.Context, org, id string) (space.AutoscalerPolicy, error) {
	var p space.AutoscalerPolicy
	err := s.getDecoded(ctx, org, prefixPolicy+id, "autoscaler policy", &p)
	return p, err
}

// listOrg pages through org's items under prefix, decoding each as a T.
func listOrg[T any](ctx context.Context, s *Store, org, prefix string, page space.Page, id func(T) string) ([]T, string, error) {
	if err := checkLimit(page.Limit); err != nil {
		return nil, "", err
	}
	out := make([]T, 0, page.Limit+1)
	err := s.queryOrg(ctx, org, prefix, page.After, "", nil, nil,
		func() int { return page.Limit + 1 - len(out) },
		func(item map[string]types.AttributeValue) error {
			var v T
			if err := s.decode(item, &v); err != nil {
				return err
			}
			if id(v) > page.After {
				out = append(out, v)
			}
			return nil
		})
	if err != nil {
		return nil, "", err
	}
	if len(out) > page.Limit {
		out = out[:page.Limit]
		return out, id(out[len(out)-1]), nil
	}
	return out, "", nil
}

// ListEnvironments returns org's environments in id order.
func (s *Store) ListEnvironments(ctx context.Context, org string, page space.Page) ([]space.Environment, string, error) {
	return listOrg(ctx, s, org, prefixEnv, page, func(e space.Environment) string { return e.ID })
}

// ListPolicies returns org's autoscaler policies in id order.
func (s *Store) ListPolicies(ctx context.Context, org string, page space.Page) ([]space.AutoscalerPolicy, string, error) {
	return listOrg(ctx, s, org, prefixPolicy, page, func(p space.AutoscalerPolicy) string { return p.ID })
}

// DeletePolicy deletes an autoscaler policy and its link to its space in
// one transaction, conditional on the policy being there at the version
// read (or at version when given): a change that slips in between the read
// and the delete (the cascade detaching it) is read again when any version
// was asked for, and answered KindChanged otherwise.
func (s *Store) DeletePolicy(ctx context.Context, org, id string, version int64) error {
	const iPolicy = 0
	return s.transact(ctx, "delete policy", func() ([]types.TransactWriteItem, error) {
		p, err := s.GetPolicy(ctx, org, id)
		if err != nil {
			return nil, err
		}
		prev := version
		switch {
		case prev == 0:
			prev = p.Version
		case prev != p.Version:
			return nil, space.ErrChanged("autoscaler policy", p.Version, version)
		}
		return []types.TransactWriteItem{
			iPolicy: {Delete: &types.Delete{TableName: s.table, Key: itemKey(org, prefixPolicy+id),
				ConditionExpression: aws.String(versionIs), ExpressionAttributeNames: names(nPK, nVersion),
				ExpressionAttributeValues:           map[string]types.AttributeValue{":prev": num(prev)},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{Delete: &types.Delete{TableName: s.table, Key: linkKey(p.SpaceID, prefixPolicy+id)}},
		}, nil
	}, func(reasons []types.CancellationReason) error {
		switch {
		case !failedCheck(reasons, iPolicy):
			return nil
		case version == 0:
			// Gone or changed since the read: read again.
			return errRetry
		}
		item := reasons[iPolicy].Item
		if item == nil {
			// Not every store returns the item with the reason.
			var err error
			if item, err = s.getItem(ctx, itemKey(org, prefixPolicy+id)); err != nil {
				return err
			}
		}
		if item == nil {
			return space.ErrNotFound("autoscaler policy")
		}
		return s.changedFrom("autoscaler policy", item, version)
	})
}

// RebindEnvironment moves an environment to spaceID and clears its gate in
// one transaction: the new space must be registered, the environment at the
// version read (or at version when given), the old link deleted and the new
// one put.
func (s *Store) RebindEnvironment(ctx context.Context, org, id, spaceID string, version int64, at time.Time) (space.Environment, error) {
	res, err := space.Run(ctx, space.EnvironmentVersioned, space.Update[space.Environment]{IfVersion: version, At: at,
		Apply: func(e space.Environment) (space.Environment, error) { e.SpaceID, e.Gate = spaceID, nil; return e, nil }},
		func(ctx context.Context) (space.Environment, error) { return s.GetEnvironment(ctx, org, id) },
		s.writeRebind)
	return res.After, err
}

// writeRebind is RebindEnvironment's transaction.
func (s *Store) writeRebind(ctx context.Context, before, after space.Environment) error {
	const (
		iSpace = iota
		iEnv
	)
	org, id := after.OrgID, after.ID
	items := []types.TransactWriteItem{
		iSpace: s.spaceRegistered(org, after.SpaceID),
		iEnv: {Update: &types.Update{
			TableName: s.table, Key: itemKey(org, prefixEnv+id),
			UpdateExpression:         aws.String("SET " + nSpaceID + " = :space, " + nUpdated + " = :upd, " + nVersion + " = :ver REMOVE " + nGate),
			ConditionExpression:      aws.String(versionIs),
			ExpressionAttributeNames: names(nSpaceID, nUpdated, nVersion, nGate, nPK),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":space": str(after.SpaceID), ":upd": str(after.UpdatedAt.Format(time.RFC3339Nano)),
				":ver": num(after.Version), ":prev": num(before.Version),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
	}
	if before.SpaceID != after.SpaceID {
		items = append(items,
			types.TransactWriteItem{Delete: &types.Delete{TableName: s.table, Key: linkKey(before.SpaceID, prefixEnv+id)}},
			s.linkPut(org, after.SpaceID, prefixEnv+id))
	}
	return s.transact(ctx, "rebind environment", func() ([]types.TransactWriteItem, error) { return items, nil },
		func(reasons []types.CancellationReason) error {
			switch {
			case failedCheck(reasons, iSpace):
				return space.ErrSpaceNotBindable()
			case failedCheck(reasons, iEnv):
				// Changed meanwhile (a cascade gate, another re-bind).
				return s.changedFrom("environment", reasons[iEnv].Item, before.Version)
			}
			return nil
		})
}

// BoundTo returns everything bound to spaceID, read strongly consistent.
func (s *Store) BoundTo(ctx context.Context, spaceID string) ([]space.Bound, error) {
	in := &dynamodb.QueryInput{
		TableName:                 s.table,
		KeyConditionExpression:    aws.String(nPK + " = :pk"),
		ExpressionAttributeNames:  names(nPK),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(spacePK(spaceID))},
		ConsistentRead:            aws.Bool(true),
	}
	var out []space.Bound
	for {
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, awsError("Query", err)
		}
		for _, item := range page.Items {
			var l struct {
				SK    string `json:"sk"`
				OrgID string `json:"org_id"`
			}
			if err := s.decode(item, &l); err != nil {
				return nil, err
			}
			switch {
			case len(l.SK) > len(prefixEnv) && l.SK[:len(prefixEnv)] == prefixEnv:
				out = append(out, space.Bound{OrgID: l.OrgID, Kind: space.BoundEnvironment, ID: l.SK[len(prefixEnv):]})
			case len(l.SK) > len(prefixPolicy) && l.SK[:len(prefixPolicy)] == prefixPolicy:
				out = append(out, space.Bound{OrgID: l.OrgID, Kind: space.BoundPolicy, ID: l.SK[len(prefixPolicy):]})
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// updateIf runs a conditional UpdateItem and reports whether it wrote:
// a failed condition means there was nothing (more) to do.
func (s *Store) updateIf(ctx context.Context, in *dynamodb.UpdateItemInput) (bool, error) {
	in.TableName = s.table
	_, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil
	default:
		return false, awsError("UpdateItem", err)
	}
}

// GateEnvironment gates an environment with g, only if it is still bound
// to spaceID and not gated yet. It reports whether it wrote.
func (s *Store) GateEnvironment(ctx context.Context, org, id, spaceID string, g space.Gate) (bool, error) {
	at := g.Since.UTC()
	g.Since = at
	gate, err := s.enc.Encode(g)
	if err != nil {
		return false, internal("encode gate", err)
	}
	return s.updateIf(ctx, &dynamodb.UpdateItemInput{
		Key:                      itemKey(org, prefixEnv+id),
		UpdateExpression:         aws.String("SET " + nGate + " = :gate, " + nUpdated + " = :upd, " + nVersion + " = " + nVersion + " + :one"),
		ConditionExpression:      aws.String("attribute_exists(" + nPK + ") AND " + nSpaceID + " = :space AND attribute_not_exists(" + nGate + ")"),
		ExpressionAttributeNames: names(nGate, nUpdated, nVersion, nPK, nSpaceID),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":gate": gate, ":upd": str(at.Format(time.RFC3339Nano)), ":one": num(1), ":space": str(spaceID),
		},
	})
}

// DetachPolicy detaches an applied policy on spaceID with reason. It
// reports whether it wrote.
func (s *Store) DetachPolicy(ctx context.Context, org, id, spaceID, reason string, at time.Time) (bool, error) {
	return s.updateIf(ctx, &dynamodb.UpdateItemInput{
		Key:                      itemKey(org, prefixPolicy+id),
		UpdateExpression:         aws.String("SET " + nPState + " = :detached, " + nPReason + " = :why, " + nUpdated + " = :upd, " + nVersion + " = " + nVersion + " + :one"),
		ConditionExpression:      aws.String("attribute_exists(" + nPK + ") AND " + nSpaceID + " = :space AND " + nPState + " = :applied"),
		ExpressionAttributeNames: names(nPState, nPReason, nUpdated, nVersion, nPK, nSpaceID),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":detached": str(string(space.PolicyDetached)), ":applied": str(string(space.PolicyApplied)), ":why": str(reason),
			":upd": str(at.UTC().Format(time.RFC3339Nano)), ":one": num(1), ":space": str(spaceID),
		},
	})
}

// RevokeGrant deletes the space's kubeauth grant if it is still there (the
// deregistration's transaction normally did). It reports whether it deleted.
func (s *Store) RevokeGrant(ctx context.Context, org, spaceID string) (bool, error) {
	out, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: s.table, Key: itemKey(org, prefixGrant+spaceID),
		ReturnValues: types.ReturnValueAllOld})
	if err != nil {
		return false, awsError("DeleteItem", err)
	}
	return len(out.Attributes) > 0, nil
}

// Cascaded reports whether the cascade of spaceID's deregistration is
// marked done.
func (s *Store) Cascaded(ctx context.Context, org, spaceID string) (bool, error) {
	item, err := s.getItem(ctx, itemKey(org, prefixCascade+spaceID))
	return item != nil, err
}

// MarkCascaded marks the cascade of spaceID done, only if not marked yet;
// it reports whether this call marked it.
func (s *Store) MarkCascaded(ctx context.Context, org, spaceID string, at time.Time) (bool, error) {
	item := itemKey(org, prefixCascade+spaceID)
	item["space_id"] = str(spaceID)
	item["cascaded_at"] = str(at.UTC().Format(time.RFC3339Nano))
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item,
		ConditionExpression: aws.String("attribute_not_exists(" + nPK + ")"), ExpressionAttributeNames: names(nPK)})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil
	default:
		return false, awsError("PutItem", err)
	}
}
