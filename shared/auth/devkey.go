package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultKeyPath is where the local stack and `make token` keep the
// development signing key, relative to the repository root.
const DefaultKeyPath = ".local/dev-jwt.pem"

// devKey is the development ES256 key pair and its key id.
type devKey struct {
	private *ecdsa.PrivateKey
	kid     string
}

// loadOrCreateKey reads the P-256 key at path, generating it on first use:
// the directory is created 0700 and the file 0600. Creation is atomic (write a
// temporary file, then hard-link it into place), so two processes starting
// at once agree on one key instead of one reading a half-written file.
func loadOrCreateKey(path string) (*devKey, error) {
	if path == "" {
		return nil, errors.New("auth: the development key path is empty")
	}
	k, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("auth: generate development key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("auth: encode development key: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("auth: create key directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".dev-jwt-*.tmp") // created 0600
	if err != nil {
		return nil, fmt.Errorf("auth: create development key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := pem.Encode(tmp, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("auth: write development key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("auth: write development key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("auth: write development key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readKey(path) // another process won the race; use its key
		}
		return nil, fmt.Errorf("auth: store development key: %w", err)
	}
	return newDevKey(priv)
}

// readKey loads a PEM P-256 private key (PKCS#8 or SEC 1) and refuses a file
// others can read, the way ssh does.
func readKey(path string) (*devKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("auth: read development key: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("auth: development key %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("auth: development key %s is accessible by others (mode %04o); run chmod 600 %s", path, perm, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: read development key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("auth: development key %s is not PEM", path)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("auth: development key %s holds a %q block, want PRIVATE KEY", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: parse development key %s: %w", path, err)
	}
	priv, ok := key.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("auth: development key %s is not an ECDSA P-256 key (ES256 needs one)", path)
	}
	return newDevKey(priv)
}

func newDevKey(priv *ecdsa.PrivateKey) (*devKey, error) {
	kid, err := thumbprint(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	return &devKey{private: priv, kid: kid}, nil
}

// thumbprint is the RFC 7638 JWK thumbprint of a P-256 public key, used as
// the kid: it names the key, so a token signed by another key is refused
// before its signature is even checked.
func thumbprint(pub *ecdsa.PublicKey) (string, error) {
	raw, err := pub.Bytes() // 0x04 || X || Y, fixed width
	if err != nil || len(raw) != 65 {
		return "", fmt.Errorf("auth: encode public key: %v", err)
	}
	enc := base64.RawURLEncoding
	// Members in lexicographic order, no whitespace (RFC 7638 section 3).
	jwk := `{"crv":"P-256","kty":"EC","x":"` + enc.EncodeToString(raw[1:33]) + `","y":"` + enc.EncodeToString(raw[33:]) + `"}`
	sum := sha256.Sum256([]byte(jwk))
	return enc.EncodeToString(sum[:]), nil
}
