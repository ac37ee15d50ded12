package kubens

import (
	"context"
	"testing"
	"time"

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

// agentWork records what kubens asks of the agent's store.
type agentWork struct {
	space.AgentWorkStore
	list      space.NamespaceList
	wanted    int
	requested []space.NamespaceCreate
}

func (a *agentWork) WantNamespaces(context.Context, string, string, time.Time) error {
	a.wanted++
	return nil
}
func (a *agentWork) ReportedNamespaces(context.Context, string, string) (space.NamespaceList, error) {
	return a.list, nil
}
func (a *agentWork) RequestNamespace(_ context.Context, _, _ string, c space.NamespaceCreate) error {
	for _, n := range a.list.Items { // as the store refuses it
		if n.Name == c.Name {
			return &space.Error{Kind: space.KindConflict, Message: "exists"}
		}
	}
	a.requested = append(a.requested, c)
	return nil
}

// TestAgentSpaceGoesThroughItsAgent: an agent space's API server is
// unreachable by design; nothing is minted or called. Listing answers the
// agent's last report and asks for a fresh one; a create is validated as
// a direct space's (a bad one records nothing), a duplicate of a reported
// namespace is 409 (recording nothing), any other is recorded as pending.
func TestAgentSpaceGoesThroughItsAgent(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	work := &agentWork{list: space.NamespaceList{Items: []space.Namespace{{Name: "default"}, {Name: "team-b"}}, ObservedAt: &at}}
	svc := &Service{Spaces: oneSpace{space.Space{ID: "s", OrgID: "o", Connectivity: space.ViaAgent}}, Minter: noMint{t}, Agent: work}
	list, err := svc.List(t.Context(), "o", "s")
	if err != nil || len(list.Items) != 2 || list.ObservedAt != &at || work.wanted != 1 {
		t.Fatalf("list: %+v %v (wanted %d)", list, err, work.wanted)
	}
	if _, err := svc.Create(t.Context(), "o", "s", space.NewNamespace{Name: "Bad_Name"}); space.KindOf(err) != space.KindInvalid {
		t.Fatalf("bad create: %v", err)
	}
	if _, err := svc.Create(t.Context(), "o", "s", space.NewNamespace{Name: "team-b"}); space.KindOf(err) != space.KindConflict {
		t.Fatalf("duplicate create: %v", err)
	}
	// Reserved names and a Pod Security downgrade are refused as invalid,
	// whether or not the agent reported them.
	for _, n := range []space.NewNamespace{{Name: "default"}, {Name: "kube-system"}, {Name: "kube-new"}, {Name: space.AgentNamespace},
		{Name: "team-c", Labels: map[string]string{space.PodSecurityEnforce: "privileged"}}} {
		if _, err := svc.Create(t.Context(), "o", "s", n); space.KindOf(err) != space.KindInvalid {
			t.Fatalf("create %+v: %v", n, err)
		}
	}
	if len(work.requested) != 0 {
		t.Fatalf("refused creates were recorded: %+v", work.requested)
	}
	c, err := svc.Create(t.Context(), "o", "s", space.NewNamespace{Name: "team-a", Labels: map[string]string{"team": "a"}})
	if err != nil || c.Pending == nil || c.Pending.Name != "team-a" || len(work.requested) != 1 || work.requested[0].Labels["team"] != "a" ||
		work.requested[0].Labels[space.PodSecurityEnforce] != space.PodSecurityBaseline {
		t.Fatalf("create: %+v %v; recorded %+v", c, err, work.requested)
	}
	// Where agent work is not served, an agent space's namespaces are 503.
	svc.Agent = nil
	if _, err := svc.List(t.Context(), "o", "s"); space.KindOf(err) != space.KindUnavailable {
		t.Fatalf("no agent store: %v", err)
	}
}
