package space

import (
	"fmt"
	"strings"
	"testing"
)

// TestWithNodesSteps: the nodes an agent reports change the stored space
// only when they differ from the stored ones; a lease without nodes (the
// agent sends them only when they changed) changes nothing, so it costs
// no write.
func TestWithNodesSteps(t *testing.T) {
	three := &Nodes{Count: 3, Versions: map[string]int{"v1.31.2-eks-1": 2, "v1.30.4": 1}}
	steps := []struct {
		name    string
		report  *Nodes
		changed bool
		want    *Nodes
	}{
		{"no report before the first: nothing", nil, false, nil},
		{"the first report", three, true, three},
		{"the same again (an agent restarted)", &Nodes{Count: 3, Versions: map[string]int{"v1.30.4": 1, "v1.31.2-eks-1": 2}}, false, three},
		{"a lease without nodes", nil, false, three},
		{"a node added", &Nodes{Count: 4, Versions: map[string]int{"v1.31.2-eks-1": 3, "v1.30.4": 1}}, true,
			&Nodes{Count: 4, Versions: map[string]int{"v1.31.2-eks-1": 3, "v1.30.4": 1}}},
		{"a node upgraded, same count", &Nodes{Count: 4, Versions: map[string]int{"v1.31.2-eks-1": 4}}, true,
			&Nodes{Count: 4, Versions: map[string]int{"v1.31.2-eks-1": 4}}},
		{"no nodes at all", &Nodes{Count: 0}, true, &Nodes{Count: 0}},
		{"still none", &Nodes{Count: 0, Versions: map[string]int{}}, false, &Nodes{Count: 0}},
	}
	s := Space{ID: "s", Connectivity: ViaAgent}
	for _, st := range steps {
		next, changed := s.WithNodes(st.report)
		if changed != st.changed || !next.Probe.Nodes.Equal(st.want) {
			t.Fatalf("%s: changed %v, nodes %+v; want %v, %+v", st.name, changed, next.Probe.Nodes, st.changed, st.want)
		}
		if changed && st.report.Versions != nil {
			// Stored as a copy: the report's map is not shared.
			st.report.Versions["mutated"] = 1
			if next.Probe.Nodes.Versions["mutated"] != 0 {
				t.Fatalf("%s: the stored nodes share the report's map", st.name)
			}
			delete(st.report.Versions, "mutated")
		}
		if !changed && !next.Probe.Nodes.Equal(s.Probe.Nodes) {
			t.Fatalf("%s: unchanged but the nodes moved", st.name)
		}
		s = next
	}
	if f := s.FactsAt(s.CreatedAt); !f.Nodes.Equal(s.Probe.Nodes) {
		t.Errorf("facts.nodes %+v, want the stored %+v", f.Nodes, s.Probe.Nodes)
	}
}

// TestCountNodes: counts per kubelet version, the ones of most nodes kept
// when there are more than MaxNodeVersions, a node without a version (or
// an unprintable one) in Count only.
func TestCountNodes(t *testing.T) {
	n := CountNodes([]string{"v1.31.2", "v1.31.2", "v1.30.4", "", "bad\nversion"})
	if !n.Equal(&Nodes{Count: 5, Versions: map[string]int{"v1.31.2": 2, "v1.30.4": 1}}) {
		t.Errorf("%+v", n)
	}
	if n := CountNodes(nil); !n.Equal(&Nodes{}) {
		t.Errorf("no nodes: %+v", n)
	}
	var many []string
	for i := range MaxNodeVersions + 3 {
		for range i + 1 {
			many = append(many, fmt.Sprintf("v1.%d.0", i))
		}
	}
	n = CountNodes(many)
	if n.Count != len(many) || len(n.Versions) != MaxNodeVersions || n.Versions["v1.0.0"] != 0 || n.Versions["v1.2.0"] != 0 ||
		n.Versions[fmt.Sprintf("v1.%d.0", MaxNodeVersions+2)] != MaxNodeVersions+3 {
		t.Errorf("capped: %+v", n)
	}
	if err := (LeaseReport{AgentVersion: "a", ServerVersion: ServerVersion{GitVersion: "v", Platform: "p"}, Nodes: &n}).Validate(); err != nil {
		t.Errorf("a capped count is refused: %v", err)
	}
}

// TestLeaseReportNodes: every bad nodes field is named.
func TestLeaseReportNodes(t *testing.T) {
	base := LeaseReport{AgentVersion: "0.1.0", ServerVersion: ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}}
	tooMany := map[string]int{}
	for i := range MaxNodeVersions + 1 {
		tooMany[fmt.Sprintf("v1.%d.0", i)] = 1
	}
	for _, c := range []struct {
		name  string
		nodes *Nodes
		field string
	}{
		{"negative", &Nodes{Count: -1}, "nodes.count"},
		{"too many nodes", &Nodes{Count: MaxNodeCount + 1}, "nodes.count"},
		{"too many versions", &Nodes{Count: 100, Versions: tooMany}, "nodes.versions"},
		{"an empty version", &Nodes{Count: 1, Versions: map[string]int{"": 1}}, "nodes.versions"},
		{"a long version", &Nodes{Count: 1, Versions: map[string]int{strings.Repeat("v", 65): 1}}, "nodes.versions"},
		{"an unprintable version", &Nodes{Count: 1, Versions: map[string]int{"v1\x00": 1}}, "nodes.versions"},
		{"a version of no node", &Nodes{Count: 1, Versions: map[string]int{"v1.31.0": 0}}, "nodes.versions"},
		{"more versions than nodes", &Nodes{Count: 1, Versions: map[string]int{"v1.31.0": 2}}, "nodes.versions"},
	} {
		r := base
		r.Nodes = c.nodes
		var e *Error
		if err := r.Validate(); !asError(err, &e) || e.Kind != KindInvalid || len(e.Fields) == 0 || e.Fields[0].Field != c.field {
			t.Errorf("%s: %v, want %s refused", c.name, err, c.field)
		}
	}
	base.Nodes = &Nodes{Count: 2, Versions: map[string]int{"v1.31.0": 1}}
	if err := base.Validate(); err != nil {
		t.Errorf("one node without a version: %v", err)
	}
}
