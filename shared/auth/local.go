package auth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Defaults for the local stack's tokens.
const (
	DefaultIssuer   = "spaces-local"
	DefaultAudience = "spaces"
	// Leeway absorbs clock skew on exp, nbf and iat.
	Leeway = 30 * time.Second
)

// LocalConfig names the development key and the token claims the local stack
// issues and accepts.
type LocalConfig struct {
	// KeyPath is the PEM file of the ES256 key, created on first use.
	KeyPath string
	// Issuer and Audience default to DefaultIssuer and DefaultAudience.
	Issuer   string
	Audience string
	// Now defaults to time.Now.
	Now func() time.Time
}

func (c LocalConfig) withDefaults() LocalConfig {
	if c.Issuer == "" {
		c.Issuer = DefaultIssuer
	}
	if c.Audience == "" {
		c.Audience = DefaultAudience
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// claims is the token body the local stack issues and accepts. Scope is the
// OAuth space-separated string.
type claims struct {
	jwt.RegisteredClaims
	OrgID string `json:"org_id,omitempty"`
	Scope string `json:"scope,omitempty"`
}

// LocalVerifier verifies bearer tokens itself against the development key,
// standing in for API Gateway's JWT authorizer when running locally.
type LocalVerifier struct {
	key    *devKey
	parser *jwt.Parser
}

// NewLocalVerifier loads (or creates) the key at cfg.KeyPath.
func NewLocalVerifier(cfg LocalConfig) (*LocalVerifier, error) {
	cfg = cfg.withDefaults()
	key, err := loadOrCreateKey(cfg.KeyPath)
	if err != nil {
		return nil, err
	}
	return &LocalVerifier{
		key: key,
		parser: jwt.NewParser(
			// Only ES256: refuses alg "none" and HS256 signed with the public
			// key (algorithm confusion) before any key is looked at.
			jwt.WithValidMethods([]string{jwt.SigningMethodES256.Alg()}),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(Leeway),
			jwt.WithTimeFunc(cfg.Now),
			jwt.WithStrictDecoding(),
		),
	}, nil
}

// KeyID is the kid tokens must carry (the key's RFC 7638 thumbprint).
func (v *LocalVerifier) KeyID() string { return v.key.kid }

// Authenticate implements Authenticator.
func (v *LocalVerifier) Authenticate(r *http.Request) (Principal, error) {
	raw, err := bearerToken(r)
	if err != nil {
		return Principal{}, err
	}
	var c claims
	if _, err := v.parser.ParseWithClaims(raw, &c, v.keyFor); err != nil {
		return Principal{}, invalidToken(describe(err, &c), err)
	}
	return newPrincipal(c.OrgID, c.Subject, parseScopes(c.Scope))
}

var (
	errUnknownKey  = errors.New("unknown kid")
	errCritical    = errors.New("crit header parameter")
	errNumericDate = errors.New("a NumericDate claim is not a JSON number")
)

// keyFor checks what the parser lets through before it picks the key: a
// crit header (RFC 7515 §4.1.11: a recipient that does not understand every
// listed extension must refuse the JWS; this one understands none), and
// exp, nbf and iat given as strings (RFC 7519 §2: a NumericDate is a JSON
// number; golang-jwt also takes "123").
func (v *LocalVerifier) keyFor(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, errCritical
	}
	if !numericDates(t.Raw) {
		return nil, errNumericDate
	}
	if kid, _ := t.Header["kid"].(string); kid != v.key.kid {
		return nil, errUnknownKey
	}
	return &v.key.private.PublicKey, nil
}

// numericDates reports whether the token's exp, nbf and iat, where present,
// are JSON numbers. The parser has decoded the payload already, so it is
// valid base64url JSON.
func numericDates(raw string) bool {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(payload, &c); err != nil {
		return false
	}
	for _, k := range []string{"exp", "nbf", "iat"} {
		if v, ok := c[k]; ok && (len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9'))) {
			return false
		}
	}
	return true
}

// describe turns a parse failure into a message for the client. Expiry comes
// first: it is the one a client can act on by fetching a new token.
func describe(err error, c *claims) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the bearer token is malformed"
	case errors.Is(err, errCritical):
		return "the bearer token names critical header parameters this API does not understand (crit)"
	case errors.Is(err, errNumericDate):
		return "the bearer token's exp, nbf and iat must be JSON numbers"
	case errors.Is(err, errUnknownKey):
		return "the bearer token was signed by an unknown key"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "the bearer token's signature is not valid"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the bearer token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "the bearer token is not valid yet"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the bearer token was issued in the future"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "the bearer token was issued by an untrusted issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the bearer token is not meant for this API (wrong audience)"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		switch {
		case c.ExpiresAt == nil:
			return "the bearer token has no expiry (exp claim)"
		case c.Issuer == "":
			return "the bearer token has no issuer (iss claim)"
		case len(c.Audience) == 0:
			return "the bearer token has no audience (aud claim)"
		}
	}
	return "the bearer token is not valid"
}

// Signer mints development tokens with the key the LocalVerifier trusts, for
// `make token` and tests.
type Signer struct {
	key *devKey
	cfg LocalConfig
}

// NewSigner loads (or creates) the key at cfg.KeyPath.
func NewSigner(cfg LocalConfig) (*Signer, error) {
	cfg = cfg.withDefaults()
	key, err := loadOrCreateKey(cfg.KeyPath)
	if err != nil {
		return nil, err
	}
	return &Signer{key: key, cfg: cfg}, nil
}

// KeyID is the kid the signer puts in its tokens.
func (s *Signer) KeyID() string { return s.key.kid }

// Mint issues a token for subject in org with scopes, valid for ttl from now.
func (s *Signer) Mint(org, subject string, scopes []string, ttl time.Duration) (string, error) {
	var problems []string
	switch {
	case org == "":
		problems = append(problems, "org is required")
	case !validOrgID(org):
		problems = append(problems, fmt.Sprintf("org must be 1-%d printable characters without spaces", maxOrgIDLen))
	}
	if subject == "" {
		problems = append(problems, "subject is required")
	}
	for _, sc := range scopes {
		if sc == "" || strings.ContainsFunc(sc, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			problems = append(problems, fmt.Sprintf("scope %q must be non-empty without spaces or control characters", sc))
		}
	}
	if ttl <= 0 {
		problems = append(problems, "ttl must be positive")
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("auth: cannot mint token: %s", strings.Join(problems, "; "))
	}
	var jti [16]byte
	_, _ = rand.Read(jti[:]) // crypto/rand.Read never fails
	now := s.cfg.Now()
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    s.cfg.Issuer,
			Subject:   subject,
			Audience:  jwt.ClaimStrings{s.cfg.Audience},
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        hex.EncodeToString(jti[:]),
		},
		OrgID: org,
		Scope: strings.Join(scopes, " "),
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	t.Header["kid"] = s.key.kid
	return t.SignedString(s.key.private)
}
