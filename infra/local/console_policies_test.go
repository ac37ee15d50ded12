package local

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// TestConsolePolicies: the Autoscaler policies screen (#/policies, in the
// nav) at 390 px: max below min is said beside its field with nothing
// sent; the API's field error (a space turned inactive after the form
// listed it: 422 naming space_id) is shown beside the space; a valid
// policy is created and listed; idle, one request a tick; Delete asks
// once more (Cancel sends nothing), then deletes it at the version listed
// (If-Match) and the list is empty again; no wider than the window, the
// question open or not; axe finds nothing.
func TestConsolePolicies(t *testing.T) {
	st := startWith(t, Config{
		Probing:        ProbingConfig{Disabled: true},
		Revisions:      RevisionsConfig{Disabled: true},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	internal := newClient(t, st, org, "spaces:internal")
	acct := c.account("aws")
	ok := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "policy-cluster")))["id"].(string)
	soon := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "soon-inactive")))["id"].(string)

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	p.watchIdle()
	const wait = time.Minute
	p.run("phone width", chromedp.EmulateViewport(390, 844))
	p.signIn(org)
	p.until("the nav's policies link", `!!document.querySelector('nav a[href="#/policies"]')`, wait)
	p.visit("open the policies", "#/policies")
	p.until("the empty list and the spaces offered", `!!document.querySelector('#policies .empty') && !!document.querySelector('#pol-space option[value="`+ok+`"]') && !!document.querySelector('#pol-space option[value="`+soon+`"]')`, wait)
	posts := func() int {
		requests, _ := proxy.stats()
		n := 0
		for _, r := range requests {
			if strings.HasPrefix(r, "POST /autoscaler-policies ") {
				n++
			}
		}
		return n
	}
	fill := func(space, min, max string) {
		t.Helper()
		p.eval(`(() => { const set = (s, v) => { const e = document.querySelector(s); e.value = v; e.dispatchEvent(new Event('input')); };
			set('#pol-space', '` + space + `'); set('#pol-namespace', 'web'); set('#pol-name', 'api'); set('#pol-min', '` + min + `'); set('#pol-max', '` + max + `'); return ''; })()`)
	}
	submit := func() { p.run("submit", chromedp.Click(chromedp.CSS(`#pol-form button[type=submit]`))) }

	fill(ok, "5", "2")
	submit()
	p.until("max below min said beside max", `!!document.querySelector('#pol-max-err') && document.querySelector('#pol-max-err').textContent.includes('at least min_replicas')`, wait)
	if n := posts(); n != 0 {
		t.Errorf("%d policies posted with max below min", n)
	}

	etag := c.do("GET", "/spaces/"+soon, nil).header.Get("ETag")
	internal.must(200, internal.do("PATCH", "/spaces/"+soon+"/status", map[string]any{"status": "inactive", "reason": "Maintenance"}, "If-Match: "+etag))
	fill(soon, "1", "3")
	submit()
	p.until("the API's error beside the space", `!!document.querySelector('#pol-space-err')`, wait)
	if n := len(c.must(200, c.do("GET", "/autoscaler-policies", nil))["items"].([]any)); n != 0 {
		t.Errorf("%d policies stored after the refusal", n)
	}
	p.audit("policies, a field error")

	fill(ok, "1", "3")
	submit()
	p.until("the policy listed", `document.querySelectorAll('#pol-table tbody tr[data-state="applied"]').length === 1 && document.querySelector('#pol-table').innerText.includes('web/api')`, wait)
	if n := len(c.must(200, c.do("GET", "/autoscaler-policies", nil))["items"].([]any)); n != 1 {
		t.Errorf("%d policies stored, want 1", n)
	}
	from, to := p.idleWindow("policies, idle", 3)
	if sent, ran := to.Requests-from.Requests, to.Ran-from.Ran; sent != ran {
		t.Errorf("policies, idle, sent %d requests in %d ticks run, want one a tick", sent, ran)
	}
	if got, _ := strconv.Atoi(p.eval(`String(document.documentElement.scrollWidth)`)); got > 390 {
		t.Errorf("the policies screen is %d px wide at 390 px", got)
	}
	p.audit("policies")
	p.shot("policies")

	// Delete: asked once more; Cancel sends nothing.
	pol := c.must(200, c.do("GET", "/autoscaler-policies", nil))["items"].([]any)[0].(map[string]any)
	id := pol["id"].(string)
	var mu sync.Mutex
	var ifMatch []string
	proxy.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == "DELETE" {
			mu.Lock()
			ifMatch = append(ifMatch, r.Header.Get("If-Match"))
			mu.Unlock()
		}
		return false
	}
	deletes := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(ifMatch)
	}
	p.run("delete", chromedp.Click(chromedp.CSS(`button[data-delete="`+id+`"]`)))
	p.until("the question", `!!document.querySelector('button[data-delete-confirm="`+id+`"]') && document.activeElement === document.querySelector('button[data-delete-confirm="`+id+`"]')`, wait)
	if got, _ := strconv.Atoi(p.eval(`String(document.documentElement.scrollWidth)`)); got > 390 {
		t.Errorf("the policies screen asking to delete is %d px wide at 390 px", got)
	}
	p.audit("policies, asking to delete")
	p.run("cancel", chromedp.Click(chromedp.CSS(`button[data-delete-cancel="`+id+`"]`)))
	p.until("the Delete button back", `!!document.querySelector('button[data-delete="`+id+`"]') && !document.querySelector('button[data-delete-confirm]')`, wait)
	if n := deletes(); n != 0 {
		t.Errorf("%d deletes sent after Cancel", n)
	}
	p.run("delete", chromedp.Click(chromedp.CSS(`button[data-delete="`+id+`"]`)))
	p.until("the question", `!!document.querySelector('button[data-delete-confirm="`+id+`"]')`, wait)
	p.run("confirm", chromedp.Click(chromedp.CSS(`button[data-delete-confirm="`+id+`"]`)))
	p.until("the list empty again", `!!document.querySelector('#policies .empty') && !document.querySelector('#pol-table')`, wait)
	if n := len(c.must(200, c.do("GET", "/autoscaler-policies", nil))["items"].([]any)); n != 0 {
		t.Errorf("%d policies stored after the delete", n)
	}
	mu.Lock()
	if want := `"` + strconv.Itoa(int(pol["version"].(float64))) + `"`; len(ifMatch) != 1 || ifMatch[0] != want {
		t.Errorf("the deletes' If-Match %q, want one, %s", ifMatch, want)
	}
	mu.Unlock()
	p.audit("policies, deleted")
}
