package local

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"
)

// GET /environments/{id}/revisions lists an environment's revisions newest
// first, paged, with a 304 while unchanged, and another org's environment
// is 404; GET /revisions?state=stopped lists the org's stopped revisions
// (here, stopped by three claims on an unknown space) until one is
// re-enqueued. Bad queries are refused by name and change nothing.
func TestRevisionListingsOverHTTP(t *testing.T) {
	prefix := fmt.Sprintf("v%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log: slog.New(slog.DiscardHandler), Probing: ProbingConfig{Disabled: true},
		Cascade:   CascadeConfig{Interval: 100 * time.Millisecond},
		Revisions: RevisionsConfig{Backoff: 100 * time.Millisecond, Wait: time.Second},
		Names:     func(id string) string { return prefix + id },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c := newClient(t, st, "org-revs")
	internal := newClient(t, st, "org-revs", "spaces:internal")
	other := newClient(t, st, "org-other")

	// The space stays unknown (probing is off): every revision stops after
	// three claims.
	spaceID := c.must(201, c.do("POST", "/spaces", registerBody("aws", c.account("aws"), "rev-target")))["id"].(string)
	envID := c.must(201, c.do("POST", "/environments", map[string]any{"name": "web", "space_id": spaceID}))["id"].(string)
	var pushed []string
	for i := range 5 {
		m := c.must(202, c.do("POST", "/environments/"+envID+"/revisions", map[string]any{"manifests": []any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": fmt.Sprintf("c%d", i)}}}}))
		pushed = append(pushed, m["id"].(string))
	}
	newest := slices.Clone(pushed)
	slices.Reverse(newest)

	ids := func(m map[string]any) []string {
		var out []string
		for _, it := range m["items"].([]any) {
			r := it.(map[string]any)
			if _, has := r["manifests"]; has {
				t.Errorf("a listed revision carries its manifests: %v", r)
			}
			out = append(out, r["id"].(string))
		}
		return out
	}
	// walk pages through path with limit 2 and returns the ids.
	walk := func(path string) []string {
		var out []string
		next := path + "&limit=2"
		for range 20 {
			m := c.must(200, c.do("GET", next, nil))
			out = append(out, ids(m)...)
			cur, _ := m["next_cursor"].(string)
			if cur == "" {
				return out
			}
			next = path + "&limit=2&cursor=" + cur
		}
		t.Fatal("the listing never ended")
		return nil
	}
	eventually(t, "the environment's revisions, newest first", func() bool {
		return slices.Equal(walk("/environments/"+envID+"/revisions?"), newest)
	})
	eventually(t, "all five stopped", func() bool {
		return len(walk("/revisions?state=stopped")) == 5
	})
	for _, id := range pushed {
		if r := c.must(200, c.do("GET", "/revisions/"+id, nil)); r["state"] != "stopped" {
			t.Fatalf("revision %s: %v", id, r)
		}
	}

	// 304 while unchanged.
	first := c.do("GET", "/environments/"+envID+"/revisions", nil)
	c.must(200, first)
	if r := c.do("GET", "/environments/"+envID+"/revisions", nil, "If-None-Match: "+first.header.Get("ETag")); r.status != http.StatusNotModified {
		t.Errorf("If-None-Match: %d %s", r.status, r.body)
	}

	// Re-enqueued once the space is active: no longer stopped.
	internal.must(200, internal.do("PATCH", "/spaces/"+spaceID+"/status", map[string]any{"status": "active"}, `If-Match: "1"`))
	c.must(202, c.do("POST", "/revisions/"+pushed[2]+"/retry", nil))
	eventually(t, "the re-enqueued revision gone from the stopped ones", func() bool {
		return !slices.Contains(walk("/revisions?state=stopped"), pushed[2]) && len(walk("/revisions?state=stopped")) == 4
	})

	// Another org: the environment is not found; it has no stopped revision.
	if r := other.do("GET", "/environments/"+envID+"/revisions", nil); r.status != http.StatusNotFound {
		t.Errorf("another org's environment: %d %s", r.status, r.body)
	}
	if m := other.must(200, other.do("GET", "/revisions?state=stopped", nil)); len(m["items"].([]any)) != 0 {
		t.Errorf("another org's stopped revisions: %v", m)
	}

	// Bad requests: refused by name, nothing changed.
	page := c.must(200, c.do("GET", "/environments/"+envID+"/revisions?limit=1", nil))
	envCursor := page["next_cursor"].(string)
	stoppedCursor := c.must(200, c.do("GET", "/revisions?state=stopped&limit=1", nil))["next_cursor"].(string)
	before := itemCount(t, st)
	for path, field := range map[string]string{
		"/environments/" + envID + "/revisions?limit=0":                 "limit",
		"/environments/" + envID + "/revisions?state=stopped":           "state",
		"/environments/" + envID + "/revisions?cursor=forged":           "cursor",
		"/environments/" + envID + "/revisions?cursor=" + stoppedCursor: "cursor",
		"/environments/" + pushed[0] + "/revisions?cursor=" + envCursor: "cursor",
		"/environments/" + envID + "/revisions?limit=1&limit=2":         "limit",
		"/revisions":               "state",
		"/revisions?state=pending": "state",
		"/revisions?state=stopped&cursor=" + envCursor:     "cursor",
		"/revisions?state=stopped&environment_id=" + envID: "environment_id",
	} {
		r := c.do("GET", path, nil)
		if r.status != http.StatusBadRequest || !hasField(r.json(t), field) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", path, r.status, r.body, field)
		}
	}
	for _, path := range []string{"/environments/not-a-uuid/revisions", "/environments/" + spaceID + "/revisions"} {
		if r := c.do("GET", path, nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	if r := newClient(t, st, "").do("GET", "/revisions?state=stopped", nil); r.status != http.StatusUnauthorized {
		t.Errorf("without a token: %d", r.status)
	}
	if itemCount(t, st) != before {
		t.Errorf("bad requests changed the table: %d items, was %d", itemCount(t, st), before)
	}
}
