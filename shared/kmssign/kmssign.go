// Package kmssign signs the agents' presence tokens with the template's
// asymmetric KMS key (AgentTokenKey, RSA_2048, SIGN_VERIFY): the private
// half never leaves KMS, so a compromised function can sign only while it
// holds the grant, and cannot carry the key away. IoT Core verifies the
// signature with the key's public half, TokenSigningPublicKeys of the
// authorizer (PublicKeyPEM).
package kmssign

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// API is the part of the KMS client a Signer calls.
type API interface {
	Sign(ctx context.Context, in *kms.SignInput, opts ...func(*kms.Options)) (*kms.SignOutput, error)
}

// Signer signs with one key.
type Signer struct {
	KMS API
	// KeyID is the key's id, ARN or alias.
	KeyID string
}

// SignToken answers the base64 (standard alphabet) of the RSA PKCS #1
// v1.5 signature of token's SHA-256: what IoT Core verifies, as the
// "openssl dgst -sha256 -sign" recipe makes it
// (https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth.html#custom-auth-token-signature).
// KMS hashes a RAW message itself
// (https://docs.aws.amazon.com/kms/latest/APIReference/API_Sign.html).
func (s Signer) SignToken(ctx context.Context, token string) (string, error) {
	out, err := s.KMS.Sign(ctx, &kms.SignInput{KeyId: aws.String(s.KeyID), Message: []byte(token),
		MessageType: types.MessageTypeRaw, SigningAlgorithm: types.SigningAlgorithmSpecRsassaPkcs1V15Sha256})
	if err != nil {
		return "", fmt.Errorf("kms Sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(out.Signature), nil
}

// PublicKeyPEM is the key's public half as TokenSigningPublicKeys takes
// it (PEM, "PUBLIC KEY"); GetPublicKey answers it DER-encoded
// (SubjectPublicKeyInfo).
func PublicKeyPEM(ctx context.Context, c interface {
	GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, opts ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error)
}, keyID string) (string, error) {
	out, err := c.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(keyID)})
	if err != nil {
		return "", fmt.Errorf("kms GetPublicKey: %w", err)
	}
	if _, err := x509.ParsePKIXPublicKey(out.PublicKey); err != nil {
		return "", fmt.Errorf("kms GetPublicKey: not a public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: out.PublicKey})), nil
}
