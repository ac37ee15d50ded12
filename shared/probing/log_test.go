package probing_test

import (
	"io"
	"log/slog"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }
