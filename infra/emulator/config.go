package emulator

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// LoadConfig builds the SDK configuration for the emulator at url, on a
// developer's machine or in a test: every client goes to url, in Region,
// with dummy static credentials unless real ones are configured (the
// emulator does not check signatures, but the SDK signs). It is the SDK's
// whole default chain, profiles included, unlike awsclient.FromEnv's
// Lambda environment: only infra links it.
func LoadConfig(ctx context.Context, url string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(Region),
		config.WithBaseEndpoint(url),
		// No instance metadata service on a developer machine: asking it
		// only adds seconds of timeouts.
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled),
	}
	if !realCredentialsConfigured() {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider("emulator", "emulator", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
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
