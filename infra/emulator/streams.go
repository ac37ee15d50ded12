package emulator

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"spaces/shared/tracing"
)

// Streams returns a DynamoDB Streams client for the emulator at endpoint,
// built as awsclient builds the others. Only the local stack reads a
// stream (in AWS, Lambda's event source mapping does), so no function
// links it.
func Streams(cfg aws.Config, endpoint string) *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		o.TracerProvider = tracing.SDK()
		o.BaseEndpoint = aws.String(endpoint)
	})
}
