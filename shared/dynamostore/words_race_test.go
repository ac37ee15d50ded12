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
	s, sp, at := raceFixture(t, "old-name", nil)
	ctx, org := t.Context(), sp.OrgID
	entries := func() int { return len(partitionSKs(t, s, wordsPK(org))) }

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

// raceFixture is a store on the emulator holding one registered space of a
// ready AWS account, named name with labels, registered at the time it
// returns.
func raceFixture(t *testing.T, name string, labels space.Labels) (*Store, space.Space, time.Time) {
	env := emulatortest.Start(t)
	s := New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(t, "SpacesTable"))
	at := time.Date(2025, 11, 30, 12, 0, 0, 0, time.UTC)
	org := uuid.NewString()
	acct := space.CloudAccount{ID: uuid.NewString(), OrgID: org, Provider: space.AWS, Name: "aws",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": "ext-1"},
		Status:     space.AccountReady, CreatedAt: at, Version: 1}
	if err := s.CreateAccount(t.Context(), acct); err != nil {
		t.Fatal(err)
	}
	sp := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Name: name, Provider: space.AWS,
		SpaceType: space.TypeKubernetes, CloudAccountID: acct.ID, Labels: labels,
		Config: space.Config{"clusterName": "c1", "region": "us-east-1"}}, at)
	if err := s.Register(t.Context(), sp, space.Idempotency{}); err != nil {
		t.Fatal(err)
	}
	return s, sp, at
}

// partitionSKs is every sort key under pk, read strongly.
func partitionSKs(t *testing.T, s *Store, pk string) []string {
	out, err := s.db.Query(t.Context(), &dynamodb.QueryInput{TableName: s.table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)}})
	if err != nil {
		t.Fatal(err)
	}
	var sks []string
	for _, item := range out.Items {
		sks = append(sks, item["sk"].(*types.AttributeValueMemberS).Value)
	}
	return sks
}
