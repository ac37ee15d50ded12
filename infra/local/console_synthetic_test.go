package local

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// TestConsoleSyntheticApart: the synthetic placeholders stand apart from
// the clusters. GET /space-counts counts them by status (a registration, a
// transition and a deregistration of synthetic spaces followed); the list's
// status tiles count the clusters alone and a tile of their own counts the
// placeholders, each tile filtering by what it counts; problems first
// lists every cluster (the inactive one first) before any placeholder,
// an inactive placeholder included; and the environment picker offers the
// clusters although 24 placeholders come before them in name order.
func TestConsoleSyntheticApart(t *testing.T) {
	st := startWith(t, Config{
		Probing:        ProbingConfig{Disabled: true},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	internal := newClient(t, st, org, "spaces:internal")
	acct := c.account("aws")
	var clusters, placeholders []string
	for i := range 3 {
		clusters = append(clusters, c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, fmt.Sprintf("zz-cluster-%d", i))))["id"].(string))
	}
	for i := range 25 {
		body := registerBody("aws", acct, fmt.Sprintf("aa-placeholder-%02d", i))
		body["synthetic"] = true
		placeholders = append(placeholders, c.must(201, c.do("POST", "/spaces", body))["id"].(string))
	}
	setStatus := func(id, to string) {
		etag := c.do("GET", "/spaces/"+id, nil).header.Get("ETag")
		internal.must(200, internal.do("PATCH", "/spaces/"+id+"/status", map[string]any{"status": to, "reason": "Maintenance"}, "If-Match: "+etag))
	}
	setStatus(clusters[0], "inactive")
	setStatus(placeholders[0], "inactive")
	c.deregister(placeholders[1])
	counts := c.must(200, c.do("GET", "/space-counts", nil))
	want := map[string]any{"total": 24.0, "by_status": map[string]any{"active": 0.0, "inactive": 1.0, "unknown": 23.0}}
	if got := counts["synthetic"]; !reflect.DeepEqual(got, want) {
		t.Errorf("the counts' synthetic spaces: %v, want %v", got, want)
	}
	if got := counts["by_status"]; !reflect.DeepEqual(got, map[string]any{"active": 0.0, "inactive": 2.0, "unknown": 25.0}) {
		t.Errorf("the counts by status: %v, want 2 inactive, 25 unknown", got)
	}

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	rows := func(n int) string {
		return fmt.Sprintf(`document.querySelectorAll('#spaces-table tbody tr').length === %d`, n)
	}
	tile := func(k string) string {
		return fmt.Sprintf(`document.querySelector('[data-count="%s"] b').textContent`, k)
	}
	p.signIn(org)
	p.until("the list and its tiles", rows(27)+` && `+tile("synthetic")+` === '24' && `+tile("unknown")+` === '2' && `+tile("inactive")+` === '1' && `+tile("active")+` === '0' && `+tile("total")+` === '27'`, wait)
	// Problems first: the clusters (inactive, then unknown), then every
	// placeholder, the inactive one too.
	order := p.eval(`[...document.querySelectorAll('#spaces-table tbody tr')].map(r => r.dataset.name).join(',')`)
	if got := p.eval(`[...document.querySelectorAll('#spaces-table tbody tr')].slice(0, 3).map(r => r.dataset.space).join(',')`); got[:36] != clusters[0] ||
		p.eval(`[...document.querySelectorAll('#spaces-table tbody tr')].slice(3).every(r => r.dataset.name.startsWith('aa-placeholder-')) ? 'apart' : 'mixed'`) != "apart" {
		t.Errorf("problems first lists %s, want zz-cluster-0 first, the other clusters next, the placeholders after them", order)
	}
	p.audit("spaces (synthetic apart)")
	p.shot("synthetic-01-tiles")

	p.run("the synthetic tile", chromedp.Click(chromedp.CSS(`[data-count="synthetic"] a`)))
	p.until("the placeholders alone", rows(24)+` && location.hash === '#/spaces?synthetic=true' && document.querySelector('#range').textContent === '1–24 of 24'`, wait)
	p.run("the unknown tile", chromedp.Click(chromedp.CSS(`[data-count="unknown"] a`)))
	p.until("the unknown clusters alone", rows(2)+` && location.hash === '#/spaces?status=unknown&synthetic=false' && document.querySelector('#range').textContent === '1–2 of 2'`, wait)
	p.run("the unknown tile again", chromedp.Click(chromedp.CSS(`[data-count="unknown"] a`)))
	p.until("every space", rows(27)+` && location.hash === '#/spaces'`, wait)

	// The environment picker offers the two unknown clusters (the inactive
	// one is left out by the API), never a placeholder.
	p.visit("the environments", "#/environments")
	p.until("the picker's choices", `[...document.querySelectorAll('#env-space option')].filter(o => o.value).length === 2`, wait)
	if got := p.eval(`[...document.querySelectorAll('#env-space option')].filter(o => o.value).map(o => o.textContent.split(' · ')[0]).sort().join(',')`); got != "zz-cluster-1,zz-cluster-2" {
		t.Errorf("the environment picker offers %s, want zz-cluster-1,zz-cluster-2", got)
	}
}
