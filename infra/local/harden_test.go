package local

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestManifestNumbersSurviveExactly: integers above 2^53 (and above int64)
// come back from the store as written, not rounded through a float.
func TestManifestNumbersSurviveExactly(t *testing.T) {
	st, _ := startCascadeStack(t, time.Hour)
	c := newClient(t, st, "acme")
	sp := c.must(201, c.do("POST", "/spaces", registerBody("aws", c.account("aws"), "exact")))["id"].(string)
	env := c.must(201, c.do("POST", "/environments", map[string]any{"name": "exact", "space_id": sp}))["id"].(string)
	const body = `{"manifests":[{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},` +
		`"spec":{"big":9007199254740993,"huge":-12345678901234567890123456789012345678,"small":1.5e-120,"list":[1,2.25,9007199254740995]}}]}`
	r := c.do("POST", "/environments/"+env+"/revisions", body)
	id := c.must(202, r)["id"].(string)
	got := c.do("GET", "/revisions/"+id, nil)
	c.must(200, got)
	for _, want := range []string{`"big":9007199254740993`, `"huge":-12345678901234567890123456789012345678`, `9007199254740995]`, `"small":1.5e-120`} {
		if !bytes.Contains(got.body, []byte(want)) {
			t.Errorf("stored revision lost %s: %s", want, got.body)
		}
	}
}

// TestStatusIfMatchStarAndWeakTags: "*" means any version for PATCH
// status; a weak tag never matches (RFC 9110 strong comparison).
func TestStatusIfMatchStarAndWeakTags(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	internal := newClient(t, st, "acme", "spaces:internal")
	sp := c.must(201, c.do("POST", "/spaces", registerBody("aws", c.account("aws"), "star")))["id"].(string)
	r := internal.do("PATCH", "/spaces/"+sp+"/status", map[string]any{"status": "inactive", "reason": "maintenance"}, `If-Match: W/"1"`)
	if m := internal.must(412, r); !hasField(m, "If-Match") {
		t.Errorf("weak tag: %s", r.body)
	}
	if got := c.must(200, c.do("GET", "/spaces/"+sp, nil)); got["status"] != "unknown" || got["version"] != float64(1) {
		t.Errorf("the refused PATCH changed the space: %v", got)
	}
	m := internal.must(200, internal.do("PATCH", "/spaces/"+sp+"/status", map[string]any{"status": "inactive", "reason": "maintenance"}, `If-Match: *`))
	if m["status"] != "inactive" || m["version"] != float64(2) {
		t.Errorf("If-Match *: %v", m)
	}
}

// TestIdempotentReplayAfterDeregistration: the replay of a registration
// whose space is gone says so (409 naming the key) instead of a 201 with a
// space that answers 404.
func TestIdempotentReplayAfterDeregistration(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	body := registerBody("aws", c.account("aws"), "replayed")
	first := c.must(201, c.do("POST", "/spaces", body, "Idempotency-Key: k-1"))
	again := c.do("POST", "/spaces", body, "Idempotency-Key: k-1")
	if m := c.must(201, again); m["id"] != first["id"] || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay of a live space: %s", again.body)
	}
	c.deregister(first["id"].(string))
	before := itemCount(t, st)
	r := c.do("POST", "/spaces", body, "Idempotency-Key: k-1")
	if m := c.must(409, r); !hasField(m, "Idempotency-Key") {
		t.Errorf("replay after deregistration: %s", r.body)
	}
	if after := itemCount(t, st); after != before {
		t.Errorf("the refused replay changed the table: %d items, was %d", after, before)
	}
	// A new key registers the cluster again.
	if m := c.must(201, c.do("POST", "/spaces", body, "Idempotency-Key: k-2")); m["id"] == first["id"] {
		t.Errorf("re-registration reused the old id")
	}
}

// TestSlowBodyIsCutOff: a client trickling its body is disconnected by the
// server's read timeout long before the body would be complete.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	c := newClient(t, st, "acme")
	u, err := url.Parse(st.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// 1,000 bytes at one byte a second would take over 16 minutes.
	fmt.Fprintf(conn, "POST /spaces HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", u.Host, c.token)
	closed := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(bufio.NewReader(conn))
		closed <- err
	}()
	for i := 0; ; i++ {
		select {
		case <-closed:
			if i >= 1000 {
				t.Fatalf("the whole body was sent before the server closed the connection")
			}
			return // the server hung up on the trickle
		case <-time.After(time.Second):
			if _, err := conn.Write([]byte("x")); err != nil {
				return // the server hung up on the trickle
			}
		}
	}
}

// TestNonCanonicalPathsOverHTTP: a 404 problem, never a 307 with HTML.
func TestNonCanonicalPathsOverHTTP(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	for _, path := range []string{"//spaces", "/./spaces", "/spaces/../cloud-accounts", "/spaces/%2E%2E/cloud-accounts"} {
		req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", path, c.token)
		conn, err := net.Dial("tcp", strings.TrimPrefix(st.APIURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, req)
		raw, _ := io.ReadAll(conn)
		conn.Close()
		head, _, _ := strings.Cut(string(raw), "\r\n")
		if head != "HTTP/1.1 404 Not Found" || !strings.Contains(string(raw), "application/problem+json") {
			t.Errorf("%s: %q", path, raw)
		}
	}
}

// TestUnreadableRequestsAnswerProblems: a request net/http refuses before any
// handler runs (a control byte in a header value, no Host) gets a problem
// document with the same status, not net/http's plain text, and stores
// nothing.
func TestUnreadableRequestsAnswerProblems(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	acct := c.account("aws")
	body := fmt.Sprintf(`{"provider":"aws","space_type":"kubernetes","cloud_account_id":%q,"config":{"clusterName":"unreadable","region":"eu-west-1"},"synthetic":true}`, acct)
	before := itemCount(t, st)
	for _, tc := range []struct{ name, head string }{
		{"DEL in Idempotency-Key", "POST /spaces HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\x7fb\r\n"},
		{"NUL in Idempotency-Key", "POST /spaces HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\x00b\r\n"},
		{"no Host", "POST /spaces HTTP/1.1\r\n"},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(st.APIURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "%sAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tc.head, c.token, len(body), body)
		raw, _ := io.ReadAll(conn)
		conn.Close()
		head, rest, _ := strings.Cut(string(raw), "\r\n\r\n")
		var p map[string]any
		if !strings.HasPrefix(head, "HTTP/1.1 400 Bad Request\r\n") || !strings.Contains(head, "Content-Type: application/problem+json") ||
			json.Unmarshal([]byte(rest), &p) != nil || p["status"] != 400.0 || p["type"] != "urn:spaces:problem:malformed-request" || p["detail"] == "" {
			t.Errorf("%s: %q", tc.name, raw)
		}
	}
	if after := itemCount(t, st); after != before {
		t.Errorf("table holds %d items after the refused requests, %d before", after, before)
	}
}
