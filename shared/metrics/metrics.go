// Package metrics writes CloudWatch metrics in the embedded metric format
// (EMF): a log line whose "_aws" member tells CloudWatch Logs which of the
// line's fields are metrics. Lines go through the function's slog logger,
// so metrics cost no API call and reach CloudWatch with the logs; the other
// fields of the line (space id, org id, ...) stay searchable properties.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Namespace is the CloudWatch namespace of Spaces metrics where no stack
// names its own (tests, the local stack). Each deployed stack publishes
// under Spaces/<stack name> (template.yaml, METRICS_NAMESPACE), so that two
// stacks in one account and region never read each other's metrics.
const Namespace = "Spaces"

// Units CloudWatch accepts that Spaces uses.
const (
	Count        = "Count"
	Milliseconds = "Milliseconds"
)

// MaxValues is the most values EMF takes for one metric in a line
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
const MaxValues = 100

// Metric is one value, or several.
type Metric struct {
	Name  string
	Unit  string
	Value float64
	// Values, when set, are this metric's values in place of Value (an EMF
	// array, at most MaxValues): one line carries many samples, each
	// counted by CloudWatch as if it had a line of its own.
	Values []float64
	// Dimensions, when set, are this metric's own dimension sets (each a
	// list of property keys; an empty one is the total) in place of the
	// line's: a line can carry a metric by provider beside others by
	// reason without publishing every metric by both.
	Dimensions [][]string
}

// Emitter writes EMF lines to a logger. The zero value writes to
// slog.Default on the real clock.
type Emitter struct {
	Log *slog.Logger
	Now func() time.Time
	// Namespace is the CloudWatch namespace (empty: Namespace).
	Namespace string
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
	ns := e.Namespace
	if ns == "" {
		ns = Namespace
	}
	sets := [][]string{{}}
	if len(dims) > 0 {
		sets = [][]string{dims, {}}
	}
	// One directive per distinct dimension sets, in the order first met.
	var directives []map[string]any
	byDims := map[string]int{}
	attrs := make([]slog.Attr, 0, len(props)+len(ms)+1)
	for _, m := range ms {
		ds := sets
		if m.Dimensions != nil {
			ds = m.Dimensions
		}
		key := fmt.Sprint(ds)
		i, ok := byDims[key]
		if !ok {
			i = len(directives)
			byDims[key] = i
			directives = append(directives, map[string]any{"Namespace": ns, "Dimensions": ds, "Metrics": []map[string]string{}})
		}
		directives[i]["Metrics"] = append(directives[i]["Metrics"].([]map[string]string), map[string]string{"Name": m.Name, "Unit": m.Unit})
		if m.Values != nil {
			attrs = append(attrs, slog.Any(m.Name, m.Values))
		} else {
			attrs = append(attrs, slog.Float64(m.Name, m.Value))
		}
	}
	attrs = append(attrs, slog.Any("_aws", map[string]any{
		"Timestamp":         now().UnixMilli(),
		"CloudWatchMetrics": directives,
	}))
	attrs = append(attrs, props...)
	log.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}
