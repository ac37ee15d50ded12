package emulator

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/shared/awsclient"
	"spaces/shared/eventbus"
)

// RemoveTestLeftovers deletes the tables, queues and event buses that test
// runs persisted into this emulator's data folder (the tests persist
// nothing; a data folder may still hold resources older test runs left). A
// leftover is named "<prefix>-<LogicalID>"
// for a logical id of the template, as the tests name theirs; the local
// stack's own resources are named by the logical id alone, and anything else
// (a developer's own tables or queues) does not end in one, so both are
// kept. It returns the names it deleted.
func (e *Emulator) RemoveTestLeftovers(ctx context.Context, template []byte) ([]string, error) {
	order, err := parseTemplate(template)
	if err != nil {
		return nil, err
	}
	ids := map[string][]string{}
	for _, r := range order {
		ids[r.typ] = append(ids[r.typ], r.id)
	}
	leftover := func(typ, name string) bool {
		return slices.ContainsFunc(ids[typ], func(id string) bool {
			prefix, ok := strings.CutSuffix(name, id)
			return ok && len(prefix) > 1 && strings.HasSuffix(prefix, "-")
		})
	}
	var removed []string
	ddb := awsclient.DynamoDB(e.cfg, e.URL)
	tables := dynamodb.NewListTablesPaginator(ddb, &dynamodb.ListTablesInput{})
	for tables.HasMorePages() {
		page, err := tables.NextPage(ctx)
		if err != nil {
			return removed, fmt.Errorf("list tables: %w", err)
		}
		for _, name := range page.TableNames {
			if !leftover(TypeTable, name) {
				continue
			}
			if _, err := ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
				return removed, fmt.Errorf("delete table %s: %w", name, err)
			}
			removed = append(removed, name)
		}
	}
	sq := awsclient.SQS(e.cfg, e.URL)
	queues := sqs.NewListQueuesPaginator(sq, &sqs.ListQueuesInput{})
	for queues.HasMorePages() {
		page, err := queues.NextPage(ctx)
		if err != nil {
			return removed, fmt.Errorf("list queues: %w", err)
		}
		for _, url := range page.QueueUrls {
			if name := path.Base(url); leftover(TypeQueue, name) {
				if _, err := sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
					return removed, fmt.Errorf("delete queue %s: %w", name, err)
				}
				removed = append(removed, name)
			}
		}
	}
	// A key is found by its alias (kmsKey); the alias goes and the key is
	// scheduled for deletion, as KMS deletes keys.
	km := awsclient.KMS(e.cfg, e.URL)
	aliases := kms.NewListAliasesPaginator(km, &kms.ListAliasesInput{})
	for aliases.HasMorePages() {
		page, err := aliases.NextPage(ctx)
		if err != nil {
			return removed, fmt.Errorf("list aliases: %w", err)
		}
		for _, a := range page.Aliases {
			name, ok := strings.CutPrefix(aws.ToString(a.AliasName), "alias/")
			if !ok || !leftover(TypeKMSKey, name) {
				continue
			}
			if _, err := km.DeleteAlias(ctx, &kms.DeleteAliasInput{AliasName: a.AliasName}); err != nil {
				return removed, fmt.Errorf("delete alias %s: %w", name, err)
			}
			if a.TargetKeyId != nil {
				if _, err := km.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: a.TargetKeyId, PendingWindowInDays: aws.Int32(7)}); err != nil {
					return removed, fmt.Errorf("delete key %s: %w", name, err)
				}
			}
			removed = append(removed, name)
		}
	}
	eb := eventbus.NewClient(e.cfg, e.URL)
	in := &eventbridge.ListEventBusesInput{}
	for {
		page, err := eb.ListEventBuses(ctx, in)
		if err != nil {
			return removed, fmt.Errorf("list event buses: %w", err)
		}
		for _, b := range page.EventBuses {
			if name := aws.ToString(b.Name); leftover(TypeEventBus, name) {
				if _, err := eb.DeleteEventBus(ctx, &eventbridge.DeleteEventBusInput{Name: aws.String(name)}); err != nil {
					return removed, fmt.Errorf("delete event bus %s: %w", name, err)
				}
				removed = append(removed, name)
			}
		}
		if page.NextToken == nil {
			return removed, nil
		}
		in.NextToken = page.NextToken
	}
}
