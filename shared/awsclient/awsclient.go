// Package awsclient is the one place that builds the AWS SDK configuration
// and the service clients the catalog API uses, so that every function and
// test talks to AWS, or to the embedded emulator, the same way, and every
// call is traced under its caller's span (shared/tracing). A client only
// other functions use is built the same way beside its one user
// (eventbus.NewClient, emulator.Streams): each linked SDK service costs
// every importer's cold start its schemas' init.
//
// In AWS a function's configuration is FromEnv's: the region and the
// execution role's credentials Lambda puts in the environment. Locally and
// in tests the clients get the emulator's URL as endpoint and
// infra/emulator's configuration.
package awsclient

import (
	"errors"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/logging"

	"spaces/shared/tracing"
)

// FromEnv is a function's SDK configuration in Lambda, read from lookup
// (os.LookupEnv): the region (AWS_REGION, or AWS_DEFAULT_REGION), the
// execution role's credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN), cached as the SDK caches them, and AWS_ENDPOINT_URL
// when a test points the binary at an emulator.
//
// It is not config.LoadDefaultConfig on purpose: that one links every
// credential source the SDK knows (SSO, SSO OIDC, sign-in, STS web
// identity and assume-role profiles, processes, instance metadata), whose
// service packages cost each cold start about 3 ms and half a megabyte of
// init, for sources Lambda never uses; nor does Lambda set the shared
// config files or the other AWS_* settings it reads. A missing region or
// key fails at start, not at the first call.
func FromEnv(lookup func(string) (string, bool)) (aws.Config, error) {
	get := func(name string) string { v, _ := lookup(name); return v }
	region := get("AWS_REGION")
	if region == "" {
		region = get("AWS_DEFAULT_REGION")
	}
	creds := credentials.NewStaticCredentialsProvider(get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY"), get("AWS_SESSION_TOKEN"))
	switch {
	case region == "":
		return aws.Config{}, errors.New("AWS_REGION is not set")
	case !creds.Value.HasKeys():
		return aws.Config{}, errors.New("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set")
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: aws.NewCredentialsCache(creds),
		// What LoadDefaultConfig sets too: the SDK's rare warnings go to stderr.
		Logger: logging.NewStandardLogger(os.Stderr),
	}
	if e := get("AWS_ENDPOINT_URL"); e != "" {
		cfg.BaseEndpoint = aws.String(e)
	}
	return cfg, nil
}

// DynamoDB returns a DynamoDB client. With an endpoint, response checksum
// validation is off: the emulator does not compute DynamoDB's CRC32 header.
func DynamoDB(cfg aws.Config, endpoint string) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.TracerProvider = tracing.SDK()
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.DisableValidateResponseChecksum = true
		}
	})
}

// SQS returns an SQS client.
func SQS(cfg aws.Config, endpoint string) *sqs.Client {
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.TracerProvider = tracing.SDK()
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// Lambda returns a Lambda client (the catalog API invokes the discovery
// function with it): its Invoke is a span under the caller's, like every
// other client's operations.
func Lambda(cfg aws.Config, endpoint string) *lambda.Client {
	return lambda.NewFromConfig(cfg, func(o *lambda.Options) {
		o.TracerProvider = tracing.SDK()
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// SecretsManager returns a Secrets Manager client.
func SecretsManager(cfg aws.Config, endpoint string) *secretsmanager.Client {
	return secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) {
		o.TracerProvider = tracing.SDK()
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// KMS returns a KMS client (webhook secrets are sealed with it).
func KMS(cfg aws.Config, endpoint string) *kms.Client {
	return kms.NewFromConfig(cfg, func(o *kms.Options) {
		o.TracerProvider = tracing.SDK()
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}
