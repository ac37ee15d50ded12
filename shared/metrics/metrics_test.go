package metrics_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"spaces/shared/metrics"
)

func TestEmitWritesEMF(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e := &metrics.Emitter{Log: slog.New(slog.NewJSONHandler(&buf, nil)), Now: func() time.Time { return at }}
	e.Emit(t.Context(), "probe", []string{"Reason"},
		[]slog.Attr{slog.String("Reason", "Timeout"), slog.String("space_id", "s1")},
		metrics.Metric{Name: "Probes", Unit: metrics.Count, Value: 1},
		metrics.Metric{Name: "ProbeLatency", Unit: metrics.Milliseconds, Value: 42},
	)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	want := map[string]any{
		"Timestamp": float64(at.UnixMilli()),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace": "Spaces",
			// By reason, and the total over every reason.
			"Dimensions": []any{[]any{"Reason"}, []any{}},
			"Metrics": []any{
				map[string]any{"Name": "Probes", "Unit": "Count"},
				map[string]any{"Name": "ProbeLatency", "Unit": "Milliseconds"},
			},
		}},
	}
	if !reflect.DeepEqual(line["_aws"], want) {
		t.Errorf("_aws = %#v", line["_aws"])
	}
	// Every metric and dimension is a top-level member, as EMF requires.
	if line["Probes"] != 1.0 || line["ProbeLatency"] != 42.0 || line["Reason"] != "Timeout" || line["space_id"] != "s1" || line["msg"] != "probe" {
		t.Errorf("line %v", line)
	}
}
