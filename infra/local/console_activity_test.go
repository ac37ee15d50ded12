package local

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// TestConsoleActivity: the activity screen in a real browser. Spaces
// registered, relabelled and deregistered through the API appear on it,
// newest first, with their actor, kind, space (linked to its page) and the
// request id the API answered; the kind and space filters are sent to the
// API (the proxy sees them), not applied in the page; an idle tab asks
// the first page with If-None-Match and gets 304s; a new entry goes above
// the rows without redrawing them, so a text selection in them stays,
// and so does one recorded late with an older time (on top) or stored
// below the top row by a race (in its place);
// "Load more" walks the API's cursor to the same entries, in the same
// order, as the API lists.
func TestConsoleActivity(t *testing.T) {
	st := startWith(t, Config{
		Probing:        ProbingConfig{Disabled: true},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := c.account("aws")
	reg := func(name string) (string, string) {
		r := c.do("POST", "/spaces", registerBody("aws", acct, name))
		return c.must(201, r)["id"].(string), r.header.Get("X-Request-Id")
	}
	a, regA := reg("act-a")
	b, _ := reg("act-b")
	relabel := func(labels map[string]string) string {
		r := c.do("PUT", "/spaces/"+a+"/labels", map[string]any{"labels": labels})
		c.must(200, r)
		return r.header.Get("X-Request-Id")
	}
	relA := relabel(map[string]string{"env": "prod"})
	c.deregister(b)
	if regA == "" || relA == "" {
		t.Fatalf("the API answered no X-Request-Id (%q, %q)", regA, relA)
	}

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	p.watchIdle()
	const wait = time.Minute
	p.signIn(org)
	p.until("the spaces list", `!!document.querySelector('#spaces-table, .empty')`, wait)
	p.run("open the activity", chromedp.Click(chromedp.CSS(`nav a[href="#/activity"]`)))
	kinds := `[...document.querySelectorAll('#activity-table tbody tr')].map(r => r.dataset.kind).join(',')`
	// Newest first: the deregistration, the relabel, the two registrations,
	// then the account's entries.
	p.until("the four space entries", kinds+`.startsWith('space.deregistered,space.relabeled,space.registered,space.registered,')`, wait)
	if got := p.eval(`document.querySelector('nav a[href="#/activity"]').getAttribute('aria-current') || ''`); got != "page" {
		t.Errorf("the navigation's Activity link is not marked current (%q)", got)
	}
	rowOf := func(kind, space string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('#activity-table tbody tr[data-kind=%q]')].find(r => r.querySelector('[data-space-link=%q]'))`, kind, space)
	}
	cell := func(kind, space, label string) string {
		return p.eval(fmt.Sprintf(`((%s || {querySelector: () => null}).querySelector('td[data-label=%q]') || {}).textContent || ''`, rowOf(kind, space), label))
	}
	if got := cell("space.registered", a, "Request id"); got != regA {
		t.Errorf("act-a's registration shows request id %q, want the API's %q", got, regA)
	}
	if got := cell("space.relabeled", a, "Request id"); got != relA {
		t.Errorf("act-a's relabel shows request id %q, want the API's %q", got, relA)
	}
	if got := cell("space.relabeled", a, "Who"); got != "test" {
		t.Errorf("the relabel's actor reads %q, want the token's subject test", got)
	}
	if got := cell("space.relabeled", a, "What"); !strings.Contains(got, "relabelled a space") || !strings.Contains(got, "env=prod") {
		t.Errorf("the relabel reads %q, want what it did and the labels after it", got)
	}
	if got := cell("space.deregistered", b, "Space"); !strings.HasPrefix(got, "act-b") {
		t.Errorf("the deregistration's space reads %q, want act-b", got)
	}
	if got := p.eval(fmt.Sprintf(`%s.querySelector('[data-space-link]').getAttribute('href')`, rowOf("space.registered", a))); got != "#/spaces/"+a {
		t.Errorf("act-a's registration links to %q, want its page", got)
	}
	p.shot("activity-01-list")
	p.audit("activity")

	// The filters go to the API: the kind…
	sentSince := func(from int, want string) bool {
		reqs, _ := proxy.stats()
		for _, r := range reqs[from:] {
			if strings.HasPrefix(r, "GET /activity?") && strings.Contains(r, want) {
				return true
			}
		}
		return false
	}
	from := len(apiRequests(proxy))
	p.eval(`(() => { const s = document.querySelector('#a-kind'); s.value = 'space.relabeled'; s.dispatchEvent(new Event('change')); return ''; })()`)
	p.until("only the relabel", kinds+` === 'space.relabeled' && location.hash === '#/activity?kind=space.relabeled'`, wait)
	if !sentSince(from, "kind=space.relabeled") {
		t.Errorf("the kind filter was not sent to the API: %v", apiRequests(proxy)[from:])
	}
	// … and the space, from a row's "only this" link (the kind kept), then alone.
	from = len(apiRequests(proxy))
	p.run("only act-a", chromedp.Click(chromedp.CSS(`#activity-table tbody tr td[data-label="Space"] .reason a`)))
	p.until("act-a's relabel", kinds+` === 'space.relabeled' && location.hash.includes('space=`+a+`')`, wait)
	p.visit("act-b's activity", "#/activity?space="+b)
	p.until("act-b's two entries", kinds+` === 'space.deregistered,space.registered' && document.querySelector('#a-space').value === '`+b+`' && document.querySelector('#a-kind').value === ''`, wait)
	if !sentSince(from, "space_id="+b) || !sentSince(from, "space_id="+a) {
		t.Errorf("the space filter was not sent to the API: %v", apiRequests(proxy)[from:])
	}
	// A space id the API would refuse is said at once, and not sent.
	from = len(apiRequests(proxy))
	p.visit("a malformed space id", "#/activity?space=not-a-uuid")
	p.until("the filter's error", `document.querySelector('main [role=alert]') && document.querySelector('main [role=alert]').textContent.includes('must be a space id') && !document.querySelector('#activity-table tbody tr')`, wait)
	if sentSince(from, "space_id=not-a-uuid") {
		t.Errorf("the console sent a malformed space id to the API")
	}

	// Idle, unfiltered: each tick asks the first page with its ETag, 304.
	p.visit("every entry", "#/activity")
	p.until("every entry again", kinds+`.startsWith('space.deregistered,space.relabeled,')`, wait)
	before := p.settled("the activity, idle")
	after := p.quiet("two more ticks", before.Ran+2)
	if sent, n304 := after.Requests-before.Requests, after.NotModified-before.NotModified; sent == 0 || sent != n304 {
		t.Errorf("idle, the activity screen sent %d requests of which %d were 304s: want every one a 304", sent, n304)
	}

	// A selection in the rows stays while a new entry arrives above them.
	p.eval(`(() => { const c = document.querySelector('#activity-table tbody tr:nth-child(2) .request-id'); window.__picked = c; getSelection().selectAllChildren(c); return ''; })()`)
	picked := p.eval(`getSelection().toString()`)
	if picked == "" {
		t.Fatal("nothing selected")
	}
	rel2 := relabel(map[string]string{"env": "staging"})
	p.until("the new relabel on top", fmt.Sprintf(`(document.querySelector('#activity-table tbody tr .request-id') || {}).textContent === %q`, rel2), wait)
	if got := p.eval(`getSelection().toString() + (window.__picked.isConnected ? '' : ' (its cell was replaced)')`); got != picked {
		t.Errorf("the selection reads %q after the new entry, want %q kept", got, picked)
	}

	// An entry recorded late (its record delivered an hour on, its time an
	// hour old) comes in on top; one whose recording raced another's, so
	// that it is stored below the top row, comes in in its place; neither
	// redraws the rows.
	store := dynamostore.New(awsclient.DynamoDB(st.AWS, st.EmulatorURL), st.Table)
	entry := func(id string) space.Activity {
		return space.Activity{ID: "act_" + id + "-" + uuid.NewString()[:8], OrgID: org, Kind: space.ActivitySpaceRelabeled,
			At: time.Now().UTC().Add(-time.Hour), ActorType: space.ActorUser, Actor: "late-user", RequestID: "req-" + id,
			ResourceType: "space", ResourceID: a, ResourceName: "act-a", SpaceID: a}
	}
	rowID := func(i int) string {
		return fmt.Sprintf(`(document.querySelectorAll('#activity-table tbody tr')[%d] || {dataset: {}}).dataset.activity`, i)
	}
	late := entry("late")
	if err := store.RecordActivity(t.Context(), late); err != nil {
		t.Fatal(err)
	}
	p.until("the late entry on top", rowID(0)+` === '`+late.ID+`'`, wait)
	var positions []string
	for _, it := range scanTable(t, st.AWS, st.EmulatorURL, st.Table) {
		if it["pk"] == "ACT#"+org {
			positions = append(positions, it["sk"].(string))
		}
	}
	slices.Sort(positions)
	slices.Reverse(positions)
	const recordedAt = "2006-01-02T15:04:05.000000000Z"
	top, _ := time.Parse(recordedAt, positions[0][:len(recordedAt)])
	next, _ := time.Parse(recordedAt, positions[1][:len(recordedAt)])
	raced := entry("raced")
	mid := next.Add(top.Sub(next) / 2)
	if err := dynamostore.New(awsclient.DynamoDB(st.AWS, st.EmulatorURL), st.Table, dynamostore.WithClock(func() time.Time { return mid })).
		RecordActivity(t.Context(), raced); err != nil {
		t.Fatal(err)
	}
	p.until("the raced entry below the top row", rowID(0)+` === '`+late.ID+`' && `+rowID(1)+` === '`+raced.ID+`'`, wait)
	if got := p.eval(`getSelection().toString() + (window.__picked.isConnected ? '' : ' (its cell was replaced)')`); got != picked {
		t.Errorf("the selection reads %q after the late entries, want %q kept", got, picked)
	}

	// Paging: more entries than a page; "Load more" walks the cursor to
	// exactly the API's list.
	for i := range 55 {
		relabel(map[string]string{"n": fmt.Sprint(i)})
	}
	var want []string
	eventually(t, "the API lists the 59 relabels", func() bool {
		want = activityIDs(t, c)
		return strings.Count(strings.Join(want, ","), "relabeled") == 59
	})
	p.visit("the spaces", "#/spaces")
	p.until("the spaces list", `!!document.querySelector('#spaces-table, .empty')`, wait)
	p.visit("the activity again", "#/activity")
	ids := `[...document.querySelectorAll('#activity-table tbody tr')].map(r => r.dataset.activity + ':' + r.dataset.kind).join(',')`
	p.until("the first page", `document.querySelectorAll('#activity-table tbody tr').length === 50 && !document.querySelector('#more').closest('.pager').hidden`, wait)
	p.run("load more", chromedp.Click(chromedp.CSS("#more")))
	p.until("every entry", fmt.Sprintf(`document.querySelectorAll('#activity-table tbody tr').length === %d && document.querySelector('#more').closest('.pager').hidden`, len(want)), wait)
	if got := strings.Split(p.eval(ids), ","); !slices.Equal(got, want) {
		t.Errorf("the screen lists, after Load more:\n%v\nthe API:\n%v", got, want)
	}
	if !sentSince(0, "cursor=") {
		t.Errorf("Load more sent no cursor")
	}
}

// activityIDs walks GET /activity: each entry as "id:kind", newest first.
func activityIDs(t *testing.T, c *client) []string {
	t.Helper()
	var out []string
	cursor := ""
	for {
		q := url.Values{"limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		page := c.must(200, c.do("GET", "/activity?"+q.Encode(), nil))
		for _, it := range page["items"].([]any) {
			e := it.(map[string]any)
			out = append(out, e["id"].(string)+":"+e["kind"].(string))
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
}

func apiRequests(p *consoleProxy) []string { reqs, _ := p.stats(); return reqs }
