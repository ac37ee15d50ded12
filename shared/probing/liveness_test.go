package probing_test

import (
	"testing"

	"spaces/infra/minttest"
	"spaces/infra/testcluster"
	"spaces/shared/kubeprobe"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// TestProductionMinterLiveness probes through the production minter
// (mint.Minter against the simulated clouds), which takes the prober's
// strongly consistent read of the space as the liveness fact instead of
// reading the grant again: a registered space is minted for and probed; once
// deregistered, with its credential still cached, a message for it reaches
// neither the cloud nor the cluster and writes nothing.
func TestProductionMinterLiveness(t *testing.T) {
	env := minttest.Start(t)
	checker := &kubeprobe.Prober{}
	t.Cleanup(checker.Close)
	p := probing.NewProber(probing.Prober{Store: env.Store, Minter: env.Minter, Checker: checker, Events: &events{},
		Metrics: &metrics.Emitter{Log: discardLogger()}, Log: discardLogger()})
	if _, ok := any(env.Minter).(probing.LiveMinter); !ok {
		t.Fatal("the production minter does not take the prober's read as the liveness fact")
	}
	for _, prov := range space.Providers {
		t.Run(string(prov), func(t *testing.T) {
			tc := testcluster.NewForTest(t)
			tc.SetTokens() // only what simcloud issues
			name := "live-" + string(prov)
			cl := minttest.Cluster(prov, name, tc.URL(), tc.CAPEM())
			cl.Sink = tc
			if prov == space.AWS {
				// EKS tokens are made client-side: the cluster asks the
				// cloud, as the EKS authenticator does.
				cl.Sink = nil
				tc.Close()
				tc = testcluster.NewForTest(t, testcluster.WithTokenCheck(env.Cloud.TokenCheck("live")))
				tc.SetTokens()
				cl.Server, cl.CAPEM, cl.Backend = tc.URL(), tc.CAPEM(), "live"
			}
			env.Cloud.AddCluster(cl)
			s := env.Register(t, prov, name, false)
			msg := probing.Delivery{MessageID: "1", Body: probing.Message{OrgID: env.Org, ID: s.ID}.Encode(), ReceiveCount: 1}

			res, err := one(p.Handle(t.Context(), msg))
			if err != nil || res.Action != probing.ActionProbed || !res.Outcome.OK() || res.Space.Status != space.Active {
				t.Fatalf("probe of a registered space: %+v, %v", res, err)
			}
			if err := env.Service.Deregister(t.Context(), env.Org, s.ID, 0, "test"); err != nil {
				t.Fatal(err)
			}
			calls, requests := env.Cloud.TotalCalls(), tc.Requests("/version")
			res, err = one(p.Handle(t.Context(), msg))
			if err != nil || res.Action != probing.ActionGone || res.Written {
				t.Fatalf("probe of a deregistered space: %+v, %v", res, err)
			}
			if got := env.Cloud.TotalCalls(); got != calls {
				t.Errorf("cloud calls %d -> %d for a deregistered space", calls, got)
			}
			if got := tc.Requests("/version"); got != requests {
				t.Errorf("cluster requests %d -> %d for a deregistered space", requests, got)
			}
			// The minter itself refuses the space as the prober read it
			// before the deregistration, cached credential or not, when
			// asked with the grant check (every caller but the prober).
			if _, err := env.Minter.Mint(t.Context(), s); err == nil {
				t.Error("Mint of a deregistered space succeeded")
			}
		})
	}
}
