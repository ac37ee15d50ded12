package dynamostore

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/space"
)

// A deregistration that read the space before a rename committed deletes
// the old name's entries only if the name is still the one read: its write
// fails instead (and Deregister reads again), so the new name's entries
// never outlive the space.
func TestDeregistrationRacingARename(t *testing.T) {
	env := emulatortest.Start(t)
	db := awsclient.DynamoDB(env.Config, env.Endpoint)
	s := New(db, env.Name(t, "SpacesTable"))
	ctx := t.Context()
	at := time.Date(2025, 11, 30, 12, 0, 0, 0, time.UTC)
	org := uuid.NewString()
	acct := space.CloudAccount{ID: uuid.NewString(), OrgID: org, Provider: space.AWS, Name: "aws",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": "ext-1"},
		Status:     space.AccountReady, CreatedAt: at, Version: 1}
	if err := s.CreateAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	sp := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Name: "old-name", Provider: space.AWS,
		SpaceType: space.TypeKubernetes, CloudAccountID: acct.ID,
		Config: space.Config{"clusterName": "c1", "region": "us-east-1"}}, at)
	if err := s.Register(ctx, sp, space.Idempotency{}); err != nil {
		t.Fatal(err)
	}
	entries := func() int {
		out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: s.table, ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(wordsPK(org))}})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items)
	}

	read, counted, err := s.liveSpaceCounted(ctx, org, sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSpace(ctx, org, sp.ID, space.Update[space.Space]{At: at.Add(time.Second),
		Apply: func(x space.Space) (space.Space, error) { x.Name = "new-name-here"; return x, nil }}); err != nil {
		t.Fatal(err)
	}
	gone := read
	when := at.Add(2 * time.Second)
	gone.DeletedAt, gone.DeletedBy = &when, "test"
	err = s.writeDeregistration(ctx, read, gone, counted, false)
	if space.KindOf(err) != space.KindPreconditionFailed {
		t.Fatalf("the deregistration on the name read before a rename: %v, want a lost race", err)
	}
	if n := entries(); n != 3 {
		t.Errorf("%d entries after the refused deregistration, want the new name's 3", n)
	}
	// Deregister itself reads again and deletes the new name's entries.
	if _, err := s.Deregister(ctx, org, sp.ID, 0, when, "test"); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 0 {
		t.Errorf("%d entries after the deregistration", n)
	}
}
