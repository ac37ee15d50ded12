package emulator_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"spaces"
	"spaces/infra/emulator"
	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/eventbus"
)

func prefixed(prefix string) func(string) string {
	return func(id string) string { return prefix + id }
}

func TestCreateResourcesFromRepositoryTemplate(t *testing.T) {
	env := emulatortest.Start(t)
	ctx := t.Context()
	db := awsclient.DynamoDB(env.Config, env.Endpoint)

	table := env.Resources["SpacesTable"]
	if table.Type != emulator.TypeTable || table.Name != env.Prefix+"SpacesTable" {
		t.Fatalf("SpacesTable = %+v", table)
	}
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table.Name)})
	if err != nil {
		t.Fatal(err)
	}
	desc := d.Table
	if got := keys(desc.KeySchema); !slices.Equal(got, []string{"pk HASH", "sk RANGE"}) {
		t.Errorf("key schema %v", got)
	}
	// On demand, as the template says (the emulator neither throttles nor
	// enforces the on-demand caps).
	if desc.BillingModeSummary == nil || desc.BillingModeSummary.BillingMode != ddbtypes.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", desc.BillingModeSummary)
	}
	if p := desc.ProvisionedThroughput; p != nil && (aws.ToInt64(p.ReadCapacityUnits) != 0 || aws.ToInt64(p.WriteCapacityUnits) != 0) {
		t.Errorf("table throughput %+v, want none on demand", p)
	}
	idx := map[string]ddbtypes.GlobalSecondaryIndexDescription{}
	for _, g := range desc.GlobalSecondaryIndexes {
		idx[aws.ToString(g.IndexName)] = g
	}
	for name, want := range map[string]struct {
		keys, projected []string
	}{
		"probe-digest":      {[]string{"probe_shard HASH", "sk RANGE"}, []string{"pd"}},
		"names":             {[]string{"org_id HASH", "name_key RANGE"}, []string{"name_lc", "provider", "space_type", "cloud_account_id"}},
		"registered":        {[]string{"org_id HASH", "reg_key RANGE"}, []string{"name_lc", "provider", "space_type", "cloud_account_id"}},
		"status":            {[]string{"org_id HASH", "status_key RANGE"}, []string{"name_lc", "provider", "space_type", "cloud_account_id"}},
		"since":             {[]string{"org_id HASH", "since_key RANGE"}, []string{"name_lc", "provider", "space_type", "cloud_account_id"}},
		"problems":          {[]string{"org_id HASH", "problem_key RANGE"}, []string{"name_lc", "provider", "space_type", "cloud_account_id"}},
		"env-revisions":     {[]string{"environment_id HASH", "rev_key RANGE"}, []string{"id", "org_id", "space_id", "namespace", "state", "reason", "attempts", "created_at", "updated_at", "version"}},
		"stopped-revisions": {[]string{"org_id HASH", "stopped_key RANGE"}, []string{"id", "environment_id", "space_id", "namespace", "state", "reason", "attempts", "created_at", "updated_at", "version"}},
	} {
		g, ok := idx[name]
		if !ok || !slices.Equal(keys(g.KeySchema), want.keys) || g.Projection == nil ||
			g.Projection.ProjectionType != ddbtypes.ProjectionTypeInclude || !slices.Equal(g.Projection.NonKeyAttributes, want.projected) {
			t.Errorf("index %s: %v %+v, want %v projecting %v", name, keys(g.KeySchema), g.Projection, want.keys, want.projected)
		}
	}
	if len(idx) != 8 {
		t.Errorf("indexes %v, want probe-digest, names, registered, status, since, problems, env-revisions and stopped-revisions", slices.Sorted(maps.Keys(idx)))
	}
	if p := idx["probe-digest"].ProvisionedThroughput; p != nil && (aws.ToInt64(p.ReadCapacityUnits) != 0 || aws.ToInt64(p.WriteCapacityUnits) != 0) {
		t.Errorf("index throughput %+v, want none on demand", p)
	}
	if s := desc.StreamSpecification; s == nil || !aws.ToBool(s.StreamEnabled) || s.StreamViewType != ddbtypes.StreamViewTypeNewAndOldImages {
		t.Errorf("stream %+v", s)
	}
	if aws.ToString(desc.LatestStreamArn) == "" || table.StreamARN != aws.ToString(desc.LatestStreamArn) {
		t.Errorf("stream ARN %q, resources say %q", aws.ToString(desc.LatestStreamArn), table.StreamARN)
	}
	if table.ARN != aws.ToString(desc.TableArn) || table.ARN == "" {
		t.Errorf("table ARN %q, described %q", table.ARN, aws.ToString(desc.TableArn))
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table.Name)})
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TimeToLiveDescription.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "expires_at" {
		t.Errorf("TTL %+v", ttl.TimeToLiveDescription)
	}

	// A second run (a restarted local stack) reuses what exists.
	again, err := env.Emulator.CreateResources(ctx, spaces.Template, prefixed(env.Prefix))
	if err != nil {
		t.Fatalf("second CreateResources: %v", err)
	}
	if again["SpacesTable"] != table {
		t.Errorf("second run %+v, first %+v", again["SpacesTable"], table)
	}
}

func keys(ks []ddbtypes.KeySchemaElement) []string {
	var out []string
	for _, k := range ks {
		out = append(out, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return out
}

// queueTemplate exercises queues with a redrive policy (the DLQ must be
// created first), an event bus, parameters and Fn::Sub.
const queueTemplate = `
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  Retries:
    Type: Number
    Default: 2
  Stage:
    Type: String
    Default: test
Resources:
  WorkQueue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 30
      MessageRetentionPeriod: 3600
      DelaySeconds: 0
      ReceiveMessageWaitTimeSeconds: 1
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt WorkDLQ.Arn
        maxReceiveCount: !Ref Retries
      Tags:
        - Key: where
          Value: !Sub "${AWS::Region}/${Stage}/${WorkDLQ.QueueName}/${!Literal}"
  WorkDLQ:
    Type: AWS::SQS::Queue
    Properties:
      MessageRetentionPeriod: 1209600
  Bus:
    Type: AWS::Events::EventBus
    Properties:
      Name: ignored-the-caller-names-it
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Handler: bootstrap
      Runtime: provided.al2023
      CodeUri: .
      Environment:
        Variables:
          QUEUE_URL: !Ref WorkQueue
Outputs:
  Queue:
    Value: !GetAtt WorkQueue.Arn
`

func TestCreateResourcesQueuesWithRedrive(t *testing.T) {
	env := emulatortest.StartWith(t, []byte(queueTemplate))
	ctx := t.Context()
	q := awsclient.SQS(env.Config, env.Endpoint)

	work, dlq := env.Resources["WorkQueue"], env.Resources["WorkDLQ"]
	if work.Name != env.Prefix+"WorkQueue" || work.URL == "" || work.ARN == "" || dlq.ARN == "" {
		t.Fatalf("queues %+v %+v", work, dlq)
	}
	if _, ok := env.Resources["Fn"]; ok {
		t.Error("a function was reported as created")
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(work.URL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"VisibilityTimeout": "30", "MessageRetentionPeriod": "3600", "DelaySeconds": "0", "ReceiveMessageWaitTimeSeconds": "1"} {
		if got := attrs.Attributes[k]; got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	var redrive struct {
		DeadLetterTargetArn string
		MaxReceiveCount     json.Number
	}
	if err := json.Unmarshal([]byte(attrs.Attributes["RedrivePolicy"]), &redrive); err != nil {
		t.Fatalf("RedrivePolicy %q: %v", attrs.Attributes["RedrivePolicy"], err)
	}
	if redrive.DeadLetterTargetArn != dlq.ARN || redrive.MaxReceiveCount != "2" {
		t.Errorf("RedrivePolicy %+v, DLQ ARN %s", redrive, dlq.ARN)
	}
	tags, err := q.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(work.URL)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "us-east-1/test/" + dlq.Name + "/${Literal}"; tags.Tags["where"] != want {
		t.Errorf("Fn::Sub gave %q, want %q", tags.Tags["where"], want)
	}
	bus := env.Resources["Bus"]
	eb := eventbus.NewClient(env.Config, env.Endpoint)
	if d, err := eb.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(env.Prefix + "Bus")}); err != nil || aws.ToString(d.Arn) != bus.ARN || bus.ARN == "" {
		t.Errorf("event bus %+v: %v", bus, err)
	}

	// A message received more than maxReceiveCount (2) times lands in the DLQ.
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(work.URL), MessageBody: aws.String("poison")}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		got := receive(t, q, work.URL)
		if len(got) != 1 || aws.ToString(got[0].Body) != "poison" {
			t.Fatalf("receive %d: %+v", i, got)
		}
		// Give it back at once instead of waiting out the visibility timeout.
		if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(work.URL), ReceiptHandle: got[0].ReceiptHandle, VisibilityTimeout: 0,
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := receive(t, q, work.URL); len(got) != 0 {
		t.Fatalf("third receive got %d messages; want the message moved to the DLQ", len(got))
	}
	if got := receive(t, q, dlq.URL); len(got) != 1 || aws.ToString(got[0].Body) != "poison" {
		t.Fatalf("DLQ holds %+v", got)
	}

	again, err := env.Emulator.CreateResources(ctx, []byte(queueTemplate), prefixed(env.Prefix))
	if err != nil {
		t.Fatalf("second CreateResources: %v", err)
	}
	for id, r := range env.Resources {
		if again[id] != r {
			t.Errorf("second run %s = %+v, first %+v", id, again[id], r)
		}
	}
}

func receive(t *testing.T, q *sqs.Client, url string) []sqstypes.Message {
	t.Helper()
	out, err := q.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

func TestCreateResourcesRejectsBadTemplates(t *testing.T) {
	env := emulatortest.StartWith(t, []byte("Resources: {}"))
	q := awsclient.SQS(env.Config, env.Endpoint)
	cases := map[string]struct{ template, want string }{
		"not YAML": {"Resources: [", "parse template"},
		"undeclared reference": {`
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      RedrivePolicy: {deadLetterTargetArn: !GetAtt Missing.Arn, maxReceiveCount: 3}
`, "does not declare"},
		"reference to a resource the emulator does not create": {`
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      RedrivePolicy: {deadLetterTargetArn: !GetAtt Topic.TopicArn, maxReceiveCount: 3}
  Topic:
    Type: AWS::SNS::Topic
`, "does not create"},
		"cycle": {`
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      RedrivePolicy: {deadLetterTargetArn: !GetAtt R.Arn, maxReceiveCount: 3}
  R:
    Type: AWS::SQS::Queue
    Properties:
      RedrivePolicy: {deadLetterTargetArn: !GetAtt Q.Arn, maxReceiveCount: 3}
`, "depend on each other"},
		"unknown property": {`
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimout: 30
`, "VisibilityTimout"},
		"attribute a queue does not have": {`
Resources:
  D:
    Type: AWS::SQS::Queue
  Q:
    Type: AWS::SQS::Queue
    Properties:
      RedrivePolicy: {deadLetterTargetArn: !GetAtt D.StreamArn, maxReceiveCount: 3}
`, "no attribute"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			prefix := emulatortest.Prefix(t)
			_, err := env.Emulator.CreateResources(t.Context(), []byte(c.template), prefixed(prefix))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to mention %q", err, c.want)
			}
			// Nothing was created for Q.
			if _, err := q.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String(prefix + "Q")}); err == nil {
				t.Errorf("queue %sQ was created", prefix)
			}
		})
	}
}

func TestCreateResourcesRefusesAnExistingTableOfAnotherShape(t *testing.T) {
	env := emulatortest.Start(t)
	other := `
Resources:
  SpacesTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: id, AttributeType: S}]
      KeySchema: [{AttributeName: id, KeyType: HASH}]
`
	_, err := env.Emulator.CreateResources(t.Context(), []byte(other), prefixed(env.Prefix))
	if err == nil || !strings.Contains(err.Error(), "another shape") {
		t.Fatalf("error %v, want a shape mismatch", err)
	}
}

func TestStartServesIndependentListeners(t *testing.T) {
	// Two servers share kumo's process-global state: what one creates the
	// other sees, which is why callers need unique names.
	a, err := emulator.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := emulator.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.URL == b.URL {
		t.Fatalf("both servers at %s", a.URL)
	}
	prefix := emulatortest.Prefix(t)
	res, err := a.CreateResources(t.Context(), []byte(queueTemplate), prefixed(prefix))
	if err != nil {
		t.Fatal(err)
	}
	q := awsclient.SQS(b.Config(), b.URL)
	got, err := q.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String(prefix + "WorkQueue")})
	if err != nil {
		t.Fatalf("the second server does not see the first one's queue: %v", err)
	}
	if !strings.HasSuffix(aws.ToString(got.QueueUrl), "/"+res["WorkQueue"].Name) {
		t.Errorf("queue URL %s", aws.ToString(got.QueueUrl))
	}
}
