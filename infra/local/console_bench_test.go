package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/shared/space"
)

// benchTeams are the seeded spaces' team labels: one space in 20 each.
var benchTeams = []string{"payments", "billing", "checkout", "search", "ledger", "identity", "catalog", "orders",
	"shipping", "inventory", "pricing", "reviews", "profile", "gateway", "metrics", "logging", "alerts", "mailer",
	"reports", "archive"}

// BenchmarkConsoleList: the spaces list of an org with 1,000 spaces
// (CONSOLE_SPACES sets another size), in headless chromium against the
// local stack. Each op loads the page afresh (signed in) and waits until
// its first page of 50 rows and the fleet's counts are on screen:
// ms/first-page is that time with the browser's cache disabled (a first
// visit), ms/first-page-cached a second load with it (a reload), and
// count-requests/load how many requests the counts took. ms/search is a
// search typed in the box (a name shared by ten spaces) until its rows are
// shown; of which, in the page, ms/search-keys is from the first keystroke
// to the last, ms/search-after-typing from the last one to the rows, and
// ms/search-request the search's own request.
// ms/selector-page opens the list with a label selector one space in 20
// matches (team=payments) from its URL, in the default order, until its
// first page is on screen, and ms/selector-request is that request.
// Then one refresh of the unchanged list is watched: requests/refresh and
// 304s/refresh count what it sent.
func BenchmarkConsoleList(b *testing.B) {
	size := 1000
	if v := os.Getenv("CONSOLE_SPACES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			b.Fatalf("CONSOLE_SPACES=%q: want a number of spaces, at least 100", v)
		}
		size = n
	}
	prefix := fmt.Sprintf("b%s-", uuid.NewString()[:8])
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: b.TempDir(),
		Log:     slog.New(slog.DiscardHandler),
		Names:   func(id string) string { return prefix + id },
		Probing: ProbingConfig{Disabled: true},
		// The stream's consumers would spend the measured minutes catching
		// up with the seeded registrations' records.
		Webhooks: WebhooksConfig{Disabled: true},
		Cascade:  CascadeConfig{Disabled: true},
		// Long enough that a refresh never lands inside a measured load.
		ConsoleRefresh: 3 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	org := "org-" + uuid.NewString()[:8]
	c := newClient(b, st, org)
	acct := c.account("aws")
	// Registered through the stack's own service (the registration's
	// transaction, counters and word entries, without HTTP): 100,000
	// requests through the API take too long on a small machine, and the
	// registrations are not what is measured.
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < size; i += 16 {
				name := fmt.Sprintf("bench-%05d", i)
				_, _, err := st.Service.Register(b.Context(), org, space.RegisterInput{Name: name, Provider: space.AWS,
					SpaceType: space.TypeKubernetes, CloudAccountID: acct, Config: space.Config(configFor("aws", name)),
					Labels: space.Labels{"team": benchTeams[i%len(benchTeams)]}}, "")
				if err != nil {
					b.Errorf("register %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}

	// The emulator runs in this process, so the seeding leaves its items
	// in this heap: about 6 GB at 100,000 spaces, whose collection takes a
	// minute of this machine's two cores. One under way when the loads
	// begin would be measured as the console's time, though no part of
	// the deployed API holds the table; so it is finished first, and
	// gc-cycles/op shows that none ran during the loads (the loads
	// themselves allocate far less than the heap it takes to start one).
	runtime.GC()

	// Straight to the stack: the checking proxy of the tests would measure
	// the validator, not the console.
	ctx := browser(b)
	base := st.APIURL
	rows := fmt.Sprintf(`document.querySelectorAll('#spaces-table tbody tr').length === 50 && document.querySelector('[data-count="total"] b').textContent === '%d'`, size)
	err = chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.Poll[chromedp.Void](`!!document.querySelector('#org-input')`),
		chromedp.SetValue(chromedp.CSS("#org-input"), org), chromedp.Click(chromedp.CSS(`form button[type=submit]`)),
		chromedp.Poll[chromedp.Void](rows))
	if err != nil {
		b.Fatal(err)
	}

	var cold, cached, searching, selecting time.Duration
	var selectorTime float64
	n, countRequests := 0, 0
	var apiTime, filesTime, searchTime, afterTyping, keys float64
	// load opens the list afresh, signed in, until its first page and the
	// counts are on screen; without the cache, as a first visit does.
	load := func(cache bool, tag string) time.Duration {
		if _, err := chromedp.Call(ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: !cache}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?load="+strconv.Itoa(n)+tag+"#/spaces"), chromedp.Poll[chromedp.Void](rows, chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// A name ten spaces share: bench-0000x at any size.
	found := `document.querySelectorAll('#spaces-table tbody tr').length === 10 && location.hash === '#/spaces?q=bench-0000'`
	gcCycles := func() uint64 {
		m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(m)
		return m[0].Value.Uint64()
	}
	gc0 := gcCycles()
	// CONSOLE_CPUPROFILE=<file>: a CPU profile of the measured loads
	// alone; -test.cpuprofile's is mostly the seeding.
	if f := os.Getenv("CONSOLE_CPUPROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	for b.Loop() {
		cold += load(false, "")
		c, err := chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType('resource').filter(e => new URL(e.name).pathname === '/space-counts' || (new URL(e.name).pathname === '/spaces' && e.name.includes('limit=100'))).length`))
		if err != nil {
			b.Fatal(err)
		}
		countRequests += c
		// Where the time went: the list page's request, and the page's own
		// files (stylesheet and script; the page itself is before them).
		parts, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => {
			const rs = performance.getEntriesByType('resource');
			const page = rs.find(e => new URL(e.name).pathname === '/spaces' && e.name.includes('limit=50'));
			const files = rs.filter(e => new URL(e.name).pathname.startsWith('/console/')).reduce((m, e) => Math.max(m, e.responseEnd), 0);
			return [page ? page.duration : -1, files];
		})()`))
		if err != nil {
			b.Fatal(err)
		}
		apiTime += parts[0]
		filesTime += parts[1]
		// Again with what the first visit left in the cache, as a reload.
		cached += load(true, "-cached")
		// The search box asks 40 ms after the last keystroke: the ten
		// keystrokes, as chromedp sends them, and that pause are part of
		// the figure.
		// In the page: when the first and the last keystroke arrived, and
		// when the rows the last one asked for were drawn.
		watch := `window.__search = {}; document.querySelector('#f-q').addEventListener('input', () => { __search.first = __search.first || performance.now(); __search.key = performance.now(); });
			new MutationObserver(() => { if (!__search.shown && (` + found + `)) __search.shown = performance.now(); }).observe(document.querySelector('main'), {childList: true, subtree: true}); true`
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](watch)); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#f-q"), "bench-0000"), chromedp.Poll[chromedp.Void](found, chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
			state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + ' box=' + document.querySelector('#f-q').value + ' rows=' + document.querySelectorAll('#spaces-table tbody tr').length + ' ' + document.querySelector('main').innerText.slice(0, 400)`))
			b.Fatalf("the search's rows: %v\n%s", err, state)
		}
		searching += time.Since(start)
		// Of which: from the last keystroke to its rows, in the page, and the
		// search's own request (the last one, for the whole text).
		d, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[__search.shown - __search.key, __search.key - __search.first, performance.getEntriesByType('resource').filter(e => e.name.includes('name_contains=bench-0000&')).map(e => e.duration).pop() || -1]`))
		if err != nil {
			b.Fatal(err)
		}
		afterTyping += d[0]
		keys += d[1]
		searchTime += d[2]
		// A label selector one space in 20 matches, in the list's default
		// order (problems first), opened from its URL as a shared link.
		start = time.Now()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?sel="+strconv.Itoa(n)+"#/spaces?labels=team%3Dpayments"),
			chromedp.Poll[chromedp.Void](`document.querySelectorAll('#spaces-table tbody tr').length === 50 && document.querySelector('#f-labels').value === 'team=payments'`, chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
			b.Fatalf("the selector's first page: %v", err)
		}
		selecting += time.Since(start)
		sel, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.getEntriesByType('resource').filter(e => e.name.includes('label_selector=team')).map(e => e.duration).pop() || -1`))
		if err != nil {
			b.Fatal(err)
		}
		selectorTime += sel
		n++
	}
	pprof.StopCPUProfile() // before the refresh below, unmeasured
	b.ReportMetric(float64(gcCycles()-gc0)/float64(n), "gc-cycles/op")
	b.ReportMetric(float64(selecting.Microseconds())/1000/float64(n), "ms/selector-page")
	b.ReportMetric(selectorTime/float64(n), "ms/selector-request")
	b.ReportMetric(float64(cold.Microseconds())/1000/float64(n), "ms/first-page")
	b.ReportMetric(float64(cached.Microseconds())/1000/float64(n), "ms/first-page-cached")
	b.ReportMetric(float64(countRequests)/float64(n), "count-requests/load")
	b.ReportMetric(apiTime/float64(n), "ms/list-request")
	b.ReportMetric(filesTime/float64(n), "ms/console-files")
	b.ReportMetric(float64(searching.Microseconds())/1000/float64(n), "ms/search")
	b.ReportMetric(keys/float64(n), "ms/search-keys")
	b.ReportMetric(afterTyping/float64(n), "ms/search-after-typing")
	b.ReportMetric(searchTime/float64(n), "ms/search-request")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?idle#/spaces"), chromedp.Poll[chromedp.Void](rows)); err != nil {
		b.Fatal(err)
	}

	// One refresh of the unchanged list: wait for the second tick's answer.
	stats := func() (int, int) {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[window.__spacesStats.requests, window.__spacesStats.notModified]`))
		if err != nil {
			b.Fatal(err)
		}
		return v[0], v[1]
	}
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.querySelector('#updated').textContent !== ''`)); err != nil {
		b.Fatal(err)
	}
	req0, nm0 := stats()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`window.__spacesStats.notModified > %d`, nm0), chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		req, nm := stats()
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText.slice(0, 600)`))
		b.Fatalf("no 304 within 30 s (requests %d -> %d, 304s %d -> %d): %v\n%s", req0, req, nm0, nm, err, text)
	}
	time.Sleep(500 * time.Millisecond) // anything else the tick sent
	req1, nm1 := stats()
	b.ReportMetric(float64(req1-req0), "requests/refresh")
	b.ReportMetric(float64(nm1-nm0), "304s/refresh")
}

// BenchmarkConsoleIdleRequests: what an idle tab costs the API on each
// screen that polls, in headless chromium against the local stack at the
// console's default refresh (10 s). Each op is one refresh tick that ran,
// read through the page's own counters once nothing is out (page.quiet);
// requests/tick and 304s/tick count what the ticks sent and how many came
// back 304, and requests/min and ticks/min divide by the wall time they
// took: the figure a test cannot hold (a busy machine ticks late),
// BENCHMARKS.md can. -benchtime 6x is a minute a screen.
func BenchmarkConsoleIdleRequests(b *testing.B) {
	prefix := fmt.Sprintf("b%s-", uuid.NewString()[:8])
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: b.TempDir(),
		Log:     slog.New(slog.DiscardHandler),
		Names:   func(id string) string { return prefix + id },
		Probing: ProbingConfig{Disabled: true},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	org := "org-" + uuid.NewString()[:8]
	c := newClient(b, st, org)
	acct := c.account("aws")
	var space string
	for i := range 60 {
		r := c.do("POST", "/spaces", registerBody("aws", acct, fmt.Sprintf("idle-%03d", i)))
		if r.status != 201 {
			b.Fatalf("register %d: %d %s", i, r.status, r.body)
		}
		space = r.json(b)["id"].(string)
	}
	env := c.must(201, c.do("POST", "/environments", map[string]any{"name": "idle-env", "space_id": space}))["id"].(string)
	// An endpoint for an event nothing here sends, so its log stays still.
	hook := c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{"url": "http://127.0.0.1:9/hooks", "event_types": []string{"provisioning_job.failed"}}))["id"].(string)

	// Straight to the stack: the checking proxy of the tests would add its
	// own time to each tick.
	p := &page{t: b, ctx: browser(b), base: st.APIURL, shots: b.TempDir()}
	p.watchIdle()
	p.signIn(org)
	p.until("the first page", `document.querySelectorAll('#spaces-table tbody tr').length === 50`, time.Minute)
	for _, screen := range []struct{ name, hash string }{
		{"spaces", "#/spaces"},
		{"space", "#/spaces/" + space},
		{"environments", "#/environments"},
		{"environment", "#/environments/" + env},
		{"jobs", "#/jobs"},
		{"activity", "#/activity"},
		{"integrations", "#/integrations"},
		{"integration", "#/integrations/" + hook},
	} {
		b.Run(screen.name, func(b *testing.B) {
			p.t = b
			p.visit(screen.name, screen.hash)
			from := p.settled("the idle " + screen.name)
			to := from
			start := time.Now()
			for b.Loop() {
				to = p.quiet("the idle "+screen.name+", one more tick run", to.Ran+1)
			}
			elapsed := time.Since(start)
			ran := float64(to.Ran - from.Ran)
			b.ReportMetric(float64(to.Requests-from.Requests)/ran, "requests/tick")
			b.ReportMetric(float64(to.NotModified-from.NotModified)/ran, "304s/tick")
			b.ReportMetric(float64(to.Requests-from.Requests)/elapsed.Minutes(), "requests/min")
			b.ReportMetric(ran/elapsed.Minutes(), "ticks/min")
		})
	}
}
