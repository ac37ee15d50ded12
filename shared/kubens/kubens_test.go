package kubens

import (
	"context"
	"testing"

	"spaces/shared/kubecred"
	"spaces/shared/space"
)

type oneSpace struct{ s space.Space }

func (o oneSpace) Get(context.Context, string, string) (space.Space, error) { return o.s, nil }

type noMint struct{ t *testing.T }

func (m noMint) Mint(context.Context, space.Space) (kubecred.Credentials, error) {
	m.t.Fatal("minted for an agent space")
	return kubecred.Credentials{}, nil
}
func (noMint) Invalidate(string) {}

// TestAgentSpaceIsNotCalled: an agent space's API server is unreachable
// by design; listing or creating its namespaces is a 422 naming why, and
// nothing is minted or called.
func TestAgentSpaceIsNotCalled(t *testing.T) {
	svc := &Service{Spaces: oneSpace{space.Space{ID: "s", OrgID: "o", Connectivity: space.ViaAgent}}, Minter: noMint{t}}
	_, err := svc.List(t.Context(), "o", "s")
	var e *space.Error
	if space.KindOf(err) != space.KindInvalid || !asErr(err, &e) || e.Reason != ReasonAgentSpace {
		t.Fatalf("list: %v", err)
	}
	if _, err := svc.Create(t.Context(), "o", "s", space.NewNamespace{Name: "x"}); space.KindOf(err) != space.KindInvalid {
		t.Fatalf("create: %v", err)
	}
}

func asErr(err error, e **space.Error) bool { x, ok := err.(*space.Error); *e = x; return ok }
