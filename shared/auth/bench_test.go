package auth_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"spaces/shared/auth"
)

func BenchmarkLocalVerifier(b *testing.B) {
	path := b.TempDir() + "/dev-jwt.pem"
	s, err := auth.NewSigner(auth.LocalConfig{KeyPath: path})
	if err != nil {
		b.Fatal(err)
	}
	v, err := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: path})
	if err != nil {
		b.Fatal(err)
	}
	tok, err := s.Mint("acme", "alice", []string{auth.ScopeInternal}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		r, _ := http.NewRequest(http.MethodGet, "/spaces", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		for pb.Next() {
			if _, err := v.Authenticate(r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkMint(b *testing.B) {
	s, err := auth.NewSigner(auth.LocalConfig{KeyPath: b.TempDir() + "/dev-jwt.pem"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Mint("acme", "alice", nil, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGatewayRequest is the whole deployed path: event to request,
// claims to principal, handler, response.
func BenchmarkGatewayRequest(b *testing.B) {
	adapter := httpadapter.NewV2(protect(auth.GatewayClaims{}, writeProblem, &whoami{}))
	ev := gatewayEvent("Bearer x", map[string]string{"sub": "alice", "org_id": "acme", "scope": "spaces:internal"}, nil)
	ctx := context.Background()
	for b.Loop() {
		resp, err := adapter.ProxyWithContext(ctx, ev)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatal(resp.StatusCode, err)
		}
	}
}
