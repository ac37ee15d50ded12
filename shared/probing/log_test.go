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
	// byMsg is the bytes of the lines of each message ("probes", "beat",
	// ...): what grows with batches, with shards or with probes.
	byMsg map[string]int64
}

// countingLogger is a function's logger as deployed (JSON lines, INFO and
// above) whose lines are counted, not kept.
func countingLogger() (*slog.Logger, *logCount) {
	c := &logCount{series: map[string]bool{}, byMsg: map[string]int64{}}
	return slog.New(slog.NewJSONHandler(c, nil)), c
}

func (c *logCount) Write(p []byte) (int, error) {
	c.bytes.Add(int64(len(p)))
	if _, rest, ok := bytes.Cut(p, []byte(`"msg":"`)); ok {
		if msg, _, ok := bytes.Cut(rest, []byte(`"`)); ok {
			c.mu.Lock()
			c.byMsg[string(msg)] += int64(len(p))
			c.mu.Unlock()
		}
	}
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
	clear(c.byMsg)
	c.mu.Unlock()
}

// Bytes is the bytes of the lines whose message is msg.
func (c *logCount) Bytes(msg string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return float64(c.byMsg[msg])
}

// Series is how many custom metrics the lines published.
func (c *logCount) Series() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.series)
}
