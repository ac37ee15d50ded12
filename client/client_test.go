package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// recorder is a test server that answers each request with the next of
// its answers and keeps what it was sent.
type recorder struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	got     []*http.Request
	bodies  []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := io.ReadAll(req.Body)
	r.got = append(r.got, req.Clone(context.Background()))
	r.bodies = append(r.bodies, string(b))
	if len(r.answers) == 0 {
		http.Error(w, "no more answers", 500)
		return
	}
	a := r.answers[0]
	r.answers = r.answers[1:]
	a(w)
}

func answer(status int, ctype, body string, headers ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

const spaceJSON = `{"id":"6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11","org_id":"acme","name":"prod","provider":"aws","space_type":"kubernetes",
"cloud_account_id":"0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a","config":{"region":"us-east-1","clusterName":"prod"},"status":"unknown",
"probe":{},"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","version":1}`

func newTest(t *testing.T, rec *recorder, waits *[]time.Duration) *API {
	t.Helper()
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	api, err := New(srv.URL+"/", Options{Token: "tok", Retry: Retry{Sleep: func(_ context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// TestRetryHonoursRetryAfter: a GET answered 429 with Retry-After: 3 is
// sent again after 3s, with the token each time; a 503 whose Retry-After
// (an HTTP date an hour ahead) is over MaxRetryAfter is returned as it is.
func TestRetryHonoursRetryAfter(t *testing.T) {
	date := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	rec := &recorder{answers: []func(http.ResponseWriter){
		answer(429, "application/json", `{"message":"Too Many Requests"}`, "Retry-After", "3"),
		answer(503, "application/problem+json", `{"type":"urn:spaces:problem:unavailable","title":"Service Unavailable","status":503}`, "Retry-After", date),
		answer(200, "application/json", spaceJSON),
	}}
	var waits []time.Duration
	api := newTest(t, rec, &waits)
	r, err := api.GetSpaceWithResponse(context.Background(), "6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11", nil)
	if err := Check(r.HTTPResponse, r.Body, err); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after a 429 and a 503 whose Retry-After is over the cap: %v, want unavailable", err)
	}
	if len(rec.got) != 2 || len(waits) != 1 || waits[0] != 3*time.Second {
		t.Fatalf("sent %d times, waited %v; want 2 sends and one wait of 3s", len(rec.got), waits)
	}
	for _, req := range rec.got {
		if req.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("request without the token: %v", req.Header)
		}
	}
}

// TestRetryAfterDate: an HTTP-date Retry-After under the cap is waited
// until; the retried GET's answer is the result.
func TestRetryAfterDate(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	if d, ok := retryAfter(now.Add(30*time.Second).Format(http.TimeFormat), now); !ok || d != 30*time.Second {
		t.Errorf("date 30s ahead: %v %v", d, ok)
	}
	if d, ok := retryAfter(now.Add(-time.Minute).Format(http.TimeFormat), now); !ok || d != 0 {
		t.Errorf("date in the past: %v %v", d, ok)
	}
	for _, bad := range []string{"", "-1", "soon", "1.5"} {
		if _, ok := retryAfter(bad, now); ok {
			t.Errorf("Retry-After %q read as a wait", bad)
		}
	}
	rec := &recorder{answers: []func(http.ResponseWriter){
		answer(504, "application/json", `{"message":"Endpoint request timed out"}`, "Retry-After", time.Now().Add(20*time.Second).UTC().Format(http.TimeFormat)),
		answer(200, "application/json", spaceJSON),
	}}
	var waits []time.Duration
	api := newTest(t, rec, &waits)
	r, err := api.GetSpaceWithResponse(context.Background(), "6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11", nil)
	if err := Check(r.HTTPResponse, r.Body, err); err != nil || r.JSON200 == nil || r.JSON200.Name != "prod" {
		t.Fatalf("after a 504: %v %+v", err, r)
	}
	if len(rec.got) != 2 || len(waits) != 1 || waits[0] <= 0 || waits[0] > 20*time.Second {
		t.Fatalf("sent %d times, waited %v; want 2 sends and one wait in (0, 20s]", len(rec.got), waits)
	}
}

// TestRetryBackoffWithoutRetryAfter: without Retry-After, each wait is
// between half and all of the doubling backoff, and the attempts stop at
// Attempts with the last answer.
func TestRetryBackoffWithoutRetryAfter(t *testing.T) {
	rec := &recorder{}
	for range 4 {
		rec.answers = append(rec.answers, answer(503, "application/problem+json", `{"type":"urn:spaces:problem:unavailable","title":"Service Unavailable","status":503,"reason":"CloudUnavailable"}`))
	}
	var waits []time.Duration
	api := newTest(t, rec, &waits)
	r, err := api.ListSpacesWithResponse(context.Background(), nil)
	err = Check(r.HTTPResponse, r.Body, err)
	var e *Error
	if !errors.As(err, &e) || e.Problem.Reason == nil || *e.Problem.Reason != "CloudUnavailable" {
		t.Fatalf("after 4 503s: %v", err)
	}
	if len(rec.got) != 4 || len(waits) != 3 {
		t.Fatalf("sent %d, waited %v: want 4 sends, 3 waits", len(rec.got), waits)
	}
	for i, w := range waits {
		ceiling := 250 * time.Millisecond << i
		if w < ceiling/2 || w > ceiling {
			t.Errorf("wait %d = %v, want in [%v, %v]", i+1, w, ceiling/2, ceiling)
		}
	}
}

// TestNoRetryOfNonIdempotentOrRefused: a POST without Idempotency-Key
// (verify) is sent once even on a 503; a 502 (a refusal) and a 409 are
// never retried.
func TestNoRetryOfNonIdempotentOrRefused(t *testing.T) {
	rec := &recorder{answers: []func(http.ResponseWriter){
		answer(503, "application/problem+json", `{"type":"urn:spaces:problem:unavailable","title":"Service Unavailable","status":503}`),
		answer(502, "application/problem+json", `{"type":"urn:spaces:problem:bad-gateway","title":"Bad Gateway","status":502,"reason":"AccessDenied"}`),
	}}
	var waits []time.Duration
	api := newTest(t, rec, &waits)
	r, err := api.VerifyCloudAccountWithResponse(context.Background(), "0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a", nil)
	if err := Check(r.HTTPResponse, r.Body, err); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("verify: %v", err)
	}
	g, err := api.GetSpaceWithResponse(context.Background(), "x", nil)
	if err := Check(g.HTTPResponse, g.Body, err); !errors.Is(err, ErrBadGateway) {
		t.Fatalf("get: %v", err)
	}
	if len(rec.got) != 2 || len(waits) != 0 {
		t.Fatalf("sent %d, waited %v: want each sent once", len(rec.got), waits)
	}
}

// TestCreateIdempotencyKey: a registration carries an Idempotency-Key
// (a UUID) that its retry repeats, with the same body; a route that takes
// no key gets none.
func TestCreateIdempotencyKey(t *testing.T) {
	rec := &recorder{answers: []func(http.ResponseWriter){
		answer(503, "application/problem+json", `{"type":"urn:spaces:problem:unavailable","title":"Service Unavailable","status":503}`),
		answer(201, "application/json", spaceJSON),
		answer(201, "application/json", `{}`),
	}}
	var waits []time.Duration
	api := newTest(t, rec, &waits)
	raw := `{"provider":"aws","cloud_account_id":"0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a","config":{"region":"us-east-1","clusterName":"prod"}}`
	r, err := api.RegisterSpaceWithBodyWithResponse(context.Background(), nil, "application/json", strings.NewReader(raw))
	if err := Check(r.HTTPResponse, r.Body, err); err != nil || r.JSON201 == nil {
		t.Fatalf("register: %v", err)
	}
	if len(rec.got) != 2 {
		t.Fatalf("sent %d times, want 2 (a 503, then 201)", len(rec.got))
	}
	k1, k2 := rec.got[0].Header.Get("Idempotency-Key"), rec.got[1].Header.Get("Idempotency-Key")
	if _, err := uuid.Parse(k1); err != nil || k1 != k2 {
		t.Errorf("keys %q, %q: want one UUID on both sends", k1, k2)
	}
	if rec.bodies[0] != raw || rec.bodies[1] != raw {
		t.Errorf("bodies %q: want the registration twice", rec.bodies)
	}
	e, err := api.CreateEnvironmentWithBodyWithResponse(context.Background(), nil, "application/json", strings.NewReader(`{}`))
	if err != nil || e.StatusCode() != 201 {
		t.Fatalf("create environment: %v", err)
	}
	if k := rec.got[2].Header.Get("Idempotency-Key"); k != "" {
		t.Errorf("an environment create (no Idempotency-Key in openapi.yaml) got %q", k)
	}
}

// TestRetryConnectionRefused: a GET whose connection fails is sent again;
// after Attempts the transport's error is the result.
func TestRetryConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var waits []time.Duration
	api, err := New("http://"+addr, Options{Retry: Retry{Attempts: 3, Sleep: func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := api.ListSpacesWithResponse(context.Background(), nil)
	var opErr *net.OpError
	if err == nil || r != nil || !errors.As(err, &opErr) {
		t.Fatalf("got %v, %v; want the connection's error", r, err)
	}
	if len(waits) != 2 {
		t.Fatalf("waited %v: want 2 waits for 3 attempts", waits)
	}
}

// TestProblemErrors: problem documents, gateway messages and other bodies
// become *Error values that errors.Is tells apart.
func TestProblemErrors(t *testing.T) {
	cases := []struct {
		name   string
		answer func(http.ResponseWriter)
		is     error
		isNot  error
		text   []string
	}{
		{"not found", answer(404, "application/problem+json", `{"type":"urn:spaces:problem:not-found","title":"Not Found","status":404,"detail":"no space 6f1c","request_id":"r1",
			"tombstone":{"id":"6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11","name":"prod","deregistered_at":"2026-01-01T00:00:00Z"}}`),
			ErrNotFound, ErrConflict, []string{"404 Not Found: no space 6f1c", "[request r1]"}},
		{"conflict", answer(409, "application/problem+json", `{"type":"urn:spaces:problem:conflict","title":"Conflict","status":409,"detail":"cluster taken","existing_space_id":"6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11"}`),
			ErrConflict, ErrNotFound, []string{"cluster taken", "existing space 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11"}},
		{"invalid", answer(422, "application/problem+json", `{"type":"urn:spaces:problem:invalid-fields","title":"Unprocessable Content","status":422,"errors":[{"field":"config.region","reason":"required"}]}`, "X-Request-Id", "h1"),
			ErrInvalid, ErrMalformed, []string{"config.region: required", "[request h1]"}},
		{"gateway 401", answer(401, "application/json", `{"message":"Unauthorized"}`),
			ErrUnauthenticated, ErrForbidden, []string{"401 Unauthorized: Unauthorized"}},
		{"gateway 429", answer(429, "application/json", `{"message":"Too Many Requests"}`),
			ErrTooManyRequests, ErrUnavailable, []string{"429"}},
		{"neither", answer(500, "text/plain", `boom`),
			nil, ErrNotFound, []string{`500 Internal Server Error: "boom"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A 429 is retried: it is answered until the attempts run out.
			rec := &recorder{answers: []func(http.ResponseWriter){tc.answer, tc.answer, tc.answer, tc.answer}}
			var waits []time.Duration
			api := newTest(t, rec, &waits)
			r, err := api.GetSpaceWithResponse(context.Background(), "6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = Check(r.HTTPResponse, r.Body, nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *Error", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%v is not %v", err, tc.is)
			}
			if errors.Is(err, tc.isNot) {
				t.Errorf("%v is %v", err, tc.isNot)
			}
			for _, s := range tc.text {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q lacks %q", err.Error(), s)
				}
			}
		})
	}
	if err := Check(&http.Response{StatusCode: 204, Header: http.Header{}}, nil, nil); err != nil {
		t.Errorf("204: %v", err)
	}
}

// TestManifestKeepsEveryField: a manifest read from the API and written
// back keeps the fields openapi.yaml does not name (spec, data, labels):
// Manifest allows additional properties and the generated type keeps them.
func TestManifestKeepsEveryField(t *testing.T) {
	in := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"apps","labels":{"app":"web"}},"data":{"k":"v"}}`
	var m Manifest
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal([]byte(in), &a)
	_ = json.Unmarshal(out, &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("round trip: %s, want %s", out, in)
	}
}

// TestResult: Result is Check on a generated response: the response when
// it succeeded, the *Error of a problem, the call's own error.
func TestResult(t *testing.T) {
	rec := &recorder{answers: []func(http.ResponseWriter){
		answer(200, "application/json", spaceJSON),
		answer(404, "application/problem+json", `{"type":"urn:spaces:problem:not-found","title":"Not Found","status":404}`),
	}}
	var waits []time.Duration
	api := newTest(t, rec, &waits)
	r, err := Result(api.GetSpaceWithResponse(context.Background(), "a", nil))
	if err != nil || r.JSON200 == nil || r.JSON200.Name != "prod" {
		t.Fatalf("200: %v %v", r, err)
	}
	if r, err := Result(api.GetSpaceWithResponse(context.Background(), "b", nil)); r != nil || !errors.Is(err, ErrNotFound) {
		t.Fatalf("404: %v %v", r, err)
	}
	boom := errors.New("boom")
	if _, err := Result[GetSpaceResponse](nil, boom); err != boom {
		t.Fatalf("call error: %v", err)
	}
}
