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
	"spaces/shared/space"
)

// TestConsoleScreenBugs: the console bugs of the fleet and space screens,
// each seen in a real browser. A slow answer does not draw the screen the
// user has left; an unknown route says so instead of redirecting; the
// sign-in field's pattern compiles as Chromium reads it (v flag); the space
// shows its account's name, not its id; the change list stays open across
// a refresh; a failed namespaces listing offers a retry and is asked again
// by itself; absolute times name their zone.
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
	// has been seen (however slowly the page comes), then the next refresh
	// lists them without a click.
	failNamespaces.Store(1)
	p.visit("the space", "#/spaces/"+id)
	p.until("the account's name", fmt.Sprintf(`(document.querySelector('#space-account') || {}).textContent === %q`, acctName), wait)
	p.until("the namespaces' retry", `!!document.querySelector('#ns-retry')`, wait)
	p.shot("bugs-namespaces-failed")
	p.audit("space detail (namespaces failed)")
	failNamespaces.Store(0)
	p.until("the namespaces listed by themselves", `!document.querySelector('#ns-retry') && !!document.querySelector('#ns-table tr[data-ns="kube-system"]')`, wait)

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
}
