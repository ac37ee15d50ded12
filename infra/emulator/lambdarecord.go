package emulator

import (
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// LambdaRecord turns a DynamoDB Streams record into the record Lambda
// delivers (the local poller's, and tests' that read the stream).
func LambdaRecord(r stypes.Record, streamARN string) events.DynamoDBEventRecord {
	ev := events.DynamoDBEventRecord{
		AWSRegion:      aws.ToString(r.AwsRegion),
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventSource:    aws.ToString(r.EventSource),
		EventVersion:   aws.ToString(r.EventVersion),
		EventSourceArn: streamARN,
	}
	if ev.EventSource == "" {
		ev.EventSource = "aws:dynamodb"
	}
	if ev.EventVersion == "" {
		ev.EventVersion = "1.1"
	}
	if ev.AWSRegion == "" {
		ev.AWSRegion = Region
	}
	if s := r.Dynamodb; s != nil {
		ev.Change = events.DynamoDBStreamRecord{
			Keys:           convertImage(s.Keys),
			NewImage:       convertImage(s.NewImage),
			OldImage:       convertImage(s.OldImage),
			SequenceNumber: aws.ToString(s.SequenceNumber),
			SizeBytes:      aws.ToInt64(s.SizeBytes),
			StreamViewType: string(s.StreamViewType),
		}
		if s.ApproximateCreationDateTime != nil {
			ev.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *s.ApproximateCreationDateTime}
		}
	}
	return ev
}

func convertImage(m map[string]stypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = convertAttr(v)
	}
	return out
}

func convertAttr(v stypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *stypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *stypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *stypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *stypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *stypes.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *stypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *stypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *stypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *stypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = convertAttr(e)
		}
		return events.NewListAttribute(l)
	case *stypes.AttributeValueMemberM:
		return events.NewMapAttribute(convertImage(v.Value))
	}
	return events.NewNullAttribute()
}
