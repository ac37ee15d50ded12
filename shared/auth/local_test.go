package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// fixture is one development key with a verifier and a signer built from its
// file, the way the local stack and `make token` use it.
type fixture struct {
	path     string
	verifier *auth.LocalVerifier
	signer   *auth.Signer
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".local", "dev-jwt.pem")
	v, err := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	s, err := auth.NewSigner(auth.LocalConfig{KeyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{path: path, verifier: v, signer: s}
}

// signerAt mints with the fixture's key but another clock or claims.
func (f fixture) signerAt(t *testing.T, cfg auth.LocalConfig) *auth.Signer {
	t.Helper()
	cfg.KeyPath = f.path
	s, err := auth.NewSigner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// privateKey reads the key file as an attacker with file access would, for
// hand-built tokens.
func (f fixture) privateKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	data, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("key file is not a PKCS#8 PEM block: %q", data)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(*ecdsa.PrivateKey)
}

func mint(t *testing.T, s *auth.Signer, org string, scopes ...string) string {
	t.Helper()
	tok, err := s.Mint(org, "alice", scopes, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func request(authz ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/spaces", nil)
	for _, a := range authz {
		r.Header.Add("Authorization", a)
	}
	return r
}

// wantUnauthenticated checks the error is a 401 with exactly msg as its
// public message.
func wantUnauthenticated(t *testing.T, err error, msg string) {
	t.Helper()
	var e *space.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *space.Error", err, err)
	}
	if e.Kind != space.KindUnauthenticated {
		t.Errorf("kind = %v, want KindUnauthenticated", e.Kind)
	}
	if e.Message != msg {
		t.Errorf("message = %q, want %q", e.Message, msg)
	}
}

// claimsNow are valid registered claims for hand-built tokens.
func claimsNow() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": auth.DefaultIssuer, "aud": auth.DefaultAudience, "sub": "alice", "org_id": "acme",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

func signES256(t *testing.T, key *ecdsa.PrivateKey, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLocalVerifierAcceptsValidToken(t *testing.T) {
	f := newFixture(t)
	tok := mint(t, f.signer, "acme", auth.ScopeInternal, "spaces:read")
	p, err := f.verifier.Authenticate(request("Bearer " + tok))
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Principal{OrgID: "acme", Subject: "alice", Scopes: []string{auth.ScopeInternal, "spaces:read"}}
	if p.OrgID != want.OrgID || p.Subject != want.Subject || !slices.Equal(p.Scopes, want.Scopes) {
		t.Fatalf("principal = %+v, want %+v", p, want)
	}
	if !p.Has(auth.ScopeInternal) || p.Has("spaces:admin") || p.Has("") {
		t.Errorf("Has: internal=%v admin=%v empty=%v", p.Has(auth.ScopeInternal), p.Has("spaces:admin"), p.Has(""))
	}
	// The scheme is case-insensitive (RFC 7235).
	if _, err := f.verifier.Authenticate(request("bearer " + tok)); err != nil {
		t.Errorf("lower-case scheme: %v", err)
	}
	// A token without scopes is an ordinary caller.
	p, err = f.verifier.Authenticate(request("Bearer " + mint(t, f.signer, "acme")))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Scopes) != 0 || p.Has(auth.ScopeInternal) {
		t.Errorf("scopes = %q, want none", p.Scopes)
	}
}

func TestLocalVerifierTokenHeader(t *testing.T) {
	f := newFixture(t)
	if got := strings.Split(mint(t, f.signer, "acme"), ".")[0]; got == "" {
		t.Fatal("no header")
	} else {
		raw, err := base64.RawURLEncoding.DecodeString(got)
		if err != nil {
			t.Fatal(err)
		}
		var h map[string]any
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		if h["alg"] != "ES256" || h["kid"] != f.verifier.KeyID() || h["kid"] != f.signer.KeyID() {
			t.Errorf("header = %v, want alg ES256 and kid %s", h, f.verifier.KeyID())
		}
	}
}

func TestLocalVerifierRefuses(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	other := newFixture(t)
	key := f.privateKey(t)
	kid := f.verifier.KeyID()

	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})

	without := func(claim string) jwt.MapClaims {
		c := claimsNow()
		delete(c, claim)
		return c
	}
	with := func(claim string, v any) jwt.MapClaims {
		c := claimsNow()
		c[claim] = v
		return c
	}
	noneToken := func() string {
		// Hand-built: the library will not sign "none" without a special key.
		enc := base64.RawURLEncoding
		h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": kid})
		c, _ := json.Marshal(claimsNow())
		return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "."
	}
	hs256WithPublicKey := func() string {
		// Algorithm confusion: an HMAC keyed with the public key, which a
		// verifier that trusts the token's alg would check with the same bytes.
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claimsNow())
		tok.Header["kid"] = kid
		s, err := tok.SignedString(pubPEM)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	foreignKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, authz, msg string
	}{
		{"expired", "Bearer " + mint(t, f.signerAt(t, auth.LocalConfig{Now: func() time.Time { return now.Add(-2 * time.Hour) }}), "acme"),
			"the bearer token has expired"},
		{"not yet valid", "Bearer " + signES256(t, key, kid, with("nbf", now.Add(5*time.Minute).Unix())),
			"the bearer token is not valid yet"},
		{"minted in the future", "Bearer " + mint(t, f.signerAt(t, auth.LocalConfig{Now: func() time.Time { return now.Add(5 * time.Minute) }}), "acme"),
			"the bearer token is not valid yet"},
		{"issued in the future", "Bearer " + signES256(t, key, kid, with("iat", now.Add(5*time.Minute).Unix())),
			"the bearer token was issued in the future"},
		{"signed by another key", "Bearer " + mint(t, other.signer, "acme"),
			"the bearer token was signed by an unknown key"},
		{"another key claiming our kid", "Bearer " + signES256(t, foreignKey, kid, claimsNow()),
			"the bearer token's signature is not valid"},
		{"no kid", "Bearer " + signES256(t, key, "", claimsNow()),
			"the bearer token was signed by an unknown key"},
		{"alg none", "Bearer " + noneToken(), "the bearer token's signature is not valid"},
		{"HS256 keyed with the public key", "Bearer " + hs256WithPublicKey(), "the bearer token's signature is not valid"},
		{"wrong issuer", "Bearer " + mint(t, f.signerAt(t, auth.LocalConfig{Issuer: "someone-else"}), "acme"),
			"the bearer token was issued by an untrusted issuer"},
		{"wrong audience", "Bearer " + mint(t, f.signerAt(t, auth.LocalConfig{Audience: "other-api"}), "acme"),
			"the bearer token is not meant for this API (wrong audience)"},
		{"no issuer", "Bearer " + signES256(t, key, kid, without("iss")), "the bearer token has no issuer (iss claim)"},
		{"no audience", "Bearer " + signES256(t, key, kid, without("aud")), "the bearer token has no audience (aud claim)"},
		{"no exp", "Bearer " + signES256(t, key, kid, without("exp")), "the bearer token has no expiry (exp claim)"},
		{"no org_id", "Bearer " + signES256(t, key, kid, without("org_id")), "the bearer token has no org_id claim"},
		{"empty org_id", "Bearer " + signES256(t, key, kid, with("org_id", "")), "the bearer token has no org_id claim"},
		{"org_id with spaces", "Bearer " + signES256(t, key, kid, with("org_id", "acme corp")),
			"the bearer token's org_id claim is not a valid organization id"},
		{"org_id not a string", "Bearer " + signES256(t, key, kid, with("org_id", 42)), "the bearer token is malformed"},
		// RFC 7519 §2: a NumericDate is a JSON number, never a string.
		{"exp a numeric string", "Bearer " + signES256(t, key, kid, with("exp", strconv.FormatInt(now.Add(time.Hour).Unix(), 10))),
			"the bearer token's exp, nbf and iat must be JSON numbers"},
		{"nbf a numeric string", "Bearer " + signES256(t, key, kid, with("nbf", strconv.FormatInt(now.Unix(), 10))),
			"the bearer token's exp, nbf and iat must be JSON numbers"},
		{"iat a numeric string", "Bearer " + signES256(t, key, kid, with("iat", strconv.FormatInt(now.Unix(), 10))),
			"the bearer token's exp, nbf and iat must be JSON numbers"},
		// RFC 7515 §4.1.11: a header naming extensions the verifier does not
		// understand (this one understands none) must be refused.
		{"crit with an unknown parameter", "Bearer " + signHeader(t, key, map[string]any{"kid": kid, "crit": []string{"exp2"}, "exp2": 1}, claimsNow()),
			"the bearer token names critical header parameters this API does not understand (crit)"},
		{"crit empty", "Bearer " + signHeader(t, key, map[string]any{"kid": kid, "crit": []string{}}, claimsNow()),
			"the bearer token names critical header parameters this API does not understand (crit)"},
		{"tampered claims", "Bearer " + tamper(t, mint(t, f.signer, "acme")), "the bearer token's signature is not valid"},
		{"garbage", "Bearer not-a-jwt", "the bearer token is malformed"},
		{"garbage segments", "Bearer a.b.c", "the bearer token is malformed"},
		{"too long", "Bearer " + strings.Repeat("a", 9000), "the bearer token is too long"},
		{"basic scheme", "Basic YWxpY2U6c2VjcmV0", "the Authorization header must use the Bearer scheme"},
		{"token without scheme", mint(t, f.signer, "acme"), "the Authorization header must use the Bearer scheme"},
		{"empty token", "Bearer ", "the bearer token is empty"},
		{"scheme only", "Bearer", "the bearer token is empty"},
		{"empty header", "", "the request has no Authorization header; send Authorization: Bearer <token>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := f.verifier.Authenticate(request(tc.authz))
			wantUnauthenticated(t, err, tc.msg)
			if p.OrgID != "" || p.Subject != "" || p.Scopes != nil {
				t.Errorf("principal = %+v, want zero on failure", p)
			}
		})
	}

	t.Run("no header", func(t *testing.T) {
		_, err := f.verifier.Authenticate(request())
		wantUnauthenticated(t, err, "the request has no Authorization header; send Authorization: Bearer <token>")
	})
	t.Run("two headers", func(t *testing.T) {
		tok := "Bearer " + mint(t, f.signer, "acme")
		_, err := f.verifier.Authenticate(request(tok, tok))
		wantUnauthenticated(t, err, "the request has more than one Authorization header")
	})
}

// signHeader signs c with extra header parameters.
func signHeader(t *testing.T, key *ecdsa.PrivateKey, header map[string]any, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tamper flips the org in the payload while keeping the signature.
func tamper(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(raw), `"org_id":"acme"`, `"org_id":"evil"`, 1)
	if changed == string(raw) {
		t.Fatalf("payload %s has no org_id to tamper with", raw)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(changed))
	return strings.Join(parts, ".")
}

func TestLocalVerifierLeeway(t *testing.T) {
	f := newFixture(t)
	key := f.privateKey(t)
	now := time.Now()
	// Clock skew under the 30 s leeway is tolerated on every time claim.
	c := claimsNow()
	c["exp"] = now.Add(-10 * time.Second).Unix()
	c["nbf"] = now.Add(10 * time.Second).Unix()
	c["iat"] = now.Add(10 * time.Second).Unix()
	if _, err := f.verifier.Authenticate(request("Bearer " + signES256(t, key, f.verifier.KeyID(), c))); err != nil {
		t.Fatalf("token within leeway refused: %v", err)
	}
	// Past the leeway it is refused.
	c["exp"] = now.Add(-auth.Leeway - 5*time.Second).Unix()
	_, err := f.verifier.Authenticate(request("Bearer " + signES256(t, key, f.verifier.KeyID(), c)))
	wantUnauthenticated(t, err, "the bearer token has expired")
}

func TestLocalVerifierClockFromConfig(t *testing.T) {
	f := newFixture(t)
	tok := mint(t, f.signer, "acme") // valid for an hour
	later, err := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: f.path, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = later.Authenticate(request("Bearer " + tok))
	wantUnauthenticated(t, err, "the bearer token has expired")
}

func TestLocalVerifierErrorsDoNotLeakInternals(t *testing.T) {
	f := newFixture(t)
	_, err := f.verifier.Authenticate(request("Bearer " + mint(t, newFixture(t).signer, "acme")))
	var e *space.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v", err)
	}
	// The cause is kept for the log, the message is what the client sees.
	if e.Err == nil {
		t.Error("internal cause was dropped")
	}
	for _, leak := range []string{"keyfunc", "kid", "jwt", f.verifier.KeyID()} {
		if strings.Contains(e.Message, leak) {
			t.Errorf("message %q leaks %q", e.Message, leak)
		}
	}
}

func TestMintRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	before, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.signer.Mint("", "", []string{"ok", "has space", ""}, 0)
	if err == nil {
		t.Fatal("Mint accepted an empty org, subject, bad scopes and zero ttl")
	}
	for _, want := range []string{"org is required", "subject is required", `scope "has space"`, `scope ""`, "ttl must be positive"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := f.signer.Mint("acme corp", "alice", nil, time.Hour); err == nil || !strings.Contains(err.Error(), "org must be") {
		t.Errorf("org with a space: err = %v", err)
	}
	after, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("a refused Mint changed the key file")
	}
}
