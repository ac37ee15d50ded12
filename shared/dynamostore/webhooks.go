package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/provisioning"
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
	return s.putNew(ctx, item, "a webhook endpoint", e.ID)
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

// WebhookEvent reads a record of the table's stream as an event for the
// org's webhook endpoints: a space item's INSERT (space.registered), the
// MODIFY that sets its deleted_at (space.deregistered), a history item's
// INSERT (space.status_changed: every stored transition, written in the
// same transaction as the space), a revision's MODIFY into deployed,
// failed or stopped (revision.*, space.RevisionEvent), a provisioning
// job's into succeeded or failed (provisioning_job.*,
// provisioning.WebhookEvent), a cloud account's verification stored as
// failed (cloud_account.verification_failed) and a live space's MODIFY
// that changes its version or announces an inventory threshold
// (space.version_changed, space.support_ending,
// space.certificate_expiring: space.InventoryEvent). Anything else is not an
// event. The
// webhook-id is "msg_" and the record's event id: the same for every read
// of the record.
func (s *Store) WebhookEvent(r events.DynamoDBEventRecord) (space.WebhookEvent, bool) {
	pk, _ := r.Change.Keys["pk"]
	sk, _ := r.Change.Keys["sk"]
	if pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString || r.EventID == "" {
		return space.WebhookEvent{}, false
	}
	id := "msg_" + r.EventID
	switch {
	case r.EventName == string(events.DynamoDBOperationTypeInsert) && strings.HasPrefix(pk.String(), prefixOrg) && strings.HasPrefix(sk.String(), prefixSpace):
		var sp space.Space
		if err := s.decode(streamImage(r.Change.NewImage), &sp); err != nil || sp.ID == "" || sp.Deleted() {
			return space.WebhookEvent{}, false
		}
		return space.WebhookEvent{ID: id, OrgID: sp.OrgID, Type: space.EventSpaceRegistered, At: sp.CreatedAt,
			SpaceID: sp.ID, Labels: sp.Labels, HasLabels: true,
			Data: space.SpaceEventData{SpaceID: sp.ID, Name: sp.Name, Provider: sp.Provider, CloudAccountID: sp.CloudAccountID,
				Connectivity: string(sp.Connectivity), Labels: sp.Labels, Status: sp.Status}}, true
	case r.EventName == string(events.DynamoDBOperationTypeModify) && strings.HasPrefix(pk.String(), prefixOrg) && strings.HasPrefix(sk.String(), prefixRevision):
		// Decoded as summaries: the manifests are never read, nor sent.
		var before, after space.RevisionSummary
		if s.decode(streamImage(r.Change.OldImage), &before) != nil || s.decode(streamImage(r.Change.NewImage), &after) != nil {
			return space.WebhookEvent{}, false
		}
		t, data, ok := space.RevisionEvent(before, after)
		if !ok {
			return space.WebhookEvent{}, false
		}
		return space.WebhookEvent{ID: id, OrgID: after.OrgID, Type: t, At: data.At, SpaceID: after.SpaceID, Data: data}, true
	case r.EventName == string(events.DynamoDBOperationTypeModify) && strings.HasPrefix(pk.String(), prefixOrg) && strings.HasPrefix(sk.String(), prefixJob):
		var before, after provisioning.Job
		if s.decode(streamImage(r.Change.OldImage), &before) != nil || s.decode(streamImage(r.Change.NewImage), &after) != nil {
			return space.WebhookEvent{}, false
		}
		t, data, ok := provisioning.WebhookEvent(before, after)
		if !ok {
			return space.WebhookEvent{}, false
		}
		// About no space: a job's events are not narrowed by a selector.
		return space.WebhookEvent{ID: id, OrgID: after.OrgID, Type: t, At: data.At, Data: data}, true
	case r.EventName == string(events.DynamoDBOperationTypeModify) && strings.HasPrefix(pk.String(), prefixOrg) && strings.HasPrefix(sk.String(), prefixAccount):
		var before, after space.CloudAccount
		if s.decode(streamImage(r.Change.OldImage), &before) != nil || s.decode(streamImage(r.Change.NewImage), &after) != nil ||
			!space.AccountVerificationFailed(before, after) {
			return space.WebhookEvent{}, false
		}
		// A failed verification stores no time of its own: the change's.
		at := r.Change.ApproximateCreationDateTime.UTC()
		if at.IsZero() || at.Unix() <= 0 {
			at = after.CreatedAt.UTC()
		}
		return space.WebhookEvent{ID: id, OrgID: after.OrgID, Type: space.EventAccountVerificationFailed, At: at,
			Data: space.AccountEventData{CloudAccountID: after.ID, Provider: after.Provider, Name: after.Name, Status: after.Status,
				Reason: after.StatusReason, Message: after.StatusMessage, At: at}}, true
	case r.EventName == string(events.DynamoDBOperationTypeModify):
		d, ok := s.Deregistration(r)
		if !ok {
			return s.inventoryEvent(id, r)
		}
		var sp space.Space
		_ = s.decode(streamImage(r.Change.NewImage), &sp) // the labels; Deregistration read the rest
		at := d.DeletedAt.UTC()
		return space.WebhookEvent{ID: id, OrgID: d.OrgID, Type: space.EventSpaceDeregistered, At: at,
			SpaceID: d.SpaceID, Labels: sp.Labels, HasLabels: true,
			Data: space.SpaceEventData{SpaceID: d.SpaceID, Name: d.Name, Provider: d.Provider, CloudAccountID: d.CloudAccountID,
				Connectivity: string(d.Connectivity), Labels: sp.Labels, DeregisteredAt: &at, DeregisteredBy: d.DeletedBy}}, true
	case r.EventName == string(events.DynamoDBOperationTypeInsert) && strings.HasPrefix(pk.String(), prefixSpace) && strings.HasPrefix(sk.String(), prefixHist):
		var tr space.Transition
		if err := s.decode(streamImage(r.Change.NewImage), &tr); err != nil || tr.OrgID == "" || tr.SpaceID == "" {
			return space.WebhookEvent{}, false
		}
		return space.WebhookEvent{ID: id, OrgID: tr.OrgID, Type: space.EventSpaceStatusChanged, At: tr.At, SpaceID: tr.SpaceID,
			Data: space.StatusChangedData{SpaceID: tr.SpaceID, From: tr.From, To: tr.To, Reason: tr.Reason, Detail: tr.Message, At: tr.At.UTC()}}, true
	}
	return space.WebhookEvent{}, false
}

// inventoryEvent reads a live space item's MODIFY as the inventory's
// event it stores (space.InventoryEvent): a changed version, or a
// threshold newly announced.
func (s *Store) inventoryEvent(id string, r events.DynamoDBEventRecord) (space.WebhookEvent, bool) {
	pk, sk := r.Change.Keys["pk"], r.Change.Keys["sk"]
	if !strings.HasPrefix(pk.String(), prefixOrg) || !strings.HasPrefix(sk.String(), prefixSpace) {
		return space.WebhookEvent{}, false
	}
	var before, after space.Space
	if s.decodeSpace(streamImage(r.Change.OldImage), &before) != nil || s.decodeSpace(streamImage(r.Change.NewImage), &after) != nil {
		return space.WebhookEvent{}, false
	}
	t, data, ok := space.InventoryEvent(before, after)
	if !ok {
		return space.WebhookEvent{}, false
	}
	return space.WebhookEvent{ID: id, OrgID: after.OrgID, Type: t, At: after.UpdatedAt.UTC(), SpaceID: after.ID,
		Labels: after.Labels, HasLabels: true, Data: data}, true
}

// streamImage converts a stream record's image into an item.
func streamImage(img map[string]events.DynamoDBAttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		out[k] = streamAttr(v)
	}
	return out
}

func streamAttr(v events.DynamoDBAttributeValue) types.AttributeValue {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}
	case events.DataTypeList:
		l := v.List()
		out := make([]types.AttributeValue, len(l))
		for i, e := range l {
			out[i] = streamAttr(e)
		}
		return &types.AttributeValueMemberL{Value: out}
	case events.DataTypeMap:
		return &types.AttributeValueMemberM{Value: streamImage(v.Map())}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}

// RecordAttempt puts one attempt in its endpoint's delivery log; it
// expires after space.DeliveryLogTTL.
func (s *Store) RecordAttempt(ctx context.Context, a space.DeliveryAttempt) error {
	item, err := s.encode(a)
	if err != nil {
		return err
	}
	item["pk"] = str(prefixWebhook + a.EndpointID)
	item["sk"] = str(prefixAttempt + a.At.UTC().Format(histTime) + "#" + a.WebhookID)
	item["expires_at"] = num(a.At.Add(space.DeliveryLogTTL).Unix())
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item}); err != nil {
		return awsError("PutItem", err)
	}
	return nil
}

// Attempts returns an endpoint's delivery log, newest first: at most
// limit attempts, and the position to continue after when more may follow.
// Only org's endpoint's log is read.
func (s *Store) Attempts(ctx context.Context, org, endpointID string, page space.Page) ([]space.DeliveryAttempt, string, error) {
	if err := checkLimit(page.Limit); err != nil {
		return nil, "", err
	}
	in := &dynamodb.QueryInput{TableName: s.table, ConsistentRead: aws.Bool(true), ScanIndexForward: aws.Bool(false),
		KeyConditionExpression:    aws.String(nPK + " = :pk AND begins_with(" + nSK + ", :prefix)"),
		FilterExpression:          aws.String(nOrg + " = :org"),
		ExpressionAttributeNames:  names(nPK, nSK, nOrg),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(prefixWebhook + endpointID), ":prefix": str(prefixAttempt), ":org": str(org)},
		Limit:                     aws.Int32(int32(page.Limit + 1))}
	if page.After != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{"pk": str(prefixWebhook + endpointID), "sk": str(page.After)}
	}
	return queryPage[space.DeliveryAttempt](ctx, s, in, page.Limit)
}

var _ space.EventStore = (*Store)(nil)

// SaveEvent keeps an event as delivered to its endpoint, for replay, until
// space.EventRetention after at (a replay's first attempt puts it again,
// unchanged but for a later expiry).
func (s *Store) SaveEvent(ctx context.Context, e space.StoredEvent, at time.Time) error {
	item, err := s.encode(e)
	if err != nil {
		return err
	}
	item["pk"] = str(prefixWebhook + e.EndpointID)
	item["sk"] = str(prefixEvent + e.WebhookID)
	item["expires_at"] = num(at.Add(space.EventRetention).Unix())
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item}); err != nil {
		return awsError("PutItem", err)
	}
	return nil
}

// DeliveredEvent returns org's endpoint's kept event webhookID; one past
// its retention (which DynamoDB's TTL may not have removed yet) is not
// found.
func (s *Store) DeliveredEvent(ctx context.Context, org, endpointID, webhookID string) (space.StoredEvent, error) {
	item, err := s.getItem(ctx, map[string]types.AttributeValue{"pk": str(prefixWebhook + endpointID), "sk": str(prefixEvent + webhookID)})
	if err != nil {
		return space.StoredEvent{}, err
	}
	var e space.StoredEvent
	if item != nil {
		if err := s.decode(item, &e); err != nil {
			return e, err
		}
	}
	if item == nil || e.OrgID != org || expired(item, s.now()) {
		return space.StoredEvent{}, space.ErrNotFound("delivery")
	}
	return e, nil
}

func expired(item map[string]types.AttributeValue, now time.Time) bool {
	n, ok := item["expires_at"].(*types.AttributeValueMemberN)
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(n.Value, 10, 64)
	return err == nil && exp <= now.Unix()
}

// DeliveredSince returns at most limit of org's endpoint's kept events
// whose first attempt in the delivery log is at or after since, oldest
// first, and when more remain, the attempt time to continue from: the log
// (ATT#, ordered by time) is read from since, each event once, then each
// event's item; an event no longer kept is skipped.
func (s *Store) DeliveredSince(ctx context.Context, org, endpointID string, since time.Time, limit int) ([]space.StoredEvent, *time.Time, error) {
	in := &dynamodb.QueryInput{TableName: s.table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String(nPK + " = :pk AND " + nSK + " BETWEEN :from AND :to"),
		FilterExpression:          aws.String(nOrg + " = :org"),
		ProjectionExpression:      aws.String(nSK + ", webhook_id"),
		ExpressionAttributeNames:  names(nPK, nSK, nOrg),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(prefixWebhook + endpointID), ":from": str(prefixAttempt + since.UTC().Format(histTime)), ":to": str(prefixAttempt + "~"), ":org": str(org)}}
	seen := map[string]bool{}
	var ids []string
	var next *time.Time
	for next == nil {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, nil, awsError("Query", err)
		}
		for _, item := range res.Items {
			v, _ := item["webhook_id"].(*types.AttributeValueMemberS)
			if v == nil || seen[v.Value] {
				continue
			}
			if len(ids) == limit {
				sk, _ := item["sk"].(*types.AttributeValueMemberS)
				at := since
				if sk != nil && len(sk.Value) >= len(prefixAttempt)+len(histTime) {
					if t, err := time.Parse(histTime, sk.Value[len(prefixAttempt):len(prefixAttempt)+len(histTime)]); err == nil {
						at = t
					}
				}
				next = &at
				break
			}
			seen[v.Value] = true
			ids = append(ids, v.Value)
		}
		if res.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	out := make([]space.StoredEvent, 0, len(ids))
	for _, id := range ids {
		e, err := s.DeliveredEvent(ctx, org, endpointID, id)
		if space.KindOf(err) == space.KindNotFound {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		out = append(out, e)
	}
	return out, next, nil
}
