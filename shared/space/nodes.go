package space

import (
	"cmp"
	"maps"
	"slices"
)

// Nodes is an agent space's nodes as its agent counts them: how many
// there are and how many run each kubelet version, never their names.
// Only the agent tells them (a watch of the cluster's nodes, one long
// request, not a call per probe); Spaces never lists a direct space's
// nodes, which would be a call per space per minute (docs/api.md,
// "Facts").
type Nodes struct {
	Count int `json:"count"`
	// Versions counts the nodes of each kubelet version
	// (status.nodeInfo.kubeletVersion), at most MaxNodeVersions of them
	// (those of most nodes); a node that has not reported one yet, or of
	// a version left out, counts in Count only.
	Versions map[string]int `json:"versions,omitempty"`
}

// Bounds of a nodes report: a cluster of more nodes than Kubernetes
// supports is not one, and more distinct versions than a few is a
// cluster in the middle of something the fleet view need not list.
const (
	MaxNodeCount    = 100000
	MaxNodeVersions = 10
)

// CountNodes summarises the kubelet versions of a cluster's nodes, one
// entry a node ("" for a node that reported none): what the agent
// reports.
func CountNodes(versions []string) Nodes {
	n := Nodes{Count: len(versions)}
	all := map[string]int{}
	for _, v := range versions {
		if v != "" && len(v) <= maxAgentText && printable(v) {
			all[v]++
		}
	}
	keys := slices.SortedFunc(maps.Keys(all), func(a, b string) int {
		return cmp.Or(cmp.Compare(all[b], all[a]), cmp.Compare(a, b))
	})
	if len(keys) > MaxNodeVersions {
		keys = keys[:MaxNodeVersions]
	}
	if len(keys) > 0 {
		n.Versions = make(map[string]int, len(keys))
		for _, k := range keys {
			n.Versions[k] = all[k]
		}
	}
	return n
}

// Equal reports whether n and o say the same (nil equals only nil).
func (n *Nodes) Equal(o *Nodes) bool {
	if n == nil || o == nil {
		return n == o
	}
	return n.Count == o.Count && maps.Equal(n.Versions, o.Versions)
}

// maxAgentText bounds each text field an agent reports.
const maxAgentText = 64

func (n *Nodes) check(fe *fieldErrors, at string) {
	if n == nil {
		return
	}
	if n.Count < 0 || n.Count > MaxNodeCount {
		fe.add(at+".count", "must be between 0 and %d", MaxNodeCount)
	}
	if len(n.Versions) > MaxNodeVersions {
		fe.add(at+".versions", "must list at most %d versions", MaxNodeVersions)
		return
	}
	sum := 0
	for _, v := range slices.Sorted(maps.Keys(n.Versions)) {
		c := n.Versions[v]
		if v == "" || len(v) > maxAgentText || !printable(v) {
			fe.add(at+".versions", "each version must be 1 to %d printable ASCII characters", maxAgentText)
		}
		if c < 1 {
			fe.add(at+".versions", "version %q must count at least one node", v)
		}
		sum += max(c, 0)
	}
	if sum > n.Count && n.Count >= 0 {
		fe.add(at+".versions", "counts %d nodes, more than count (%d)", sum, n.Count)
	}
}

// WithNodes is s with the nodes its agent reported, and whether that
// changes what is stored: nil (the agent sent none: unchanged since its
// last report, or it may not list nodes) and an equal report change
// nothing, so a lease costs no write of the space.
func (s Space) WithNodes(n *Nodes) (Space, bool) {
	if n == nil || s.Probe.Nodes.Equal(n) {
		return s, false
	}
	c := *n
	c.Versions = maps.Clone(n.Versions)
	s.Probe.Nodes = &c
	return s, true
}
