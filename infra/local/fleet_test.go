package local

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
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

	// The version distribution is what the simulated clouds and the probes
	// say (TestCountsFollowVersions holds its moves): here, that it adds up
	// to the total; the rest is compared whole.
	versions := func(got map[string]any) map[string]any {
		t.Helper()
		sum, _ := got["version_unknown"].(float64)
		byVersion, ok := got["by_version"].(map[string]any)
		for _, n := range byVersion {
			sum += n.(float64)
		}
		if !ok || sum != got["total"] {
			t.Errorf("by_version %v and version_unknown %v do not add up to total %v", got["by_version"], got["version_unknown"], got["total"])
		}
		delete(got, "by_version")
		delete(got, "version_unknown")
		return got
	}
	counts := func() map[string]any { return versions(c.must(200, c.do("GET", "/space-counts", nil))) }
	want := map[string]any{
		"total":       4.0,
		"by_status":   map[string]any{"active": 0.0, "inactive": 0.0, "unknown": 4.0},
		"by_provider": map[string]any{"aws": 3.0, "gcp": 1.0, "azure": 0.0},
		"by_account":  map[string]any{aws: 3.0, gcp: 1.0},
		"synthetic":   map[string]any{"total": 0.0, "by_status": map[string]any{"active": 0.0, "inactive": 0.0, "unknown": 0.0}},
	}
	if got := counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}

	// A status change moves one space; a deregistration removes one.
	internal.must(200, internal.do("PATCH", "/spaces/"+ids[0]+"/status", map[string]any{"status": "active"}, `If-Match: "1"`))
	c.deregister(ids[1])
	want["total"] = 3.0
	want["by_status"] = map[string]any{"active": 1.0, "inactive": 0.0, "unknown": 2.0}
	want["by_provider"] = map[string]any{"aws": 2.0, "gcp": 1.0, "azure": 0.0}
	want["by_account"] = map[string]any{aws: 2.0, gcp: 1.0}
	first := c.do("GET", "/space-counts", nil)
	if got := versions(c.must(200, first)); !reflect.DeepEqual(got, want) {
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

// GET /spaces searches names (by prefix, or by word prefix with
// name_contains, ignoring case) and sorts by name, paging with a cursor
// bound to the search and order; bad parameters are refused by name and
// change nothing.
func TestSpaceSearchAndSort(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "org-search")
	acct := c.account("aws")
	for _, name := range []string{"prod-eu", "Prod-US", "staging", "dev-eu", "PRODUCTION"} {
		body := registerBody("aws", acct, strings.ToLower(name))
		body["name"] = name
		c.must(201, c.do("POST", "/spaces", body))
	}
	names := func(path string) ([]string, string) {
		m := c.must(200, c.do("GET", path, nil))
		var out []string
		for _, it := range m["items"].([]any) {
			out = append(out, it.(map[string]any)["name"].(string))
		}
		next, _ := m["next_cursor"].(string)
		return out, next
	}
	// walk follows path's cursor to the end (at most 10 pages: a cursor
	// that never ends fails the test's order check, not its time).
	walk := func(path string) []string {
		var got []string
		for i, p := 0, path; i < 10; i++ {
			page, next := names(p)
			got = append(got, page...)
			if next == "" {
				break
			}
			p = path + "&cursor=" + next
		}
		return got
	}
	// Paged two at a time in name order, following the cursor.
	got := walk("/spaces?sort=name&limit=2")
	if want := []string{"dev-eu", "prod-eu", "Prod-US", "PRODUCTION", "staging"}; !slices.Equal(got, want) {
		t.Errorf("by name: %q, want %q", got, want)
	}
	for path, want := range map[string][]string{
		"/spaces?sort=-name&name_prefix=PROD": {"PRODUCTION", "Prod-US", "prod-eu"},
		// By word prefix: by the word matched, then name; not mid-word.
		"/spaces?name_contains=EU":         {"dev-eu", "prod-eu"},
		"/spaces?name_contains=pro":        {"prod-eu", "Prod-US", "PRODUCTION"},
		"/spaces?name_contains=us%20prod":  {"Prod-US"},
		"/spaces?name_contains=rod":        nil,
		"/spaces?sort=name&name_prefix=zz": nil,
	} {
		if got, _ := names(path); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	if got := walk("/spaces?name_contains=pro&limit=1"); !slices.Equal(got, []string{"prod-eu", "Prod-US", "PRODUCTION"}) {
		t.Errorf("word search paged one at a time: %q", got)
	}
	// By registration, newest first, paged one at a time: the reverse of
	// the order they were registered in.
	got = walk("/spaces?sort=-registered&limit=1")
	if want := []string{"PRODUCTION", "dev-eu", "staging", "Prod-US", "prod-eu"}; !slices.Equal(got, want) {
		t.Errorf("newest first: %q, want %q", got, want)
	}
	if got, _ := names("/spaces?sort=registered&name_prefix=prod"); !slices.Equal(got, []string{"prod-eu", "Prod-US", "PRODUCTION"}) {
		t.Errorf("oldest first, prefix prod: %q", got)
	}
	// By status: staging set active first, then the unknown ones by name.
	internal := newClient(t, st, "org-search", "spaces:internal")
	staging := c.must(200, c.do("GET", "/spaces?name_prefix=staging", nil))["items"].([]any)[0].(map[string]any)["id"].(string)
	internal.must(200, internal.do("PATCH", "/spaces/"+staging+"/status", map[string]any{"status": "active"}, `If-Match: "1"`))
	got = walk("/spaces?sort=status&limit=2")
	if want := []string{"staging", "dev-eu", "prod-eu", "Prod-US", "PRODUCTION"}; !slices.Equal(got, want) {
		t.Errorf("by status: %q, want %q", got, want)
	}
	// By the time of the last transition, newest first: staging's change
	// to active is newer than every other space's registration, and those
	// follow newest first (a space with no transition dates from it).
	got = walk("/spaces?sort=-status_since&limit=2")
	if want := []string{"staging", "PRODUCTION", "dev-eu", "Prod-US", "prod-eu"}; !slices.Equal(got, want) {
		t.Errorf("newest change first: %q, want %q", got, want)
	}

	// A cursor continues only its own search and order.
	_, next := names("/spaces?sort=name&limit=1")
	_, searchNext := names("/spaces?name_contains=pro&limit=1")
	before := itemCount(t, st)
	for path, field := range map[string]string{
		"/spaces?sort=probed":                                     "sort",
		"/spaces?name_prefix=":                                    "name_prefix",
		"/spaces?name_contains=a%00b":                             "name_contains",
		"/spaces?name_prefix=" + strings.Repeat("a", 101):         "name_prefix",
		"/spaces?name_prefix=a&name_contains=b":                   "name_contains",
		"/spaces?sort=-name&limit=1&cursor=" + next:               "cursor",
		"/spaces?sort=registered&limit=1&cursor=" + next:          "cursor",
		"/spaces?name_prefix=p&limit=1&cursor=" + next:            "cursor",
		"/spaces?name_contains=-_.":                               "name_contains",
		"/spaces?sort=name&name_contains=eu":                      "sort",
		"/spaces?name_contains=prod&limit=1&cursor=" + searchNext: "cursor",
	} {
		r := c.do("GET", path, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"`+field+`"`) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", path, r.status, r.body, field)
		}
	}
	if itemCount(t, st) != before {
		t.Errorf("bad requests changed the table")
	}

	// synthetic keeps the placeholders, or the others; its cursor
	// continues only its own listing, and a bad value is refused by name.
	body := registerBody("aws", acct, "placeholder")
	body["synthetic"] = true
	c.must(201, c.do("POST", "/spaces", body))
	if got, _ := names("/spaces?synthetic=true"); !slices.Equal(got, []string{"placeholder"}) {
		t.Errorf("synthetic=true: %q, want placeholder", got)
	}
	if got, _ := names("/spaces?synthetic=false&sort=name"); !slices.Equal(got, []string{"dev-eu", "prod-eu", "Prod-US", "PRODUCTION", "staging"}) {
		t.Errorf("synthetic=false: %q", got)
	}
	_, next = names("/spaces?synthetic=false&limit=1")
	before = itemCount(t, st)
	for path, field := range map[string]string{
		"/spaces?synthetic=yes":                         "synthetic",
		"/spaces?synthetic=true&limit=1&cursor=" + next: "cursor",
	} {
		r := c.do("GET", path, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"`+field+`"`) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", path, r.status, r.body, field)
		}
	}
	if itemCount(t, st) != before {
		t.Errorf("bad requests changed the table")
	}
}
