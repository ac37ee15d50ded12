package emulator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"spaces/shared/awsclient"
)

// ErrUnpatched says how to get the patched emulator.
const ErrUnpatched = "the embedded emulator is not patched (infra/emulator/kumo): run through `make run` / `make test`, " +
	"or by hand with GOFLAGS=-modfile=$(make -s overlay)"

// Check proves that this kumo is the patched one the service needs: a
// transaction writes a stream record (the deregistration cascade depends on
// it), and, when persisting, the write is on disk once acknowledged. It
// works on a scratch table of its own, deleted afterwards.
func (e *Emulator) Check(ctx context.Context) (err error) {
	db := awsclient.DynamoDB(e.cfg, e.URL)
	ss := Streams(e.cfg, e.URL)
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	table := "spaces-selfcheck-" + hex.EncodeToString(b[:])
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }

	created, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		return fmt.Errorf("emulator check: create table: %w", err)
	}
	defer func() {
		if _, derr := db.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); derr != nil && err == nil {
			err = fmt.Errorf("emulator check: delete table: %w", derr)
		}
	}()
	arn := created.TableDescription.LatestStreamArn
	sd, err := ss.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil || len(sd.StreamDescription.Shards) == 0 {
		return fmt.Errorf("emulator check: the table's stream has no shard: %v", err)
	}
	it, err := ss.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: arn, ShardId: sd.StreamDescription.Shards[0].ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		return fmt.Errorf("emulator check: shard iterator: %w", err)
	}
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{"pk": s("check")}}},
	}}); err != nil {
		return fmt.Errorf("emulator check: transaction: %w", err)
	}
	out, err := ss.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		return fmt.Errorf("emulator check: read stream: %w", err)
	}
	if len(out.Records) == 0 {
		return errors.New("emulator check: a transaction wrote no stream record, so deregistrations would never cascade: " + ErrUnpatched)
	}
	if e.DataDir == "" {
		return nil
	}
	// Acknowledged means on disk: the table must be in the snapshot now.
	snap, err := os.ReadFile(filepath.Join(e.DataDir, "dynamodb.json"))
	if err != nil || !strings.Contains(string(snap), table) {
		return fmt.Errorf("emulator check: an acknowledged write is not in %s (%v): %s", e.DataDir, err, ErrUnpatched)
	}
	return nil
}
