package probing_test

import (
	"os"
	"testing"
)

// TestMain runs the tests, or, in a process a cost benchmark started with
// proberInstanceEnv set, the prober as one Lambda instance
// (runProberInstance; it does not return).
func TestMain(m *testing.M) {
	if cfg := os.Getenv(proberInstanceEnv); cfg != "" {
		runProberInstance(cfg)
	}
	os.Exit(m.Run())
}
