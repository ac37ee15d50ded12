package probing_test

import (
	"testing"
	"time"

	"spaces/infra/testcluster"
	"spaces/shared/space"
)

// TestCertificateFactWrittenOnlyOnChange: through the scheduler's probe
// index and the prober against a real TLS server, the serving
// certificate's notAfter and issuer are stored with the first probe; ticks
// that see the same certificate write nothing (the index carries what the
// prober compares: were it missing, each tick would write); a renewed
// certificate is one conditional write, and nothing after it.
func TestCertificateFactWrittenOnlyOnChange(t *testing.T) {
	h := newHarness(t, 5*time.Second)
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	first, err := ca.ServerCertificate()
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.NewForTest(t, testcluster.WithCA(ca))
	s := h.register("facts-cert", false)
	h.minter.Set(s.ID, c.Credentials())

	next := h.clock.Now()
	h.run(&next, h.clock.Now().Add(3*space.DefaultProbeInterval), nil)
	got := h.get(s.ID)
	if got.Status != space.Active || got.Version != 2 || got.Probe.Certificate == nil ||
		!got.Probe.Certificate.NotAfter.Equal(first.Leaf.NotAfter) || got.Probe.Certificate.Issuer != "CN=testcluster CA" {
		t.Fatalf("after three ticks of the same certificate: %s at version %d, certificate %+v; want active at 2 (one write) with notAfter %s",
			got.Status, got.Version, got.Probe.Certificate, first.Leaf.NotAfter)
	}
	if n := c.Requests("/version"); n < 3 {
		t.Fatalf("%d GET /version in three ticks: the unchanged ticks were not probed", n)
	}

	renewedUntil := first.Leaf.NotAfter.Add(90 * 24 * time.Hour).Truncate(time.Second)
	renewed, err := ca.ServerCertificateUntil(renewedUntil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetServingCertificate(renewed)
	before := c.Requests("/version")
	h.run(&next, h.clock.Now().Add(3*space.DefaultProbeInterval), nil)
	got = h.get(s.ID)
	if got.Version != 3 || got.Probe.Certificate == nil || !got.Probe.Certificate.NotAfter.Equal(renewedUntil) {
		t.Fatalf("after a renewal and three ticks: version %d, certificate %+v; want version 3 (one write) with notAfter %s",
			got.Version, got.Probe.Certificate, renewedUntil)
	}
	if n := c.Requests("/version") - before; n < 3 {
		t.Fatalf("%d GET /version after the renewal, want a probe a tick", n)
	}
	if trs := h.history(s.ID); len(trs) != 1 {
		t.Errorf("%d transitions, want the first one only: a certificate is a fact, not a transition", len(trs))
	}
}
