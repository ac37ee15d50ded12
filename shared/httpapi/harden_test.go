package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// fieldsOf returns the field errors of err by field name.
func fieldsOf(err error) map[string]string {
	var de *space.Error
	out := map[string]string{}
	if errors.As(err, &de) {
		for _, f := range de.Fields {
			out[f.Field] = f.Reason
		}
	}
	return out
}

func jsonRequest(body string) *http.Request {
	r := httptest.NewRequest("POST", "/x", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// TestReadObjectRefusesWhatJSONWouldRewrite: invalid UTF-8 (raw or an
// escaped lone surrogate) and duplicate keys are refused with the field
// named, where encoding/json would silently store something else.
func TestReadObjectRefusesWhatJSONWouldRewrite(t *testing.T) {
	var manyKeys string
	for i := range 20 {
		manyKeys += fmt.Sprintf(`"k%02d":%d,`, i, i)
	}
	cases := []struct {
		name, body, field string
	}{
		{"invalid UTF-8 in a value", "{\"name\":\"a\xffb\",\"provider\":\"aws\"}", "name"},
		{"invalid UTF-8 in a nested value", "{\"config\":{\"region\":\"\xc3\"}}", "config"},
		{"invalid UTF-8 in a key", "{\"na\xffme\":\"x\"}", "body"},
		{"lone high surrogate", `{"name":"a\ud800b"}`, "name"},
		{"lone low surrogate", `{"name":"\udc00"}`, "name"},
		{"high surrogate at the end", `{"name":"\ud83d"}`, "name"},
		{"duplicate top-level key", `{"name":"a","name":"b"}`, "name"},
		{"duplicate nested key", `{"config":{"region":"us-east-1","region":"eu-west-1"}}`, "config.region"},
		{"duplicate key in an array", `{"manifests":[{"a":1},{"kind":"x","kind":"y"}]}`, "manifests[1].kind"},
		{"duplicate key after an array", `{"manifests":[{"a":1}],"manifests":[]}`, "manifests"},
		{"duplicate key, one escaped", `{"name":"a","n\u0061me":"b"}`, "name"},
		// Past 16 keys an object's keys go into a map.
		{"duplicate key among many", `{"manifests":[{` + manyKeys + `"k19":0}]}`, "manifests[0].k19"},
	}
	for _, c := range cases {
		var name, provider string
		var config map[string]string
		var manifests []map[string]any
		err := readObject(httptest.NewRecorder(), jsonRequest(c.body), map[string]any{
			"name": &name, "provider": &provider, "config": &config, "manifests": &manifests})
		if space.KindOf(err) != space.KindMalformed || fieldsOf(err)[c.field] == "" {
			t.Errorf("%s: want 400 naming %s, got %v", c.name, c.field, err)
		}
		if name != "" || provider != "" || config != nil || manifests != nil {
			t.Errorf("%s: fields were filled from a refused body", c.name)
		}
	}
	// What must still pass: a valid surrogate pair, escaped backslashes
	// before a u, the same key in sibling objects.
	var name string
	var manifests []map[string]any
	ok := `{"name":"\ud83d\ude00 \\ud800","manifests":[{"k":1,"o":{"k":1}},{"k":2,"o":[{"k":1}]}]}`
	if err := readObject(httptest.NewRecorder(), jsonRequest(ok), map[string]any{"name": &name, "manifests": &manifests}); err != nil {
		t.Fatalf("valid body refused: %v", err)
	}
	if name != "😀 \\ud800" {
		t.Errorf("name %q", name)
	}
}

// TestReadObjectRefusesDataAfterTheObject: the body is one object; what
// follows it, a stray closing bracket included, is a 400 naming the body
// (a stray bracket once panicked the duplicate-key scan).
func TestReadObjectRefusesDataAfterTheObject(t *testing.T) {
	for _, body := range []string{`{"name":"a"} {}`, `{"name":"a"}}`, `{"name":"a"}]`, `{"name":"a"} x`} {
		var name string
		err := readObject(httptest.NewRecorder(), jsonRequest(body), map[string]any{"name": &name})
		if space.KindOf(err) != space.KindMalformed || !strings.Contains(fieldsOf(err)["body"], "data after the JSON object") {
			t.Errorf("%s: want 400 about data after the object, got %v", body, err)
		}
	}
	var name string
	if err := readObject(httptest.NewRecorder(), jsonRequest("\n {\"name\":\"a\"} \n\t"), map[string]any{"name": &name}); err != nil || name != "a" {
		t.Errorf("space around the object: %v, name %q", err, name)
	}
}

// TestReadObjectKeepsIntegersExact: a manifest number above 2^53 is kept
// as written, not rounded through float64.
func TestReadObjectKeepsIntegersExact(t *testing.T) {
	var manifests []map[string]any
	if err := readObject(httptest.NewRecorder(), jsonRequest(`{"manifests":[{"n":9007199254740993,"f":1.25}]}`),
		map[string]any{"manifests": &manifests}); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(manifests)
	if string(out) != `[{"f":1.25,"n":9007199254740993}]` {
		t.Errorf("round trip: %s", out)
	}
}

// TestPolicyTargetKeysAreExact: encoding/json matches struct fields
// case-insensitively; the target's keys must be exactly the documented ones.
func TestPolicyTargetKeysAreExact(t *testing.T) {
	for _, body := range []string{
		`{"target":{"Namespace":"a","kind":"Deployment","name":"w"}}`,
		`{"target":{"namespace":"a","KIND":"Deployment","name":"w"}}`,
		`{"target":{"namespace":"a","kind":"Deployment","name":"w","extra":"x"}}`,
		`{"target":{"namespace":1,"kind":"Deployment","name":"w"}}`,
	} {
		var target *policyTarget
		err := readObject(httptest.NewRecorder(), jsonRequest(body), map[string]any{"target": &target})
		if fieldsOf(err)["target"] == "" {
			t.Errorf("%s: want a problem on target, got %v", body, err)
		}
	}
	var target *policyTarget
	if err := readObject(httptest.NewRecorder(), jsonRequest(`{"target":{"namespace":"a","kind":"Deployment","name":"w"}}`),
		map[string]any{"target": &target}); err != nil || *target != (policyTarget{"a", "Deployment", "w"}) {
		t.Errorf("valid target: %v %+v", err, target)
	}
}

// TestQueryRefusesBadEscapes: a broken percent-escape must not make a
// filter disappear (fail open); the parameter is named.
func TestQueryRefusesBadEscapes(t *testing.T) {
	cases := []struct{ raw, field string }{
		{"provider=gc%zz", "provider"},
		{"limit=1&limit=%zz", "limit"},
		{"status=%", "status"},
		{"pro%zzvider=aws", "pro%zzvider"},
	}
	for _, c := range cases {
		q := newQuery(c.raw, "provider", "limit", "status")
		if fieldsOf(q.err())[c.field] == "" {
			t.Errorf("%s: want a problem on %s, got %v", c.raw, c.field, q.err())
		}
	}
	q := newQuery("provider=g%63p&limit=5&status=", "provider", "limit", "status")
	if err := q.err(); err != nil || q.oneOf("provider", "aws", "gcp") != "gcp" || q.limit() != 5 {
		t.Errorf("valid query refused or misread: %v", err)
	}
}

func TestIfMatch(t *testing.T) {
	cases := []struct {
		header  string
		version int64
		kind    space.Kind // 0 (KindInternal) when accepted
	}{
		{`"3"`, 3, 0},
		{`*`, 0, 0},
		{`W/"3"`, 0, space.KindPreconditionFailed},
		{`"3", "4"`, 0, space.KindMalformed},
		{`3`, 0, space.KindMalformed},
		{`"0"`, 0, space.KindMalformed},
		{`"3.1765000000"`, 3, 0}, // a read's tag, naming its probe time
		{`"3."`, 0, space.KindMalformed},
		{`"3.x"`, 0, space.KindMalformed},
	}
	for _, c := range cases {
		r := httptest.NewRequest("PATCH", "/x", nil)
		r.Header.Set("If-Match", c.header)
		v, err := ifMatch(r, true)
		switch {
		case c.kind == 0 && (err != nil || v != c.version):
			t.Errorf("%s: %d %v, want %d", c.header, v, err, c.version)
		case c.kind != 0 && (space.KindOf(err) != c.kind || fieldsOf(err)["If-Match"] == ""):
			t.Errorf("%s: %v, want kind %d naming If-Match", c.header, err, c.kind)
		}
	}
}

// TestReadTagMovesWithTheProbe: a read's ETag is the version until the space
// is probed, then also names the probe time, so a beat that moves the time
// at one version is not answered 304; If-Match reads either as the version.
func TestReadTagMovesWithTheProbe(t *testing.T) {
	s := space.Space{Version: 7}
	if got := readTag(s); got != `"7"` {
		t.Errorf("unprobed: %s", got)
	}
	at := time.Unix(1765000000, 0)
	s.Probe.LastProbeAt = &at
	first := readTag(s)
	later := at.Add(time.Minute)
	s.Probe.LastProbeAt = &later
	if second := readTag(s); first != `"7.1765000000"` || second == first {
		t.Errorf("probed: %s then %s", first, second)
	}
	r := httptest.NewRequest("PATCH", "/x", nil)
	r.Header.Set("If-Match", first)
	if v, err := ifMatch(r, true); err != nil || v != 7 {
		t.Errorf("If-Match %s: %d %v", first, v, err)
	}
}

// serve runs one request through the real middleware stack with a handler
// that fails with err.
func serve(t *testing.T, ctx context.Context, path string, err error) (*httptest.ResponseRecorder, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	api := &API{Auth: failAuth{err}, Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	req := httptest.NewRequest("GET", path, nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, req)
	return rec, &logs
}

type failAuth struct{ err error }

func (f failAuth) Authenticate(*http.Request) (auth.Principal, error) { return auth.Principal{}, f.err }

func problemOf(t *testing.T, rec *httptest.ResponseRecorder) problem {
	t.Helper()
	var p problem
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q: %s", ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNonCanonicalPathsAre404: no redirect with an HTML body.
func TestNonCanonicalPathsAre404(t *testing.T) {
	for _, path := range []string{"//spaces", "/./spaces", "/spaces/../cloud-accounts", "/spaces/%2e%2e/cloud-accounts", "/spaces/x/./status"} {
		rec, _ := serve(t, context.Background(), path, nil)
		if rec.Code != 404 || problemOf(t, rec).Status != 404 {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
}

// TestResponseHeaders: every answer is nosniff and no-store; a 401 for a
// bad token names the RFC 6750 error.
func TestResponseHeaders(t *testing.T) {
	bad := &space.Error{Kind: space.KindUnauthenticated, Reason: "invalid_token", Message: "the bearer token has expired"}
	rec, _ := serve(t, context.Background(), "/spaces", bad)
	if rec.Code != 401 {
		t.Fatalf("status %d", rec.Code)
	}
	if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="spaces", error="invalid_token"` {
		t.Errorf("WWW-Authenticate %q", got)
	}
	missing := &space.Error{Kind: space.KindUnauthenticated, Message: "no Authorization header"}
	if rec, _ := serve(t, context.Background(), "/spaces", missing); rec.Header().Get("WWW-Authenticate") != `Bearer realm="spaces"` {
		t.Errorf("no credentials: WWW-Authenticate %q", rec.Header().Get("WWW-Authenticate"))
	}
	for _, path := range []string{"/spaces", "/nope", "/openapi.yaml"} {
		rec, _ := serve(t, context.Background(), path, bad)
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", path, rec.Header())
		}
	}
}

// TestBadGatewayHidesTheCloudsWords: the 502 detail says what to fix; the
// cloud's message (which names Spaces' own principal) stays in the log.
func TestBadGatewayHidesTheCloudsWords(t *testing.T) {
	secret := "User: arn:aws:sts::111122223333:assumed-role/spaces-runtime/x is not authorized to perform: sts:AssumeRole"
	for _, reason := range []string{space.ReasonAccessDenied, space.ReasonClusterNotFound, space.ReasonUnauthorized, space.ReasonBadResponse, ""} {
		err := &space.Error{Kind: space.KindBadGateway, Reason: reason, Message: "assume role: " + secret, Err: errors.New(secret)}
		rec, logs := serve(t, context.Background(), "/spaces", err)
		p := problemOf(t, rec)
		if rec.Code != 502 || strings.Contains(rec.Body.String(), "arn:aws") || p.Detail == "" {
			t.Errorf("%q: %d %s", reason, rec.Code, rec.Body)
		}
		if !strings.Contains(logs.String(), "spaces-runtime") {
			t.Errorf("%q: the cause is not in the log", reason)
		}
	}
}

// TestClientCancellationIsNotAServerError: a store call failing because
// the client went away is logged as a cancellation (499), not as a 503 at
// ERROR level.
func TestClientCancellationIsNotAServerError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	storeErr := &space.Error{Kind: space.KindUnavailable, Message: "the registry store did not answer in time", Err: fmt.Errorf("dynamodb GetItem: %w", context.Canceled)}
	_, logs := serve(t, ctx, "/spaces", storeErr)
	var sawAccess bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["level"] == "ERROR" {
			t.Errorf("logged at ERROR: %s", line)
		}
		if m["msg"] == "request" {
			sawAccess = true
			if m["status"] != float64(statusClientClosed) {
				t.Errorf("access log status %v, want 499: %s", m["status"], line)
			}
		}
	}
	if !sawAccess {
		t.Errorf("no access log line: %s", logs)
	}
	// Without the cancellation the same error is a 503 at ERROR level.
	rec, logs := serve(t, context.Background(), "/spaces", storeErr)
	if rec.Code != 503 || !strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("uncancelled: %d %s", rec.Code, logs)
	}
}

// The request id and the idempotency key keep the limits of their counted
// forms (space.Pattern says why they are no longer counted).
func TestHeaderPatternsKeepTheirLimits(t *testing.T) {
	for _, c := range []struct {
		counted string
		match   func(string) bool
		max     int
	}{
		{`^[A-Za-z0-9._:=-]{1,128}$`, validRequestID.MatchString, 128},
		{`^[\x21-\x7e]{1,255}$`, idempotencyKey.MatchString, 255},
	} {
		want := regexp.MustCompile(c.counted)
		for n := 0; n <= c.max+1; n++ {
			for _, s := range []string{strings.Repeat("a", n), strings.Repeat("a", n) + "é", strings.Repeat(":", n)} {
				if w, g := want.MatchString(s), c.match(s); w != g {
					t.Errorf("%s on %q: counted %t, now %t", c.counted, s, w, g)
				}
			}
		}
	}
}
