package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// The sample events go through the API Gateway v2 adapter into the console
// the way Lambda runs it: the page, its config document (OIDC, no
// development sign-in) and a module, each with the security headers.
func TestSampleEvents(t *testing.T) {
	env := map[string]string{"OIDC_ISSUER": "https://login.example.com/", "OIDC_CLIENT_ID": "spaces-console", "OIDC_AUDIENCE": "spaces-api"}
	h, err := handler(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	adapter := httpadapter.NewV2(h)
	want := map[string]string{"get-index.json": "text/html", "get-config.json": "application/json", "get-app-js.json": "text/javascript"}
	files, _ := filepath.Glob("../../events/console/*.json")
	if len(files) != len(want) {
		t.Fatalf("events/console holds %v, want %d samples", files, len(want))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		res, err := adapter.ProxyWithContext(context.Background(), ev)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := filepath.Base(f)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Headers["Content-Type"], want[name]) {
			t.Errorf("%s: %d %q", name, res.StatusCode, res.Headers["Content-Type"])
		}
		if !strings.Contains(res.Headers["Content-Security-Policy"], "script-src 'self'") || res.Headers["Referrer-Policy"] != "no-referrer" {
			t.Errorf("%s: security headers %v", name, res.Headers)
		}
		if name == "get-config.json" {
			var cfg map[string]any
			if err := json.Unmarshal([]byte(res.Body), &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg["sign_in"] != "oidc" || cfg["issuer"] != env["OIDC_ISSUER"] || cfg["client_id"] != "spaces-console" || cfg["audience"] != "spaces-api" || cfg["dev_sign_in"] != nil {
				t.Errorf("config document %v", cfg)
			}
		}
	}
}

// A deployment without an https issuer or a client id does not start.
func TestRefusesIncompleteConfig(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OIDC_ISSUER": "http://login.example.com", "OIDC_CLIENT_ID": "c"},
		{"OIDC_ISSUER": "https://login.example.com"},
	} {
		if _, err := handler(func(k string) string { return env[k] }); err == nil {
			t.Errorf("%v: accepted", env)
		}
	}
}
