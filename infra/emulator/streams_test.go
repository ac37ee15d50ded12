package emulator_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"spaces/infra/emulator"
	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
)

// TestTransactionsAppearInTheStream: real DynamoDB writes a stream record for
// every item a transaction changes; the cascade depends on it, since
// registration and deregistration are transactions. kumo does so only with
// the overlay of infra/emulator/kumo, which `make test` passes to go test.
func TestTransactionsAppearInTheStream(t *testing.T) {
	env := emulatortest.Start(t)
	ctx := t.Context()
	db := awsclient.DynamoDB(env.Config, env.Endpoint)
	ss := emulator.Streams(env.Config, env.Endpoint)
	table := env.Resources["SpacesTable"]

	sd, err := ss.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(table.StreamARN)})
	if err != nil {
		t.Fatal(err)
	}
	if len(sd.StreamDescription.Shards) == 0 {
		t.Fatal("the stream has no shard")
	}
	it, err := ss.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(table.StreamARN), ShardId: sd.StreamDescription.Shards[0].ShardId,
		ShardIteratorType: stypes.ShardIteratorTypeLatest,
	})
	if err != nil {
		t.Fatal(err)
	}

	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	key := map[string]ddbtypes.AttributeValue{"pk": s("ORG#t"), "sk": s("X#1")}
	tx := func(item ddbtypes.TransactWriteItem) {
		t.Helper()
		if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{item}}); err != nil {
			t.Fatal(err)
		}
	}
	tx(ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(table.Name),
		Item: map[string]ddbtypes.AttributeValue{"pk": s("ORG#t"), "sk": s("X#1"), "v": s("one")}}})
	tx(ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: aws.String(table.Name), Key: key,
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": s("two")}}})
	tx(ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: aws.String(table.Name), Key: key}})

	out, err := ss.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Records) == 0 {
		t.Fatal("TransactWriteItems wrote no stream record: the kumo overlay (infra/emulator/kumo) is missing; " +
			"run the tests through `make test` (or GOFLAGS=-modfile=$(make -s overlay) go test ...)")
	}
	image := func(m map[string]stypes.AttributeValue) string {
		if m == nil {
			return "<none>"
		}
		if v, ok := m["v"].(*stypes.AttributeValueMemberS); ok {
			return v.Value
		}
		return "<no v>"
	}
	type rec struct{ name, old, new string }
	want := []rec{{"INSERT", "<none>", "one"}, {"MODIFY", "one", "two"}, {"REMOVE", "two", "<none>"}}
	if len(out.Records) != len(want) {
		t.Fatalf("%d records, want %d", len(out.Records), len(want))
	}
	for i, r := range out.Records {
		got := rec{string(r.EventName), image(r.Dynamodb.OldImage), image(r.Dynamodb.NewImage)}
		if got != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, got, want[i])
		}
		if k, ok := r.Dynamodb.Keys["sk"].(*stypes.AttributeValueMemberS); !ok || k.Value != "X#1" {
			t.Errorf("record %d keys %v", i, r.Dynamodb.Keys)
		}
	}
}
