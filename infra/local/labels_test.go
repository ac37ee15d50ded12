package local

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Labels over HTTP: set at registration, replaced by a versioned PUT
// (If-Match optional), filtered by a Kubernetes label selector with the
// cursor intact; bad labels are a 422 naming the label, a malformed
// selector a 400 naming the parameter, and neither changes anything.
func TestSpaceLabels(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "org-labels")
	acct := c.account("aws")
	ids := map[string]string{}
	for name, labels := range map[string]map[string]string{
		"eu-prod":  {"env": "prod", "region": "eu", "example.com/team": "payments"},
		"us-prod":  {"env": "prod", "region": "us"},
		"eu-dev":   {"env": "dev", "region": "eu"},
		"no-label": nil,
	} {
		body := registerBody("aws", acct, name)
		if labels != nil {
			body["labels"] = labels
		}
		m := c.must(201, c.do("POST", "/spaces", body))
		ids[name] = m["id"].(string)
		if got, _ := m["labels"].(map[string]any); len(got) != len(labels) {
			t.Errorf("%s registered with labels %v, want %v", name, m["labels"], labels)
		}
	}

	// Bad labels at registration: 422 naming each label, nothing stored.
	before := itemCount(t, st)
	bad := registerBody("aws", acct, "bad-labels")
	bad["labels"] = map[string]string{"-env": "prod", "tier": "gold plated"}
	r := c.do("POST", "/spaces", bad)
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), `"labels.-env"`) || !strings.Contains(string(r.body), `"labels.tier"`) {
		t.Errorf("bad labels at registration: %d %s", r.status, r.body)
	}
	if n := itemCount(t, st); n != before {
		t.Errorf("a refused registration changed the table: %d items, was %d", n, before)
	}

	names := func(query string) []string {
		t.Helper()
		var out []string
		path := "/spaces?limit=1&label_selector=" + url.QueryEscape(query)
		for range 10 {
			m := c.must(200, c.do("GET", path, nil))
			for _, it := range m["items"].([]any) {
				out = append(out, it.(map[string]any)["name"].(string))
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			// One space a page: every page follows the cursor, under the filter.
			path = "/spaces?limit=1&label_selector=" + url.QueryEscape(query) + "&cursor=" + next
		}
		slices.Sort(out)
		return out
	}
	for sel, want := range map[string][]string{
		"env=prod":                          {"eu-prod", "us-prod"},
		"env==prod, region = eu":            {"eu-prod"},
		"env!=prod":                         {"eu-dev", "no-label"},
		"example.com/team":                  {"eu-prod"},
		"!region":                           {"no-label"},
		"region in (eu,us),env notin (dev)": {"eu-prod", "us-prod"},
		"env=staging":                       nil,
	} {
		if got := names(sel); !slices.Equal(got, want) {
			t.Errorf("label_selector=%q: %q, want %q", sel, got, want)
		}
	}

	// A cursor continues its own selector only.
	first := c.must(200, c.do("GET", "/spaces?limit=1&label_selector=env%3Dprod", nil))
	cur, _ := first["next_cursor"].(string)
	if cur == "" {
		t.Fatal("no cursor after the first of two matches")
	}
	if r := c.do("GET", "/spaces?limit=1&label_selector=env%3Ddev&cursor="+cur, nil); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"cursor"`) {
		t.Errorf("a cursor under another selector: %d %s", r.status, r.body)
	}

	// Malformed selectors: 400 naming label_selector.
	for _, sel := range []string{"", "env in ()", "env in (a", "env>1", "a b", ",", "-x", "env=prod,", "env=a=b"} {
		r := c.do("GET", "/spaces?label_selector="+url.QueryEscape(sel), nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"label_selector"`) {
			t.Errorf("label_selector=%q: %d %s", sel, r.status, r.body)
		}
	}

	// PUT replaces the set, versioned.
	id := ids["us-prod"]
	got := c.do("GET", "/spaces/"+id, nil)
	etag := got.header.Get("ETag")
	put := c.do("PUT", "/spaces/"+id+"/labels", map[string]any{"labels": map[string]string{"env": "prod", "region": "us", "tier": "gold"}}, "If-Match: "+etag)
	m := c.must(200, put)
	if want := map[string]any{"env": "prod", "region": "us", "tier": "gold"}; !reflect.DeepEqual(m["labels"], want) {
		t.Errorf("after PUT: labels %v, want %v", m["labels"], want)
	}
	if put.header.Get("ETag") == etag || m["version"] != got.json(t)["version"].(float64)+1 {
		t.Errorf("PUT kept the version: ETag %s (was %s), version %v", put.header.Get("ETag"), etag, m["version"])
	}
	if got := names("tier=gold"); !slices.Equal(got, []string{"us-prod"}) {
		t.Errorf("tier=gold after PUT: %q", got)
	}
	// The old ETag no longer matches: 412, nothing changed.
	if r := c.do("PUT", "/spaces/"+id+"/labels", map[string]any{"labels": map[string]string{}}, "If-Match: "+etag); r.status != http.StatusPreconditionFailed {
		t.Errorf("stale If-Match: %d %s", r.status, r.body)
	}
	// The same labels again: no write.
	same := c.must(200, c.do("PUT", "/spaces/"+id+"/labels", map[string]any{"labels": m["labels"]}))
	if same["version"] != m["version"] {
		t.Errorf("the same labels wrote a new version: %v, was %v", same["version"], m["version"])
	}

	// Bad labels, bad bodies: refused by field, nothing changed.
	before = itemCount(t, st)
	for _, tc := range []struct {
		body   any
		status int
		field  string
	}{
		{map[string]any{"labels": map[string]string{"a/b/c": "x"}}, 422, `"labels.a/b/c"`},
		{map[string]any{"labels": map[string]string{"ok": strings.Repeat("v", 64)}}, 422, `"labels.ok"`},
		{map[string]any{"labels": manyLabels(65)}, 422, `"labels"`},
		{map[string]any{}, 422, `"labels"`},
		{map[string]any{"labels": map[string]any{"env": 1}}, 400, `"labels"`},
		{map[string]any{"labels": map[string]string{}, "extra": 1}, 400, `"extra"`},
	} {
		r := c.do("PUT", "/spaces/"+id+"/labels", tc.body)
		if r.status != tc.status || !strings.Contains(string(r.body), tc.field) {
			t.Errorf("PUT %v: %d %s, want %d naming %s", tc.body, r.status, r.body, tc.status, tc.field)
		}
	}
	after := c.must(200, c.do("GET", "/spaces/"+id, nil))
	if !reflect.DeepEqual(after["labels"], m["labels"]) || after["version"] != m["version"] || itemCount(t, st) != before {
		t.Errorf("refused PUTs changed the space: %v v%v (want %v v%v)", after["labels"], after["version"], m["labels"], m["version"])
	}
	c.must(200, c.do("PUT", "/spaces/"+id+"/labels", map[string]any{"labels": manyLabels(64)}))

	// {} removes them all; another org's space is not found.
	if cleared := c.must(200, c.do("PUT", "/spaces/"+id+"/labels", map[string]any{"labels": map[string]string{}})); cleared["labels"] != nil {
		t.Errorf("after PUT {}: labels %v", cleared["labels"])
	}
	other := newClient(t, st, "org-labels-other")
	if r := other.do("PUT", "/spaces/"+ids["eu-prod"]+"/labels", map[string]any{"labels": map[string]string{}}); r.status != http.StatusNotFound {
		t.Errorf("another org's space: %d", r.status)
	}
	if got := names("example.com/team=payments"); !slices.Equal(got, []string{"eu-prod"}) {
		t.Errorf("another org's PUT changed labels: %q", got)
	}
}

func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprint("k", i)] = "v"
	}
	return m
}
