package cursor_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"spaces/shared/cursor"
	"spaces/shared/space"
)

// position is what the store pages by: the last key of the previous page.
type position struct {
	OrgID string `json:"o"`
	After string `json:"a"`
}

const (
	scopeAcme  = "org=acme|GET /spaces|provider=aws"
	secretKey  = "test secret, never used outside tests"
	spaceID    = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	otherSpace = "9b2f3c1a-0d4e-4f5a-8b6c-7d8e9f0a1b2c"
)

func newCodec(t testing.TB, secret string) *cursor.Codec {
	t.Helper()
	c, err := cursor.New(cursor.KeyFromSecret(secret))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func seal(t testing.TB, c *cursor.Codec, scope string, v any) string {
	t.Helper()
	s, err := c.Seal(scope, v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantRefused checks err is the one public cursor error, and that v was left
// exactly as it was.
func wantRefused(t *testing.T, err error, v, before position) {
	t.Helper()
	var e *space.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *space.Error", err, err)
	}
	if e.Kind != space.KindMalformed {
		t.Errorf("kind = %v, want KindMalformed", e.Kind)
	}
	if len(e.Fields) != 1 || e.Fields[0] != (space.FieldError{Field: "cursor", Reason: "is not a valid cursor for this listing"}) {
		t.Errorf("fields = %+v", e.Fields)
	}
	if e.Message != "the cursor is not valid" {
		t.Errorf("message = %q", e.Message)
	}
	if e.Err == nil {
		t.Error("internal cause dropped (the log needs it)")
	}
	if v != before {
		t.Errorf("a refused cursor changed the destination: %+v, was %+v", v, before)
	}
}

func TestRoundTrip(t *testing.T) {
	c := newCodec(t, secretKey)
	in := position{OrgID: "acme", After: spaceID}
	s := seal(t, c, scopeAcme, in)
	if len(s) > cursor.MaxLen || strings.ContainsAny(s, "+/=") {
		t.Errorf("cursor %q is not unpadded base64url within %d bytes", s, cursor.MaxLen)
	}
	var out position
	if err := c.Open(scopeAcme, s, &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Errorf("opened %+v, sealed %+v", out, in)
	}
	// Opening replaces the destination rather than merging into it.
	stale := position{OrgID: "old", After: "old"}
	if err := c.Open(scopeAcme, seal(t, c, scopeAcme, position{After: spaceID}), &stale); err != nil {
		t.Fatal(err)
	}
	if stale != (position{After: spaceID}) {
		t.Errorf("opened into a used value: %+v", stale)
	}
	// Any JSON value round-trips, not only structs.
	var keys map[string]string
	if err := c.Open("s", seal(t, c, "s", map[string]string{"pk": "ORG#acme", "sk": "SPACE#" + spaceID}), &keys); err != nil {
		t.Fatal(err)
	}
	if keys["sk"] != "SPACE#"+spaceID {
		t.Errorf("map round trip: %v", keys)
	}
}

func TestSharedSecretInteroperates(t *testing.T) {
	// Two functions configured with the same secret open each other's cursors.
	a, b := newCodec(t, secretKey), newCodec(t, secretKey)
	var out position
	if err := b.Open(scopeAcme, seal(t, a, scopeAcme, position{After: spaceID}), &out); err != nil || out.After != spaceID {
		t.Fatalf("open across codecs: %+v, %v", out, err)
	}
	k1, k2 := cursor.KeyFromSecret("one"), cursor.KeyFromSecret("two")
	if len(k1) != cursor.KeySize || bytes.Equal(k1, k2) || !bytes.Equal(k1, cursor.KeyFromSecret("one")) {
		t.Errorf("KeyFromSecret: len %d, distinct %v, stable %v", len(k1), !bytes.Equal(k1, k2), bytes.Equal(k1, cursor.KeyFromSecret("one")))
	}
}

// TestRotationKeepsCursorsOpenAcrossOneRotation: after the secret is
// rotated, a codec built from the new value and the previous one opens the
// cursors sealed before, seals only with the new key, and a codec that no
// longer carries the old value refuses them, leaving the target untouched.
func TestRotationKeepsCursorsOpenAcrossOneRotation(t *testing.T) {
	before := newCodec(t, "value one")
	old := seal(t, before, scopeAcme, position{After: spaceID})

	rotated, err := cursor.New(cursor.KeyFromSecret("value two"), cursor.KeyFromSecret("value one"))
	if err != nil {
		t.Fatal(err)
	}
	var out position
	if err := rotated.Open(scopeAcme, old, &out); err != nil || out.After != spaceID {
		t.Fatalf("a cursor from before the rotation: %+v, %v", out, err)
	}
	// Still bound to its scope under the previous key.
	if err := rotated.Open("org=other|GET /spaces|provider=aws", old, &out); err == nil {
		t.Error("the previous key opened a cursor for another scope")
	}
	fresh := seal(t, rotated, scopeAcme, position{After: otherSpace})
	if err := newCodec(t, "value two").Open(scopeAcme, fresh, &out); err != nil || out.After != otherSpace {
		t.Errorf("a new cursor is not sealed with the current key: %+v, %v", out, err)
	}
	if err := before.Open(scopeAcme, fresh, &out); err == nil {
		t.Error("the old key opened a cursor sealed after the rotation")
	}

	// A second rotation drops "value one": its cursors are refused.
	twice, err := cursor.New(cursor.KeyFromSecret("value three"), cursor.KeyFromSecret("value two"))
	if err != nil {
		t.Fatal(err)
	}
	kept := position{After: "unchanged"}
	err = twice.Open(scopeAcme, old, &kept)
	var se *space.Error
	if !errors.As(err, &se) || se.Kind != space.KindMalformed || kept.After != "unchanged" {
		t.Errorf("two rotations later: %v, target %+v; want a malformed-cursor error and no change", err, kept)
	}
	if _, err := cursor.New(cursor.KeyFromSecret("x"), make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "previous key") {
		t.Errorf("New with a 16-byte previous key = %v, want a key-length error", err)
	}
}

func TestSealsAreUnlinkable(t *testing.T) {
	// A fresh nonce each time: the same position never gives the same
	// cursor, so clients cannot even tell two cursors point at one place.
	c := newCodec(t, secretKey)
	p := position{OrgID: "acme", After: spaceID}
	a, b := seal(t, c, scopeAcme, p), seal(t, c, scopeAcme, p)
	if a == b {
		t.Fatal("two seals of one position are identical")
	}
}

func TestCursorRevealsNoKeys(t *testing.T) {
	c := newCodec(t, secretKey)
	p := position{OrgID: "acme", After: spaceID}
	s := seal(t, c, scopeAcme, p)
	plain, _ := json.Marshal(p)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{spaceID, "acme", strings.ReplaceAll(spaceID, "-", "")} {
		if strings.Contains(s, secret) || bytes.Contains(raw, []byte(secret)) {
			t.Errorf("cursor reveals %q", secret)
		}
	}
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		// Any alignment of the plaintext's base64 would show a run of it.
		if strings.Contains(s, strings.TrimRight(e.EncodeToString(plain), "=")[4:20]) {
			t.Errorf("cursor contains the base64 of its plaintext")
		}
	}
	if bytes.Contains(raw, plain[:8]) {
		t.Error("cursor contains its plaintext")
	}
}

func TestOpenRefuses(t *testing.T) {
	c := newCodec(t, secretKey)
	good := seal(t, c, scopeAcme, position{OrgID: "acme", After: spaceID})
	raw, err := base64.RawURLEncoding.DecodeString(good)
	if err != nil {
		t.Fatal(err)
	}
	reencode := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	withByte := func(i int, x byte) string {
		b := bytes.Clone(raw)
		b[i] ^= x
		return reencode(b)
	}
	cases := []struct{ name, scope, cursor string }{
		{"other org", "org=globex|GET /spaces|provider=aws", good},
		{"other list", "org=acme|GET /cloud-accounts|provider=aws", good},
		{"other filter", "org=acme|GET /spaces|provider=gcp", good},
		{"scope prefix", "org=acme|GET /spaces|provider=aw", good},
		{"empty scope", "", good},
		{"sealed by another key", scopeAcme, seal(t, newCodec(t, "another secret"), scopeAcme, position{OrgID: "acme", After: spaceID})},
		{"flipped version byte", scopeAcme, withByte(0, 0x01)},
		{"flipped nonce byte", scopeAcme, withByte(3, 0x80)},
		{"flipped ciphertext byte", scopeAcme, withByte(len(raw)/2, 0x01)},
		{"flipped tag byte", scopeAcme, withByte(len(raw)-1, 0x01)},
		{"truncated", scopeAcme, reencode(raw[:len(raw)-1])},
		{"extended", scopeAcme, reencode(append(bytes.Clone(raw), 0))},
		{"too short", scopeAcme, reencode(raw[:20])},
		{"empty", scopeAcme, ""},
		{"padded base64", scopeAcme, good + "="},
		{"standard alphabet", scopeAcme, strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+/"},
		{"not base64", scopeAcme, "not a cursor!"},
		{"non-canonical last character", scopeAcme, nonCanonical(good)},
		{"over the length cap", scopeAcme, strings.Repeat("A", cursor.MaxLen+1)},
		{"valid cursor wrapped in spaces", scopeAcme, " " + good + " "},
		{"other shape", scopeAcme, seal(t, c, scopeAcme, []int{1, 2, 3})},
		{"wrong field type", scopeAcme, seal(t, c, scopeAcme, map[string]int{"a": 7})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := position{OrgID: "untouched", After: otherSpace}
			v := before
			err := c.Open(tc.scope, tc.cursor, &v)
			wantRefused(t, err, v, before)
		})
	}
	// Every single-byte change anywhere is refused.
	for i := range raw {
		var v position
		if err := c.Open(scopeAcme, withByte(i, 0x40), &v); err == nil {
			t.Fatalf("changing byte %d was not noticed", i)
		}
	}
}

// nonCanonical changes the unused low bits of the last character, which a
// lenient decoder would accept as the same bytes.
func nonCanonical(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if len(s)%4 == 0 {
		return s + "A" // no spare bits: make it an invalid length instead
	}
	last := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[last^1])
}

func TestOpenNeedsAPointer(t *testing.T) {
	c := newCodec(t, secretKey)
	s := seal(t, c, scopeAcme, position{})
	for _, v := range []any{position{}, nil, (*position)(nil)} {
		err := c.Open(scopeAcme, s, v)
		if err == nil || space.KindOf(err) != space.KindInternal || !strings.Contains(err.Error(), "non-nil pointer") {
			t.Errorf("Open(%T) = %v, want an internal error naming the misuse", v, err)
		}
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := cursor.New(make([]byte, n)); err == nil || !strings.Contains(err.Error(), "32 bytes") {
			t.Errorf("New(%d bytes) = %v, want a key-length error", n, err)
		}
	}
}

func TestSealRefusesWhatOpenWould(t *testing.T) {
	c := newCodec(t, secretKey)
	if _, err := c.Seal(scopeAcme, position{After: strings.Repeat("x", cursor.MaxLen)}); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized position: err = %v", err)
	}
	if _, err := c.Seal(scopeAcme, func() {}); err == nil {
		t.Error("a value JSON cannot encode was sealed")
	}
	// The largest position that seals still opens.
	big := position{After: strings.Repeat("x", 700)}
	var out position
	if err := c.Open(scopeAcme, seal(t, c, scopeAcme, big), &out); err != nil || out != big {
		t.Errorf("a 700-byte position: %v", err)
	}
}

func FuzzOpen(f *testing.F) {
	c := newCodec(f, secretKey)
	want := position{OrgID: "acme", After: spaceID}
	good := seal(f, c, scopeAcme, want)
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	f.Add(scopeAcme, good)
	f.Add("org=globex|GET /spaces|provider=aws", good)
	f.Add(scopeAcme, good[:len(good)-1])
	f.Add(scopeAcme, good+"A")
	f.Add(scopeAcme, base64.RawURLEncoding.EncodeToString(raw[:29]))
	f.Add(scopeAcme, base64.RawURLEncoding.EncodeToString(raw[:28]))
	f.Add(scopeAcme, "")
	f.Add(scopeAcme, "A")
	f.Add(scopeAcme, "====")
	f.Add(scopeAcme, "\x00\xff")
	f.Add(scopeAcme, strings.Repeat("_", cursor.MaxLen))
	f.Add(scopeAcme, strings.Repeat("-", cursor.MaxLen+1))
	f.Add("", seal(f, c, "", "null"))
	f.Add(scopeAcme, seal(f, c, scopeAcme, []any{nil, 1.5, "x"}))
	f.Fuzz(func(t *testing.T, scope, s string) {
		var v position
		err := c.Open(scope, s, &v)
		if err == nil {
			// Only a cursor sealed for this scope opens; fuzzing cannot
			// forge one, so success means a seal of the seed position (each
			// fuzz worker seals it afresh, with its own nonce).
			if scope != scopeAcme || v != want {
				t.Fatalf("Open(%q, %q) accepted a cursor it never sealed: %+v", scope, s, v)
			}
			return
		}
		if space.KindOf(err) != space.KindMalformed {
			t.Fatalf("Open(%q, %q) = %v, want KindMalformed", scope, s, err)
		}
		if v != (position{}) {
			t.Fatalf("a refused cursor changed the destination: %+v", v)
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	c := newCodec(b, secretKey)
	p := position{OrgID: "acme", After: spaceID}
	for b.Loop() {
		if _, err := c.Seal(scopeAcme, p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	c := newCodec(b, secretKey)
	s := seal(b, c, scopeAcme, position{OrgID: "acme", After: spaceID})
	var p position
	for b.Loop() {
		if err := c.Open(scopeAcme, s, &p); err != nil {
			b.Fatal(err)
		}
	}
}
