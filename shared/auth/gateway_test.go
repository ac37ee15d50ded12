package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// principalKey carries the principal from protect to the handler.
type principalKey struct{}

// protect does with an Authenticator what the HTTP layer (httpapi) does:
// the principal goes on to the handler, a failure is a 401 with the RFC 6750
// challenge, written by onError.
func protect(a auth.Authenticator, onError func(w http.ResponseWriter, r *http.Request, err error), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", auth.Challenge(err))
			onError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// whoami is a protected handler that reports the principal it was given.
type whoami struct{ calls atomic.Int32 }

func (h *whoami) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.calls.Add(1)
	p, ok := r.Context().Value(principalKey{}).(auth.Principal)
	if !ok {
		http.Error(w, "no principal in context", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(p)
}

// writeProblem stands in for the HTTP layer's one error mapper.
func writeProblem(w http.ResponseWriter, _ *http.Request, err error) {
	var e *space.Error
	if !errors.As(err, &e) || e.Kind != space.KindUnauthenticated {
		http.Error(w, "unexpected error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": 401, "title": "Unauthorized", "detail": e.Message})
}

func gatewayEvent(authz string, claims map[string]string, scopes []string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "GET /spaces",
		RawPath:        "/spaces",
		RawQueryString: "limit=10",
		Headers:        map[string]string{"accept": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:   "GET /spaces",
			AccountID:  "123456789012",
			Stage:      "$default",
			RequestID:  "req-1",
			APIID:      "api1",
			DomainName: "api1.execute-api.us-east-1.amazonaws.com",
			TimeEpoch:  time.Now().UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: "GET", Path: "/spaces", Protocol: "HTTP/1.1", SourceIP: "203.0.113.7", UserAgent: "test",
			},
		},
	}
	if authz != "" {
		ev.Headers["authorization"] = authz
	}
	if claims != nil {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims, Scopes: scopes},
		}
	}
	return ev
}

func TestGatewayClaimsThroughLambdaAdapter(t *testing.T) {
	// The token itself is not checked here (the gateway did that); it is
	// present as it would be in a real event.
	const bearer = "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln"
	cases := []struct {
		name      string
		ev        events.APIGatewayV2HTTPRequest
		status    int
		principal auth.Principal
		detail    string
		challenge string
	}{
		{
			name: "verified claims",
			ev: gatewayEvent(bearer, map[string]string{
				"iss": "https://issuer.example", "sub": "alice", "org_id": "acme", "scope": "spaces:internal spaces:read", "exp": "1999999999",
			}, nil),
			status:    http.StatusOK,
			principal: auth.Principal{OrgID: "acme", Subject: "alice", Scopes: []string{auth.ScopeInternal, "spaces:read"}},
		},
		{
			name: "array scope flattened by the gateway, plus authorizer scopes",
			ev: gatewayEvent(bearer, map[string]string{"sub": "svc", "org_id": "acme", "scope": "[spaces:read spaces:internal]"},
				[]string{"spaces:internal", "spaces:write"}),
			status:    http.StatusOK,
			principal: auth.Principal{OrgID: "acme", Subject: "svc", Scopes: []string{"spaces:read", auth.ScopeInternal, "spaces:write"}},
		},
		{
			name:      "no org_id claim",
			ev:        gatewayEvent(bearer, map[string]string{"sub": "alice", "scope": "spaces:internal"}, nil),
			status:    http.StatusUnauthorized,
			detail:    "the bearer token has no org_id claim",
			challenge: `Bearer realm="spaces", error="invalid_token"`,
		},
		{
			name:      "no authorizer and no header",
			ev:        gatewayEvent("", nil, nil),
			status:    http.StatusUnauthorized,
			detail:    "the request has no Authorization header; send Authorization: Bearer <token>",
			challenge: `Bearer realm="spaces"`,
		},
		{
			name:      "no authorizer, basic scheme",
			ev:        gatewayEvent("Basic YWxpY2U6c2VjcmV0", nil, nil),
			status:    http.StatusUnauthorized,
			detail:    "the Authorization header must use the Bearer scheme",
			challenge: `Bearer realm="spaces"`,
		},
		{
			name: "no authorizer, forged proxy context header",
			ev: func() events.APIGatewayV2HTTPRequest {
				// Any client can send the proxy's context header; it must not
				// count as verified claims.
				ev := gatewayEvent(bearer, nil, nil)
				forged := gatewayEvent(bearer, map[string]string{"sub": "mallory", "org_id": "victim"}, nil).RequestContext
				b, _ := json.Marshal(forged)
				ev.Headers[core.APIGwContextHeader] = string(b)
				return ev
			}(),
			status:    http.StatusUnauthorized,
			detail:    "the bearer token was not verified by the gateway",
			challenge: `Bearer realm="spaces", error="invalid_token"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &whoami{}
			adapter := httpadapter.NewV2(protect(auth.GatewayClaims{}, writeProblem, h))
			resp, err := adapter.ProxyWithContext(context.Background(), tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d, body %s", resp.StatusCode, resp.Body)
			}
			if tc.status == http.StatusOK {
				var p auth.Principal
				if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
					t.Fatal(err)
				}
				if p.OrgID != tc.principal.OrgID || p.Subject != tc.principal.Subject || !slices.Equal(p.Scopes, tc.principal.Scopes) {
					t.Errorf("principal = %+v, want %+v", p, tc.principal)
				}
				return
			}
			if n := h.calls.Load(); n != 0 {
				t.Errorf("protected handler ran %d times for a refused request", n)
			}
			var prob struct{ Detail string }
			if err := json.Unmarshal([]byte(resp.Body), &prob); err != nil {
				t.Fatal(err)
			}
			if prob.Detail != tc.detail {
				t.Errorf("detail = %q, want %q", prob.Detail, tc.detail)
			}
			if got := resp.Headers[http.CanonicalHeaderKey("WWW-Authenticate")]; got != tc.challenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tc.challenge)
			}
		})
	}
}

func TestProtectedOverHTTP(t *testing.T) {
	f := newFixture(t)
	h := &whoami{}
	srv := httptest.NewServer(protect(f.verifier, writeProblem, h))
	defer srv.Close()

	get := func(authz string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/spaces", nil)
		if err != nil {
			t.Fatal(err)
		}
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}

	resp, body := get("Bearer " + mint(t, f.signer, "acme", auth.ScopeInternal))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"OrgID":"acme"`) {
		t.Fatalf("valid token: %d %s", resp.StatusCode, body)
	}
	if h.calls.Load() != 1 {
		t.Fatalf("handler calls = %d, want 1", h.calls.Load())
	}

	resp, body = get("Bearer " + tamper(t, mint(t, f.signer, "acme")))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "the bearer token's signature is not valid") {
		t.Errorf("tampered token: %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer realm="spaces", error="invalid_token"` {
		t.Errorf("WWW-Authenticate = %q", got)
	}
	resp, _ = get("")
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || got != `Bearer realm="spaces"` {
		t.Errorf("no token: %d, WWW-Authenticate = %q", resp.StatusCode, got)
	}
	if h.calls.Load() != 1 {
		t.Errorf("refused requests reached the handler: calls = %d", h.calls.Load())
	}
}
