package agentwake_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"spaces/shared/agentwake"
	"spaces/shared/space"
)

// A wake is the data plane's Publish: POST /topics/<topic, escaped>?qos=1,
// signed with SigV4 for the service "iotdata"; an error answer is an error.
func TestWakeIsASignedPublish(t *testing.T) {
	const id = "0a1b2c3d-0000-4000-8000-000000000000"
	status := http.StatusOK
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	p := &agentwake.Publisher{Endpoint: srv.URL, Prefix: "stack-", AWS: aws.Config{Region: "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}}
	if err := p.Wake(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	topic := space.WakeTopic("stack-", id)
	if got.Method != http.MethodPost || got.URL.EscapedPath() != "/topics/"+strings.ReplaceAll(topic, "/", "%2F") || got.URL.RawQuery != "qos=1" {
		t.Errorf("request %s %s?%s, want POST on the topic %s", got.Method, got.URL.EscapedPath(), got.URL.RawQuery, topic)
	}
	if a := got.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKID/") || !strings.Contains(a, "/eu-west-1/iotdata/aws4_request") {
		t.Errorf("Authorization %q: not SigV4 for iotdata", a)
	}
	if body == "" {
		t.Error("empty payload")
	}
	status = http.StatusForbidden
	if err := p.Wake(t.Context(), id); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a 403 answer: %v", err)
	}
}

// A disconnect is the data plane's DeleteConnection: DELETE
// /connections/<client id>?cleanSession=true, no body, signed for
// "iotdata"; a client not connected (404) is no error, any other error
// answer is one.
func TestDisconnectIsASignedDeleteConnection(t *testing.T) {
	const id = "0a1b2c3d-0000-4000-8000-000000000000"
	status := http.StatusOK
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	p := &agentwake.Publisher{Endpoint: srv.URL, Prefix: "stack_", AWS: aws.Config{Region: "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}}
	if err := p.Disconnect(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if got.Method != http.MethodDelete || got.URL.EscapedPath() != "/connections/"+space.AgentClientID("stack_", id) || got.URL.RawQuery != "cleanSession=true" {
		t.Errorf("request %s %s?%s, want DELETE of the client's connection", got.Method, got.URL.EscapedPath(), got.URL.RawQuery)
	}
	if a := got.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKID/") || !strings.Contains(a, "/eu-west-1/iotdata/aws4_request") {
		t.Errorf("Authorization %q: not SigV4 for iotdata", a)
	}
	if body != "" {
		t.Errorf("body %q, want none", body)
	}
	status = http.StatusNotFound
	if err := p.Disconnect(t.Context(), id); err != nil {
		t.Errorf("a client not connected: %v", err)
	}
	status = http.StatusForbidden
	if err := p.Disconnect(t.Context(), id); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a 403 answer: %v", err)
	}
}
