package awsclient_test

import (
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
)

// cleanEnv hides the machine's AWS configuration from the test.
func cleanEnv(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_ENDPOINT_URL": "",
	} {
		t.Setenv(k, v)
	}
}

func TestLoadForAnEmulator(t *testing.T) {
	cleanEnv(t)
	cfg, err := awsclient.Load(t.Context(), awsclient.Options{Endpoint: "http://127.0.0.1:4566"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != awsclient.DefaultRegion || aws.ToString(cfg.BaseEndpoint) != "http://127.0.0.1:4566" {
		t.Errorf("region %q, endpoint %q", cfg.Region, aws.ToString(cfg.BaseEndpoint))
	}
	creds, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || creds.AccessKeyID != "emulator" {
		t.Errorf("credentials %+v, %v", creds, err)
	}

	// Real credentials and an explicit region win.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAREAL")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	cfg, err = awsclient.Load(t.Context(), awsclient.Options{Endpoint: "http://127.0.0.1:4566", Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	if creds, err := cfg.Credentials.Retrieve(t.Context()); err != nil || creds.AccessKeyID != "AKIAREAL" || cfg.Region != "eu-west-1" {
		t.Errorf("credentials %+v (%v), region %q", creds, err, cfg.Region)
	}
}

func TestLoadForAWS(t *testing.T) {
	cleanEnv(t)
	t.Setenv("AWS_REGION", "eu-central-1")
	cfg, err := awsclient.Load(t.Context(), awsclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-central-1" || cfg.BaseEndpoint != nil {
		t.Errorf("region %q, endpoint %v", cfg.Region, cfg.BaseEndpoint)
	}
	o := awsclient.DynamoDB(cfg, "").Options()
	if o.BaseEndpoint != nil || o.DisableValidateResponseChecksum {
		t.Errorf("a DynamoDB client for AWS: endpoint %v, checksum validation off %t", o.BaseEndpoint, o.DisableValidateResponseChecksum)
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
