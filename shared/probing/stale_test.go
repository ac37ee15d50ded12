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

// TestBeatsReportStalenessAndMintLatency: the message that closes a
// shard's tick records the shard's beat and says whether the shard's
// spaces read ProbeStale until then (the StaleStatusAlarm's StaleTicks /
// Ticks, one a shard and tick); other messages report no tick. Readers
// see the space's last probe move with the beats though nothing of it is
// written, turn ProbeStale once the beats stop for StaleAfter, and fresh
// at the next beat. Every probe carries its mint latency by provider.
func TestBeatsReportStalenessAndMintLatency(t *testing.T) {
	h := newHarness(t, time.Second)
	c := testcluster.NewForTest(t)
	s := h.register("stale", false)
	h.minter.Set(s.ID, c.Credentials())
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	p := probing.NewProber(probing.Prober{
		// Its mints take a cloud's time: a cached credential is no sample.
		Store: h.store, Minter: slowMinter{Minter: h.minter, slow: s.ID, d: 2 * time.Millisecond}, Checker: h.prober.Checker, Events: h.events, Queue: h.queue,
		Now: h.clock.Now, Timeout: time.Second, StaleAfter: space.DefaultStaleAfter,
		Metrics: &metrics.Emitter{Log: log, Now: h.clock.Now}, Log: log,
	})
	// lines handles d and returns its metric lines by message.
	lines := func(d probing.Delivery) map[string]map[string]any {
		t.Helper()
		buf.Reset()
		if _, err := p.Handle(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]any{}
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			var l map[string]any
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			if l["_aws"] != nil {
				out[l["msg"].(string)] = l
			}
		}
		return out
	}
	// tick runs a scheduler tick and handles its one message when due.
	tick := func() map[string]map[string]any {
		t.Helper()
		if _, err := h.scheduler.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(probing.Jitter(s.ID, space.DefaultProbeInterval))
		ds := h.queue.due()
		if len(ds) != 1 {
			t.Fatalf("%d messages due, want the space's one", len(ds))
		}
		return lines(ds[0])
	}

	reg := lines(probing.Delivery{MessageID: "r", Body: probing.Message{OrgID: h.org, ID: s.ID, Kind: probing.KindRegistered}.Encode()})
	if reg["beat"] != nil || reg["probes"]["Ticks"] != nil {
		t.Errorf("registration probe: %v, want no tick reported", reg)
	}
	// The batch's metrics: the probe's mint latency, one sample, as its
	// cloud's metric, published as a total.
	if ms, ok := reg["probes"]["MintLatencyAWS"].([]any); !ok || len(ms) != 1 || reg["probes"]["Probes"] != 1.0 {
		t.Errorf("registration probe: MintLatencyAWS %v Probes %v", reg["probes"]["MintLatencyAWS"], reg["probes"]["Probes"])
	}
	var dims []any
	for _, d := range reg["probes"]["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
		for _, m := range d.(map[string]any)["Metrics"].([]any) {
			if m.(map[string]any)["Name"] == "MintLatencyAWS" {
				dims = d.(map[string]any)["Dimensions"].([]any)
			}
		}
	}
	if len(dims) != 1 || len(dims[0].([]any)) != 0 {
		t.Errorf("MintLatencyAWS dimensions %v, want [[]]", dims)
	}
	version := h.get(s.ID).Version

	h.clock.Advance(time.Minute)
	first := tick()
	if b := first["beat"]; b == nil || b["Ticks"] != 1.0 || b["StaleTicks"] != 0.0 {
		t.Errorf("first beat: %v, want Ticks 1 and StaleTicks 0", b)
	}
	for i := range 3 {
		h.clock.Advance(time.Minute - probing.Jitter(s.ID, space.DefaultProbeInterval))
		tickAt := h.clock.Now()
		if b := tick()["beat"]; b == nil || b["Ticks"] != 1.0 || b["StaleTicks"] != 0.0 {
			t.Errorf("beat %d: %v, want Ticks 1 and StaleTicks 0", i+2, b)
		}
		got := h.get(s.ID)
		if got.Version != version || got.Probe.LastProbeAt == nil || !got.Probe.LastProbeAt.Equal(tickAt) {
			t.Errorf("after beat %d: version %d (want %d: nothing written), last probe %v (want the tick, %s)", i+2, got.Version, version, got.Probe.LastProbeAt, tickAt)
		}
	}
	// The prober stops for longer than StaleAfter: readers see ProbeStale
	// though the cluster is healthy; the next beat says so, and clears it.
	h.clock.Advance(space.DefaultStaleAfter + time.Minute)
	if got := h.get(s.ID).Observed(h.clock.Now(), space.DefaultStaleAfter); got.Probe.Reason != space.ReasonProbeStale {
		t.Fatalf("the space reads %s, want ProbeStale with the prober stopped", got.Probe.Reason)
	}
	if b := tick()["beat"]; b == nil || b["Ticks"] != 1.0 || b["StaleTicks"] != 1.0 {
		t.Errorf("stale beat: %v, want Ticks 1 and StaleTicks 1", b)
	}
	h.clock.Advance(time.Minute) // past the store's cache of the beats
	if got := h.get(s.ID).Observed(h.clock.Now(), space.DefaultStaleAfter); got.Status != space.Active || got.Probe.Reason != "" {
		t.Errorf("after the beat the space reads %s/%s, want active", got.Status, got.Probe.Reason)
	}
}
