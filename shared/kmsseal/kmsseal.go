// Package kmsseal encrypts small secrets (webhook signing secrets) with a
// KMS key the template creates: Encrypt and Decrypt directly, no data key,
// since each secret is far below KMS's 4 KiB limit. The encryption context
// binds a ciphertext to the item it belongs to, so a sealed value copied
// onto another item does not open.
package kmsseal

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// API is the part of the KMS client a Sealer calls.
type API interface {
	Encrypt(ctx context.Context, in *kms.EncryptInput, opts ...func(*kms.Options)) (*kms.EncryptOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// Sealer seals with one key.
type Sealer struct {
	KMS API
	// KeyID is the key's id, ARN or alias.
	KeyID string
}

// Seal encrypts plaintext under the key, bound to ec.
func (s Sealer) Seal(ctx context.Context, plaintext []byte, ec map[string]string) ([]byte, error) {
	out, err := s.KMS.Encrypt(ctx, &kms.EncryptInput{KeyId: aws.String(s.KeyID), Plaintext: plaintext, EncryptionContext: ec})
	if err != nil {
		return nil, fmt.Errorf("kms Encrypt: %w", err)
	}
	return out.CiphertextBlob, nil
}

// Open decrypts what Seal sealed with the same ec. The key is named too,
// so that a ciphertext of another key is refused.
func (s Sealer) Open(ctx context.Context, ciphertext []byte, ec map[string]string) ([]byte, error) {
	out, err := s.KMS.Decrypt(ctx, &kms.DecryptInput{KeyId: aws.String(s.KeyID), CiphertextBlob: ciphertext, EncryptionContext: ec})
	if err != nil {
		return nil, fmt.Errorf("kms Decrypt: %w", err)
	}
	return out.Plaintext, nil
}
