// Package metrics writes CloudWatch metrics in the embedded metric format
// (EMF): a log line whose "_aws" member tells CloudWatch Logs which of the
// line's fields are metrics. Lines go through the function's slog logger,
// so metrics cost no API call and reach CloudWatch with the logs; the other
// fields of the line (space id, org id, ...) stay searchable properties.
package metrics

import (
	"context"
	"log/slog"
	"time"
)

// Namespace is the CloudWatch namespace of every Spaces metric.
const Namespace = "Spaces"

// Units CloudWatch accepts that Spaces uses.
const (
	Count        = "Count"
	Milliseconds = "Milliseconds"
)

// Metric is one value.
type Metric struct {
	Name  string
	Unit  string
	Value float64
}

// Emitter writes EMF lines to a logger. The zero value writes to
// slog.Default on the real clock.
type Emitter struct {
	Log *slog.Logger
	Now func() time.Time
}

// Emit writes one line carrying the metrics, aggregated by the dimension
// keys dims names (their values are taken from props; keep them few and of
// low cardinality: every distinct value set is a billed metric), and every
// property as a plain field. msg is the log message. With dims, each metric
// is also published without dimensions, as the total that alarms need
// (CloudWatch alarms cannot sum a metric over its dimension values).
func (e *Emitter) Emit(ctx context.Context, msg string, dims []string, props []slog.Attr, ms ...Metric) {
	log := e.Log
	if log == nil {
		log = slog.Default()
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	defs := make([]map[string]string, len(ms))
	attrs := make([]slog.Attr, 0, len(props)+len(ms)+1)
	for i, m := range ms {
		defs[i] = map[string]string{"Name": m.Name, "Unit": m.Unit}
		attrs = append(attrs, slog.Float64(m.Name, m.Value))
	}
	sets := [][]string{{}}
	if len(dims) > 0 {
		sets = [][]string{dims, {}}
	}
	attrs = append(attrs, slog.Any("_aws", map[string]any{
		"Timestamp": now().UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  Namespace,
			"Dimensions": sets,
			"Metrics":    defs,
		}},
	}))
	attrs = append(attrs, props...)
	log.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}
