package probing_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"spaces/infra/testcluster"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// TestTicksReportStalenessAndMintLatency: each tick's line says whether
// its space read ProbeStale when the prober read it (the
// StaleStatusAlarm's StaleTicks / Ticks), a tick dropped as recent still
// counts as a fresh tick, other probes are no ticks, and every probe
// carries its mint latency by provider.
func TestTicksReportStalenessAndMintLatency(t *testing.T) {
	h := newHarness(t, time.Second)
	c := testcluster.NewForTest(t)
	s := h.register("stale", false)
	h.minter.Set(s.ID, c.Credentials())
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	p := probing.NewProber(probing.Prober{
		Store: h.store, Minter: h.minter, Checker: h.prober.Checker, Events: h.events, Queue: h.queue,
		Now: h.clock.Now, Timeout: time.Second, StaleAfter: space.DefaultStaleAfter,
		Metrics: &metrics.Emitter{Log: log, Now: h.clock.Now}, Log: log,
	})
	handle := func(d probing.Delivery) map[string]any {
		t.Helper()
		buf.Reset()
		if _, err := p.Handle(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		var line map[string]any
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			var l map[string]any
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			if l["_aws"] != nil {
				line = l
			}
		}
		if line == nil {
			t.Fatalf("no metrics line in %q", buf.String())
		}
		return line
	}

	reg := handle(probing.Delivery{MessageID: "r", Body: probing.Message{OrgID: h.org, ID: s.ID, Kind: probing.KindRegistered}.Encode()})
	if reg["Ticks"] != 0.0 || reg["StaleTicks"] != 0.0 {
		t.Errorf("registration probe: Ticks %v StaleTicks %v, want 0 and 0", reg["Ticks"], reg["StaleTicks"])
	}
	if _, ok := reg["MintLatency"].(float64); !ok || reg["Provider"] != "aws" {
		t.Errorf("registration probe: MintLatency %v Provider %v", reg["MintLatency"], reg["Provider"])
	}
	var dims []any
	for _, d := range reg["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
		for _, m := range d.(map[string]any)["Metrics"].([]any) {
			if m.(map[string]any)["Name"] == "MintLatency" {
				dims = d.(map[string]any)["Dimensions"].([]any)
			}
		}
	}
	if len(dims) != 1 || len(dims[0].([]any)) != 1 || dims[0].([]any)[0] != "Provider" {
		t.Errorf("MintLatency dimensions %v, want [[Provider]]", dims)
	}

	h.clock.Advance(time.Minute)
	if l := handle(tick(s)); l["Ticks"] != 1.0 || l["StaleTicks"] != 0.0 {
		t.Errorf("fresh tick: Ticks %v StaleTicks %v, want 1 and 0", l["Ticks"], l["StaleTicks"])
	}
	// Nothing probed it for longer than StaleAfter: readers saw ProbeStale
	// until this tick's probe.
	h.clock.Advance(space.DefaultStaleAfter + time.Minute)
	if got := h.get(s.ID).Observed(h.clock.Now(), space.DefaultStaleAfter); got.Probe.Reason != space.ReasonProbeStale {
		t.Fatalf("the space reads %s, want ProbeStale before the tick", got.Probe.Reason)
	}
	if l := handle(tick(s)); l["Ticks"] != 1.0 || l["StaleTicks"] != 1.0 {
		t.Errorf("stale tick: Ticks %v StaleTicks %v, want 1 and 1", l["Ticks"], l["StaleTicks"])
	}
	h.clock.Advance(5 * time.Second)
	if l := handle(tick(s)); l["msg"] != "tick skipped" || l["Ticks"] != 1.0 || l["StaleTicks"] != 0.0 {
		t.Errorf("recent tick: %v, want a skipped tick counted fresh", l)
	}
}
