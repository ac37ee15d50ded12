package local

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// TestConsoleFleetView: the spaces list of an org of 120 spaces in a real
// browser. The status tiles come from GET /space-counts in one request (no
// page of the fleet is walked) and filter the list when clicked; the range
// reads "1–50 of 120"; problems come first, the API's sort=problems
// (inactive, newest change first, then unknown, the latest registered
// first whatever their ids); a malformed selector is explained with no
// rows and nothing sent; the registration, status and status-since sorts
// are column headers; a
// filter saved as a named view is one choice away, after a reload too; the search box and the name sort put their state in
// the URL, and a search keeps the view (only its rows change); the page is
// in the URL, so a reload keeps it and Back returns to the page before; an
// idle tab sends one request a tick, conditional, and each is answered 304.
func TestConsoleFleetView(t *testing.T) {
	st := startWith(t, Config{
		Probing:        ProbingConfig{Disabled: true},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	internal := newClient(t, st, org, "spaces:internal")
	acct := c.account("aws")
	ids := make([]string, 120)
	created := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 120; i += 4 {
				name := fmt.Sprintf("alpha-%03d", i)
				if i >= 60 {
					name = fmt.Sprintf("beta-%03d", i)
				}
				r := c.do("POST", "/spaces", registerBody("aws", acct, name))
				if r.status != 201 {
					t.Errorf("register %s: %d %s", name, r.status, r.body)
					return
				}
				m := r.json(t)
				ids[i] = m["id"].(string)
				mu.Lock()
				created[ids[i]] = m["created_at"].(string)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Five inactive, three active, the rest unknown (probing is off).
	for i, id := range ids[:8] {
		to := "inactive"
		if i >= 5 {
			to = "active"
		}
		etag := c.do("GET", "/spaces/"+id, nil).header.Get("ETag")
		internal.must(200, internal.do("PATCH", "/spaces/"+id+"/status", map[string]any{"status": to, "reason": "Maintenance"}, "If-Match: "+etag))
	}

	proxy := newConsoleProxy(t, st, nil)
	seen := &requestLog{}
	proxy.hook = seen.record
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	p.watchIdle()
	const wait = time.Minute
	rows := func(n int) string {
		return fmt.Sprintf(`document.querySelectorAll('#spaces-table tbody tr').length === %d`, n)
	}
	first := `(document.querySelector('#spaces-table tbody tr') || {dataset: {}}).dataset.name`
	p.signIn(org)
	p.until("the first page and the counts", rows(50)+` && document.querySelector('#range').textContent === '1–50 of 120'`, wait)
	for k, want := range map[string]string{"total": "120", "active": "3", "inactive": "5", "unknown": "112"} {
		if got := p.text(fmt.Sprintf(`[data-count="%s"] b`, k)); got != want {
			t.Errorf("tile %s shows %q, want %s", k, got, want)
		}
	}
	reqs, _ := proxy.stats()
	counts, walks := 0, 0
	for _, r := range reqs {
		// The idle tab's poll revalidates the counts (304) once its tick
		// falls due, which a slow machine can reach before this line: the
		// counts themselves are the 200s.
		if strings.HasPrefix(r, "GET /space-counts ") && !strings.HasSuffix(r, " 304") {
			counts++
		}
		if strings.HasPrefix(r, "GET /spaces?") && strings.Contains(r, "limit=100") {
			walks++
		}
	}
	if counts != 1 || walks != 0 {
		t.Errorf("the counts took %d requests to /space-counts and %d pages walked, want 1 and 0: %v", counts, walks, reqs)
	}
	// Problems first: the inactive spaces, the newest status change first
	// (they turned inactive in order), then the unknown ones; the active
	// ones come last, so not on page 1.
	wantFirst := strings.Join([]string{ids[4], ids[3], ids[2], ids[1], ids[0]}, ",")
	if got := p.eval(`[...document.querySelectorAll('#spaces-table tbody tr')].slice(0, 5).map(r => r.dataset.space).join(',')`); got != wantFirst {
		t.Errorf("the first rows are %s, want the inactive spaces newest change first: %s", got, wantFirst)
	}
	if got := p.eval(`[...document.querySelectorAll('#spaces-table tbody tr')].slice(5).map(r => r.querySelector('.badge').dataset.status).filter(s => s !== 'unknown').join(',')`); got != "" {
		t.Errorf("after the inactive spaces, page 1 shows %s, want only unknown ones", got)
	}
	// Then the 45 latest changes among the unknown ones (never changed:
	// their registrations, latest first), whichever page of the fleet
	// they are on: the API's order (sort=problems), not each page's rows
	// sorted in the browser.
	unknown := slices.Clone(ids[8:])
	slices.SortFunc(unknown, func(a, b string) int {
		ta, _ := time.Parse(time.RFC3339Nano, created[a])
		tb, _ := time.Parse(time.RFC3339Nano, created[b])
		if c := tb.Compare(ta); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if got, want := p.eval(`[...document.querySelectorAll('#spaces-table tbody tr')].slice(5).map(r => r.dataset.space).join(',')`), strings.Join(unknown[:45], ","); got != want {
		t.Errorf("after the inactive spaces, page 1 lists\n%s\nwant the latest registered unknown ones, latest first:\n%s", got, want)
	}
	if reqs, _ := proxy.stats(); !slices.ContainsFunc(reqs, func(r string) bool {
		return strings.HasPrefix(r, "GET /spaces?") && strings.Contains(r, "sort=problems")
	}) {
		t.Errorf("the list did not ask the API for sort=problems: %v", reqs)
	}
	p.shot("fleet-01-list")
	p.audit("spaces (fleet)")

	// A malformed label selector is explained at once, with no rows and no
	// request sent.
	before, _ := proxy.stats()
	p.run("a malformed selector", chromedp.SendKeys(chromedp.CSS("#f-labels"), "env in (prod\r"))
	p.until("the selector's error, no rows", `document.querySelector('main [role=alert]') && document.querySelector('main [role=alert]').innerText.includes("has a '(' without its ')'") &&
		!document.querySelector('#spaces-table') && document.querySelector('#range').textContent === '' && document.querySelector('#f-labels').getAttribute('aria-invalid') === 'true'`, wait)
	if p.eval(`document.querySelector('main [role=alert]').innerText.includes('request id') ? 'asks' : ''`) != "" {
		t.Error("the selector's error asks to quote a request id")
	}
	p.audit("spaces (malformed selector)")
	p.visit("clear the selector", "#/spaces")
	p.until("the whole list again", rows(50)+` && !document.querySelector('main [role=alert]')`, wait)
	after, _ := proxy.stats()
	for _, r := range after[len(before):] {
		if strings.Contains(r, "label_selector") {
			t.Errorf("the malformed selector was sent: %s", r)
		}
	}

	// Every order the API offers is a column header.
	oldest := c.must(200, c.do("GET", "/spaces?sort=registered&limit=1", nil))["items"].([]any)[0].(map[string]any)["id"].(string)
	p.run("sort by registration", chromedp.Click(chromedp.CSS(`#sort-registered`)))
	p.until("registration order", `location.hash === '#/spaces?sort=registered' && document.querySelector('#spaces-table tbody tr').dataset.space === '`+oldest+`'`, wait)
	firstStatus := `document.querySelector('#spaces-table tbody tr .badge').dataset.status`
	p.run("sort by status", chromedp.Click(chromedp.CSS(`#sort-status`)))
	p.until("status order", `location.hash === '#/spaces?sort=status' && `+firstStatus+` === 'active'`, wait)
	p.run("sort by status, reversed", chromedp.Click(chromedp.CSS(`#sort-status`)))
	p.until("reverse status order", `location.hash === '#/spaces?sort=-status' && `+firstStatus+` === 'unknown'`, wait)
	p.run("back to problems first", chromedp.Click(chromedp.CSS(`#sort-status`)))
	p.until("problems first", `location.hash === '#/spaces' && document.querySelector('#spaces-table tbody tr').dataset.space === '`+ids[4]+`'`, wait)
	// The status header's second order: when each took its status, the
	// latest change last, then first.
	p.run("sort by status since", chromedp.Click(chromedp.CSS(`#sort-status_since`)))
	p.until("status since order", `location.hash === '#/spaces?sort=status_since' && document.querySelector('#spaces-table tbody tr').dataset.space === '`+unknown[len(unknown)-1]+`' && document.querySelector('#sort-status_since').closest('th').getAttribute('aria-sort') === 'ascending'`, wait)
	p.run("sort by status since, reversed", chromedp.Click(chromedp.CSS(`#sort-status_since`)))
	p.until("latest change first", `location.hash === '#/spaces?sort=-status_since' && document.querySelector('#spaces-table tbody tr').dataset.space === '`+ids[7]+`'`, wait)
	p.run("back to problems first", chromedp.Click(chromedp.CSS(`#sort-status_since`)))
	p.until("problems first again", `location.hash === '#/spaces' && document.querySelector('#spaces-table tbody tr').dataset.space === '`+ids[4]+`'`, wait)

	// A tile filters by its status; clicked again, it clears the filter.
	p.run("click the inactive tile", chromedp.Click(chromedp.CSS(`[data-count="inactive"] a`)))
	p.until("the inactive spaces", rows(5)+` && location.hash === '#/spaces?status=inactive&synthetic=false' && document.querySelector('#range').textContent === '1–5 of 5'`, wait)
	// Saved as a view, it is one choice away, after a reload too.
	p.run("save the view", chromedp.SendKeys(chromedp.CSS("#view-name"), "broken"), chromedp.Click(chromedp.CSS(`#views button[type=submit]`)))
	p.until("the view saved", `!!document.querySelector('#view-pick option[value="broken"]')`, wait)
	p.visit("all spaces", "#/spaces")
	p.until("the whole list", rows(50)+` && location.hash === '#/spaces'`, wait)
	p.run("reload", chromedp.Reload())
	p.untilAcrossLoads("the saved view after a reload", `!!document.querySelector('#view-pick option[value="broken"]')`, wait)
	p.eval(`(() => { const s = document.querySelector('#view-pick'); s.value = 'broken'; s.dispatchEvent(new Event('change')); return ''; })()`)
	p.until("the saved view", rows(5)+` && location.hash === '#/spaces?status=inactive&synthetic=false'`, wait)
	p.run("click it again", chromedp.Click(chromedp.CSS(`[data-count="inactive"] a`)))
	p.until("the whole list again", rows(50)+` && location.hash === '#/spaces'`, wait)

	// The search box: names containing "beta-1", in the URL. The view is
	// kept (the same table, the accounts not asked again): only the rows
	// change. Back leaves the search, not one letter of it.
	before, _ = proxy.stats()
	p.eval(`document.querySelector('#spaces-table').dataset.kept = 'yes'`)
	p.run("search", chromedp.SendKeys(chromedp.CSS("#f-q"), "BETA-1"))
	p.until("the search's rows", rows(20)+` && location.hash === '#/spaces?q=BETA-1' && document.querySelector('#range').textContent === '1–20'`, wait)
	if got := p.eval(`[...document.querySelectorAll('#spaces-table tbody tr')].filter(r => !r.dataset.name.startsWith('beta-1')).map(r => r.dataset.name).join(',')`); got != "" {
		t.Errorf("the search for BETA-1 shows %s", got)
	}
	after, _ = proxy.stats()
	for _, r := range after[len(before):] {
		if strings.HasPrefix(r, "GET /cloud-accounts") {
			t.Errorf("the search asked the accounts again: %s", r)
		}
	}
	if got := p.eval(`document.querySelector('#spaces-table').dataset.kept || 'redrawn'`); got != "yes" {
		t.Errorf("the search drew the screen afresh (table %s), want only its rows", got)
	}
	p.run("back", chromedp.NavigateBack())
	p.until("the list before the search", rows(50)+` && location.hash === '#/spaces' && document.querySelector('#f-q').value === ''`, wait)
	p.run("forward", chromedp.NavigateForward())
	p.until("the search again", rows(20)+` && location.hash === '#/spaces?q=BETA-1' && document.querySelector('#f-q').value === 'BETA-1'`, wait)
	p.visit("clear the search", "#/spaces")
	p.until("the whole list again", rows(50)+` && document.querySelector('#f-q').value === ''`, wait)

	// Sort by name, then the other way.
	p.run("sort by name", chromedp.Click(chromedp.CSS(`#sort-name`)))
	p.until("name order", first+` === 'alpha-000' && location.hash === '#/spaces?sort=name'`, wait)
	p.run("sort by name, Z to A", chromedp.Click(chromedp.CSS(`#sort-name`)))
	p.until("reverse name order", first+` === 'beta-119' && location.hash === '#/spaces?sort=-name'`, wait)

	// Page 2 is in the URL: Back returns to page 1, and a reload keeps page 2.
	p.run("next page", chromedp.Click(chromedp.CSS(`#next`)))
	page2 := first + ` === 'beta-069' && document.querySelector('#range').textContent === '51–100 of 120' && location.hash.includes('page=2')`
	p.until("page 2", page2, wait)
	p.run("back", chromedp.NavigateBack())
	p.until("page 1 after Back", first+` === 'beta-119' && document.querySelector('#range').textContent === '1–50 of 120'`, wait)
	p.run("forward", chromedp.NavigateForward())
	p.until("page 2 again", page2, wait)
	p.run("reload", chromedp.Reload())
	p.untilAcrossLoads("page 2 after the reload", page2, wait) // the reload may still be replacing the page
	p.shot("fleet-02-sorted")
	p.audit("spaces (sorted)")

	// Idle: each tick that runs sends one request, the page and the counts
	// in turn, each a GET with the ETag of the answer before (If-None-Match),
	// and each answered 304, nothing having changed. How many a minute that
	// makes is BenchmarkConsoleIdleRequests's figure.
	from := p.settled("the idle list")
	idleFrom := seen.len()
	// A tick that starts after idleFrom was read, so the proxy sees some.
	now := p.quiet("the idle list", 0)
	to := p.quiet("the idle list, 4 more ticks run", max(from.Ran+4, now.Ran+1))
	sent, ran := to.Requests-from.Requests, to.Ran-from.Ran
	if sent != ran || to.NotModified-from.NotModified != sent || ran > to.Ticks-from.Ticks {
		t.Errorf("an idle list sent %d requests in %d ticks run (%d ticks), %d of them answered 304; want one a tick run, every one a 304", sent, ran, to.Ticks-from.Ticks, to.NotModified-from.NotModified)
	}
	polls := seen.since(idleFrom)
	if len(polls) == 0 {
		t.Error("the proxy saw no request of the idle list")
	}
	for _, r := range polls {
		if !r.conditional || r.method != "GET" || !(strings.HasPrefix(r.uri, "/spaces?") || r.uri == "/space-counts") {
			t.Errorf("the idle list sent %s %s (If-None-Match: %t), want only conditional GETs of its page and the counts", r.method, r.uri, r.conditional)
		}
	}
}

// requestLog is a consoleProxy hook that keeps every API request's method,
// URI and whether it was conditional (If-None-Match), and lets it through.
type requestLog struct {
	mu   sync.Mutex
	reqs []loggedRequest
}

type loggedRequest struct {
	method, uri string
	conditional bool
}

func (l *requestLog) record(_ http.ResponseWriter, r *http.Request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, loggedRequest{r.Method, r.URL.RequestURI(), r.Header.Get("If-None-Match") != ""})
	return false
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *requestLog) since(i int) []loggedRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedRequest(nil), l.reqs[i:]...)
}
