package probing_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"spaces/infra/testcluster"
	"spaces/shared/kubecred"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// TestBatchWritesItsMetricsOnce: a batch's probe metrics are one EMF line
// a reason, counts summed and latencies (the probes', and the mints' of
// each cloud) as arrays of every probe's value, not a line a probe (CloudWatch Logs bills each byte); a
// probe's own line is at info only when it failed and changed what is
// stored, or moved the status, at debug otherwise; only ProbeFailures is
// published by Reason.
func TestBatchWritesItsMetricsOnce(t *testing.T) {
	h := newHarness(t, time.Second)
	up := testcluster.NewForTest(t)
	down := testcluster.NewForTest(t)
	down.SetMode(testcluster.Down())
	var healthy []space.Space
	for i := range 4 {
		s := h.register(fmt.Sprintf("ok-%d", i), false)
		h.minter.Set(s.ID, up.Credentials())
		healthy = append(healthy, s)
	}
	bad := h.register("down", false)
	h.minter.Set(bad.ID, down.Credentials())
	// One space's credentials take a cloud's time to mint; the others'
	// come from a cache, at once.
	h.prober.Minter = slowMinter{Minter: h.minter, slow: healthy[0].ID, d: 3 * time.Millisecond}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.prober.Log, h.prober.Metrics = log, &metrics.Emitter{Log: log, Now: h.clock.Now}

	// Registration probes and the first ticks, until the statuses settle.
	next := h.clock.Now()
	h.run(&next, h.clock.Now().Add(4*time.Minute), nil)
	if h.get(bad.ID).Status != space.Inactive || h.get(healthy[0].ID).Status != space.Active {
		t.Fatalf("statuses %s / %s, want inactive / active", h.get(bad.ID).Status, h.get(healthy[0].ID).Status)
	}

	// Three steady minutes, each tick's five messages handled as one
	// batch (as Lambda gathers them within its batching window).
	h.clock.Advance(time.Minute) // what the last tick sent, handled first
	if ds := h.queue.due(); len(ds) > 0 {
		h.prober.HandleBatch(t.Context(), ds)
	}
	// While the down space moved toward inactive, its failures were
	// stored, and each was a line at info.
	if n := strings.Count(buf.String(), `"level":"INFO","msg":"probe"`); n < space.FailureThreshold {
		t.Errorf("%d probe lines at info while the down space failed toward inactive, want at least %d", n, space.FailureThreshold)
	}
	buf.Reset()
	for range 3 {
		if _, err := h.scheduler.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Minute)
		ds := h.queue.due()
		if len(ds) == 0 {
			t.Fatal("no probe message due a minute after a tick")
		}
		if failed := h.prober.HandleBatch(t.Context(), ds); len(failed) > 0 {
			t.Fatalf("batch items failed: %v", failed)
		}
	}
	var probeLines, metricLines int
	sums := map[string]float64{}
	samples := map[string]int{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		switch l["msg"] {
		case "probe":
			probeLines++
			failed := l["outcome"] == "failure"
			if failed != (l["space_id"] == bad.ID) {
				t.Errorf("probe line %v: only the down space's probes fail", l)
			}
			// The down space is inactive by now: its failures store
			// nothing, and are not news.
			if want := map[bool]string{true: "INFO", false: "DEBUG"}[failed && l["written"] == true || l["from"] != nil]; l["level"] != want {
				t.Errorf("probe line at %v, want %s: %v", l["level"], want, l)
			}
		case "probes":
			metricLines++
			if l["_aws"] == nil {
				t.Fatalf("metrics line without EMF directives: %v", l)
			}
			reason := l["Reason"].(string)
			sums[reason] += l["Probes"].(float64)
			// Only ProbeFailures by Reason: each value of a dimension
			// is a custom metric billed by the month.
			byReason := map[string]bool{}
			for _, d := range l["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
				d := d.(map[string]any)
				if fmt.Sprint(d["Dimensions"]) == "[[Reason] []]" {
					for _, m := range d["Metrics"].([]any) {
						byReason[m.(map[string]any)["Name"].(string)] = true
					}
				}
			}
			want := map[string]bool{}
			_, failures := l["ProbeFailures"]
			if failures {
				want["ProbeFailures"] = true
			}
			if fmt.Sprint(byReason) != fmt.Sprint(want) || failures != (reason != "OK") {
				t.Errorf("%s line: metrics by Reason %v, ProbeFailures %v; want ProbeFailures alone, on failures' lines only", reason, byReason, l["ProbeFailures"])
			}
			lat, ok := l["ProbeLatency"].([]any)
			if !ok || len(lat) > metrics.MaxValues {
				t.Fatalf("latencies %v: want an array of one value a probe", l["ProbeLatency"])
			}
			// The mints that took a cloud's time: the slow space's, one
			// a tick, on the OK line; none from the cache.
			mint, _ := l[probing.MintLatencyMetric(space.AWS)].([]any)
			if want := map[bool]int{true: 1, false: 0}[reason == "OK"]; len(mint) != want || want == 1 && mint[0].(float64) < 3 {
				t.Errorf("%s line: mint latencies %v, want %d sample(s) of at least 3 ms", reason, l["MintLatencyAWS"], want)
			}
			samples[reason] += len(lat)
		}
	}
	if probeLines != 15 {
		t.Errorf("%d probe lines in three minutes of five spaces, want 15", probeLines)
	}
	// The counts and the samples agree, and cover every probe.
	if sums["OK"] != 12 || samples["OK"] != 12 || sums["OK"]+sums["Unreachable"] != 15 || samples["Unreachable"] != 3 {
		t.Errorf("probes by reason %v, latency samples %v; want 12 OK and 3 Unreachable", sums, samples)
	}
	// One batch a tick: a line for the healthy four and one for the down
	// one each minute, not five.
	if metricLines != 6 {
		t.Errorf("%d metrics lines in three ticks, want 6 (one a reason and tick)", metricLines)
	}
}

// slowMinter takes d to mint the slow space's credentials, as a cloud
// would; the others' as its Minter does.
type slowMinter struct {
	kubecred.Minter
	slow string
	d    time.Duration
}

func (m slowMinter) Mint(ctx context.Context, s space.Space) (kubecred.Credentials, error) {
	if s.ID == m.slow {
		time.Sleep(m.d)
	}
	return m.Minter.Mint(ctx, s)
}
