package probing_test

import (
	"io"
	"log/slog"
	"sync/atomic"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// countingLogger is a function's logger as deployed (JSON lines, INFO and
// above) whose lines are counted, not kept: what CloudWatch Logs would
// ingest from the function's code.
func countingLogger() (*slog.Logger, *atomic.Int64) {
	var n atomic.Int64
	return slog.New(slog.NewJSONHandler(byteCounter{&n}, nil)), &n
}

type byteCounter struct{ n *atomic.Int64 }

func (c byteCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}
