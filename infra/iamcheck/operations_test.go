package iamcheck

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestRequests: each modelled operation is the IAM action and resource AWS
// authorizes it as.
func TestRequests(t *testing.T) {
	l := Local{Names: map[string]string{"t1-ProbeQueue": "ProbeQueue", "t1-EventBus": "EventBus", "t1-Discovery": "DiscoveryFunction", "t1-Table": "SpacesTable"}, Alias: "live"}
	r := NewRecorder()
	const acct = ":us-east-1:000000000000:"
	stream := "arn:aws:dynamodb" + acct + "table/t1-Table/stream/2026-01-01T00:00:00.000"
	for _, tc := range []struct {
		service, op string
		in, out     any
		want        []request
	}{
		{"SQS", "DeleteMessageBatch", &sqs.DeleteMessageBatchInput{QueueUrl: aws.String("http://127.0.0.1:1/000000000000/t1-ProbeQueue")}, nil,
			[]request{{"sqs:DeleteMessage", "arn:aws:sqs" + acct + "ProbeQueue"}}},
		{"SQS", "SendMessage", &sqs.SendMessageInput{QueueUrl: aws.String("http://127.0.0.1:1/000000000000/t1-ProbeQueue")}, nil,
			[]request{{"sqs:SendMessage", "arn:aws:sqs" + acct + "ProbeQueue"}}},
		{"EventBridge", "PutEvents", &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{EventBusName: aws.String("t1-EventBus")}, {}}}, nil,
			[]request{{"events:PutEvents", "arn:aws:events" + acct + "event-bus/EventBus"}, {"events:PutEvents", "arn:aws:events" + acct + "event-bus/default"}}},
		{"Lambda", "Invoke", &lambda.InvokeInput{FunctionName: aws.String("t1-Discovery")}, nil,
			[]request{{"lambda:InvokeFunction", "arn:aws:lambda" + acct + "function:DiscoveryFunction:live"}}},
		{"Lambda", "Invoke", &lambda.InvokeInput{FunctionName: aws.String("arn:aws:lambda" + acct + "function:t1-Discovery:3")}, nil,
			[]request{{"lambda:InvokeFunction", "arn:aws:lambda" + acct + "function:DiscoveryFunction:3"}}},
		{"DynamoDB Streams", "GetShardIterator", &dynamodbstreams.GetShardIteratorInput{StreamArn: &stream}, &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String("it-1")},
			[]request{{"dynamodb:GetShardIterator", "arn:aws:dynamodb" + acct + "table/SpacesTable/stream/label"}}},
		{"DynamoDB Streams", "GetRecords", &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("it-1")}, &dynamodbstreams.GetRecordsOutput{NextShardIterator: aws.String("it-2")},
			[]request{{"dynamodb:GetRecords", "arn:aws:dynamodb" + acct + "table/SpacesTable/stream/label"}}},
		{"DynamoDB Streams", "GetRecords", &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("it-2")}, nil,
			[]request{{"dynamodb:GetRecords", "arn:aws:dynamodb" + acct + "table/SpacesTable/stream/label"}}},
		// An iterator is read once: a replay of it names no stream.
		{"DynamoDB Streams", "GetRecords", &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("it-1")}, nil,
			[]request{{"dynamodb:GetRecords", ""}}},
		{"Kinesis", "PutRecord", nil, nil, []request{{"kinesis:PutRecord", ""}}},
	} {
		if got := r.requests(l, tc.service, tc.op, tc.in, tc.out); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %v, want %v", tc.service, tc.op, got, tc.want)
		}
	}
}

// TestMatch: IAM's wildcards, across "/" too.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"arn:aws:iot:r:a:topic/spaces/spaces-*", "arn:aws:iot:r:a:topic/spaces/spaces-1/wake", true},
		{"arn:aws:iot:r:a:topic/spaces/spaces-*", "arn:aws:iot:r:a:topic/spaces/other-1/wake", false},
		{"arn:aws:dynamodb:r:a:table/T", "arn:aws:dynamodb:r:a:table/T/index/names", false},
		{"arn:aws:dynamodb:r:a:table/T/index/*", "arn:aws:dynamodb:r:a:table/T/index/names", true},
		{"*", "arn:aws:sqs:r:a:Q", true},
		{"arn:aws:sqs:r:a:Q?", "arn:aws:sqs:r:a:Q1", true},
		{"arn:aws:sqs:r:a:[Q]", "arn:aws:sqs:r:a:Q", false},
	} {
		if got := match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("match(%q, %q) = %t", tc.pattern, tc.s, got)
		}
	}
}
