package local

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestConsoleTimesTick: the "… ago" times move on by themselves, with no
// request. The console polls once an hour here, so after its first answers
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
	c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "tick-2")))

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
	before := requests()
	shift(10 * time.Minute)
	p.until("the list's times 10 minutes on", ages("#spaces-table time", `^1[0-4] min ago$`), wait)
	shift(3 * time.Hour)
	p.until("the list's times 3 hours on", ages("#spaces-table time", `^3 h ago$`), wait)
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
