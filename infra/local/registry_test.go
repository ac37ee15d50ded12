package local

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
)

// TestRegistryTour walks the tour (docs/tour.md) over real HTTP: register one space
// per provider, list, get, filter, pick, patch the status with its ETag,
// deregister, and register the same cluster again.
func TestRegistryTour(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	internal := newClient(t, st, "acme", "spaces:internal")

	ids := map[string]string{}
	accounts := map[string]string{}
	for _, p := range []string{"aws", "gcp", "azure"} {
		accounts[p] = c.account(p)
		r := c.do("POST", "/spaces", registerBody(p, accounts[p], "prod-"+p))
		m := c.must(201, r)
		ids[p] = m["id"].(string)
		if m["status"] != "unknown" || m["name"] != "prod-"+p || m["org_id"] != "acme" || m["provider"] != p {
			t.Errorf("%s: registered %v", p, m)
		}
		if r.header.Get("Location") != "/spaces/"+ids[p] || r.header.Get("ETag") != `"1"` {
			t.Errorf("%s: headers %v", p, r.header)
		}
	}
	synthetic := c.must(201, c.do("POST", "/spaces", map[string]any{
		"name": "placeholder", "provider": "aws", "space_type": "kubernetes", "cloud_account_id": accounts["aws"],
		"config": configFor("aws", "placeholder"), "synthetic": true,
	}))["id"].(string)

	list := func(query string) []string {
		t.Helper()
		m := c.must(200, c.do("GET", "/spaces"+query, nil))
		var out []string
		for _, it := range m["items"].([]any) {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		sort.Strings(out)
		return out
	}
	want := func(ids ...string) []string { sort.Strings(ids); return ids }
	eq := func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

	if got := list(""); !eq(got, want(ids["aws"], ids["gcp"], ids["azure"], synthetic)) {
		t.Errorf("list = %v", got)
	}
	if got := list("?provider=gcp"); !eq(got, want(ids["gcp"])) {
		t.Errorf("provider filter = %v", got)
	}
	if got := list("?cloud_account_id=" + accounts["aws"]); !eq(got, want(ids["aws"], synthetic)) {
		t.Errorf("account filter = %v", got)
	}

	// Make the azure space inactive through the internal status route.
	r := c.do("GET", "/spaces/"+ids["azure"], nil)
	c.must(200, r)
	etag := r.header.Get("ETag")
	if got := c.do("PATCH", "/spaces/"+ids["azure"]+"/status", map[string]any{"status": "inactive"}, "If-Match: "+etag); got.status != 403 {
		t.Errorf("non-internal patch: %d", got.status)
	}
	if got := internal.do("PATCH", "/spaces/"+ids["azure"]+"/status", map[string]any{"status": "inactive"}); got.status != 428 {
		t.Errorf("patch without If-Match: %d", got.status)
	}
	if got := internal.do("PATCH", "/spaces/"+ids["azure"]+"/status", map[string]any{"status": "inactive"}, `If-Match: "7"`); got.status != 412 {
		t.Errorf("patch with a stale ETag: %d", got.status)
	}
	pr := internal.do("PATCH", "/spaces/"+ids["azure"]+"/status", map[string]any{"status": "inactive", "reason": "Maintenance"}, "If-Match: "+etag)
	m := internal.must(200, pr)
	if m["status"] != "inactive" || pr.header.Get("ETag") != `"2"` || m["probe"].(map[string]any)["reason"] != "Maintenance" {
		t.Errorf("patched: %v %v", m, pr.header)
	}
	// The old ETag no longer matches.
	if got := internal.do("PATCH", "/spaces/"+ids["azure"]+"/status", map[string]any{"status": "active"}, "If-Match: "+etag); got.status != 412 {
		t.Errorf("reused ETag: %d", got.status)
	}
	internal.must(200, internal.do("PATCH", "/spaces/"+ids["aws"]+"/status", map[string]any{"status": "active"}, `If-Match: "1"`))

	if got := list("?status=inactive"); !eq(got, want(ids["azure"])) {
		t.Errorf("status filter = %v", got)
	}
	if got := list("?status=active"); !eq(got, want(ids["aws"])) {
		t.Errorf("active filter = %v", got)
	}
	// Pickers: inactive is out of all; synthetic is out of the scaling-aware ones.
	if got := list("?picker=environment"); !eq(got, want(ids["aws"], ids["gcp"], synthetic)) {
		t.Errorf("environment picker = %v", got)
	}
	for _, p := range []string{"autoscaler", "event-readiness"} {
		if got := list("?picker=" + p); !eq(got, want(ids["aws"], ids["gcp"])) {
			t.Errorf("%s picker = %v", p, got)
		}
	}

	// Deregister with a stale ETag fails, with the right one succeeds.
	if got := c.do("DELETE", "/spaces/"+ids["aws"], nil, `If-Match: "1"`); got.status != 412 {
		t.Errorf("delete with stale ETag: %d", got.status)
	}
	c.must(204, c.do("DELETE", "/spaces/"+ids["aws"], nil, `If-Match: "2"`))
	for _, probe := range []resp{c.do("GET", "/spaces/"+ids["aws"], nil), c.do("DELETE", "/spaces/"+ids["aws"], nil),
		internal.do("PATCH", "/spaces/"+ids["aws"]+"/status", map[string]any{"status": "active"}, `If-Match: "3"`)} {
		if probe.status != 404 {
			t.Errorf("deregistered space answered %d: %s", probe.status, probe.body)
		}
	}
	if got := list(""); !eq(got, want(ids["gcp"], ids["azure"], synthetic)) {
		t.Errorf("list after deregistration = %v", got)
	}
	again := c.must(201, c.do("POST", "/spaces", registerBody("aws", accounts["aws"], "prod-aws")))
	if again["id"] == ids["aws"] {
		t.Error("a re-registration must get a new id")
	}

	// An account in use cannot be deleted; an unused one can.
	if got := c.do("DELETE", "/cloud-accounts/"+accounts["gcp"], nil); got.status != 409 {
		t.Errorf("delete of a used account: %d", got.status)
	}
	c.must(204, c.do("DELETE", "/spaces/"+ids["gcp"], nil))
	c.must(204, c.do("DELETE", "/cloud-accounts/"+accounts["gcp"], nil))
	if got := c.do("GET", "/cloud-accounts/"+accounts["gcp"], nil); got.status != 404 {
		t.Errorf("deleted account: %d", got.status)
	}
	accts := c.must(200, c.do("GET", "/cloud-accounts", nil))["items"].([]any)
	if len(accts) != 2 {
		t.Errorf("accounts listed: %d", len(accts))
	}
}

func TestListPagingWithCursors(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	acct := c.account("aws")
	created := map[string]bool{}
	for i := range 23 {
		m := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, fmt.Sprintf("c-%02d", i))))
		created[m["id"].(string)] = true
	}
	seen := map[string]bool{}
	cursor, pages, last := "", 0, ""
	for {
		q := "?limit=5"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		m := c.must(200, c.do("GET", "/spaces"+q, nil))
		pages++
		for _, it := range m["items"].([]any) {
			id := it.(map[string]any)["id"].(string)
			if seen[id] || id <= last {
				t.Fatalf("duplicate or out of order: %s after %s", id, last)
			}
			seen[id], last = true, id
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			break
		}
		if strings.Contains(next, last) {
			t.Fatal("the cursor reveals the key")
		}
		cursor = next
	}
	if len(seen) != 23 || pages != 5 {
		t.Errorf("saw %d spaces in %d pages", len(seen), pages)
	}
	// A cursor is bound to its org and filters.
	first := c.must(200, c.do("GET", "/spaces?limit=5", nil))["next_cursor"].(string)
	if r := c.do("GET", "/spaces?limit=5&provider=aws&cursor="+url.QueryEscape(first), nil); r.status != 400 {
		t.Errorf("cursor reused with other filters: %d", r.status)
	}
	other := newClient(t, st, "globex")
	if r := other.do("GET", "/spaces?limit=5&cursor="+url.QueryEscape(first), nil); r.status != 400 {
		t.Errorf("cursor reused by another org: %d", r.status)
	}
	// Limits above the maximum are clamped.
	if n := len(c.must(200, c.do("GET", "/spaces?limit=1000", nil))["items"].([]any)); n != 23 {
		t.Errorf("clamped limit returned %d", n)
	}
}

// TestOrgIsolation: org B sees nothing of org A, and A's objects are 404 to B.
func TestOrgIsolation(t *testing.T) {
	st := startStack(t)
	a := newClient(t, st, "org-a", "spaces:internal")
	b := newClient(t, st, "org-b", "spaces:internal")
	acct := a.account("aws")
	id := a.must(201, a.do("POST", "/spaces", registerBody("aws", acct, "shared-name")))["id"].(string)

	if n := len(b.must(200, b.do("GET", "/spaces", nil))["items"].([]any)); n != 0 {
		t.Errorf("org b lists %d spaces", n)
	}
	if n := len(b.must(200, b.do("GET", "/cloud-accounts", nil))["items"].([]any)); n != 0 {
		t.Errorf("org b lists %d accounts", n)
	}
	for _, r := range []resp{
		b.do("GET", "/spaces/"+id, nil),
		b.do("PATCH", "/spaces/"+id+"/status", map[string]any{"status": "inactive"}, `If-Match: "1"`),
		b.do("DELETE", "/spaces/"+id, nil),
		b.do("GET", "/cloud-accounts/"+acct, nil),
		b.do("DELETE", "/cloud-accounts/"+acct, nil),
	} {
		if r.status != 404 {
			t.Errorf("org b got %d: %s", r.status, r.body)
		}
	}
	// B cannot register through A's account either.
	if r := b.do("POST", "/spaces", registerBody("aws", acct, "b-cluster")); r.status != 422 || !strings.Contains(string(r.body), "cloud_account_id") {
		t.Errorf("foreign account: %d %s", r.status, r.body)
	}
	// The same cluster may be registered by another org.
	bacct := b.account("aws")
	b.must(201, b.do("POST", "/spaces", registerBody("aws", bacct, "shared-name")))
	// And A's space is untouched.
	if m := a.must(200, a.do("GET", "/spaces/"+id, nil)); m["version"].(float64) != 1 {
		t.Errorf("org a's space changed: %v", m)
	}
}

func TestIdempotentRegistration(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	acct := c.account("gcp")
	body := registerBody("gcp", acct, "idem-cluster")
	first := c.do("POST", "/spaces", body, "Idempotency-Key: reg-42")
	c.must(201, first)
	second := c.do("POST", "/spaces", body, "Idempotency-Key: reg-42")
	c.must(201, second)
	if string(first.body) != string(second.body) || second.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay differs:\n%s\n%s", first.body, second.body)
	}
	before := itemCount(t, st)
	other := registerBody("gcp", acct, "another-cluster")
	if r := c.do("POST", "/spaces", other, "Idempotency-Key: reg-42"); r.status != 422 || !strings.Contains(string(r.body), "Idempotency-Key") {
		t.Errorf("same key, other body: %d %s", r.status, r.body)
	}
	if after := itemCount(t, st); after != before {
		t.Errorf("items %d → %d", before, after)
	}
	if n := len(c.must(200, c.do("GET", "/spaces", nil))["items"].([]any)); n != 1 {
		t.Errorf("%d spaces after replays", n)
	}
}

// TestConcurrentRegistrationOfOneCluster: 50 racing registrations of the same
// cluster give exactly one 201 and 49 409s naming the winner.
func TestConcurrentRegistrationOfOneCluster(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	acct := c.account("aws")
	body := registerBody("aws", acct, "contended")
	var mu sync.Mutex
	codes := map[int]int{}
	var winner string
	var conflicts []string
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.do("POST", "/spaces", body)
			mu.Lock()
			defer mu.Unlock()
			codes[r.status]++
			switch r.status {
			case 201:
				winner = r.json(t)["id"].(string)
			case 409:
				conflicts = append(conflicts, r.json(t)["existing_space_id"].(string))
			}
		}()
	}
	wg.Wait()
	if codes[201] != 1 || codes[409] != 49 {
		t.Fatalf("codes %v", codes)
	}
	for _, id := range conflicts {
		if id != winner {
			t.Fatalf("409 names %s, winner %s", id, winner)
		}
	}
}

// TestDeregistrationRacingStatusUpdates: however the race goes, the space
// ends deregistered and later writes cannot bring it back.
func TestDeregistrationRacingStatusUpdates(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme", "spaces:internal")
	acct := c.account("azure")
	for round := range 5 {
		id := c.must(201, c.do("POST", "/spaces", registerBody("azure", acct, fmt.Sprintf("race-%d", round))))["id"].(string)
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status := []string{"active", "inactive"}[i%2]
				for v := 1; v <= 4; v++ {
					r := c.do("PATCH", "/spaces/"+id+"/status", map[string]any{"status": status}, fmt.Sprintf(`If-Match: "%d"`, v))
					if r.status != 200 && r.status != 412 && r.status != 404 {
						t.Errorf("patch answered %d: %s", r.status, r.body)
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.must(204, c.do("DELETE", "/spaces/"+id, nil))
		}()
		wg.Wait()
		if r := c.do("GET", "/spaces/"+id, nil); r.status != http.StatusNotFound {
			t.Fatalf("round %d: the space came back: %d %s", round, r.status, r.body)
		}
	}
	if n := len(c.must(200, c.do("GET", "/spaces", nil))["items"].([]any)); n != 0 {
		t.Errorf("%d spaces listed after all were deregistered", n)
	}
}
