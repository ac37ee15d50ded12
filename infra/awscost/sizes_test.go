package awscost_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
)

// TestMeterSizesWrites: with SizeWith, an update, a delete and a
// transaction's update are counted by DynamoDB's rule on the larger of the
// item before and after, read from the emulator; without it an update of
// an item over 1 KB is undercounted as one unit.
func TestMeterSizesWrites(t *testing.T) {
	env := emulatortest.Start(t)
	table := aws.String(env.Name(t, "SpacesTable"))
	raw := awsclient.DynamoDB(env.Config, env.Endpoint)
	sized, plain := awscost.New(), awscost.New()
	sized.SizeWith(raw)
	key := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "ORG#size"}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	put := func(sk string, bytes int) {
		it := key(sk)
		it["blob"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", bytes)}
		if _, err := raw.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	setBlob := func(sk string, bytes int) *dynamodb.UpdateItemInput {
		return &dynamodb.UpdateItemInput{TableName: table, Key: key(sk), UpdateExpression: aws.String("SET blob = :b"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":b": &types.AttributeValueMemberS{Value: strings.Repeat("y", bytes)}}}
	}
	for _, c := range []struct {
		name        string
		seed        func()
		write       func(db *dynamodb.Client) error
		sized, bare float64
	}{
		{"an update of a 1.5 KB item that keeps its size", func() { put("a", 1500) },
			func(db *dynamodb.Client) error { _, err := db.UpdateItem(t.Context(), setBlob("a", 1500)); return err }, 2, 1},
		{"an update growing 0.5 KB to 2.5 KB", func() { put("b", 500) },
			func(db *dynamodb.Client) error { _, err := db.UpdateItem(t.Context(), setBlob("b", 2500)); return err }, 3, 1},
		{"a delete of a 1.5 KB item", func() { put("c", 1500) },
			func(db *dynamodb.Client) error {
				_, err := db.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: table, Key: key("c")})
				return err
			}, 2, 1},
		{"a transaction: an update of a 1.5 KB item and a small put", func() { put("d", 1500) },
			func(db *dynamodb.Client) error {
				u := setBlob("d", 1500)
				_, err := db.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Update: &types.Update{TableName: table, Key: u.Key, UpdateExpression: u.UpdateExpression, ExpressionAttributeValues: u.ExpressionAttributeValues}},
					{Put: &types.Put{TableName: table, Item: key("e")}},
				}})
				return err
			}, 2*2 + 2, 2 + 2},
	} {
		for _, m := range []struct {
			meter *awscost.Meter
			want  float64
		}{{sized, c.sized}, {plain, c.bare}} {
			c.seed()
			if err := c.write(awsclient.DynamoDB(m.meter.Instrument(env.Config), env.Endpoint)); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if got := m.meter.Take().TotalWRU(); got != m.want {
				t.Errorf("%s: %v write units, want %v", c.name, got, m.want)
			}
		}
	}
}
