package wiring_test

import (
	"testing"

	"spaces/shared/config"
	"spaces/shared/wiring"
)

// The metric namespace the template sets per stack reaches the scheduler's
// and the prober's settings; unset, it is empty (metrics.Namespace).
func TestMetricsNamespaceIsRead(t *testing.T) {
	vars := map[string]string{"TABLE_NAME": "t", "PROBE_QUEUE_URL": "q", "EVENT_BUS_NAME": "b", "METRICS_NAMESPACE": "Spaces/prod"}
	env := &config.Env{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	if got := wiring.ReadScheduler(env).MetricsNamespace; got != "Spaces/prod" {
		t.Errorf("scheduler MetricsNamespace %q, want Spaces/prod", got)
	}
	p, err := wiring.ReadProber(env)
	if err != nil || p.MetricsNamespace != "Spaces/prod" {
		t.Errorf("prober MetricsNamespace %q (%v), want Spaces/prod", p.MetricsNamespace, err)
	}
	delete(vars, "METRICS_NAMESPACE")
	if got := wiring.ReadScheduler(env).MetricsNamespace; got != "" {
		t.Errorf("unset: scheduler MetricsNamespace %q, want empty", got)
	}
}
