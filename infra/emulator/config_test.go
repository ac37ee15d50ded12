package emulator_test

import (
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces/infra/emulator"
)

func TestLoadConfig(t *testing.T) {
	// Hide the machine's AWS configuration.
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "", "AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_ENDPOINT_URL": "",
	} {
		t.Setenv(k, v)
	}
	cfg, err := emulator.LoadConfig(t.Context(), "http://127.0.0.1:4566")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != emulator.Region || aws.ToString(cfg.BaseEndpoint) != "http://127.0.0.1:4566" {
		t.Errorf("region %q, endpoint %q", cfg.Region, aws.ToString(cfg.BaseEndpoint))
	}
	creds, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || creds.AccessKeyID != "emulator" {
		t.Errorf("credentials %+v, %v", creds, err)
	}

	// Real credentials win over the dummy ones.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAREAL")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	cfg, err = emulator.LoadConfig(t.Context(), "http://127.0.0.1:4566")
	if err != nil {
		t.Fatal(err)
	}
	if creds, err := cfg.Credentials.Retrieve(t.Context()); err != nil || creds.AccessKeyID != "AKIAREAL" {
		t.Errorf("credentials %+v (%v)", creds, err)
	}
}
