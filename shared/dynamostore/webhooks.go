package dynamostore

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// Sealer encrypts and decrypts the webhook endpoints' signing secrets
// (shared/kmsseal: the template's KMS key). ec binds a ciphertext to its
// item: a sealed value copied onto another endpoint does not open.
type Sealer interface {
	Seal(ctx context.Context, plaintext []byte, ec map[string]string) ([]byte, error)
	Open(ctx context.Context, ciphertext []byte, ec map[string]string) ([]byte, error)
}

// WithSealer sets what seals webhook secrets; without one, the webhook
// calls fail (no secret is ever stored in the clear).
func WithSealer(s Sealer) Option { return func(st *Store) { st.sealer = s } }

var _ space.WebhookStore = (*Store)(nil)

func webhookEC(org, id string) map[string]string {
	return map[string]string{"org_id": org, "webhook_id": id}
}

// webhookItem is the endpoint's item: its fields and its secrets, sealed.
func (s *Store) webhookItem(ctx context.Context, e space.WebhookEndpoint) (map[string]types.AttributeValue, error) {
	if s.sealer == nil {
		return nil, internal("seal webhook secrets", errors.New("no sealer configured"))
	}
	item, err := s.encode(e)
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(e.Secrets)
	if err != nil {
		return nil, internal("encode webhook secrets", err)
	}
	sealed, err := s.sealer.Seal(ctx, plain, webhookEC(e.OrgID, e.ID))
	if err != nil {
		return nil, unavailable("the key that seals webhook secrets is unavailable", err)
	}
	item[attrSecretsSealed] = &types.AttributeValueMemberB{Value: sealed}
	for k, v := range itemKey(e.OrgID, webhookSK(e.ID)) {
		item[k] = v
	}
	return item, nil
}

// decodeWebhook reads an endpoint's item, opening its secrets when open.
func (s *Store) decodeWebhook(ctx context.Context, item map[string]types.AttributeValue, open bool) (space.WebhookEndpoint, error) {
	var e space.WebhookEndpoint
	if err := s.decode(item, &e); err != nil {
		return e, err
	}
	if !open {
		return e, nil
	}
	b, ok := item[attrSecretsSealed].(*types.AttributeValueMemberB)
	if !ok || s.sealer == nil {
		return e, internal("open webhook secrets", errors.New("no sealed secrets or no sealer"))
	}
	plain, err := s.sealer.Open(ctx, b.Value, webhookEC(e.OrgID, e.ID))
	if err != nil {
		return e, unavailable("the key that seals webhook secrets is unavailable", err)
	}
	if err := json.Unmarshal(plain, &e.Secrets); err != nil {
		return e, internal("decode webhook secrets", err)
	}
	return e, nil
}

// CreateWebhook stores a new endpoint, only if its id is free.
func (s *Store) CreateWebhook(ctx context.Context, e space.WebhookEndpoint) error {
	item, err := s.webhookItem(ctx, e)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(" + nPK + ")"),
		ExpressionAttributeNames: names(nPK)})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return space.Errorf(space.KindConflict, "a webhook endpoint with id %s already exists", e.ID)
	default:
		return awsError("PutItem", err)
	}
}

// GetWebhook returns org's endpoint with its secrets (one Decrypt).
func (s *Store) GetWebhook(ctx context.Context, org, id string) (space.WebhookEndpoint, error) {
	item, err := s.getItem(ctx, itemKey(org, webhookSK(id)))
	if err != nil {
		return space.WebhookEndpoint{}, err
	}
	if item == nil {
		return space.WebhookEndpoint{}, space.ErrNotFound("webhook endpoint")
	}
	return s.decodeWebhook(ctx, item, true)
}

// ListWebhooks returns org's endpoints ordered by id, without their
// secrets (no Decrypt: a list never shows them).
func (s *Store) ListWebhooks(ctx context.Context, org string, page space.Page) ([]space.WebhookEndpoint, string, error) {
	if err := checkLimit(page.Limit); err != nil {
		return nil, "", err
	}
	out := make([]space.WebhookEndpoint, 0, page.Limit+1)
	err := s.queryOrg(ctx, org, prefixWebhook, page.After, "", nil, nil,
		func() int { return page.Limit + 1 - len(out) },
		func(item map[string]types.AttributeValue) error {
			e, err := s.decodeWebhook(ctx, item, false)
			if err != nil {
				return err
			}
			if e.ID > page.After {
				out = append(out, e)
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

// UpdateWebhook changes an endpoint (space.Run): the whole item is put
// again, secrets sealed again, only over the version read.
func (s *Store) UpdateWebhook(ctx context.Context, org, id string, u space.Update[space.WebhookEndpoint]) (space.Updated[space.WebhookEndpoint], error) {
	return space.Run(ctx, space.WebhookVersioned, u,
		func(ctx context.Context) (space.WebhookEndpoint, error) { return s.GetWebhook(ctx, org, id) },
		func(ctx context.Context, before, after space.WebhookEndpoint) error {
			item, err := s.webhookItem(ctx, after)
			if err != nil {
				return err
			}
			err = s.putVersioned(ctx, "webhook endpoint", s.versionedPut(item, before.Version), before.Version)
			if space.KindOf(err) == space.KindPreconditionFailed {
				// Gone since the read: not found, never "changed".
				if cur, gerr := s.getItem(ctx, itemKey(org, webhookSK(id))); gerr == nil && cur == nil {
					return space.ErrNotFound("webhook endpoint")
				}
			}
			return err
		})
}

// DeleteWebhook removes an endpoint, only at version when version is not
// 0. Its delivery log expires with its TTL.
func (s *Store) DeleteWebhook(ctx context.Context, org, id string, version int64) error {
	in := &dynamodb.DeleteItemInput{TableName: s.table, Key: itemKey(org, webhookSK(id)),
		ConditionExpression:                 aws.String("attribute_exists(" + nPK + ")"),
		ExpressionAttributeNames:            names(nPK),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	if version != 0 {
		in.ConditionExpression = aws.String(versionIs)
		in.ExpressionAttributeNames = names(nPK, nVersion)
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": num(version)}
	}
	_, err := s.db.DeleteItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &ccf):
		return awsError("DeleteItem", err)
	}
	item := ccf.Item
	if item == nil {
		if item, err = s.getItem(ctx, itemKey(org, webhookSK(id))); err != nil {
			return err
		}
	}
	if item == nil {
		return space.ErrNotFound("webhook endpoint")
	}
	return s.changedFrom("webhook endpoint", item, version)
}
