package space

import "testing"

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
