package main

import (
	"bytes"
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
	"spaces/shared/space"
)

// The command on a real table: a space registered before the listing
// indexes (its keys removed) is listed by registration after one run, and
// bad flags change nothing.
func TestBackfillCommand(t *testing.T) {
	env := emulatortest.Start(t)
	db := awsclient.DynamoDB(env.Config, env.Endpoint)
	table := env.Name(t, "SpacesTable")
	store := dynamostore.New(db, table)
	ctx := t.Context()
	org, now := uuid.NewString(), time.Now().UTC()
	acct := space.CloudAccount{ID: uuid.NewString(), OrgID: org, Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}, Status: space.AccountReady, CreatedAt: now, Version: 1}
	if err := store.CreateAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	s := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes, CloudAccountID: acct.ID,
		Config: space.Config{"clusterName": "old", "region": "us-east-1"}}, now)
	if err := store.Register(ctx, s, space.Idempotency{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "ORG#" + org}, "sk": &types.AttributeValueMemberS{Value: "SPACE#" + s.ID}},
		UpdateExpression: aws.String("REMOVE reg_key")}); err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		q := space.Query{Sort: space.SortRegistered}
		q.Limit = 10
		page, _, err := store.ListSpaces(ctx, org, q)
		if err != nil {
			t.Fatal(err)
		}
		return len(page)
	}
	if n := listed(); n != 0 {
		t.Fatalf("%d listed before the backfill", n)
	}
	var out, errb bytes.Buffer
	for _, bad := range [][]string{{}, {"-table", table, "-segments", "0"}, {"-table", table, "extra"}} {
		if err := run(ctx, bad, &out, &errb, db); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if n := listed(); n != 0 || out.Len() != 0 {
		t.Fatalf("bad flags wrote: %d listed, %q", n, out.String())
	}
	if err := run(ctx, []string{"-table", table, "-segments", "2"}, &out, &errb, db); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "gave 1 spaces and 0 revisions their listing keys") {
		t.Errorf("output: %q", out.String())
	}
	if n := listed(); n != 1 {
		t.Errorf("%d listed after the backfill, want 1", n)
	}
}
