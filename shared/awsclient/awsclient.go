// Package awsclient is the one place that builds the AWS SDK configuration
// and the service clients the catalog API uses, so that every function and
// test talks to AWS, or to the embedded emulator, the same way, and every
// call is traced under its caller's span (shared/tracing). A client only
// other functions use is built the same way beside its one user
// (eventbus.NewClient, emulator.Streams): each linked SDK service costs
// every importer's cold start its schemas' init.
//
// In AWS the Lambdas call it with an empty Endpoint: region and credentials
// come from the Lambda environment. Locally and in tests Endpoint is the
// emulator's URL: every client is pointed at it, the region defaults to
// us-east-1, and dummy static credentials are used unless real ones are
// configured (the emulator does not check signatures, but the SDK signs).
package awsclient

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/shared/tracing"
)

// DefaultRegion is the region used against an emulator when none is configured.
const DefaultRegion = "us-east-1"

// Options selects where the clients go.
type Options struct {
	// Endpoint is the base URL of an AWS emulator; empty means real AWS.
	Endpoint string
	// Region overrides the configured region; empty keeps it (and, with an
	// Endpoint, falls back to DefaultRegion).
	Region string
}

// Load builds the SDK configuration for o.
func Load(ctx context.Context, o Options) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.Endpoint != "" {
		opts = append(opts,
			config.WithBaseEndpoint(o.Endpoint),
			// No instance metadata service on a developer machine: asking it
			// only adds seconds of timeouts.
			config.WithEC2IMDSClientEnableState(imds.ClientDisabled),
		)
		if !realCredentialsConfigured() {
			opts = append(opts, config.WithCredentialsProvider(
				credentials.NewStaticCredentialsProvider("emulator", "emulator", "")))
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if o.Endpoint != "" && cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	return cfg, nil
}

// realCredentialsConfigured reports whether the environment names credentials
// explicitly (keys or a profile); only then are they used against an emulator.
func realCredentialsConfigured() bool {
	env, err := config.NewEnvConfig()
	if err != nil {
		return false
	}
	return env.Credentials.HasKeys() || env.SharedConfigProfile != ""
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
// function with it).
func Lambda(cfg aws.Config, endpoint string) *lambda.Client {
	return lambda.NewFromConfig(cfg, func(o *lambda.Options) {
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
