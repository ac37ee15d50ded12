package dynamostore_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/kmsseal"
	"spaces/shared/space"
)

// webhookFixture is a store on the emulator whose webhook secrets are
// sealed by the template's WebhookSecretsKey in the emulator's KMS.
func webhookFixture(t *testing.T) (*dynamostore.Store, *dynamodb.Client, string, kmsseal.Sealer) {
	env := emulatortest.Start(t)
	db := awsclient.DynamoDB(env.Config, env.Endpoint)
	sealer := kmsseal.Sealer{KMS: awsclient.KMS(env.Config, env.Endpoint), KeyID: env.Name(t, "WebhookSecretsKey")}
	table := env.Name(t, "SpacesTable")
	return dynamostore.New(db, table, dynamostore.WithSealer(sealer)), db, table, sealer
}

func newEndpoint(org string) space.WebhookEndpoint {
	return space.WebhookEndpoint{ID: uuid.NewString(), OrgID: org, URL: "https://hooks.example.com/x",
		EventTypes: []space.EventType{space.EventSpaceRegistered}, State: space.WebhookEnabled,
		CreatedAt: now, UpdatedAt: now, Version: 1, Secrets: []space.WebhookSecret{{Value: space.NewWebhookSecret()}}}
}

// TestWebhookSecretsAreSealed: the item holds no secret in the clear, only
// a KMS ciphertext bound to the endpoint (it does not open as another
// endpoint's), and a read opens it again.
func TestWebhookSecretsAreSealed(t *testing.T) {
	store, db, table, sealer := webhookFixture(t)
	ctx := t.Context()
	e := newEndpoint(uuid.NewString())
	if err := store.CreateWebhook(ctx, e); err != nil {
		t.Fatal(err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "ORG#" + e.OrgID}, "sk": &types.AttributeValueMemberS{Value: "HOOK#" + e.ID}}})
	if err != nil || out.Item == nil {
		t.Fatalf("raw item: %v %v", out, err)
	}
	secretB64 := strings.TrimPrefix(e.Secrets[0].Value, space.WebhookSecretPrefix)
	for k, v := range out.Item {
		var raw []byte
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			raw = []byte(v.Value)
		case *types.AttributeValueMemberB:
			raw = v.Value
		}
		if bytes.Contains(raw, []byte(secretB64)) {
			t.Errorf("attribute %s holds the secret in the clear", k)
		}
	}
	sealed, ok := out.Item["secrets_sealed"].(*types.AttributeValueMemberB)
	if !ok || len(sealed.Value) == 0 {
		t.Fatalf("no sealed secrets: %v", out.Item["secrets_sealed"])
	}
	if _, err := sealer.Open(ctx, sealed.Value, map[string]string{"org_id": e.OrgID, "webhook_id": e.ID}); err != nil {
		t.Fatalf("the sealed secrets do not open with their own context: %v", err)
	}

	got, err := store.GetWebhook(ctx, e.OrgID, e.ID)
	if err != nil || len(got.Secrets) != 1 || got.Secrets[0].Value != e.Secrets[0].Value || got.URL != e.URL || got.Version != 1 {
		t.Fatalf("GetWebhook: %+v, %v", got, err)
	}
	// Listed without secrets: a list never opens them.
	list, after, err := store.ListWebhooks(ctx, e.OrgID, space.Page{Limit: 10})
	if err != nil || after != "" || len(list) != 1 || list[0].ID != e.ID || list[0].Secrets != nil {
		t.Fatalf("ListWebhooks: %+v %q %v", list, after, err)
	}
	// Another org sees nothing.
	if _, err := store.GetWebhook(ctx, uuid.NewString(), e.ID); space.KindOf(err) != space.KindNotFound {
		t.Errorf("another org's read: %v", err)
	}
	if err := store.CreateWebhook(ctx, e); space.KindOf(err) != space.KindConflict {
		t.Errorf("a second create of the id: %v", err)
	}
}

// TestWebhookUpdateAndDelete: updates go through space.Run (version checked,
// If-Match never retried), a rotation's secrets are stored sealed, and a
// delete is conditional on the version when one is given.
func TestWebhookUpdateAndDelete(t *testing.T) {
	store, _, _, _ := webhookFixture(t)
	ctx := t.Context()
	e := newEndpoint(uuid.NewString())
	if err := store.CreateWebhook(ctx, e); err != nil {
		t.Fatal(err)
	}
	rotated := "whsec_" + strings.Repeat("A", 43) + "="
	res, err := store.UpdateWebhook(ctx, e.OrgID, e.ID, space.Update[space.WebhookEndpoint]{IfVersion: 1, At: now.Add(time.Minute),
		Apply: func(w space.WebhookEndpoint) (space.WebhookEndpoint, error) {
			return w.Rotate(rotated, now.Add(time.Minute), space.WebhookRotationOverlap), nil
		}})
	if err != nil || !res.Written || res.After.Version != 2 {
		t.Fatalf("rotate: %+v %v", res, err)
	}
	got, err := store.GetWebhook(ctx, e.OrgID, e.ID)
	if err != nil || len(got.Secrets) != 2 || got.Secrets[0].Value != rotated || got.Secrets[1].ExpiresAt == nil {
		t.Fatalf("after rotation: %+v %v", got.Secrets, err)
	}
	// A stale If-Match changes nothing.
	_, err = store.UpdateWebhook(ctx, e.OrgID, e.ID, space.Update[space.WebhookEndpoint]{IfVersion: 1, At: now,
		Apply: func(w space.WebhookEndpoint) (space.WebhookEndpoint, error) {
			w.URL = "https://other.example.com/"
			return w, nil
		}})
	if space.KindOf(err) != space.KindPreconditionFailed {
		t.Fatalf("stale If-Match: %v", err)
	}
	if err := store.DeleteWebhook(ctx, e.OrgID, e.ID, 1); space.KindOf(err) != space.KindPreconditionFailed {
		t.Fatalf("delete at a stale version: %v", err)
	}
	if got, _ := store.GetWebhook(ctx, e.OrgID, e.ID); got.URL != e.URL || got.Version != 2 {
		t.Fatalf("refused writes changed the endpoint: %+v", got)
	}
	if err := store.DeleteWebhook(ctx, e.OrgID, e.ID, 2); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteWebhook(ctx, e.OrgID, e.ID, 0); space.KindOf(err) != space.KindNotFound {
		t.Errorf("second delete: %v", err)
	}
	_, err = store.UpdateWebhook(ctx, e.OrgID, e.ID, space.Update[space.WebhookEndpoint]{At: now,
		Apply: func(w space.WebhookEndpoint) (space.WebhookEndpoint, error) { return w, nil }})
	if space.KindOf(err) != space.KindNotFound {
		t.Errorf("update of a deleted endpoint: %v", err)
	}
}

// TestWebhookWithoutSealerStoresNothing: no sealer, no write.
func TestWebhookWithoutSealerStoresNothing(t *testing.T) {
	env := emulatortest.Start(t)
	store := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(t, "SpacesTable"))
	e := newEndpoint(uuid.NewString())
	if err := store.CreateWebhook(context.Background(), e); err == nil {
		t.Fatal("stored without a sealer")
	}
	if _, err := store.GetWebhook(t.Context(), e.OrgID, e.ID); space.KindOf(err) != space.KindNotFound {
		t.Errorf("read after a refused create: %v", err)
	}
}

// TestDeliveredEventsForReplay: an event kept for replay is read back
// whole by its webhook-id, by its org only; events since a time come
// oldest first, each once however many attempts it had, paged at the
// limit with the time to continue from; one past its retention is gone.
func TestDeliveredEventsForReplay(t *testing.T) {
	store, db, table, sealer := webhookFixture(t)
	ctx := t.Context()
	org, ep := uuid.NewString(), uuid.NewString()
	t0 := time.Now().UTC().Truncate(time.Second)
	ids := []string{"msg_a", "msg_b", "msg_c"}
	for i, id := range ids {
		at := t0.Add(time.Duration(i) * time.Minute)
		ev := space.StoredEvent{OrgID: org, EndpointID: ep, WebhookID: id, Type: space.EventSpaceRegistered, At: at, Data: []byte(`{"space_id":"` + id + `"}`)}
		if err := store.SaveEvent(ctx, ev, at); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 2; n++ { // two attempts each
			if err := store.RecordAttempt(ctx, space.DeliveryAttempt{OrgID: org, EndpointID: ep, WebhookID: id, Type: ev.Type,
				Attempt: n, At: at.Add(time.Duration(n) * time.Second), Verdict: space.RetryLater}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := store.DeliveredEvent(ctx, org, ep, "msg_b")
	if err != nil || got.Type != space.EventSpaceRegistered || string(got.Data) != `{"space_id":"msg_b"}` || !got.At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("msg_b: %+v %v", got, err)
	}
	if _, err := store.DeliveredEvent(ctx, uuid.NewString(), ep, "msg_b"); space.KindOf(err) != space.KindNotFound {
		t.Errorf("another org reads the event: %v", err)
	}
	page, next, err := store.DeliveredSince(ctx, org, ep, t0, 2)
	if err != nil || len(page) != 2 || page[0].WebhookID != "msg_a" || page[1].WebhookID != "msg_b" || next == nil {
		t.Fatalf("first page: %+v next %v %v", page, next, err)
	}
	rest, next2, err := store.DeliveredSince(ctx, org, ep, *next, 2)
	if err != nil || len(rest) != 1 || rest[0].WebhookID != "msg_c" || next2 != nil {
		t.Fatalf("second page: %+v next %v %v", rest, next2, err)
	}
	if late, _, err := store.DeliveredSince(ctx, org, ep, t0.Add(90*time.Second), 10); err != nil || len(late) != 1 || late[0].WebhookID != "msg_c" {
		t.Errorf("since 90 s on: %+v %v", late, err)
	}
	if other, _, err := store.DeliveredSince(ctx, uuid.NewString(), ep, t0, 10); err != nil || len(other) != 0 {
		t.Errorf("another org's since: %+v %v", other, err)
	}
	expired := dynamostore.New(db, table, dynamostore.WithSealer(sealer), dynamostore.WithClock(func() time.Time { return t0.Add(space.EventRetention + time.Hour) }))
	if _, err := expired.DeliveredEvent(ctx, org, ep, "msg_a"); space.KindOf(err) != space.KindNotFound {
		t.Errorf("an event past its retention: %v", err)
	}
}
