package probing_test

import (
	"fmt"
	"testing"
	"time"

	"spaces/infra/testcluster"
	"spaces/shared/space"
)

// TestEndToEnd drives the scheduler and the prober over 24 TLS test
// clusters in every fault mode, on the emulator, with a fake clock: the
// scheduler ticks every simulated minute, SQS delays are honoured on the
// clock, and each probe is a real GET /version.
func TestEndToEnd(t *testing.T) {
	const timeout = time.Second // the prober's timeout; Slow clusters take longer
	h := newHarness(t, timeout)
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}

	type fleetSpace struct {
		kind    string
		cluster *testcluster.Cluster
		space   space.Space
	}
	var fleet []*fleetSpace
	add := func(kind string, n int, setup func(c *testcluster.Cluster), opts ...testcluster.Option) {
		for i := range n {
			c := testcluster.NewForTest(t, append([]testcluster.Option{testcluster.WithCA(ca)}, opts...)...)
			if setup != nil {
				setup(c)
			}
			s := h.register(fmt.Sprintf("%s-%d", kind, i), false)
			if kind != "mint-fails" {
				h.minter.Set(s.ID, c.Credentials())
			}
			fleet = append(fleet, &fleetSpace{kind: kind, cluster: c, space: s})
		}
	}
	add("healthy", 5, nil)
	add("healthy-v130", 1, nil, testcluster.WithVersion("v1.30.2", "linux/arm64"))
	add("down", 3, func(c *testcluster.Cluster) { c.SetMode(testcluster.Down()) })
	add("stopped", 2, func(c *testcluster.Cluster) {
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	})
	add("slow", 2, func(c *testcluster.Cluster) { c.SetMode(testcluster.Slow(3 * timeout)) })
	add("401-once", 2, func(c *testcluster.Cluster) { c.SetMode(testcluster.UnauthorizedOnce()) })
	add("401-always", 2, func(c *testcluster.Cluster) { c.SetMode(testcluster.Unauthorized()) })
	add("garbled", 2, func(c *testcluster.Cluster) { c.SetMode(testcluster.Garbled()) })
	add("bad-version", 1, func(c *testcluster.Cluster) { c.SetMode(testcluster.BadVersion()) })
	add("flap-1", 1, func(c *testcluster.Cluster) {
		for range 40 {
			c.Next(testcluster.Down(), testcluster.Healthy())
		}
	})
	add("flap-2", 1, func(c *testcluster.Cluster) {
		for range 30 {
			c.Next(testcluster.Down(), testcluster.Down(), testcluster.Healthy())
		}
	})
	add("mint-fails", 1, nil)
	add("goes-down", 1, nil)
	synthetic := h.register("synthetic-0", true)
	if len(fleet) < 20 {
		t.Fatalf("fleet of %d", len(fleet))
	}

	// Phase 1: six ticks (minutes 0..5), until just before the seventh.
	start := h.clock.Now()
	nextTick := start
	h.run(&nextTick, start.Add(6*time.Minute-time.Second), nil)

	want := map[string]struct {
		status  space.Status
		reason  string
		version int64
	}{
		// unknown→active at the first tick; nothing more is written.
		"healthy": {space.Active, "", 2}, "healthy-v130": {space.Active, "", 2},
		"401-once": {space.Active, "", 2},
		// The first tick fails and two re-probes 12 s apart complete three
		// failures (3 writes); later failures with the same reason are not
		// written.
		"down": {space.Inactive, space.ReasonUnreachable, 4}, "stopped": {space.Inactive, space.ReasonUnreachable, 4},
		"slow":       {space.Inactive, space.ReasonTimeout, 4},
		"401-always": {space.Inactive, space.ReasonUnauthorized, 4},
		"garbled":    {space.Inactive, space.ReasonBadResponse, 4}, "bad-version": {space.Inactive, space.ReasonBadResponse, 4},
		"mint-fails": {space.Inactive, space.ReasonCredentialsUnavailable, 4},
		"flap-1":     {space.Active, "", 0}, "flap-2": {space.Active, "", 0},
		"goes-down": {space.Active, "", 2},
	}
	for _, f := range fleet {
		w := want[f.kind]
		got := h.get(f.space.ID)
		// A flapping cluster may end on a failure (reason set) short of the
		// threshold; its version depends on how the failures fell.
		flapping := w.version == 0
		if got.Status != w.status || (!flapping && (got.Probe.Reason != w.reason || got.Version != w.version)) {
			t.Errorf("%s: status %s reason %q version %d, want %s %q %d (message %q)",
				f.kind, got.Status, got.Probe.Reason, got.Version, w.status, w.reason, w.version, got.Probe.Message)
		}
		hist := h.history(f.space.ID)
		if len(hist) != 1 || hist[0].From != space.Unknown || hist[0].To != w.status {
			t.Errorf("%s: history %+v, want one transition unknown→%s", f.kind, hist, w.status)
		}
		if evs := h.events.of(f.space.ID); len(evs) != len(hist) {
			t.Errorf("%s: %d events for %d transitions", f.kind, len(evs), len(hist))
		}
		switch f.kind {
		case "healthy", "401-once", "goes-down":
			if v := got.Probe.ServerVersion; v == nil || v.GitVersion != "v1.31.4" || v.Platform != "linux/amd64" {
				t.Errorf("%s: server version %+v", f.kind, v)
			}
		case "healthy-v130":
			if v := got.Probe.ServerVersion; v == nil || v.GitVersion != "v1.30.2" || v.Platform != "linux/arm64" {
				t.Errorf("%s: server version %+v", f.kind, v)
			}
		}
		switch f.kind {
		case "401-once":
			if n := h.minter.Invalidations(f.space.ID); n != 1 {
				t.Errorf("401-once: %d invalidations, want 1", n)
			}
		case "401-always":
			// Each of 8 probes (3 in the first minute, then one a minute)
			// invalidates and retries at once: 16 requests.
			if n, r := h.minter.Invalidations(f.space.ID), f.cluster.Requests("/version"); n != 8 || r != 16 {
				t.Errorf("401-always: %d invalidations and %d requests, want 8 and 16", n, r)
			}
		case "flap-1", "flap-2":
			if got.Probe.ConsecutiveFailures >= space.FailureThreshold {
				t.Errorf("%s: %d consecutive failures", f.kind, got.Probe.ConsecutiveFailures)
			}
		}
	}
	if s := h.get(synthetic.ID); s.Version != 1 || s.Probe.LastProbeAt != nil {
		t.Errorf("synthetic space was probed: %+v", s)
	}

	// Phase 2: one healthy cluster goes down; time until inactive.
	var gd *fleetSpace
	for _, f := range fleet {
		if f.kind == "goes-down" {
			gd = f
		}
	}
	h.clock.Advance(7 * time.Second)
	down := h.clock.Now()
	if err := gd.cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	var detected, recovered time.Time
	h.run(&nextTick, down.Add(3*time.Minute), func(now time.Time) {
		if detected.IsZero() && h.get(gd.space.ID).Status == space.Inactive {
			detected = now
		}
	})
	if detected.IsZero() {
		t.Fatal("the stopped cluster never became inactive")
	}
	detect := detected.Sub(down)
	// One tick (within a minute) and two re-probes 12 s apart.
	if limit := space.DefaultProbeInterval + 2*12*time.Second + time.Second; detect > limit {
		t.Errorf("cluster down → inactive took %s on the clock, more than %s", detect, limit)
	}

	// Phase 3: it comes back.
	if err := gd.cluster.Start(); err != nil {
		t.Fatal(err)
	}
	back := h.clock.Now()
	h.run(&nextTick, back.Add(2*time.Minute), func(now time.Time) {
		if recovered.IsZero() && h.get(gd.space.ID).Status == space.Active {
			recovered = now
		}
	})
	if recovered.IsZero() {
		t.Fatal("the restarted cluster never became active")
	}
	recover := recovered.Sub(back)
	if recover > space.DefaultProbeInterval {
		t.Errorf("cluster back → active took %s on the clock", recover)
	}
	hist := h.history(gd.space.ID)
	if len(hist) != 3 || hist[0].To != space.Active || hist[1].To != space.Inactive || hist[1].Reason != space.ReasonUnreachable || hist[2].To != space.Active {
		t.Errorf("goes-down history (newest first): %+v", hist)
	}
	t.Logf("cluster down → inactive: %s; cluster back → active: %s (fake clock)", detect, recover)
}
