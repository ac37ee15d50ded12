// Package cursor seals pagination positions into opaque, tamper-proof
// strings. A cursor is AES-256-GCM over the JSON position, with the listing's
// scope (org, route, filter fingerprint) bound as additional authenticated
// data, so a client can neither read the keys inside nor replay a cursor
// against another org, list or filter.
package cursor

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"spaces/shared/space"
)

const (
	// KeySize is the AES-256 key length New requires.
	KeySize = 32
	// MaxLen caps an encoded cursor; longer input is refused before decoding.
	MaxLen = 1024
	// version is the first byte of every sealed cursor and part of the
	// authenticated data, so the format can change without old cursors
	// being misread.
	version byte = 1
)

// enc is strict so every cursor has exactly one spelling.
var enc = base64.RawURLEncoding.Strict()

// Codec seals cursors with one key and opens them with that key or an
// earlier one. It is safe for concurrent use.
type Codec struct {
	aead cipher.AEAD
	// older open cursors sealed before a key rotation, so that a client
	// paging through a listing is not cut off by it.
	older []cipher.AEAD
}

// New returns a codec for a 32-byte key (see KeyFromSecret). Cursors sealed
// with any of the previous keys still open; new ones are sealed with key.
func New(key []byte, previous ...[]byte) (*Codec, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	c := &Codec{aead: aead}
	for _, k := range previous {
		a, err := newAEAD(k)
		if err != nil {
			return nil, fmt.Errorf("previous key: %w", err)
		}
		c.older = append(c.older, a)
	}
	return c, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("cursor: key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("cursor: %w", err)
	}
	// Random 96-bit nonces, generated and prepended by the AEAD itself.
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("cursor: %w", err)
	}
	return aead, nil
}

// KeyFromSecret derives the key from a configured secret, so every deployed
// function that shares the secret opens the others' cursors.
func KeyFromSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// Seal encodes v as JSON and encrypts it bound to scope.
func (c *Codec) Seal(scope string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("cursor: encode position: %w", err)
	}
	out := c.aead.Seal([]byte{version}, nil, plain, aad(scope))
	s := enc.EncodeToString(out)
	if len(s) > MaxLen {
		// Never hand out a cursor Open would refuse.
		return "", fmt.Errorf("cursor: sealed position is %d bytes, over the %d limit", len(s), MaxLen)
	}
	return s, nil
}

// Open decrypts s, checks it was sealed for scope, and decodes it into v. Any
// failure is the same KindMalformed error on the cursor field: the client
// learns only that the cursor is not valid here. The empty string is not a
// cursor; callers treat an absent cursor as the first page before calling.
func (c *Codec) Open(scope, s string, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		// A caller bug, not a client error.
		return fmt.Errorf("cursor: Open needs a non-nil pointer, got %T", v)
	}
	if len(s) > MaxLen {
		return invalid(fmt.Errorf("cursor is %d bytes, over the %d limit", len(s), MaxLen))
	}
	raw, err := enc.DecodeString(s)
	if err != nil {
		return invalid(fmt.Errorf("decode: %w", err))
	}
	if len(raw) < 1+c.aead.NonceSize()+c.aead.Overhead() {
		return invalid(fmt.Errorf("cursor is %d bytes, too short", len(raw)))
	}
	if raw[0] != version {
		return invalid(fmt.Errorf("unknown cursor version %d", raw[0]))
	}
	plain, err := c.aead.Open(nil, nil, raw[1:], aad(scope))
	for _, a := range c.older {
		if err == nil {
			break
		}
		plain, err = a.Open(nil, nil, raw[1:], aad(scope))
	}
	if err != nil {
		return invalid(errors.New("authentication failed (tampered, other key or other scope)"))
	}
	// Decode into a fresh value and assign only on success, so a refused
	// cursor leaves v exactly as it was.
	fresh := reflect.New(rv.Elem().Type())
	if err := json.Unmarshal(plain, fresh.Interface()); err != nil {
		return invalid(fmt.Errorf("decode position: %w", err))
	}
	rv.Elem().Set(fresh.Elem())
	return nil
}

// aad binds the format version and the scope.
func aad(scope string) []byte {
	return append([]byte{version}, scope...)
}

func invalid(cause error) error {
	return &space.Error{
		Kind:    space.KindMalformed,
		Message: "the cursor is not valid",
		Fields:  []space.FieldError{{Field: "cursor", Reason: "is not a valid cursor for this listing"}},
		Err:     cause,
	}
}
