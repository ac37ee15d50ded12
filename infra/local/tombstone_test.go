package local

import (
	"net/http"
	"testing"
	"time"
)

// A deregistered space still answers its name, and when and by whom it was
// deregistered, to the views that reference it: its own 404 (to its org
// only) and the gate of an environment it held. It stays a 404 to every
// route, and a second DELETE changes nothing, its tombstone included.
func TestTombstonesOverHTTP(t *testing.T) {
	st, _ := startCascadeStack(t, 100*time.Millisecond)
	c := newClient(t, st, "org-tomb")
	other := newClient(t, st, "org-other")
	id := c.must(201, c.do("POST", "/spaces", registerBody("aws", c.account("aws"), "prod-eu")))["id"].(string)
	envID := c.must(201, c.do("POST", "/environments", map[string]any{"name": "web", "space_id": id}))["id"].(string)
	c.deregister(id) // and its cascade, whose last write is counted below

	tomb := func(r resp) map[string]any {
		t.Helper()
		if r.status != http.StatusNotFound {
			t.Fatalf("status %d, want 404: %s", r.status, r.body)
		}
		ts, _ := r.json(t)["tombstone"].(map[string]any)
		return ts
	}
	ts := tomb(c.do("GET", "/spaces/"+id, nil))
	if ts == nil || ts["id"] != id || ts["name"] != "prod-eu" || ts["provider"] != "aws" || ts["deregistered_by"] != "test" || ts["deregistered_at"] == nil {
		t.Fatalf("tombstone %v", ts)
	}
	for _, path := range []string{"/spaces/" + id + "/status-history"} {
		if got := tomb(c.do("GET", path, nil)); got == nil || got["name"] != "prod-eu" {
			t.Errorf("GET %s: tombstone %v", path, got)
		}
	}
	if got := tomb(other.do("GET", "/spaces/"+id, nil)); got != nil {
		t.Errorf("another org sees the tombstone: %v", got)
	}

	eventually(t, "the environment gated with the tombstone", func() bool {
		g, _ := c.must(200, c.do("GET", "/environments/"+envID, nil))["gate"].(map[string]any)
		sp, _ := g["space"].(map[string]any)
		return sp != nil && sp["name"] == "prod-eu" && sp["deregistered_by"] == "test" && sp["deregistered_at"] == ts["deregistered_at"]
	})

	// Nothing comes back: a second deregistration and a status write are
	// 404 with the same tombstone, and nothing in the table changes.
	before := itemCount(t, st)
	if got := tomb(c.do("DELETE", "/spaces/"+id, nil)); got["deregistered_at"] != ts["deregistered_at"] {
		t.Errorf("a second DELETE: tombstone %v, want %v", got, ts)
	}
	internal := newClient(t, st, "org-tomb", "spaces:internal")
	tomb(internal.do("PATCH", "/spaces/"+id+"/status", map[string]any{"status": "active"}, `If-Match: "2"`))
	if got := tomb(c.do("GET", "/spaces/"+id, nil)); got["deregistered_by"] != "test" || got["deregistered_at"] != ts["deregistered_at"] {
		t.Errorf("tombstone after the refused writes: %v, want %v", got, ts)
	}
	if after := itemCount(t, st); after != before {
		t.Errorf("refused writes changed the table: %d items, was %d", after, before)
	}
}
