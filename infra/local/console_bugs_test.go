package local

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/infra/demo"
	"spaces/infra/testwait"
	"spaces/shared/space"
)

// TestConsoleScreenBugs: the console bugs of the fleet and space screens,
// each seen in a real browser. A slow answer does not draw the screen the
// user has left; an unknown route says so instead of redirecting; the
// sign-in field's pattern compiles as Chromium reads it (v flag); the space
// shows its account's name, not its id; the change list stays open across
// a refresh; a failed namespaces listing offers a retry and is asked again
// by itself; a direct space's namespaces card says no null; the status
// history starts at the registration; an unchanged space is polled with
// its ETag and a selection survives the refreshes; a synthetic space asks
// no namespaces, offers no Create namespace and is no environment choice;
// the cluster picker says GKE's RUNNING as ready; the jobs page of an org
// without an account links to the accounts page; "is required" goes once
// its field is filled; an account is disconnected from the list; absolute
// times name their zone.
func TestConsoleScreenBugs(t *testing.T) {
	st := startWith(t, Config{
		Demo:           &demo.Options{},
		Probing:        ProbingConfig{Disabled: true},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	internal := newClient(t, st, org, "spaces:internal")
	acct := c.connect(st.Demo.Cloud, space.AWS, demo.Connection(space.AWS))
	acctName := c.must(200, c.do("GET", "/cloud-accounts/"+acct, nil))["name"].(string)
	id := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes", "cloud_account_id": acct,
		"config": map[string]string{"clusterName": "demo-eks-1", "region": demo.AWSRegion}}))["id"].(string)
	setStatus := func(to string) {
		etag := c.do("GET", "/spaces/"+id, nil).header.Get("ETag")
		internal.must(200, internal.do("PATCH", "/spaces/"+id+"/status", map[string]any{"status": to, "reason": "Maintenance"}, "If-Match: "+etag))
	}
	setStatus("inactive")
	synthetic := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes", "cloud_account_id": acct, "synthetic": true,
		"config": map[string]string{"clusterName": "placeholder-1", "region": demo.AWSRegion}}))["id"].(string)
	gcp := c.connect(st.Demo.Cloud, space.GCP, demo.Connection(space.GCP))

	proxy := newConsoleProxy(t, st, nil)
	var slowDetail, failNamespaces atomic.Int32
	proxy.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == "GET" && r.URL.Path == "/spaces/"+id && slowDetail.Load() > 0 {
			time.Sleep(3 * time.Second)
			return false
		}
		if strings.HasSuffix(r.URL.Path, "/namespaces") && failNamespaces.Load() > 0 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"type":"urn:spaces:problem:unavailable","title":"Service Unavailable","status":503,"detail":"the cloud is briefly unavailable"}`)
			return true
		}
		return false
	}
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute

	p.run("open the console", chromedp.Navigate(p.base+"/"))
	p.until("the sign-in form", `!!document.querySelector('#org-input')`, wait)
	if got := p.eval(`(() => { try { new RegExp('^(?:' + document.querySelector('#org-input').pattern + ')$', 'v'); return 'valid'; } catch (e) { return String(e); } })()`); got != "valid" {
		t.Errorf("the sign-in field's pattern does not compile as Chromium reads it: %s", got)
	}
	p.run("sign in", chromedp.SetValue(chromedp.CSS("#org-input"), org), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
	p.until("the list", `!!document.querySelector('#spaces-table tbody tr')`, wait)

	// An unknown route says so and stays where it is.
	p.visit("an unknown route", "#/nowhere")
	p.until("the not-found page", `!!document.querySelector('#not-found') && location.hash === '#/nowhere'`, wait)
	p.audit("unknown route")

	// A slow detail answer, then the user moves on: it never draws.
	slowDetail.Store(1)
	p.visit("the space, slowly", "#/spaces/"+id)
	time.Sleep(300 * time.Millisecond)
	p.visit("away before it answers", "#/connect")
	p.until("the connect screen", `!!document.querySelector('#connect-form')`, wait)
	time.Sleep(4 * time.Second) // past the slow answer
	if got := p.eval(`location.hash + ' ' + !!document.querySelector('#identity') + ' ' + !!document.querySelector('#connect-form')`); got != "#/connect false true" {
		t.Errorf("after the slow answer: %s, want the connect screen alone", got)
	}
	slowDetail.Store(0)

	// The space: its account by name; the namespaces fail until the retry
	// has been seen (however slowly the page comes), then a refresh (every
	// other one, in turn with the space) lists them without a click.
	failNamespaces.Store(1)
	p.visit("the space", "#/spaces/"+id)
	p.until("the account's name", fmt.Sprintf(`(document.querySelector('#space-account') || {}).textContent === %q`, acctName), wait)
	p.until("the namespaces' retry", `!!document.querySelector('#ns-retry')`, wait)
	p.shot("bugs-namespaces-failed")
	p.audit("space detail (namespaces failed)")
	failNamespaces.Store(0)
	p.until("the namespaces listed by themselves", `!!document.querySelector('#ns-table tr[data-ns="kube-system"]') && !document.querySelector('#ns-retry')`, wait)
	if got := p.text("#namespaces"); strings.Contains(got, "null") {
		t.Errorf("the namespaces card of a direct space says null: %q", got)
	}
	// The status history starts at the registration (minutes ago), not a
	// day back: no "not registered" band, and the shares count its time.
	p.until("the status history", `!!document.querySelector('#history svg .band')`, wait)
	if got := p.eval(`String(document.querySelectorAll('#history .band-none').length) + ' ' + document.querySelector('#history .legend').innerText.includes('not registered')`); got != "0 false" {
		t.Errorf("the history of a space registered just now: %s bands and legend 'not registered' (want 0 false)", got)
	}

	// Nothing changed: the page asks with the space's ETag, gets 304s, and
	// redraws nothing, so a selection (the id, being copied) stays.
	p.eval(`(() => { const code = [...document.querySelectorAll('#identity code')].find(c => c.textContent === '` + id + `');
		const r = document.createRange(); r.selectNodeContents(code); getSelection().removeAllRanges(); getSelection().addRange(r); return ''; })()`)
	notModified := func() int {
		reqs, _ := proxy.stats()
		n := 0
		for _, r := range reqs {
			if r == "GET /spaces/"+id+" 304" {
				n++
			}
		}
		return n
	}
	seen := notModified()
	testwait.Eventually(t, wait, "two 304s of the space", func() bool { return notModified() >= seen+2 })
	if got := p.eval(`getSelection().toString()`); got != id {
		t.Errorf("after two refreshes the selection is %q, want the id %s", got, id)
	}

	// The change list, opened, stays open when a new transition redraws it;
	// its times name their zone.
	p.until("the change list", `!!document.querySelector('#history-changes summary')`, wait)
	p.run("open the change list", chromedp.Click(chromedp.CSS(`#history-changes summary`)))
	p.until("it is open", `document.querySelector('#history-changes').open`, wait)
	setStatus("active")
	p.until("the new change, list still open", `document.querySelector('#history-changes summary').textContent.startsWith('2 changes') && document.querySelector('#history-changes').open`, wait)
	when := p.eval(`document.querySelector('#history-changes tbody td').textContent`)
	if !strings.Contains(when, "UTC") && !strings.Contains(when, "GMT") {
		t.Errorf("an absolute time does not name its zone: %q", when)
	}

	// A synthetic space has no cluster: no namespaces asked (no endless
	// Try again), no Create namespace.
	p.visit("the synthetic space", "#/spaces/"+synthetic)
	p.until("its namespaces card", `!!document.querySelector('#ns-synthetic') && !document.querySelector('#ns-form') && !document.querySelector('#ns-retry')`, wait)
	p.audit("synthetic space")
	// ... and it is no choice for an environment.
	p.visit("environments", "#/environments")
	p.until("the picker's choices", `!!document.querySelector('#env-space option[value="`+id+`"]')`, wait)
	if p.eval(`String(!!document.querySelector('#env-space option[value="`+synthetic+`"]'))`) != "false" {
		t.Error("the environment picker offers the synthetic space")
	}
	// The list keeps the placeholders apart on request.
	p.visit("spaces", "#/spaces")
	p.until("the list with both", `document.querySelectorAll('#spaces-table tbody tr').length === 2`, wait)
	p.eval(`(() => { const s = document.querySelector('#f-kind'); s.value = 'true'; s.dispatchEvent(new Event('change')); return ''; })()`)
	p.until("only the synthetic space", `location.hash === '#/spaces?synthetic=true' && document.querySelectorAll('#spaces-table tbody tr').length === 1 && !!document.querySelector('tr[data-space="`+synthetic+`"]')`, wait)
	reqs, _ := proxy.stats()
	for _, r := range reqs {
		if strings.Contains(r, synthetic+"/namespaces") {
			t.Errorf("the console asked a synthetic space's namespaces: %s", r)
		}
	}

	// The cluster picker says each cloud's cluster state in one word.
	p.visit("the GCP account's clusters", "#/accounts/"+gcp+"/clusters")
	p.until("GKE's RUNNING said as ready", `[...document.querySelectorAll('[data-cloud-status]')].length > 0 && [...document.querySelectorAll('[data-cloud-status]')].every(e => e.textContent === 'ready')`, wait)

	// Another org, with no account: the jobs page links to the accounts
	// page; the connect form's "is required" goes once the field is
	// filled; an account is disconnected from the list.
	p.run("sign out", chromedp.Click(chromedp.CSS("#signout")))
	p.until("the sign-in form", `!!document.querySelector('#org-input')`, wait)
	other := org + "-other"
	p.run("sign in as another org", chromedp.SetValue(chromedp.CSS("#org-input"), other), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
	p.visit("its spaces", "#/spaces")
	p.until("its empty list", `document.querySelector('main').innerText.includes('No space is registered yet')`, wait)
	p.visit("jobs", "#/jobs")
	p.until("the jobs page without an account", `!!document.querySelector('#provision-none a')`, wait)
	p.run("follow its link", chromedp.Click(chromedp.CSS("#provision-none a")))
	p.until("the connect form", `location.hash === '#/connect' && !!document.querySelector('#connect-form')`, wait)
	p.run("connect with nothing filled", chromedp.Click(chromedp.CSS(`#connect-form button[type=submit]`)))
	p.until("is required under the name", `(document.querySelector('#acct-name-err') || {}).textContent === 'is required'`, wait)
	p.run("fill the name", chromedp.SendKeys(chromedp.CSS("#acct-name"), "named"))
	p.until("the name's error gone", `!document.querySelector('#acct-name-err') && !document.querySelector('#acct-name').hasAttribute('aria-invalid')`, wait)
	p.audit("connect form (an error mended)")
	oc := newClient(t, st, other)
	gone := oc.account("aws")
	p.visit("spaces", "#/spaces")
	p.visit("the accounts again", "#/connect")
	p.until("the account's Disconnect", `!!document.querySelector('[data-disconnect="`+gone+`"]')`, wait)
	p.run("disconnect", chromedp.Click(chromedp.CSS(`[data-disconnect="`+gone+`"]`)))
	p.until("the confirmation", `!!document.querySelector('[data-disconnect-confirm="`+gone+`"]')`, wait)
	p.audit("accounts (disconnect confirmation)")
	p.run("confirm", chromedp.Click(chromedp.CSS(`[data-disconnect-confirm="`+gone+`"]`)))
	p.until("the row gone", `!document.querySelector('tr[data-account="`+gone+`"]')`, wait)
	oc.must(404, oc.do("GET", "/cloud-accounts/"+gone, nil))
}
