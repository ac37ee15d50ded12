package dynamostore

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/backoff"
	"spaces/shared/space"
)

// maxBatchGet is DynamoDB's limit of keys per BatchGetItem.
const maxBatchGet = 100

// grantRecord is the stored form of a grant.
type grantRecord struct {
	SpaceID        string         `json:"space_id"`
	Provider       space.Provider `json:"provider"`
	CloudAccountID string         `json:"cloud_account_id"`
	CreatedAt      string         `json:"created_at"`
}

// grantItem is the Put that creates sp's grant, only if absent (a space id
// is new at registration, so a present grant is a bug, not a race).
func (s *Store) grantItem(sp space.Space) (types.TransactWriteItem, error) {
	item, err := s.encode(grantRecord{SpaceID: sp.ID, Provider: sp.Provider, CloudAccountID: sp.CloudAccountID,
		CreatedAt: sp.CreatedAt.UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	for k, v := range itemKey(sp.OrgID, prefixGrant+sp.ID) {
		item[k] = v
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: s.table, Item: item,
		ConditionExpression: aws.String("attribute_not_exists(" + nPK + ")"), ExpressionAttributeNames: names(nPK),
	}}, nil
}

// revokeGrantItem is the Delete that removes a space's grant. It has no
// condition: a space without a grant still deregisters.
func (s *Store) revokeGrantItem(org, id string) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{TableName: s.table, Key: itemKey(org, prefixGrant+id)}}
}

// HasGrant reports whether credentials may be minted for the space: it is
// registered in org and not deregistered. The read is strongly consistent,
// so a deregistration is seen at once.
func (s *Store) HasGrant(ctx context.Context, org, spaceID string) (bool, error) {
	item, err := s.getItem(ctx, itemKey(org, prefixGrant+spaceID))
	if err != nil {
		return false, err
	}
	return item != nil, nil
}

// ClaimHolders returns, for each of the identities (space.Identity strings)
// that is registered in org, the id of the space holding it. Identities not
// registered are absent from the map.
func (s *Store) ClaimHolders(ctx context.Context, org string, identities []string) (map[string]string, error) {
	out := make(map[string]string, len(identities))
	seen := make(map[string]bool, len(identities))
	var keys []map[string]types.AttributeValue
	for _, id := range identities {
		if !seen[id] {
			seen[id] = true
			keys = append(keys, itemKey(org, prefixClaim+id))
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), maxBatchGet)
		batch := keys[:n]
		keys = keys[n:]
		for attempt := 1; len(batch) > 0; attempt++ {
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				*s.table: {Keys: batch, ConsistentRead: aws.Bool(true)},
			}})
			if err != nil {
				return nil, awsError("BatchGetItem", err)
			}
			for _, item := range res.Responses[*s.table] {
				var c claimRecord
				var sk string
				if err := s.decode(item, &c); err != nil {
					return nil, err
				}
				if v, ok := item["sk"].(*types.AttributeValueMemberS); ok {
					sk = v.Value
				}
				if len(sk) > len(prefixClaim) && c.SpaceID != "" {
					out[sk[len(prefixClaim):]] = c.SpaceID
				}
			}
			// Keys DynamoDB did not get to (throttling, size) come back
			// unprocessed; ask again after a pause.
			batch = res.UnprocessedKeys[*s.table].Keys
			if len(batch) > 0 {
				if attempt == maxAttempts {
					return nil, unavailable("the registry store is busy", nil)
				}
				if err := backoff.Wait(ctx, backoffBase, attempt); err != nil {
					return nil, unavailable("the registry store is busy", err)
				}
			}
		}
	}
	return out, nil
}
