package local

import (
	"net/http"
	"reflect"
	"testing"
)

// The fleet's counts come in one request, follow registrations, status
// changes and deregistrations, answer 304 while unchanged, and a bad request
// is refused and changes nothing.
func TestSpaceCounts(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "org-counts")
	internal := newClient(t, st, "org-counts", "spaces:internal")
	aws, gcp := c.account("aws"), c.account("gcp")
	var ids []string
	for _, name := range []string{"count-1", "count-2", "count-3"} {
		ids = append(ids, c.must(201, c.do("POST", "/spaces", registerBody("aws", aws, name)))["id"].(string))
	}
	c.must(201, c.do("POST", "/spaces", registerBody("gcp", gcp, "count-g")))

	counts := func() map[string]any { return c.must(200, c.do("GET", "/space-counts", nil)) }
	want := map[string]any{
		"total":       4.0,
		"by_status":   map[string]any{"active": 0.0, "inactive": 0.0, "unknown": 4.0},
		"by_provider": map[string]any{"aws": 3.0, "gcp": 1.0, "azure": 0.0},
		"by_account":  map[string]any{aws: 3.0, gcp: 1.0},
	}
	if got := counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}

	// A status change moves one space; a deregistration removes one.
	internal.must(200, internal.do("PATCH", "/spaces/"+ids[0]+"/status", map[string]any{"status": "active"}, `If-Match: "1"`))
	c.must(204, c.do("DELETE", "/spaces/"+ids[1], nil))
	want["total"] = 3.0
	want["by_status"] = map[string]any{"active": 1.0, "inactive": 0.0, "unknown": 2.0}
	want["by_provider"] = map[string]any{"aws": 2.0, "gcp": 1.0, "azure": 0.0}
	want["by_account"] = map[string]any{aws: 2.0, gcp: 1.0}
	first := c.do("GET", "/space-counts", nil)
	if got := c.must(200, first); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a transition and a deregistration: %v, want %v", got, want)
	}

	// Polling: 304 while nothing changed.
	tag := first.header.Get("ETag")
	if again := c.do("GET", "/space-counts", nil, "If-None-Match: "+tag); again.status != http.StatusNotModified || len(again.body) != 0 {
		t.Errorf("If-None-Match %s: %d %q", tag, again.status, again.body)
	}

	// Bad requests: each refused, nothing changed.
	before := itemCount(t, st)
	for _, path := range []string{"/space-counts?status=active", "/space-counts?limit=1", "/space-counts?x%zz=1"} {
		if r := c.do("GET", path, nil); r.status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	if r := newClient(t, st, "").do("GET", "/space-counts", nil); r.status != http.StatusUnauthorized {
		t.Errorf("without a token: %d", r.status)
	}
	if got := counts(); !reflect.DeepEqual(got, want) || itemCount(t, st) != before {
		t.Errorf("bad requests changed something: %v (want %v), %d items (was %d)", got, want, itemCount(t, st), before)
	}

	// Another org counts nothing of this one's.
	other := newClient(t, st, "org-other").must(200, newClient(t, st, "org-other").do("GET", "/space-counts", nil))
	if other["total"] != 0.0 || len(other["by_account"].(map[string]any)) != 0 {
		t.Errorf("another org's counts: %v", other)
	}
}
