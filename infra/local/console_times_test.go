package local

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// TestConsoleTimesTick: the "… ago" times move on by themselves, with no
// request, and probe times claim no more than the API's precision (a
// minute: never seconds; a status unknown for want of a probe says since
// when no probe result came, not its stored status's time). The console polls once an hour here, so after its first answers
// nothing is asked; the page's clock (Date.now) is then moved on, and the
// list's and a space page's relative times follow it while the request
// count stays where it was.
func TestConsoleTimesTick(t *testing.T) {
	st := startWith(t, Config{
		Probing:        ProbingConfig{Disabled: true},
		ConsoleRefresh: time.Hour,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := c.account("aws")
	id := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "tick-1")))["id"].(string)
	stale := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "tick-2")))["id"].(string)
	// tick-1 was probed in the minute tick 20 s ago; tick-2's last probe is
	// 10 minutes old, so the API reads it as unknown (ProbeStale), its
	// stored status active since 2 hours.
	store := dynamostore.New(awsclient.DynamoDB(st.AWS, st.EmulatorURL), st.Table)
	probed := func(id string, last, transition time.Duration) {
		t.Helper()
		now := time.Now().UTC()
		at, since := now.Add(-last), now.Add(-transition)
		if _, err := store.UpdateSpace(t.Context(), org, id, space.Update[space.Space]{At: now, Apply: func(sp space.Space) (space.Space, error) {
			sp.Status, sp.Probe.Reason = space.Active, ""
			sp.Probe.LastProbeAt, sp.Probe.LastSuccessAt, sp.Probe.LastTransitionAt = &at, &at, &since
			return sp, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	probed(id, 20*time.Second, time.Hour)
	probed(stale, 10*time.Minute, 2*time.Hour)

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	requests := func() string { return p.eval(`String(window.__spacesStats.requests)`) }
	// shift moves the page's clock on by d from the real one.
	shift := func(d time.Duration) {
		p.eval(fmt.Sprintf(`(() => { window.__realNow = window.__realNow || Date.now.bind(Date); Date.now = () => window.__realNow() + %d; return ''; })()`, d.Milliseconds()))
	}
	ages := func(sel, re string) string {
		return fmt.Sprintf(`(() => { const ts = [...document.querySelectorAll(%q)]; return ts.length > 0 && ts.every(t => /%s/.test(t.textContent)); })()`, sel, re)
	}

	p.signIn(org)
	// The first tick's answers are in, and the accounts (asked after them).
	p.until("the list, settled", `document.querySelectorAll('#spaces-table tbody tr').length === 2 && document.querySelector('#updated').dataset.ticks === '1' &&
		document.querySelectorAll('#f-account option').length === 2`, wait)
	// Probe times to the API's precision (a minute): tick-1's, 20 s after
	// its tick, is under a minute old, never "20 s ago", its title the
	// minute it stands for; tick-2, read as unknown for want of a probe,
	// says since when no probe result came, not its stored status's 2 h.
	row := func(id, sel string) string {
		return fmt.Sprintf(`(document.querySelector('#spaces-table tr[data-space="%s"] %s') || {}).textContent`, id, sel)
	}
	probedCell := `td[data-label="Last probed"] time`
	p.until("tick-1 probed under a minute ago", row(id, probedCell)+` === 'under a minute ago'`, wait)
	if title := p.eval(fmt.Sprintf(`document.querySelector('#spaces-table tr[data-space="%s"] %s').title`, id, probedCell)); !strings.HasPrefix(title, "in the minute from ") {
		t.Errorf("tick-1's last probe is titled %q, want the minute it stands for", title)
	}
	if got := p.eval(row(stale, `[data-since]`)); !regexp.MustCompile(`^no probe result since 1[01] min ago$`).MatchString(got) {
		t.Errorf("the stale space's status cell says %q, want since when no probe result came", got)
	}
	before := requests()
	shift(10 * time.Minute)
	p.until("the list's times 10 minutes on", ages(`#spaces-table td[data-label="Registered"] time`, `^1[0-4] min ago$`), wait)
	p.until("the probe times 10 minutes on", ages(`#spaces-table `+probedCell, `^(1[01]|2[01]) min ago$`), wait)
	shift(3 * time.Hour)
	p.until("the list's times 3 hours on", ages(`#spaces-table td[data-label="Registered"] time, #spaces-table `+probedCell, `^3 h ago$`), wait)
	if after := requests(); after != before {
		t.Errorf("the list sent %s requests while its times moved on, want none (%s before)", after, before)
	}

	// A space's page: its registration time moves on with the clock too.
	shift(0)
	p.visit("the space", "#/spaces/"+id)
	p.until("the space, settled", `!!document.querySelector('#identity time') && !!document.querySelector('#history svg') && !!document.querySelector('#bindings h2') &&
		!document.querySelector('#namespaces .loading')`, wait)
	before = requests()
	shift(2 * 24 * time.Hour)
	p.until("the space's times 2 days on", ages("#identity time", `^2 d ago$`), wait)
	if after := requests(); after != before {
		t.Errorf("the space's page sent %s requests while its times moved on, want none (%s before)", after, before)
	}
	shift(0)
	kv := func(label string) string {
		return fmt.Sprintf(`([...document.querySelectorAll('#probe dt')].find(d => d.textContent === %q) || {nextElementSibling: {}}).nextElementSibling.textContent`, label)
	}
	p.until("the space's probe times to the minute", kv("Last probed")+` === 'under a minute ago' && `+kv("Last success")+` === 'under a minute ago'`, wait)
	p.visit("the stale space", "#/spaces/"+stale)
	p.until("the stale space's probe", `!!document.querySelector('#status-since')`, wait)
	if got := p.eval(`document.querySelector('#status-since').textContent`); !regexp.MustCompile(`^no probe result since 1[01] min ago$`).MatchString(got) {
		t.Errorf("the stale space's page says its status is %q, want since when no probe result came", got)
	}
}

// TestConsoleFlashShiftsNothing: a message that comes and goes (flash: a
// registration done, a secret copied) moves nothing on the page, so a
// click aimed while it disappears lands where it was aimed. It sat above
// the page and went after 8 s, pulling everything up: TestConsoleInBrowser's
// click on a cluster's Register under load hit the row below it.
func TestConsoleFlashShiftsNothing(t *testing.T) {
	st := startWith(t, Config{Probing: ProbingConfig{Disabled: true}, ConsoleRefresh: time.Hour})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	c.must(201, c.do("POST", "/spaces", registerBody("aws", c.account("aws"), "still-1")))
	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	p.signIn(org)
	p.until("the list", `document.querySelectorAll('#spaces-table tbody tr').length === 1`, wait)
	// The flash's own element, filled and emptied as flash() does.
	top := func(fill bool) string {
		return p.eval(fmt.Sprintf(`(() => {
			const f = document.getElementById('flash');
			if (%t) { const d = document.createElement('div'); d.className = 'alert info'; d.textContent = 'still-1 registered: it is probed now.'; f.replaceChildren(d); }
			else f.replaceChildren();
			return String(document.querySelector('#spaces-table tbody tr').getBoundingClientRect().top);
		})()`, fill))
	}
	without, with := top(false), top(true)
	if with != without {
		t.Errorf("the list's first row is at %s px with a message shown and %s px without: a message that goes moves the page", with, without)
	}
	if shown := p.eval(`String(getComputedStyle(document.querySelector('#flash .alert')).display !== 'none' && document.querySelector('#flash').getBoundingClientRect().height > 0)`); shown != "true" {
		t.Errorf("the message is not shown: %s", shown)
	}
}

// TestConsoleHiddenTabAsksNothing: a tab that is hidden (another tab in
// front, a minimised window) sends no request however often its refresh
// timer fires, and asks at once when it is shown again. The refresh is an
// hour here and the test fires the console's refresh timer itself (the
// page hands it each interval it sets), so the counts depend on no clock:
// a fired timer asks when the tab is visible, asks nothing while hidden,
// and showing the tab asks with no timer fired.
func TestConsoleHiddenTabAsksNothing(t *testing.T) {
	st := startWith(t, Config{Probing: ProbingConfig{Disabled: true}, ConsoleRefresh: time.Hour})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := c.account("aws")
	c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "hidden-1")))

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	// Every interval the page sets is kept in window.__timers, so the test
	// can fire the hour-long refresh now.
	const timers = `(() => {
  const every = window.setInterval.bind(window);
  window.__timers = [];
  window.setInterval = (fn, ms, ...a) => { window.__timers.push({ fn, ms }); return every(fn, ms, ...a); };
})()`
	if _, err := chromedp.Call(p.ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: timers}); err != nil {
		t.Fatal(err)
	}
	const wait = time.Minute
	// fire runs the refresh timers n times, lets the tasks they start
	// begin, and answers how many requests that sent.
	fire := func(n int) int {
		v, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](fmt.Sprintf(`(async () => {
  const before = window.__spacesStats.requests;
  for (let i = 0; i < %d; i++) window.__timers.filter(x => x.ms === %d).forEach(x => x.fn());
  for (let i = 0; i < 5; i++) await new Promise(r => setTimeout(r, 0));
  return window.__spacesStats.requests - before;
})()`, n, time.Hour.Milliseconds()), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("fire the refresh: %v", err)
		}
		return v
	}
	visibility := func(hidden bool) {
		p.eval(fmt.Sprintf(`(() => {
  Object.defineProperty(document, 'hidden', { value: %t, configurable: true });
  Object.defineProperty(document, 'visibilityState', { value: %q, configurable: true });
  document.dispatchEvent(new Event('visibilitychange'));
  return '';
})()`, hidden, map[bool]string{true: "hidden", false: "visible"}[hidden]))
	}
	settled := `document.querySelectorAll('#spaces-table tbody tr').length === 1 && window.__spacesStats.recent.every(r => r.status !== 'pending')`

	p.signIn(org)
	p.until("the list, settled", settled, wait)
	if n := fire(1); n == 0 {
		t.Fatalf("a fired refresh of a visible tab sent no request")
	}
	p.until("the visible tick's answers", settled, wait)

	visibility(true)
	before := p.eval(`String(window.__spacesStats.requests)`)
	if n := fire(5); n != 0 {
		t.Errorf("a hidden tab sent %d requests in 5 refreshes, want none", n)
	}
	visibility(false)
	p.until("a request as the tab is shown", fmt.Sprintf(`window.__spacesStats.requests > %s`, before), wait)
	p.until("its answers", settled, wait)
}
