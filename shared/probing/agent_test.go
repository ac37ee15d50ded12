package probing_test

import (
	"context"
	"testing"
	"time"

	"spaces/shared/probing"
	"spaces/shared/space"
)

// TestAgentSpaceFollowsItsLease drives an agent space through the real
// scheduler, prober and store on the fake clock, its agent renewing
// through space.Agents as the API does: unknown (AgentNotConnected) until
// the first lease, active while the lease is renewed, inactive within
// 3 intervals + grace + a tick of the agent stopping, active again after
// it restarts; nothing is minted or probed for it, and its transitions are
// in its history like a probed space's.
func TestAgentSpaceFollowsItsLease(t *testing.T) {
	h := newHarness(t, time.Second)
	h.prober.Leases = h.store
	agents := &space.Agents{Store: h.store, Spaces: h.store, Now: h.clock.Now}
	s, _, err := h.svc.Register(context.Background(), h.org, space.RegisterInput{
		Provider: space.AWS, SpaceType: space.TypeKubernetes, CloudAccountID: h.account.ID,
		Config: space.Config{"clusterName": "private", "region": "us-east-1"}, Connectivity: space.ViaAgent,
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := agents.IssueBootstrap(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	next := h.clock.Now()
	h.run(&next, h.clock.Now().Add(3*time.Minute), nil)
	if got := h.get(s.ID); got.Status != space.Unknown || got.Probe.Reason != space.ReasonAgentNotConnected {
		t.Fatalf("before the first lease: %s %q", got.Status, got.Probe.Reason)
	}

	cred, err := agents.Exchange(t.Context(), b.Token)
	if err != nil {
		t.Fatal(err)
	}
	rep := space.LeaseReport{AgentVersion: "0.1.0", ServerVersion: space.ServerVersion{GitVersion: "v1.37.2", Platform: "linux/amd64"}}
	renewing := true
	var lastRenewal, stopped, inactiveAt time.Time
	renew := func(now time.Time) {
		if renewing && now.Sub(lastRenewal) >= space.LeaseInterval {
			res, err := agents.RenewLease(t.Context(), cred.Credential, s.ID, rep)
			if err != nil {
				t.Fatal(err)
			}
			lastRenewal = now
			if res.Lapsed { // the API enqueues a check at once
				if err := h.queue.Enqueue(t.Context(), []probing.Delayed{{Message: probing.Message{OrgID: res.OrgID, ID: s.ID, Kind: probing.KindRegistered}}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	h.run(&next, h.clock.Now().Add(5*time.Minute), renew)
	got := h.get(s.ID)
	if got.Status != space.Active || got.Probe.ServerVersion == nil || got.Probe.ServerVersion.GitVersion != "v1.37.2" {
		t.Fatalf("while renewing: %s %+v", got.Status, got.Probe)
	}

	renewing, stopped = false, h.clock.Now()
	h.run(&next, h.clock.Now().Add(4*time.Minute), func(now time.Time) {
		if inactiveAt.IsZero() && h.get(s.ID).Status == space.Inactive {
			inactiveAt = now
		}
	})
	if inactiveAt.IsZero() {
		t.Fatalf("still %s four minutes after the agent stopped", h.get(s.ID).Status)
	}
	// The bound: 3 intervals + grace after the last renewal, plus one tick.
	if d := inactiveAt.Sub(lastRenewal); d > 3*space.LeaseInterval+space.LeaseGrace+space.DefaultProbeInterval {
		t.Errorf("inactive %s after the last renewal (agent stopped %s after it)", d, stopped.Sub(lastRenewal))
	}
	if got := h.get(s.ID); got.Probe.Reason != space.ReasonAgentLeaseExpired || got.Probe.ConsecutiveFailures < space.FailureThreshold {
		t.Fatalf("inactive: %+v", got.Probe)
	}

	renewing = true
	h.run(&next, h.clock.Now().Add(30*time.Second), renew)
	if got := h.get(s.ID); got.Status != space.Active {
		t.Fatalf("30 s after the agent restarted: %s %+v", got.Status, got.Probe)
	}
	var path []space.Status
	for _, tr := range h.history(s.ID) {
		path = append([]space.Status{tr.To}, path...)
	}
	if len(path) != 3 || path[0] != space.Active || path[1] != space.Inactive || path[2] != space.Active {
		t.Fatalf("history %v", path)
	}
	if n := h.minter.Mints(s.ID); n != 0 {
		t.Fatalf("%d credentials minted for an agent space", n)
	}
}
