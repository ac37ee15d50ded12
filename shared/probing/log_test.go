package probing_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// logCount is what a function's log would hold in CloudWatch Logs: its
// bytes, and the custom metrics its EMF lines publish (a metric name and
// its dimensions' values, each billed by the month).
type logCount struct {
	bytes  atomic.Int64
	mu     sync.Mutex
	series map[string]bool
}

// countingLogger is a function's logger as deployed (JSON lines, INFO and
// above) whose lines are counted, not kept.
func countingLogger() (*slog.Logger, *logCount) {
	c := &logCount{series: map[string]bool{}}
	return slog.New(slog.NewJSONHandler(c, nil)), c
}

func (c *logCount) Write(p []byte) (int, error) {
	c.bytes.Add(int64(len(p)))
	if bytes.Contains(p, []byte(`"_aws"`)) {
		var line struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Dimensions [][]string
					Metrics    []struct{ Name string }
				}
			} `json:"_aws"`
		}
		var props map[string]any
		if json.Unmarshal(p, &line) == nil && json.Unmarshal(p, &props) == nil {
			c.mu.Lock()
			for _, d := range line.AWS.CloudWatchMetrics {
				for _, set := range d.Dimensions {
					key := ""
					for _, k := range set {
						key += fmt.Sprintf("|%s=%v", k, props[k])
					}
					for _, m := range d.Metrics {
						c.series[m.Name+key] = true
					}
				}
			}
			c.mu.Unlock()
		}
	}
	return len(p), nil
}

// Reset forgets what was counted.
func (c *logCount) Reset() {
	c.bytes.Store(0)
	c.mu.Lock()
	clear(c.series)
	c.mu.Unlock()
}

// Series is how many custom metrics the lines published.
func (c *logCount) Series() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.series)
}
