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
// dataPlane is IoT Core's data plane as a recording server: the last
// request, its body, and the status it answers.
type dataPlane struct {
	srv    *httptest.Server
	status int
	got    *http.Request
	body   string
}

func newDataPlane(t *testing.T) *dataPlane {
	d := &dataPlane{status: http.StatusOK}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.got = r
		b, _ := io.ReadAll(r.Body)
		d.body = string(b)
		w.WriteHeader(d.status)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// publisher calls the data plane with static credentials in eu-west-1.
func (d *dataPlane) publisher(prefix string) *agentwake.Publisher {
	return &agentwake.Publisher{Endpoint: d.srv.URL, Prefix: prefix, AWS: aws.Config{Region: "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}}
}

func TestWakeIsASignedPublish(t *testing.T) {
	const id = "0a1b2c3d-0000-4000-8000-000000000000"
	d := newDataPlane(t)
	p := d.publisher("stack-")
	if err := p.Wake(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	topic := space.WakeTopic("stack-", id)
	if d.got.Method != http.MethodPost || d.got.URL.EscapedPath() != "/topics/"+strings.ReplaceAll(topic, "/", "%2F") || d.got.URL.RawQuery != "qos=1" {
		t.Errorf("request %s %s?%s, want POST on the topic %s", d.got.Method, d.got.URL.EscapedPath(), d.got.URL.RawQuery, topic)
	}
	if a := d.got.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKID/") || !strings.Contains(a, "/eu-west-1/iotdata/aws4_request") {
		t.Errorf("Authorization %q: not SigV4 for iotdata", a)
	}
	if d.body == "" {
		t.Error("empty payload")
	}
	d.status = http.StatusForbidden
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
	d := newDataPlane(t)
	p := d.publisher("stack_")
	if err := p.Disconnect(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if d.got.Method != http.MethodDelete || d.got.URL.EscapedPath() != "/connections/"+space.AgentClientID("stack_", id) || d.got.URL.RawQuery != "cleanSession=true" {
		t.Errorf("request %s %s?%s, want DELETE of the client's connection", d.got.Method, d.got.URL.EscapedPath(), d.got.URL.RawQuery)
	}
	if a := d.got.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKID/") || !strings.Contains(a, "/eu-west-1/iotdata/aws4_request") {
		t.Errorf("Authorization %q: not SigV4 for iotdata", a)
	}
	if d.body != "" {
		t.Errorf("body %q, want none", d.body)
	}
	d.status = http.StatusNotFound
	if err := p.Disconnect(t.Context(), id); err != nil {
		t.Errorf("a client not connected: %v", err)
	}
	d.status = http.StatusForbidden
	if err := p.Disconnect(t.Context(), id); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a 403 answer: %v", err)
	}
}
