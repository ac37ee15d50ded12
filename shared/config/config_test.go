package config

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) *Env {
	return &Env{Lookup: func(k string) (string, bool) { v, ok := m[k]; return v, ok }}
}

func TestEnv(t *testing.T) {
	e := env(map[string]string{"TABLE_NAME": "t", "HEARTBEAT": "2m"})
	if e.Required("TABLE_NAME") != "t" || e.Duration("HEARTBEAT", time.Minute) != 2*time.Minute || e.String("X", "d") != "d" {
		t.Fatal("values not read")
	}
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	e = env(map[string]string{"HEARTBEAT": "soon", "EMPTY": ""})
	e.Required("TABLE_NAME")
	e.Required("EMPTY")
	if d := e.Duration("HEARTBEAT", time.Minute); d != time.Minute {
		t.Errorf("bad duration gave %v", d)
	}
	err := e.Err()
	for _, want := range []string{"TABLE_NAME is required", "EMPTY is required", `HEARTBEAT="soon"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func TestEnvInt(t *testing.T) {
	e := env(map[string]string{"MAX_RECEIVES": "5", "BAD": "0", "WORSE": "x"})
	if e.Int("MAX_RECEIVES", 3) != 5 || e.Int("UNSET", 3) != 3 {
		t.Fatal("values not read")
	}
	if e.Int("BAD", 3) != 3 || e.Int("WORSE", 3) != 3 {
		t.Fatal("bad values not replaced by the default")
	}
	err := e.Err()
	for _, want := range []string{`BAD="0"`, `WORSE="x"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestLogLevel: Lambda's ApplicationLogLevel names (AWS_LAMBDA_LOG_LEVEL)
// set the function's level; anything else is INFO.
func TestLogLevel(t *testing.T) {
	for v, want := range map[string]slog.Level{
		"": slog.LevelInfo, "INFO": slog.LevelInfo, "TRACE": slog.LevelDebug, "debug": slog.LevelDebug,
		"WARN": slog.LevelWarn, "ERROR": slog.LevelError, "FATAL": slog.LevelError, "loud": slog.LevelInfo,
	} {
		if got := LogLevel(v); got != want {
			t.Errorf("LogLevel(%q) = %v, want %v", v, got, want)
		}
	}
}
