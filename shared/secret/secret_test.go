package secret_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/secret"
)

// TestVersionsFollowARotation reads a secret from the emulator's Secrets
// Manager before and after a rotation (a new value put into it): first the
// only value and no previous one, then the new value and the one it replaced.
func TestVersionsFollowARotation(t *testing.T) {
	env := emulatortest.Start(t)
	sm := awsclient.SecretsManager(env.Config, env.Endpoint)
	name := env.Prefix + "cursor"
	created, err := sm.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String("value one")})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(created.ARN)

	cur, prev, err := secret.Versions(t.Context(), sm, arn)
	if err != nil || cur != "value one" || prev != "" {
		t.Fatalf("before any rotation: %q, %q, %v; want the value and no previous", cur, prev, err)
	}

	if _, err := sm.PutSecretValue(t.Context(), &secretsmanager.PutSecretValueInput{SecretId: aws.String(arn), SecretString: aws.String("value two")}); err != nil {
		t.Fatal(err)
	}
	cur, prev, err = secret.Versions(t.Context(), sm, arn)
	if err != nil || cur != "value two" || prev != "value one" {
		t.Fatalf("after a rotation: %q, %q, %v; want value two, then value one", cur, prev, err)
	}
	// By name as well as by ARN.
	if cur, _, err := secret.Versions(t.Context(), sm, name); err != nil || cur != "value two" {
		t.Errorf("by name: %q, %v", cur, err)
	}
}

// TestVersionsRefusesWhatIsNotThere: no secret, or an empty one, is an error
// (a function must not start without its key), and nothing is returned.
func TestVersionsRefusesWhatIsNotThere(t *testing.T) {
	env := emulatortest.Start(t)
	sm := awsclient.SecretsManager(env.Config, env.Endpoint)
	cur, prev, err := secret.Versions(t.Context(), sm, env.Prefix+"absent")
	if err == nil || cur != "" || prev != "" || !strings.Contains(err.Error(), env.Prefix+"absent") {
		t.Errorf("absent secret: %q, %q, %v; want an error naming it", cur, prev, err)
	}

	if _, err := sm.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String(env.Prefix + "empty"), SecretString: aws.String("")}); err != nil {
		t.Fatal(err)
	}
	cur, prev, err = secret.Versions(t.Context(), sm, env.Prefix+"empty")
	if err == nil || cur != "" || prev != "" {
		t.Errorf("empty secret: %q, %q, %v; want an error", cur, prev, err)
	}
}
