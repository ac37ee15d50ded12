package space

import (
	"testing"
	"time"
)

// A space moves among the version counts only when its minor changes:
// never on a heartbeat, an unchanged answer or a patch release, so a probe
// writes no counter unless the cluster was upgraded (or first answered).
func TestVersionMove(t *testing.T) {
	withProbe := func(cloud, git string) Space {
		s := Space{KubernetesVersion: cloud}
		if git != "" {
			s.Probe.ServerVersion = &ServerVersion{GitVersion: git}
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		counted string
		after   Space
		to      string
		moved   bool
	}{
		{"unknown stays unknown", "", withProbe("", ""), "", false},
		{"the cloud's form counts as its minor", "", withProbe("1.31", ""), "1.31", true},
		{"a first answer of the same minor as the cloud said", "1.31", withProbe("1.31", "v1.31.4-eks-2d5f260"), "1.31", false},
		{"a patch release", "1.31", withProbe("1.31", "v1.31.5-eks-2d5f260"), "1.31", false},
		{"an upgrade", "1.31", withProbe("1.31", "v1.32.0-eks-1"), "1.32", true},
		{"a first version", "", withProbe("", "v1.30.2"), "1.30", true},
		{"an answer that does not parse counts as unknown", "1.30", withProbe("", "devel"), "", true},
		{"a downgrade", "1.32", withProbe("", "v1.31.0+k3s1"), "1.31", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, moved := VersionMove(tc.counted, tc.after)
			if to != tc.to || moved != tc.moved {
				t.Errorf("VersionMove(%q, %q) = %q, %v; want %q, %v", tc.counted, tc.after.CurrentVersion(), to, moved, tc.to, tc.moved)
			}
		})
	}
}

// StatusSince moves only on a transition: a registration's is its
// creation, a probe that keeps the status (a heartbeat, a new version, a
// failure below the threshold) leaves it, a transition sets it.
func TestStatusSinceSteps(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := Space{Status: Unknown, CreatedAt: t0}
	steps := []struct {
		name string
		o    Outcome
		want time.Time
	}{
		{"a first answer: unknown to active", Outcome{At: t0.Add(time.Minute)}, t0.Add(time.Minute)},
		{"a heartbeat", Outcome{At: t0.Add(2 * time.Minute)}, t0.Add(time.Minute)},
		{"an upgrade", Outcome{At: t0.Add(3 * time.Minute), Version: &ServerVersion{GitVersion: "v1.32.0"}}, t0.Add(time.Minute)},
		{"one failure, still active", Outcome{At: t0.Add(4 * time.Minute), Reason: "Timeout"}, t0.Add(time.Minute)},
	}
	if got := s.StatusSince(); !got.Equal(t0) {
		t.Fatalf("registered: %v, want its creation %v", got, t0)
	}
	for _, st := range steps {
		s, _ = ApplyProbe(s, st.o)
		if got := s.StatusSince(); !got.Equal(st.want) {
			t.Errorf("%s: status since %v, want %v", st.name, got, st.want)
		}
	}
	// Failures up to the threshold make it inactive: a transition.
	var at time.Time
	for i := 0; s.Status != Inactive && i < 10; i++ {
		at = t0.Add(time.Duration(5+i) * time.Minute)
		s, _ = ApplyProbe(s, Outcome{At: at, Reason: "Timeout"})
	}
	if s.Status != Inactive || !s.StatusSince().Equal(at) {
		t.Errorf("after failures: %s since %v, want inactive since %v", s.Status, s.StatusSince(), at)
	}
}
