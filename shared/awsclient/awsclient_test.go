package awsclient_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
)

func TestFromEnv(t *testing.T) {
	env := map[string]string{"AWS_REGION": "eu-central-1", "AWS_DEFAULT_REGION": "us-west-2",
		"AWS_ACCESS_KEY_ID": "ASIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := awsclient.FromEnv(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-central-1" || cfg.BaseEndpoint != nil {
		t.Errorf("region %q, endpoint %v", cfg.Region, cfg.BaseEndpoint)
	}
	creds, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || creds.AccessKeyID != "ASIAEXAMPLE" || creds.SecretAccessKey != "secret" || creds.SessionToken != "token" {
		t.Errorf("credentials %+v, %v", creds, err)
	}
	o := awsclient.DynamoDB(cfg, "").Options()
	if o.BaseEndpoint != nil || o.DisableValidateResponseChecksum {
		t.Errorf("a DynamoDB client for AWS: endpoint %v, checksum validation off %t", o.BaseEndpoint, o.DisableValidateResponseChecksum)
	}

	// AWS_DEFAULT_REGION stands in for AWS_REGION; AWS_ENDPOINT_URL points
	// every client elsewhere (a test's emulator).
	delete(env, "AWS_REGION")
	env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:4566"
	if cfg, err = awsclient.FromEnv(lookup); err != nil || cfg.Region != "us-west-2" || aws.ToString(cfg.BaseEndpoint) != "http://127.0.0.1:4566" {
		t.Errorf("region %q, endpoint %q, %v", cfg.Region, aws.ToString(cfg.BaseEndpoint), err)
	}

	// Without a region or keys the function cannot start.
	delete(env, "AWS_DEFAULT_REGION")
	if _, err := awsclient.FromEnv(lookup); err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Errorf("no region: %v", err)
	}
	env["AWS_REGION"] = "eu-central-1"
	delete(env, "AWS_SECRET_ACCESS_KEY")
	if _, err := awsclient.FromEnv(lookup); err == nil || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("no secret key: %v", err)
	}
}

func TestClientsReachTheEmulator(t *testing.T) {
	env := emulatortest.Start(t)
	ctx := t.Context()

	db := awsclient.DynamoDB(env.Config, env.Endpoint)
	if !db.Options().DisableValidateResponseChecksum {
		t.Error("checksum validation is on against the emulator")
	}
	if _, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(env.Name(t, "SpacesTable"))}); err != nil {
		t.Errorf("DynamoDB: %v", err)
	}
	if _, err := awsclient.SQS(env.Config, env.Endpoint).ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Errorf("SQS: %v", err)
	}
}
