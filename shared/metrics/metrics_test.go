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

// A metric with its own dimensions goes in a directive of its own, so the
// line's other metrics are not published by its dimension too.
func TestEmitOwnDimensions(t *testing.T) {
	var buf bytes.Buffer
	e := &metrics.Emitter{Log: slog.New(slog.NewJSONHandler(&buf, nil)), Now: func() time.Time { return time.UnixMilli(7) }}
	e.Emit(t.Context(), "probe", []string{"Reason"},
		[]slog.Attr{slog.String("Reason", "OK"), slog.String("Provider", "gcp")},
		metrics.Metric{Name: "Probes", Unit: metrics.Count, Value: 1},
		metrics.Metric{Name: "MintLatency", Unit: metrics.Milliseconds, Value: 12, Dimensions: [][]string{{"Provider"}}},
		metrics.Metric{Name: "Ticks", Unit: metrics.Count, Value: 1, Dimensions: [][]string{{}}},
	)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	want := []any{
		map[string]any{"Namespace": "Spaces", "Dimensions": []any{[]any{"Reason"}, []any{}},
			"Metrics": []any{map[string]any{"Name": "Probes", "Unit": "Count"}}},
		map[string]any{"Namespace": "Spaces", "Dimensions": []any{[]any{"Provider"}},
			"Metrics": []any{map[string]any{"Name": "MintLatency", "Unit": "Milliseconds"}}},
		map[string]any{"Namespace": "Spaces", "Dimensions": []any{[]any{}},
			"Metrics": []any{map[string]any{"Name": "Ticks", "Unit": "Count"}}},
	}
	if got := line["_aws"].(map[string]any)["CloudWatchMetrics"]; !reflect.DeepEqual(got, want) {
		t.Errorf("directives = %#v", got)
	}
	if line["MintLatency"] != 12.0 || line["Provider"] != "gcp" || line["Ticks"] != 1.0 {
		t.Errorf("line %v", line)
	}
}

// A stack's own namespace replaces the default in every directive.
func TestEmitStackNamespace(t *testing.T) {
	var buf bytes.Buffer
	e := &metrics.Emitter{Log: slog.New(slog.NewJSONHandler(&buf, nil)), Namespace: "Spaces/prod"}
	e.Emit(t.Context(), "tick", nil, nil, metrics.Metric{Name: "Ticks", Unit: metrics.Count, Value: 1},
		metrics.Metric{Name: "MintLatency", Unit: metrics.Milliseconds, Value: 3, Dimensions: [][]string{{"Provider"}}})
	var line struct {
		AWS struct{ CloudWatchMetrics []struct{ Namespace string } } `json:"_aws"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	if len(line.AWS.CloudWatchMetrics) != 2 {
		t.Fatalf("directives %+v, want 2", line.AWS.CloudWatchMetrics)
	}
	for _, d := range line.AWS.CloudWatchMetrics {
		if d.Namespace != "Spaces/prod" {
			t.Errorf("namespace %q, want Spaces/prod", d.Namespace)
		}
	}
}

// TestEmitValues: a metric's Values go out as an EMF array, each a sample
// of its own, beside single values in the same line.
func TestEmitValues(t *testing.T) {
	var buf bytes.Buffer
	e := &metrics.Emitter{Log: slog.New(slog.NewJSONHandler(&buf, nil))}
	e.Emit(t.Context(), "probes", nil, nil,
		metrics.Metric{Name: "Probes", Unit: metrics.Count, Value: 3},
		metrics.Metric{Name: "ProbeLatency", Unit: metrics.Milliseconds, Values: []float64{12, 50, 7}})
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	if !reflect.DeepEqual(line["ProbeLatency"], []any{12.0, 50.0, 7.0}) || line["Probes"] != 3.0 {
		t.Errorf("ProbeLatency %v, Probes %v: want [12 50 7] and 3", line["ProbeLatency"], line["Probes"])
	}
}
