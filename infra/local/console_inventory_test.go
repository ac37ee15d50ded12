package local

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/infra/demo"
	"spaces/shared/space"
)

// TestConsoleInventory: the fleet's inventory in a real browser, on the
// demo's clusters (demo-eks-1 and demo-eks-2 past EKS's support,
// demo-gke-1's certificate expiring within 30 days, GKE's 1.30 and 1.31
// not in its calendar) and a synthetic placeholder (no version). The list
// shows each space's Kubernetes version and the days to its end of
// support ("ended", "unknown"), with badges, in words, for support ending
// and certificates expiring; the fleet view draws the versions from the
// counts it reads already (by_version, version_unknown) as a table; a
// version's bar and the two inventory tiles set the list's filter in the
// URL (version=, support_ends_within_days=60,
// certificate_expires_within_days=30) and the list shows those spaces
// alone; a space's page shows the same facts and badges; an idle list
// still sends one request a tick; at 390 px nothing scrolls sideways. The
// module's own answers for a version still in support (none of the
// demo's is) are checked in the same browser.
func TestConsoleInventory(t *testing.T) {
	st := startWith(t, Config{
		Demo:           &demo.Options{},
		Probing:        ProbingConfig{Interval: 2 * time.Second},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	accounts := map[space.Provider]string{}
	for _, p := range []space.Provider{space.AWS, space.GCP} {
		accounts[p] = c.connect(st.Demo.Cloud, p, demo.Connection(p))
	}
	ids := map[string]string{}
	clusters := []string{"demo-eks-1", "demo-eks-2", "demo-gke-1", "demo-gke-2"}
	for _, name := range clusters {
		spec := specNamed(t, name)
		body := map[string]any{"provider": spec.Provider, "space_type": "kubernetes", "cloud_account_id": accounts[spec.Provider], "config": spec.Config()}
		ids[name] = c.must(201, c.do("POST", "/spaces", body))["id"].(string)
	}
	placeholder := registerBody("aws", accounts[space.AWS], "inv-placeholder")
	placeholder["synthetic"] = true
	ids["inv-placeholder"] = c.must(201, c.do("POST", "/spaces", placeholder))["id"].(string)
	for _, name := range clusters {
		waitActive(t, c, ids[name])
	}
	counts := c.must(200, c.do("GET", "/space-counts", nil))
	if fmt.Sprint(counts["by_version"], counts["version_unknown"]) != "map[1.30:2 1.31:2] 1" {
		t.Fatalf("the counts' versions: %v, unknown %v; want 2 on 1.30, 2 on 1.31, 1 unknown", counts["by_version"], counts["version_unknown"])
	}

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	p.watchIdle()
	const wait = time.Minute
	rows := func(n int) string {
		return fmt.Sprintf(`document.querySelectorAll('#spaces-table tbody tr').length === %d`, n)
	}
	listed := `[...document.querySelectorAll('#spaces-table tbody tr')].map(r => r.dataset.name).sort().join(',')`
	cell := func(name, label string) string {
		return fmt.Sprintf(`document.querySelector('tr[data-name="%s"] td[data-label="%s"]')`, name, label)
	}
	support := func(name string) string {
		return fmt.Sprintf(`document.querySelector('tr[data-name="%s"] td[data-label="Support ends"] [data-support]')`, name)
	}
	p.signIn(org)
	p.until("the list and the counts", rows(5)+` && document.querySelector('[data-count="total"] b').textContent === '5'`, wait)

	// The columns: the version as last known, and the days to the end of
	// support, "ended" past it and "unknown" where the calendar says nothing.
	for name, want := range map[string][2]string{
		"demo-eks-1":      {specNamed(t, "demo-eks-1").GitVersion, "unsupported ended"},
		"demo-eks-2":      {specNamed(t, "demo-eks-2").GitVersion, "unsupported ended"},
		"demo-gke-1":      {specNamed(t, "demo-gke-1").GitVersion, "unknown unknown"},
		"demo-gke-2":      {specNamed(t, "demo-gke-2").GitVersion, "unknown unknown"},
		"inv-placeholder": {"unknown", "unknown unknown"},
	} {
		if got := p.eval(`(` + cell(name, "Kubernetes") + ` || {firstChild: {}}).firstChild.textContent || 'no cell'`); got != want[0] {
			t.Errorf("%s: Kubernetes column %q, want %q", name, got, want[0])
		}
		sup := support(name)
		if got := p.eval(`(s => s ? s.dataset.support + ' ' + s.firstChild.textContent : 'no cell')(` + sup + `)`); got != want[1] {
			t.Errorf("%s: support column %q, want %q", name, got, want[1])
		}
	}
	if got := p.eval(`(` + support("demo-eks-1") + ` || {}).title || ''`); !strings.Contains(got, "2026-11-26") {
		t.Errorf("demo-eks-1's support cell's title %q does not give the day support ended (2026-11-26, eks.json)", got)
	}

	// The badges, in words, with the date in the title and the text.
	badges := func(name string) string {
		return p.eval(`[...document.querySelectorAll('tr[data-name="` + name + `"] [data-badge]')].map(b => b.dataset.badge + ': ' + b.firstChild.textContent).join('; ')`)
	}
	for name, want := range map[string]string{
		"demo-eks-1": "support: support ended", "demo-eks-2": "support: support ended",
		"demo-gke-1": "certificate: certificate expires in 20 days", "demo-gke-2": "", "inv-placeholder": "",
	} {
		if got := badges(name); got != want {
			t.Errorf("%s's badges: %q, want %q", name, got, want)
		}
	}
	gke1 := c.must(200, c.do("GET", "/spaces/"+ids["demo-gke-1"], nil))
	notAfter, err := time.Parse(time.RFC3339, gke1["facts"].(map[string]any)["certificate"].(map[string]any)["not_after"].(string))
	if err != nil {
		t.Fatal(err)
	}
	certBadge := `document.querySelector('tr[data-name="demo-gke-1"] [data-badge="certificate"]')`
	year := strconv.Itoa(notAfter.Year())
	if got := p.eval(`(b => b ? b.title + ' | ' + b.textContent : 'no badge')(` + certBadge + `)`); strings.Count(got, year) != 2 || !strings.Contains(got, "CN=testcluster CA") {
		t.Errorf("the certificate badge's title and text %q do not both give its date (%s) and issuer", got, notAfter)
	}

	// The version distribution, newest first, the unknown ones last.
	if got := p.eval(`[...document.querySelectorAll('#version-chart tbody tr')].map(r => r.dataset.version + '=' + (r.querySelector('.vcount') || {}).textContent).join(' ')`); got != "1.31=2 1.30=2 unknown=1" {
		t.Errorf("the version chart reads %q, want 1.31=2 1.30=2 unknown=1", got)
	}
	p.shot("inventory-01-list")
	p.audit("spaces (inventory)")

	// A version's bar filters the list by it; again, clears it.
	before, _ := proxy.stats()
	p.run("the 1.30 bar", chromedp.Click(chromedp.CSS(`#version-chart tr[data-version="1.30"] a`)))
	p.until("the spaces on 1.30", `location.hash === '#/spaces?version=1.30' && `+listed+` === 'demo-eks-2,demo-gke-2' && document.querySelector('#range').textContent === '1–2 of 2'`, wait)
	p.audit("spaces (one version)")
	p.run("the 1.30 bar again", chromedp.Click(chromedp.CSS(`#version-chart tr[data-version="1.30"] a`)))
	p.until("every space again", `location.hash === '#/spaces' && `+rows(5), wait)

	// The tiles filter by what their badges say.
	p.run("the support tile", chromedp.Click(chromedp.CSS(`[data-count="support-ending"] a`)))
	p.until("the spaces whose support ends", `location.hash === '#/spaces?support_ends_within_days=60' && `+listed+` === 'demo-eks-1,demo-eks-2'`, wait)
	p.run("the support tile again", chromedp.Click(chromedp.CSS(`[data-count="support-ending"] a`)))
	p.until("every space again", `location.hash === '#/spaces' && `+rows(5), wait)
	p.run("the certificate tile", chromedp.Click(chromedp.CSS(`[data-count="certificate-expiring"] a`)))
	certOnly := `location.hash === '#/spaces?certificate_expires_within_days=30' && ` + listed + ` === 'demo-gke-1'`
	p.until("the spaces whose certificate expires", certOnly, wait)
	p.audit("spaces (certificates expiring)")
	// The filter is in the URL: a reload keeps it.
	p.run("reload", chromedp.Reload())
	p.untilAcrossLoads("the certificate filter after a reload", certOnly+` && document.querySelector('[data-count="certificate-expiring"] a').getAttribute('aria-current') === 'true'`, wait)
	after, _ := proxy.stats()
	for _, want := range []string{"version=1.30", "support_ends_within_days=60", "certificate_expires_within_days=30"} {
		found := false
		for _, r := range after[len(before):] {
			found = found || strings.HasPrefix(r, "GET /spaces?") && strings.Contains(r, want)
		}
		if !found {
			t.Errorf("no list request carried %s: %v", want, after[len(before):])
		}
	}
	// The whole-fleet tile clears every filter.
	p.run("the total tile", chromedp.Click(chromedp.CSS(`[data-count="total"] a`)))
	p.until("every space again", `location.hash === '#/spaces' && `+rows(5), wait)

	// Idle, the list still sends one request a tick: the chart and the
	// tiles come from the counts it polls already.
	from, to := p.idleWindow("the idle list", 3)
	if sent, ran := to.Requests-from.Requests, to.Ran-from.Ran; sent != ran {
		t.Errorf("an idle list sent %d requests in %d ticks run, want one a tick", sent, ran)
	}

	// A space's page: the same facts and badges.
	p.visit("demo-gke-1's page", "#/spaces/"+ids["demo-gke-1"])
	p.until("demo-gke-1's facts", `!!document.querySelector('h1 [data-badge="certificate"]') && document.querySelector('#space-certificate').textContent.includes('CN=testcluster CA') && document.querySelector('#probe [data-support]').dataset.support === 'unknown'`, wait)
	p.audit("space (certificate expiring)")
	p.visit("demo-eks-1's page", "#/spaces/"+ids["demo-eks-1"])
	p.until("demo-eks-1's facts", `document.querySelector('h1') && document.querySelector('h1').innerText.includes('demo-eks-1') && !!document.querySelector('h1 [data-badge="support"]') && document.querySelector('#probe [data-support]').dataset.support === 'unsupported' && document.querySelector('#probe').innerText.includes('v1.31.4')`, wait)
	p.shot("inventory-02-space")

	// At a phone's width, the columns are readable without scrolling sideways.
	p.run("phone width", chromedp.EmulateViewport(390, 844))
	for _, screen := range []struct{ name, hash, ready string }{
		{"spaces", "#/spaces", rows(5) + ` && !!document.querySelector('#version-chart')`},
		{"space", "#/spaces/" + ids["demo-eks-1"], `!!document.querySelector('#probe [data-support]') && document.querySelector('h1').innerText.includes('demo-eks-1')`},
	} {
		p.visit(screen.name+" at 390 px", screen.hash)
		p.until(screen.name+" at 390 px", screen.ready, wait)
		// As TestConsoleAtPhoneWidth reads it: no element past the window's
		// width (the scrollbar's excluded), and the page no wider than 390 px.
		if wide := p.eval(`[...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
			.slice(0, 6).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' ' + Math.round(e.getBoundingClientRect().right) + 'px').join(', ')`); wide != "" {
			t.Errorf("%s at 390 px has elements past the window: %s", screen.name, wide)
		}
		if got, _ := strconv.Atoi(p.eval(`String(document.documentElement.scrollWidth)`)); got > 390 {
			p.shot("inventory-phone-wide-" + screen.name)
			t.Errorf("%s is %d px wide at 390 px", screen.name, got)
		}
		if screen.name == "spaces" {
			if got := p.eval(`['Kubernetes', 'Support ends'].map(l => document.querySelector('tr[data-name="demo-eks-1"] td[data-label="' + l + '"]')).map(c => c ? c.getBoundingClientRect() : {})
				.every(r => r.width > 0 && r.height > 0 && r.right <= 390) ? 'shown' : 'hidden'`); got != "shown" {
				t.Errorf("demo-eks-1's version and support cells at 390 px are %s", got)
			}
			p.shot("inventory-03-phone")
		}
	}

	// In dark mode (the system setting) the badges, tiles and bars keep
	// their contrast.
	p.run("dark mode, desktop width", chromedp.EmulateViewport(1280, 900),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return err
		}))
	p.visit("the list in dark mode", "#/spaces")
	p.until("the list in dark mode", rows(5)+` && !!document.querySelector('#version-chart') && getComputedStyle(document.body).backgroundColor === 'rgb(13, 17, 23)'`, wait)
	p.audit("spaces (inventory, dark)")
	p.visit("demo-gke-1's page in dark mode", "#/spaces/"+ids["demo-gke-1"])
	p.until("demo-gke-1's page in dark mode", `!!document.querySelector('h1 [data-badge="certificate"]') && !!document.querySelector('#ns-table')`, wait)
	p.audit("space (certificate expiring, dark)")

	// A version still in support (no demo cluster's is): the days left,
	// a badge within 60 of them, none beyond; a certificate's days
	// rounded up, as the filter counts them.
	day := func(d int) string { return time.Now().UTC().AddDate(0, 0, d).Format("2006-01-02") }
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`import('/console/inventory.js').then(m => {
		const sp = (ends, notAfter) => ({ facts: { kubernetes_version: 'v1.33.1', support: { state: 'supported', standard_ends: ends }, certificate: { not_after: notAfter, issuer: 'CN=x' } } });
		const read = x => m.supportCell(x).firstChild.textContent + ' | ' + [...(m.factBadges(x) || { children: [] }).children].map(b => b.firstChild.textContent).join(', ');
		return [read(sp('`+day(45)+`', '`+at(31*24*time.Hour)+`')), read(sp('`+day(61)+`', '`+at(29*24*time.Hour+time.Hour)+`')),
			read(sp('`+day(60)+`', '`+at(-time.Hour)+`'))].join('\n');
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("import the inventory module: %v", err)
	}
	want := strings.Join([]string{
		"45 days | support ends in 45 days",
		"61 days | certificate expires in 30 days",
		"60 days | support ends in 60 days, certificate expired",
	}, "\n")
	if got != want {
		t.Errorf("the inventory module reads:\n%s\nwant:\n%s", got, want)
	}
}
