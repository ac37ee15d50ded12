package auth_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// FuzzLocalVerifier sends any Authorization header to the token verifier:
// it never panics, refuses with a 401 the client can read, and accepts only
// tokens the signer minted (mutations cannot forge an ES256 signature, so an
// accepted header carries the seed's org and subject).
func FuzzLocalVerifier(f *testing.F) {
	path := filepath.Join(f.TempDir(), "dev-jwt.pem")
	v, err := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: path})
	if err != nil {
		f.Fatal(err)
	}
	s, err := auth.NewSigner(auth.LocalConfig{KeyPath: path})
	if err != nil {
		f.Fatal(err)
	}
	good, err := s.Mint("acme", "fuzz", []string{"spaces:internal"}, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	past, err := auth.NewSigner(auth.LocalConfig{KeyPath: path, Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	if err != nil {
		f.Fatal(err)
	}
	expired, _ := past.Mint("acme", "fuzz", nil, time.Hour)
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"org_id": "acme", "sub": "fuzz", "iss": auth.DefaultIssuer,
		"aud": auth.DefaultAudience, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"org_id": "acme", "sub": "fuzz"}).SignedString([]byte("guess"))
	// Tokens signed with the real key that must still be refused: a crit
	// header (RFC 7515 §4.1.11) and an exp given as a string.
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	block, _ := pem.Decode(data)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		f.Fatal(err)
	}
	claims := jwt.MapClaims{"org_id": "acme", "sub": "fuzz", "iss": auth.DefaultIssuer, "aud": auth.DefaultAudience,
		"exp": time.Now().Add(time.Hour).Unix()}
	crit := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	crit.Header["kid"], crit.Header["crit"] = v.KeyID(), []string{"b64"}
	critical, _ := crit.SignedString(key)
	claims["exp"] = strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	str := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	str.Header["kid"] = v.KeyID()
	stringExp, _ := str.SignedString(key)
	parts := strings.Split(good, ".")
	for _, h := range []string{
		"Bearer " + good, "bearer  " + good + " ", "Bearer " + expired, "Bearer " + none, "Bearer " + hs,
		"Bearer " + parts[0] + "." + parts[1] + ".", "Bearer " + good[:len(good)-2], "Bearer " + parts[0] + ".e30." + parts[2],
		"Basic YTpi", "Bearer", "", "Bearer " + strings.Repeat("a", 9000), "Bearer a.b.c", "Bearer ....",
		"Bearer " + critical, "Bearer " + stringExp,
	} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/spaces", nil)
		r.Header["Authorization"] = []string{header}
		p, err := v.Authenticate(r)
		if err != nil {
			var msg string
			if e, ok := err.(*space.Error); ok {
				msg = e.Message
			}
			if space.KindOf(err) != space.KindUnauthenticated || msg == "" {
				t.Fatalf("refusal of %q is not a 401 with a message: %v", header, err)
			}
			return
		}
		if p.OrgID != "acme" || p.Subject != "fuzz" {
			t.Fatalf("accepted %q as %+v", header, p)
		}
		seg := strings.Split(strings.TrimSpace(header[len("Bearer "):]), ".")
		hdr, _ := base64.RawURLEncoding.DecodeString(seg[0])
		body, _ := base64.RawURLEncoding.DecodeString(seg[1])
		if strings.Contains(string(hdr), `"crit"`) || strings.Contains(string(body), `"exp":"`) {
			t.Fatalf("accepted %q: header %s, claims %s", header, hdr, body)
		}
	})
}
