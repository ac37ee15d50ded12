package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	cfnddb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	cfnevents "github.com/awslabs/goformation/v7/cloudformation/events"
	cfnsqs "github.com/awslabs/goformation/v7/cloudformation/sqs"
	"github.com/awslabs/goformation/v7/cloudformation/tags"

	"spaces/shared/awsclient"
	"spaces/shared/eventbus"
)

// Resource is one created resource.
type Resource struct {
	// Type is the CloudFormation type, such as AWS::SQS::Queue.
	Type string
	// Name is the physical name: the table, queue or event bus name.
	Name string
	// ARN is the resource's ARN.
	ARN string
	// URL is a queue's URL.
	URL string
	// StreamARN is a table's latest stream ARN, when the table has a stream
	// (read from DescribeTable: kumo has no ListStreams).
	StreamARN string
}

// Resources maps a template's logical ids to what was created for them.
type Resources map[string]Resource

// CreateResources creates in the emulator every DynamoDB table, SQS queue and
// EventBridge bus the SAM/CloudFormation template declares, naming each
// names(logicalID) (nil: the logical id itself). Resources are created after
// those they refer to (a queue after its dead-letter queue). A resource that
// already exists is reused, so a local stack can restart on persisted data;
// a table that exists with another key schema or other indexes is an error.
// Intrinsic functions are resolved against the emulator (Ref and Fn::GetAtt
// of the template's own resources, Fn::Sub, parameters' defaults, the
// pseudo parameters); template Conditions are not evaluated.
func (e *Emulator) CreateResources(ctx context.Context, template []byte, names func(logicalID string) string) (Resources, error) {
	if names == nil {
		names = func(id string) string { return id }
	}
	order, err := parseTemplate(template)
	if err != nil {
		return nil, err
	}
	c := creator{
		ddb: awsclient.DynamoDB(e.cfg, e.URL),
		sqs: awsclient.SQS(e.cfg, e.URL),
		eb:  eventbus.NewClient(e.cfg, e.URL),
		kms: awsclient.KMS(e.cfg, e.URL),
	}
	created := make(Resources, len(order))
	for _, r := range order {
		raw, err := resolveTokens(r.raw, created)
		if err != nil {
			return nil, fmt.Errorf("emulator: resource %s: %w", r.id, err)
		}
		var res Resource
		switch r.typ {
		case TypeTable:
			res, err = c.table(ctx, names(r.id), raw)
		case TypeQueue:
			res, err = c.queue(ctx, names(r.id), raw)
		case TypeEventBus:
			res, err = c.eventBus(ctx, names(r.id), raw)
		case TypeKMSKey:
			res, err = c.kmsKey(ctx, names(r.id), raw)
		}
		if err != nil {
			return nil, fmt.Errorf("emulator: resource %s (%s): %w", r.id, r.typ, err)
		}
		res.Type = r.typ
		created[r.id] = res
	}
	return created, nil
}

type creator struct {
	ddb *dynamodb.Client
	sqs *sqs.Client
	eb  *eventbridge.Client
	kms *kms.Client
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// table creates a DynamoDB table with its keys, indexes, billing mode, stream
// and TTL. Point-in-time recovery, encryption, contributor insights and
// Kinesis streaming are AWS-side operations settings with no local effect
// (kumo implements no UpdateContinuousBackups); they are not applied.
func (c creator) table(ctx context.Context, name string, raw []byte) (Resource, error) {
	raw, err := withoutOnDemandCaps(raw)
	if err != nil {
		return Resource{}, err
	}
	var t cfnddb.Table
	if err := json.Unmarshal(raw, &t); err != nil {
		return Resource{}, err
	}
	in := &dynamodb.CreateTableInput{
		TableName:                 aws.String(name),
		KeySchema:                 keySchema(t.KeySchema),
		DeletionProtectionEnabled: t.DeletionProtectionEnabled,
	}
	for _, a := range t.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{
			AttributeName: aws.String(a.AttributeName),
			AttributeType: ddbtypes.ScalarAttributeType(a.AttributeType),
		})
	}
	if t.BillingMode != nil {
		in.BillingMode = ddbtypes.BillingMode(*t.BillingMode)
	}
	in.ProvisionedThroughput = throughput(t.ProvisionedThroughput)
	for _, g := range t.GlobalSecondaryIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, ddbtypes.GlobalSecondaryIndex{
			IndexName:             aws.String(g.IndexName),
			KeySchema:             keySchema(g.KeySchema),
			Projection:            projection(g.Projection),
			ProvisionedThroughput: throughput(g.ProvisionedThroughput),
		})
	}
	for _, l := range t.LocalSecondaryIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, ddbtypes.LocalSecondaryIndex{
			IndexName:  aws.String(l.IndexName),
			KeySchema:  keySchema(l.KeySchema),
			Projection: projection(l.Projection),
		})
	}
	if s := t.StreamSpecification; s != nil {
		in.StreamSpecification = &ddbtypes.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: ddbtypes.StreamViewType(s.StreamViewType),
		}
	}
	if t.TableClass != nil {
		in.TableClass = ddbtypes.TableClass(*t.TableClass)
	}
	for _, tg := range t.Tags {
		in.Tags = append(in.Tags, ddbtypes.Tag{Key: aws.String(tg.Key), Value: aws.String(tg.Value)})
	}

	var desc *ddbtypes.TableDescription
	out, err := c.ddb.CreateTable(ctx, in)
	switch {
	case err == nil:
		desc = out.TableDescription
	case errorCode(err) == "ResourceInUseException":
		d, err := c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return Resource{}, err
		}
		desc = d.Table
		if err := sameShape(in, desc); err != nil {
			return Resource{}, fmt.Errorf("table %s already exists with another shape (%w); remove the emulator's data to recreate it", name, err)
		}
	default:
		return Resource{}, err
	}

	if ttl := t.TimeToLiveSpecification; ttl != nil && ttl.Enabled && ttl.AttributeName != nil {
		if err := c.enableTTL(ctx, name, *ttl.AttributeName); err != nil {
			return Resource{}, err
		}
	}
	return Resource{
		Name:      name,
		ARN:       aws.ToString(desc.TableArn),
		StreamARN: aws.ToString(desc.LatestStreamArn),
	}, nil
}

// enableTTL turns TTL on unless it already is on the same attribute (DynamoDB
// refuses to enable it twice).
func (c creator) enableTTL(ctx context.Context, table, attr string) error {
	d, err := c.ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return err
	}
	if ttl := d.TimeToLiveDescription; ttl != nil {
		on := ttl.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled || ttl.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabling
		switch {
		case on && aws.ToString(ttl.AttributeName) == attr:
			return nil
		case on:
			return fmt.Errorf("table %s has TTL on %q, the template asks for %q", table, aws.ToString(ttl.AttributeName), attr)
		}
	}
	_, err = c.ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(true)},
	})
	return err
}

// sameShape compares what a restart would create with the existing table:
// keys, indexes and stream must match, or the code would run against a table
// it was not written for.
func sameShape(want *dynamodb.CreateTableInput, got *ddbtypes.TableDescription) error {
	if !slices.Equal(keyString(want.KeySchema), keyString(got.KeySchema)) {
		return fmt.Errorf("key schema %v, template %v", keyString(got.KeySchema), keyString(want.KeySchema))
	}
	wantIdx := map[string][]string{}
	for _, g := range want.GlobalSecondaryIndexes {
		wantIdx[aws.ToString(g.IndexName)] = keyString(g.KeySchema)
	}
	gotIdx := map[string][]string{}
	for _, g := range got.GlobalSecondaryIndexes {
		gotIdx[aws.ToString(g.IndexName)] = keyString(g.KeySchema)
	}
	for n, k := range wantIdx {
		if !slices.Equal(k, gotIdx[n]) {
			return fmt.Errorf("index %s is %v, template %v", n, gotIdx[n], k)
		}
	}
	for n := range gotIdx {
		if _, ok := wantIdx[n]; !ok {
			return fmt.Errorf("index %s is not in the template", n)
		}
	}
	wantStream := want.StreamSpecification != nil
	gotStream := got.StreamSpecification != nil && aws.ToBool(got.StreamSpecification.StreamEnabled)
	if wantStream != gotStream {
		return fmt.Errorf("stream enabled %t, template %t", gotStream, wantStream)
	}
	return nil
}

// withoutOnDemandCaps drops the table's and its indexes' OnDemandThroughput,
// which goformation's Table does not know (it refuses unknown fields):
// the caps are a cost guard AWS enforces by throttling, and the emulator
// throttles nothing, so they have no local effect.
func withoutOnDemandCaps(raw []byte) ([]byte, error) {
	var r map[string]any
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	t, ok := r["Properties"].(map[string]any)
	if !ok {
		return raw, nil
	}
	delete(t, "OnDemandThroughput")
	if gsis, ok := t["GlobalSecondaryIndexes"].([]any); ok {
		for _, g := range gsis {
			if m, ok := g.(map[string]any); ok {
				delete(m, "OnDemandThroughput")
			}
		}
	}
	return json.Marshal(r)
}

func keyString(ks []ddbtypes.KeySchemaElement) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = aws.ToString(k.AttributeName) + " " + string(k.KeyType)
	}
	return out
}

func keySchema(ks []cfnddb.Table_KeySchema) []ddbtypes.KeySchemaElement {
	out := make([]ddbtypes.KeySchemaElement, len(ks))
	for i, k := range ks {
		out[i] = ddbtypes.KeySchemaElement{AttributeName: aws.String(k.AttributeName), KeyType: ddbtypes.KeyType(k.KeyType)}
	}
	return out
}

func projection(p *cfnddb.Table_Projection) *ddbtypes.Projection {
	if p == nil {
		return &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll}
	}
	out := &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly, NonKeyAttributes: p.NonKeyAttributes}
	if p.ProjectionType != nil {
		out.ProjectionType = ddbtypes.ProjectionType(*p.ProjectionType)
	}
	return out
}

func throughput(p *cfnddb.Table_ProvisionedThroughput) *ddbtypes.ProvisionedThroughput {
	if p == nil {
		return nil
	}
	return &ddbtypes.ProvisionedThroughput{
		ReadCapacityUnits:  aws.Int64(int64(p.ReadCapacityUnits)),
		WriteCapacityUnits: aws.Int64(int64(p.WriteCapacityUnits)),
	}
}

// queue creates an SQS queue with the template's attributes. A queue that
// exists gets the template's attributes set again, so a restarted local stack
// converges on the template.
func (c creator) queue(ctx context.Context, name string, raw []byte) (Resource, error) {
	var q cfnsqs.Queue
	if err := json.Unmarshal(raw, &q); err != nil {
		return Resource{}, err
	}
	attrs := map[string]string{}
	setInt := func(k string, v *int) {
		if v != nil {
			attrs[k] = strconv.Itoa(*v)
		}
	}
	setInt(string(sqstypes.QueueAttributeNameDelaySeconds), q.DelaySeconds)
	setInt(string(sqstypes.QueueAttributeNameMaximumMessageSize), q.MaximumMessageSize)
	setInt(string(sqstypes.QueueAttributeNameMessageRetentionPeriod), q.MessageRetentionPeriod)
	setInt(string(sqstypes.QueueAttributeNameReceiveMessageWaitTimeSeconds), q.ReceiveMessageWaitTimeSeconds)
	setInt(string(sqstypes.QueueAttributeNameVisibilityTimeout), q.VisibilityTimeout)
	for k, v := range map[sqstypes.QueueAttributeName]any{
		sqstypes.QueueAttributeNameRedrivePolicy:      q.RedrivePolicy,
		sqstypes.QueueAttributeNameRedriveAllowPolicy: q.RedriveAllowPolicy,
	} {
		s, err := policyString(v)
		if err != nil {
			return Resource{}, fmt.Errorf("%s: %w", k, err)
		}
		if s != "" {
			attrs[string(k)] = s
		}
	}
	if q.ContentBasedDeduplication != nil {
		attrs[string(sqstypes.QueueAttributeNameContentBasedDeduplication)] = strconv.FormatBool(*q.ContentBasedDeduplication)
	}
	create := map[string]string{}
	for k, v := range attrs {
		create[k] = v
	}
	if q.FifoQueue != nil && *q.FifoQueue {
		// SQS requires the suffix on FIFO queues; CloudFormation adds it too.
		if !strings.HasSuffix(name, ".fifo") {
			name += ".fifo"
		}
		create[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
	}
	var queueTags map[string]string
	if len(q.Tags) > 0 {
		queueTags = tagMap(q.Tags)
	}

	var url string
	out, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: create, Tags: queueTags})
	switch {
	case err == nil:
		url = aws.ToString(out.QueueUrl)
	case errorCode(err) == "QueueAlreadyExists" || errorCode(err) == "QueueNameExists":
		got, err := c.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			return Resource{}, err
		}
		url = aws.ToString(got.QueueUrl)
	default:
		return Resource{}, err
	}
	if len(attrs) > 0 {
		// FifoQueue cannot be set on an existing queue; the rest converge.
		if _, err := c.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: attrs}); err != nil {
			return Resource{}, err
		}
	}
	qa, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return Resource{}, err
	}
	return Resource{Name: name, URL: url, ARN: qa.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]}, nil
}

// policyString renders a JSON policy property (an object in templates, or
// already a string) as the string SQS expects.
func policyString(v any) (string, error) {
	switch p := v.(type) {
	case nil:
		return "", nil
	case string:
		return p, nil
	default:
		b, err := json.Marshal(p)
		return string(b), err
	}
}

func tagMap(ts []tags.Tag) map[string]string {
	m := make(map[string]string, len(ts))
	for _, t := range ts {
		m[t.Key] = t.Value
	}
	return m
}

// eventBus creates an EventBridge bus.
func (c creator) eventBus(ctx context.Context, name string, raw []byte) (Resource, error) {
	var b cfnevents.EventBus
	if err := json.Unmarshal(raw, &b); err != nil {
		return Resource{}, err
	}
	in := &eventbridge.CreateEventBusInput{Name: aws.String(name)}
	for _, t := range b.Tags {
		in.Tags = append(in.Tags, ebtypes.Tag{Key: aws.String(t.Key), Value: aws.String(t.Value)})
	}
	out, err := c.eb.CreateEventBus(ctx, in)
	switch {
	case err == nil:
		return Resource{Name: name, ARN: aws.ToString(out.EventBusArn)}, nil
	case errorCode(err) == "ResourceAlreadyExistsException":
		d, err := c.eb.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(name)})
		if err != nil {
			return Resource{}, err
		}
		return Resource{Name: name, ARN: aws.ToString(d.Arn)}, nil
	default:
		return Resource{}, err
	}
}

// kmsKey creates a key of the template's KeySpec and KeyUsage (a
// symmetric encryption key by default, as KMS) and names it by an alias,
// alias/<name>, so that a restarted stack finds the key its sealed data
// needs instead of creating another. Name is the key's id (what Ref
// answers in AWS).
func (c creator) kmsKey(ctx context.Context, name string, raw []byte) (Resource, error) {
	var res struct {
		Properties struct{ KeySpec, KeyUsage string }
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return Resource{}, err
	}
	props := res.Properties
	alias := "alias/" + name
	if d, err := c.kms.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(alias)}); err == nil && d.KeyMetadata != nil {
		return Resource{Name: aws.ToString(d.KeyMetadata.KeyId), ARN: aws.ToString(d.KeyMetadata.Arn)}, nil
	}
	in := &kms.CreateKeyInput{Description: aws.String(name)}
	if props.KeySpec != "" {
		in.KeySpec = kmstypes.KeySpec(props.KeySpec)
	}
	if props.KeyUsage != "" {
		in.KeyUsage = kmstypes.KeyUsageType(props.KeyUsage)
	}
	out, err := c.kms.CreateKey(ctx, in)
	if err != nil {
		return Resource{}, err
	}
	id := aws.ToString(out.KeyMetadata.KeyId)
	if _, err := c.kms.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(id)}); err != nil {
		return Resource{}, err
	}
	return Resource{Name: id, ARN: aws.ToString(out.KeyMetadata.Arn)}, nil
}
