package revisions_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/kubecred"
	"spaces/shared/revisions"
	"spaces/shared/space"
)

// queue records what a claim asks of the queue.
type queue struct {
	postponed []time.Duration
	dead      int
}

func (q *queue) Postpone(_ context.Context, _ string, d time.Duration) error {
	q.postponed = append(q.postponed, d)
	return nil
}
func (q *queue) DeadLetter(context.Context, string) error { q.dead++; return nil }

type noCluster struct{ t *testing.T }

func (n noCluster) Mint(context.Context, space.Space) (kubecred.Credentials, error) {
	n.t.Fatal("minted for an agent space")
	return kubecred.Credentials{}, nil
}
func (noCluster) Invalidate(string) {}
func (n noCluster) Apply(context.Context, kubecred.Credentials, string, []map[string]any) error {
	n.t.Fatal("applied to an agent space from Lambda")
	return nil
}

// TestClaimHandsToTheAgent: a claim that would deploy to an agent space
// hands the revision to its agent (no mint, no apply), leaves it pending
// and has the message come back after AgentWait; the lease answer then
// carries it. Redelivered while the agent has not reported and the space
// is active, it is handed again (nothing counted); once the agent reported,
// acknowledged untouched. DecideClaim's rules hold for agent spaces: an
// inactive space counts an attempt (the hand-over's version is then stale,
// so the answer drops it), the third stops the revision, a deregistered
// space dead-letters it.
func TestClaimHandsToTheAgent(t *testing.T) {
	env := emulatortest.Start(t)
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return now }
	store := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(t, "SpacesTable"), dynamostore.WithClock(clock))
	svc := &space.Service{Store: store, Now: clock, NewID: uuid.NewString}
	agents := &space.Agents{Store: store, Spaces: store, Now: clock, Work: store, Revisions: store}
	org := "org-" + uuid.NewString()[:8]
	acct, err := svc.CreateAccount(t.Context(), org, space.NewAccountInput{Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		t.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1
	if err := store.SaveAccount(t.Context(), acct); err != nil {
		t.Fatal(err)
	}
	sp, _, err := svc.Register(t.Context(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes, CloudAccountID: acct.ID,
		Config: space.Config{"clusterName": "private", "region": "us-east-1"}, Connectivity: space.ViaAgent}, "")
	if err != nil {
		t.Fatal(err)
	}
	boot, err := agents.IssueBootstrap(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := agents.Exchange(t.Context(), boot.Token)
	if err != nil {
		t.Fatal(err)
	}
	setStatus := func(st space.Status) {
		t.Helper()
		now = now.Add(time.Second) // one transition per instant
		if _, err := store.UpdateSpace(t.Context(), org, sp.ID, space.Update[space.Space]{At: now, Apply: func(s space.Space) (space.Space, error) {
			s.Status = st
			s.Probe.LastProbeAt = &now
			return s, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(space.Active)
	q := &queue{}
	c := revisions.NewClaimer(revisions.Claimer{Store: store, Minter: noCluster{t}, Applier: noCluster{t}, Queue: q,
		AgentWait: 20 * time.Second, StaleAfter: space.DefaultStaleAfter, Now: clock, Log: slog.New(slog.DiscardHandler)})
	push := func() space.Revision {
		r := space.Revision{ID: uuid.NewString(), OrgID: org, EnvironmentID: uuid.NewString(), SpaceID: sp.ID, Namespace: "web",
			Manifests: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}}},
			State:     space.RevisionPending, CreatedAt: now, UpdatedAt: now, Version: 1}
		if err := store.CreateRevision(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	claim := func(r space.Revision) bool {
		return c.Claim(t.Context(), revisions.Delivery{MessageID: "m", ReceiptHandle: "h", Body: revisions.Message{OrgID: org, RevisionID: r.ID}.Encode()})
	}
	get := func(r space.Revision) space.Revision {
		got, err := store.GetRevision(t.Context(), org, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	renew := func() space.AgentWork {
		t.Helper()
		res, err := agents.RenewLease(t.Context(), cred.Credential, sp.ID, space.LeaseReport{AgentVersion: "0.1.0",
			ServerVersion: space.ServerVersion{GitVersion: "v1.37.2", Platform: "linux/amd64"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Work
	}

	r := push()
	for i := range 2 { // handed, then handed again: the agent has not reported
		if claim(r) || len(q.postponed) != i+1 || q.postponed[i] != 20*time.Second {
			t.Fatalf("claim %d: postponed %v", i, q.postponed)
		}
		if g := get(r); g.State != space.RevisionPending || g.Version != 1 || g.Attempts != 0 {
			t.Fatalf("handed revision %+v", g)
		}
	}
	if w := renew(); len(w.Revisions) != 1 || w.Revisions[0].ID != r.ID || w.Revisions[0].Version != 1 {
		t.Fatalf("lease work %+v", w)
	}
	if err := agents.ReportRevision(t.Context(), cred.Credential, sp.ID, r.ID, space.RevisionReport{Version: 1}); err != nil {
		t.Fatal(err)
	}
	if !claim(r) || get(r).State != space.RevisionDeployed || len(q.postponed) != 2 {
		t.Fatalf("after the report: %+v, postponed %v", get(r), q.postponed)
	}

	// Handed, then the space goes inactive: counted, the hand-over stale.
	r2 := push()
	claim(r2)
	setStatus(space.Inactive)
	for i := 1; i <= space.MaxClaimAttempts; i++ {
		ok := claim(r2)
		g := get(r2)
		if g.Attempts != i || (i < space.MaxClaimAttempts && (ok || g.State != space.RevisionPending)) {
			t.Fatalf("inactive claim %d: %v %+v", i, ok, g)
		}
	}
	if g := get(r2); g.State != space.RevisionStopped || g.Reason != space.ReasonSpaceInactive {
		t.Fatalf("after %d inactive claims: %+v", space.MaxClaimAttempts, g)
	}
	if w := renew(); len(w.Revisions) != 0 {
		t.Fatalf("a stopped revision is still carried: %+v", w)
	}
	if err := agents.ReportRevision(t.Context(), cred.Credential, sp.ID, r2.ID, space.RevisionReport{Version: 1}); space.KindOf(err) != space.KindConflict {
		t.Fatalf("a report of the stopped revision: %v", err)
	}

	// Deregistered: dead-lettered, as for a direct space.
	setStatus(space.Active)
	r3 := push()
	claim(r3)
	got, err := store.GetSpace(t.Context(), org, sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Deregister(t.Context(), org, sp.ID, got.Version, now, "test"); err != nil {
		t.Fatal(err)
	}
	if !claim(r3) || q.dead != 1 || get(r3).State != space.RevisionDeadLettered {
		t.Fatalf("deregistered: %+v, dead letters %d", get(r3), q.dead)
	}
}
