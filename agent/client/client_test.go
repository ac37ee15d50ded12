package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCheckURL: the agent sends its secrets only over https, or plain
// http to loopback; never with credentials, a query or a fragment in the URL.
func TestCheckURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://spaces.example.com/prod":     true,
		"http://127.0.0.1:8080":               true,
		"http://localhost:8080":               true,
		"http://[::1]:8080":                   true,
		"http://spaces.example.com":           false,
		"http://10.0.0.1":                     false,
		"https://user:pw@spaces.example.com":  false,
		"https://spaces.example.com/?token=x": false,
		"https://spaces.example.com/#x":       false,
		"spaces.example.com":                  false,
		"":                                    false,
		"ftp://spaces.example.com":            false,
	} {
		if _, err := CheckURL(raw); (err == nil) != ok {
			t.Errorf("CheckURL(%q): %v, want ok=%v", raw, err, ok)
		}
	}
	// The stack's AgentUrl output, a function URL, ends in a slash; the
	// agent's paths join onto it once.
	u, err := CheckURL("https://a1b2c3.lambda-url.us-east-1.on.aws/")
	if err != nil {
		t.Fatal(err)
	}
	if got := u.JoinPath("agent/exchange").String(); got != "https://a1b2c3.lambda-url.us-east-1.on.aws/agent/exchange" {
		t.Errorf("joined %q", got)
	}
}

// TestRefusal: a 401 is ErrRefused, and nothing else is; the secret
// travels in the Authorization header only, and no error quotes it.
func TestRefusal(t *testing.T) {
	const secret = "spa1.0a1b2c3d-0000-4000-8000-000000000000.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"
	status := http.StatusUnauthorized
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret || strings.Contains(r.URL.String(), secret) {
			t.Errorf("request %s with Authorization %q", r.URL, r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":401,"title":"Unauthorized","detail":"the agent token is not valid"}`))
	}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	api := &spacesAPI{base: base, http: srv.Client()}
	_, err := api.renew(context.Background(), secret)
	if !errors.Is(err, ErrRefused) || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "not valid") {
		t.Fatalf("401: %v", err)
	}
	for _, status = range []int{http.StatusNotFound, http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		if _, err := api.lease(context.Background(), secret, "0a1b2c3d-0000-4000-8000-000000000000", ServerVersion{}, nil); err == nil || errors.Is(err, ErrRefused) {
			t.Errorf("%d: %v, want a retried error", status, err)
		}
	}
}

// TestLeaseInterval: the cadence Spaces answers is bounded, so a wrong
// answer can neither spin the agent nor silence it.
func TestLeaseInterval(t *testing.T) {
	for s, want := range map[int]time.Duration{0: 35 * time.Second, -3: 35 * time.Second, 1: 5 * time.Second,
		35: 35 * time.Second, 86400: 10 * time.Minute} {
		if got := leaseInterval(s); got != want {
			t.Errorf("leaseInterval(%d) = %s, want %s", s, got, want)
		}
	}
}

// TestAgentLinksNoAWS: the agent runs in customers' clusters; of this
// repository it links only the applier it shares with the revisions
// claimer (shared/kubeapply, one place for how a revision is applied) and
// what that needs (kubecred, the domain's types), and no AWS SDK.
func TestAgentLinksNoAWS(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "spaces/agent/cmd/spaces-agent").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{"spaces/agent/", "spaces/shared/kubeapply", "spaces/shared/kubecred", "spaces/shared/space"}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/aws/") {
			t.Errorf("the agent links %s", pkg)
		}
		if strings.HasPrefix(pkg, "spaces/") && !slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(pkg, a) }) {
			t.Errorf("the agent links %s", pkg)
		}
	}
}
