package mint_test

import (
	"testing"
	"time"

	"spaces/infra/kubetest"
	"spaces/infra/minttest"
	"spaces/infra/testwait"
	"spaces/shared/kubeprobe"
	"spaces/shared/space"
)

// TestEndToEndRealAPIServer: one real kube-apiserver behind an EKS, a GKE
// and an AKS cluster of the simulated clouds; the apiserver authenticates
// every minted token through simcloud's token-review webhook.
func TestEndToEndRealAPIServer(t *testing.T) {
	env := minttest.Start(t)
	kc := kubetest.Start(t, kubetest.Options{TokenWebhook: &kubetest.TokenWebhook{
		URL: env.Cloud.WebhookURL("kube"), CAPEM: env.Cloud.CAPEM}})
	prober := &kubeprobe.Prober{}
	defer prober.Close()

	for _, p := range space.Providers {
		t.Run(string(p), func(t *testing.T) {
			cl := minttest.Cluster(p, "e2e-"+string(p), kc.URL, kc.CAPEM)
			cl.Backend = "kube"
			env.Cloud.AddCluster(cl)
			s := env.Register(t, p, cl.Name, false)

			creds, err := env.Minter.Mint(t.Context(), s)
			if err != nil {
				t.Fatalf("mint: %v", err)
			}
			o := prober.Probe(t.Context(), creds)
			if !o.OK() || o.Version == nil || o.Version.GitVersion != kubetest.KubernetesVersion {
				t.Fatalf("probe: %+v", o)
			}
		})
	}

	// The cluster stops: every probe fails; it starts: every probe succeeds.
	spaces := map[space.Provider]space.Space{}
	for _, p := range space.Providers {
		spaces[p] = env.Register(t, p, "e2e-"+string(p)+"-2", false)
		cl := minttest.Cluster(p, "e2e-"+string(p)+"-2", kc.URL, kc.CAPEM)
		cl.Backend = "kube"
		env.Cloud.AddCluster(cl)
	}
	if err := kc.Stop(); err != nil {
		t.Fatal(err)
	}
	for p, s := range spaces {
		creds, err := env.Minter.Mint(t.Context(), s)
		if err != nil {
			t.Fatalf("%s: mint while the cluster is down: %v", p, err)
		}
		if o := prober.Probe(t.Context(), creds); o.OK() || o.Reason != space.ReasonUnreachable {
			t.Errorf("%s: probe of a stopped cluster: %+v", p, o)
		}
	}
	if err := kc.Restart(); err != nil {
		t.Fatal(err)
	}
	for p, s := range spaces {
		creds, err := env.Minter.Mint(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		if o := prober.Probe(t.Context(), creds); !o.OK() {
			t.Errorf("%s: probe after restart: %+v", p, o)
		}
	}

	// A revoked token is refused by the real API server (through the
	// webhook); one re-mint fixes it.
	s := spaces[space.GCP]
	c1, _ := env.Minter.Mint(t.Context(), s)
	env.Cloud.Revoke(c1.Token)
	// kube-apiserver caches successful token authentications for 10 s
	// (its built-in token success cache, whatever the webhook cache TTL):
	// the revocation bites once that entry lapses.
	var o space.Outcome
	if err := testwait.UntilEvery(testwait.Timeout, 500*time.Millisecond, func() bool { o = prober.Probe(t.Context(), c1); return kubeprobe.IsUnauthorized(o) }); err != nil {
		t.Fatalf("the revoked token still works %s: %+v", err, o)
	}
	env.Minter.Invalidate(s.ID)
	c2, err := env.Minter.Mint(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if o := prober.Probe(t.Context(), c2); !o.OK() {
		t.Errorf("after re-mint: %+v", o)
	}
	t.Log(env.Cloud.CallCounts())
}
