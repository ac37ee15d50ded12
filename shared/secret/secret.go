// Package secret reads a secret's values from AWS Secrets Manager, once, when
// a function starts: secrets never travel in environment variables or
// template parameters, and a warm function makes no call per request.
//
// Rotation is a new value put into the secret: Secrets Manager then labels it
// AWSCURRENT and the value before it AWSPREVIOUS. Versions returns both, so
// that what was sealed with the previous value (pagination cursors) stays
// readable across one rotation, while new material uses the current one.
package secret

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// Getter is the one Secrets Manager call Versions makes.
type Getter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Stages Secrets Manager maintains through a rotation.
const (
	StageCurrent  = "AWSCURRENT"
	StagePrevious = "AWSPREVIOUS"
)

// Versions returns the secret's current string value and its previous one,
// or "" for previous when the secret was never rotated. id is the secret's
// ARN or name. A missing or empty current value is an error: a function must
// not start without its key.
func Versions(ctx context.Context, c Getter, id string) (current, previous string, err error) {
	current, err = value(ctx, c, id, StageCurrent)
	if err != nil {
		return "", "", err
	}
	if current == "" {
		return "", "", fmt.Errorf("secret %s: %s has no string value", id, StageCurrent)
	}
	previous, err = value(ctx, c, id, StagePrevious)
	var nf *smtypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		// Never rotated: there is no previous version.
		return current, "", nil
	}
	if err != nil {
		return "", "", err
	}
	return current, previous, nil
}

func value(ctx context.Context, c Getter, id, stage string) (string, error) {
	out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id), VersionStage: aws.String(stage)})
	if err != nil {
		return "", fmt.Errorf("secret %s (%s): %w", id, stage, err)
	}
	return aws.ToString(out.SecretString), nil
}
