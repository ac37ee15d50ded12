package local

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// TestConsoleBulkWork: bulk work on the spaces list in a real browser.
// Rows picked by their checkboxes get a label; then every space matching
// the filter (60, over two pages) gets another, one PUT per space with at
// most four out at once (the console's CONCURRENCY): a space relabelled
// meanwhile (412) is read again and merged, not overwritten, and a space
// whose write fails is reported on its row and stays selected. Running the
// action again writes that space alone: the others already hold the label
// and are not sent, so a retry never does anything twice. Removing the
// label empties it everywhere. Deregistering a selection shows the
// cascade summed over it (its spaces' environments and applied policies)
// and each space's result, one deregistered meanwhile reported as already
// deregistered.
func TestConsoleBulkWork(t *testing.T) {
	st := startWith(t, Config{
		Probing:        ProbingConfig{Disabled: true},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := c.account("aws")
	ids := make([]string, 60)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(ids); i += 4 {
				r := c.do("POST", "/spaces", registerBody("aws", acct, fmt.Sprintf("bulk-%03d", i)))
				if r.status != 201 {
					t.Errorf("register bulk-%03d: %d %s", i, r.status, r.body)
					return
				}
				ids[i] = r.json(t)["id"].(string)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, name := range []string{"env-a", "env-b"} {
		c.must(201, c.do("POST", "/environments", map[string]any{"name": name, "space_id": ids[i]}))
	}
	c.must(201, c.do("POST", "/autoscaler-policies", map[string]any{"space_id": ids[0],
		"target": map[string]any{"namespace": "web", "kind": "Deployment", "name": "api"}, "min_replicas": 1, "max_replicas": 3}))

	// The proxy counts the writes and the most out at once; it fails the
	// first label write of ids[10] (503) and, just before the first one of
	// ids[11] goes through, relabels that space as another user would.
	var mu sync.Mutex
	var writes []string
	inflight, most := 0, 0
	failed, edited := false, false
	isWrite := func(r *http.Request) bool {
		return (r.Method == "PUT" && strings.HasSuffix(r.URL.Path, "/labels")) || (r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/spaces/"))
	}
	proxy := newConsoleProxy(t, st, nil)
	proxy.hook = func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == "PUT" && r.URL.Path == "/spaces/"+ids[10]+"/labels" && !failed {
			failed = true
			writes = append(writes, "failed "+r.URL.Path)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"type":"urn:spaces:problem:unavailable","title":"Service Unavailable","status":503,"detail":"the table is briefly unavailable","request_id":"req-bulk-test"}`)
			return true
		}
		if r.Method == "PUT" && r.URL.Path == "/spaces/"+ids[11]+"/labels" && !edited {
			edited = true
			c.must(200, c.do("PUT", "/spaces/"+ids[11]+"/labels", map[string]any{"labels": map[string]string{"other": "1"}}))
		}
		return false
	}
	proxy.around = func(r *http.Request) func() {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/spaces/") {
			writes = append(writes, "read "+r.URL.Path)
		}
		if !isWrite(r) {
			return func() {}
		}
		writes = append(writes, r.Method+" "+r.URL.Path)
		inflight++
		most = max(most, inflight)
		return func() { mu.Lock(); inflight--; mu.Unlock() }
	}
	sinceWrites := func(from int) []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), writes[from:]...)
	}
	writeCount := func() int { mu.Lock(); defer mu.Unlock(); return len(writes) }
	labelled := func(selector string) int {
		items := c.must(200, c.do("GET", "/spaces?limit=100&label_selector="+url.QueryEscape(selector), nil))["items"].([]any)
		return len(items)
	}

	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	rows := func(n int) string {
		return fmt.Sprintf(`document.querySelectorAll('#spaces-table tbody tr').length === %d`, n)
	}
	summary := func(want string) string {
		return `(document.querySelector('#bulk-summary') || {}).textContent && document.querySelector('#bulk-summary').textContent.startsWith(` + fmt.Sprintf("%q", want) + `) && !document.querySelector('#bulk-set').disabled`
	}
	p.signIn(org)
	p.until("the first page", rows(50)+` && document.querySelector('#range').textContent === '1–50 of 60'`, wait)
	if got := p.eval(`document.querySelector('#bulk').hidden ? 'hidden' : 'shown'`); got != "hidden" {
		t.Errorf("the bulk bar is %s with nothing selected", got)
	}

	// Two rows by their checkboxes.
	box := func(id string) string { return fmt.Sprintf(`#spaces-table input[data-select="%s"]`, id) }
	first2 := strings.Split(p.eval(fmt.Sprintf(`[...document.querySelectorAll('#spaces-table tbody tr')].map(r => r.dataset.space).filter(id => id !== %q && id !== %q).slice(0, 2).join(',')`, ids[10], ids[11])), ",")
	p.run("select two rows", chromedp.Click(chromedp.CSS(box(first2[0]))), chromedp.Click(chromedp.CSS(box(first2[1]))))
	p.until("two selected", `document.querySelector('#bulk-count').textContent === '2 selected' && document.querySelector('#select-page').indeterminate`, wait)
	p.run("set tier=gold", chromedp.SendKeys(chromedp.CSS("#bulk-label"), "tier=gold"), chromedp.Click(chromedp.CSS("#bulk-set")))
	p.until("two changed", summary("Labels (set tier=gold): 2 changed, 0 already so"), wait)
	if n := labelled("tier=gold"); n != 2 {
		t.Errorf("%d spaces are labelled tier=gold, want the 2 selected", n)
	}
	p.audit("spaces (bulk work)")

	// Every space matching the filter: the page, then the other 10.
	p.run("clear the selection", chromedp.Click(chromedp.CSS("#bulk-clear")))
	p.until("nothing selected", `document.querySelector('#bulk').hidden`, wait)
	p.run("select the page", chromedp.Click(chromedp.CSS("#select-page")))
	p.until("the page selected", `document.querySelector('#bulk-count').textContent === '50 selected' && document.querySelector('#bulk-all').textContent === 'Select all 60 matching this filter'`, wait)
	p.run("select all matching", chromedp.Click(chromedp.CSS("#bulk-all")))
	p.until("all 60 selected", `document.querySelector('#bulk-count').textContent === '60 selected' && document.querySelector('#bulk-all').hidden`, wait)
	from := writeCount()
	p.run("set fleet=blue", chromedp.SetValue(chromedp.CSS("#bulk-label"), "fleet=blue"), chromedp.Click(chromedp.CSS("#bulk-set")))
	p.until("59 changed, one failed", summary("Labels (set fleet=blue): 59 changed, 0 already so, 0 deregistered meanwhile, 1 failed."), wait)
	p.until("the failed row", fmt.Sprintf(`!!document.querySelector('#bulk-result-table tr[data-result-space="%s"][data-result="failed"]') && document.querySelector('#bulk-result-table tbody tr').dataset.resultSpace === '%s'`, ids[10], ids[10]), wait)
	if got := p.text(fmt.Sprintf(`#bulk-result-table tr[data-result-space="%s"]`, ids[10])); !strings.Contains(got, "req-bulk-test") {
		t.Errorf("the failed row says %q, want its request id", got)
	}
	got := sinceWrites(from)
	puts, reads := 0, 0
	for _, w := range got {
		switch {
		case strings.HasPrefix(w, "PUT "), strings.HasPrefix(w, "failed "):
			puts++
		case strings.HasPrefix(w, "read /spaces/"+ids[11]):
			reads++
		}
	}
	// 60 writes and, for the space relabelled meanwhile, its read and its
	// second write.
	if puts != 61 || reads != 1 {
		t.Errorf("labelling 60 spaces sent %d label writes and read the relabelled space %d times, want 61 and 1: %v", puts, reads, got)
	}
	if n := labelled("fleet=blue"); n != 59 {
		t.Errorf("%d spaces are labelled fleet=blue, want 59", n)
	}
	if l := c.must(200, c.do("GET", "/spaces/"+ids[11], nil))["labels"]; fmt.Sprint(l) != "map[fleet:blue other:1]" {
		t.Errorf("the space relabelled meanwhile holds %v, want both labels", l)
	}
	p.shot("bulk-01-labelled")
	p.audit("spaces (bulk results)")
	// At 390 px the bar and the results fit, and no button breaks a word.
	p.run("phone width", chromedp.EmulateViewport(390, 844))
	if got := p.eval(`(document.documentElement.scrollWidth <= 390 ? 'fits' : 'is ' + document.documentElement.scrollWidth + ' px wide') + ';' + [...document.querySelectorAll('#bulk button')].filter(b => b.offsetParent && b.getBoundingClientRect().height >= 2 * parseFloat(getComputedStyle(b).lineHeight)).map(b => b.textContent).join(',')`); got != "fits;" {
		p.shot("bulk-phone")
		t.Errorf("the bulk bar at 390 px: %q (the page, then any button broken over lines), want it to fit with none", got)
	}
	p.run("desktop width", chromedp.EmulateViewport(1280, 900))

	// Again: only the failed space is written.
	from = writeCount()
	p.run("set fleet=blue again", chromedp.Click(chromedp.CSS("#bulk-set")))
	p.until("one changed, 59 already so", summary("Labels (set fleet=blue): 1 changed, 59 already so, 0 deregistered meanwhile, 0 failed."), wait)
	if got := sinceWrites(from); len(got) != 1 || got[0] != "PUT /spaces/"+ids[10]+"/labels" {
		t.Errorf("running the action again sent %v, want the failed space's write alone", got)
	}
	if n := labelled("fleet=blue"); n != 60 {
		t.Errorf("%d spaces are labelled fleet=blue, want 60", n)
	}

	// A key that is not a label is refused in the page, nothing sent.
	from = writeCount()
	p.run("remove a bad key", chromedp.SetValue(chromedp.CSS("#bulk-label"), "bad key"), chromedp.Click(chromedp.CSS("#bulk-remove")))
	p.until("the key refused", `!!document.querySelector('#bulk-label-err') && document.querySelector('#bulk-label').getAttribute('aria-invalid') === 'true'`, wait)
	p.run("remove fleet", chromedp.SetValue(chromedp.CSS("#bulk-label"), "fleet"), chromedp.Click(chromedp.CSS("#bulk-remove")))
	p.until("60 changed", summary("Labels (remove fleet): 60 changed"), wait)
	if got := sinceWrites(from); len(got) != 60 {
		t.Errorf("removing a label from 60 spaces sent %d requests, want 60", len(got))
	}
	if n := labelled("fleet"); n != 0 {
		t.Errorf("%d spaces still have the label fleet", n)
	}
	mu.Lock()
	if most > 4 || most < 1 {
		t.Errorf("at most %d label writes were out at once, want between 1 and 4", most)
	}
	mu.Unlock()

	// Deregister three: the cascade summed over them, then each result;
	// one is deregistered meanwhile (by another user).
	p.visit("a filter", "#/spaces?q=bulk-00")
	p.until("ten rows, nothing selected", rows(10)+` && document.querySelector('#bulk').hidden`, wait)
	p.run("select three", chromedp.Click(chromedp.CSS(box(ids[0]))), chromedp.Click(chromedp.CSS(box(ids[1]))), chromedp.Click(chromedp.CSS(box(ids[2]))))
	p.until("three selected", `document.querySelector('#bulk-count').textContent === '3 selected'`, wait)
	c.deregister(ids[2])
	p.run("deregister", chromedp.Click(chromedp.CSS("#bulk-deregister")))
	p.until("the summed cascade", `!!document.querySelector('#bulk-dialog[open] #bulk-cascade')`, wait)
	if got := p.eval(`document.querySelector('#bulk-cascade [data-envs]').dataset.envs + ' ' + document.querySelector('#bulk-cascade [data-policies]').dataset.policies + ' ' + ['env-a (on bulk-000)', 'env-b (on bulk-001)'].every(e => document.querySelector('#bulk-cascade').textContent.includes(e))`); got != "2 1 true" {
		t.Errorf("the cascade lists environments, policies, names: %s, want 2 1 true", got)
	}
	p.audit("bulk deregistration")
	p.shot("bulk-02-deregister")
	p.run("confirm", chromedp.Click(chromedp.CSS("#bulk-confirm")))
	p.until("each result", `(document.querySelector('#bulk-summary') || {}).textContent === 'Deregister: 2 deregistered, 1 already deregistered, 0 failed.'`, wait)
	for _, id := range ids[:3] {
		if r := c.do("GET", "/spaces/"+id, nil); r.status != 404 {
			t.Errorf("space %s answers %d after the bulk deregistration, want 404", id, r.status)
		}
	}
	p.until("the rows gone, nothing selected", rows(7)+` && document.querySelector('#bulk-count').textContent === '0 selected'`, wait)
}
