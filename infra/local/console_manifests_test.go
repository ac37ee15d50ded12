package local

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// TestConsoleRevisionManifests: each revision on the environment page has a
// "Manifests" disclosure that reads GET /revisions/{id} when it is opened,
// and only then (an idle page still sends one request a tick, before and
// while it is open); the manifests are text (markup in them is not
// markup), in a box that scrolls rather than widening the page at 390 px,
// with a Copy button; the disclosure stays open, without reading again,
// when a new revision redraws the rows.
func TestConsoleRevisionManifests(t *testing.T) {
	st := startWith(t, Config{
		Probing:        ProbingConfig{Disabled: true},
		Revisions:      RevisionsConfig{Disabled: true},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := c.account("aws")
	spaceID := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "manifests-cluster")))["id"].(string)
	envID := c.must(201, c.do("POST", "/environments", map[string]any{"name": "web", "space_id": spaceID}))["id"].(string)
	long := strings.Repeat("x", 400)
	push := func(name string) string {
		return c.must(202, c.do("POST", "/environments/"+envID+"/revisions", map[string]any{"manifests": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name},
			"data": map[string]any{"html": "<b>bold</b>", "long": long}}}}))["id"].(string)
	}
	rev := push("first")

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	p.watchIdle()
	const wait = time.Minute
	p.run("phone width", chromedp.EmulateViewport(390, 844))
	p.signIn(org)
	p.until("the spaces list", `!!document.querySelector('#spaces-table')`, wait)
	p.visit("open the environment", "#/environments/"+envID)
	details := fmt.Sprintf(`document.querySelector('details[data-manifests="%s"]')`, rev)
	p.until("the revision's Manifests disclosure", `!!`+details+` && !`+details+`.open`, wait)
	reads := func() int {
		requests, _ := proxy.stats()
		n := 0
		for _, r := range requests {
			if strings.HasPrefix(r, "GET /revisions/"+rev+" ") {
				n++
			}
		}
		return n
	}
	idle := func(what string) {
		t.Helper()
		from, to := p.idleWindow(what, 3)
		if sent, ran := to.Requests-from.Requests, to.Ran-from.Ran; sent != ran {
			t.Errorf("%s: sent %d requests in %d ticks run, want one a tick", what, sent, ran)
		}
	}
	idle("the environment, closed")
	if n := reads(); n != 0 {
		t.Errorf("the revision was read %d times before its manifests were opened", n)
	}

	p.run("open the manifests", chromedp.Click(chromedp.CSS(fmt.Sprintf(`details[data-manifests="%s"] summary`, rev))))
	pre := details + `.querySelector('pre')`
	p.until("the manifests shown", `!!`+pre+` && `+pre+`.textContent.includes('"name": "first"')`, wait)
	if got := p.eval(pre + `.textContent.includes('<b>bold</b>') && !` + pre + `.querySelector('b') ? 'text' : 'markup'`); got != "text" {
		t.Errorf("the manifests' markup is %s, want text", got)
	}
	if n := p.eval(`String(` + details + `.querySelectorAll('button').length)`); n != "1" || p.eval(details+`.querySelector('button').textContent`) != "Copy" {
		t.Errorf("the manifests have %s buttons, want Copy", n)
	}
	if got, _ := strconv.Atoi(p.eval(`String(document.documentElement.scrollWidth)`)); got > 390 {
		t.Errorf("the environment page with manifests open is %d px wide at 390 px", got)
	}
	if p.eval(`String(`+pre+`.scrollWidth > `+pre+`.clientWidth)`) != "true" {
		t.Error("the manifests' long line does not scroll inside its box")
	}
	p.audit("environment, manifests open")
	p.shot("revision-manifests")
	if n := reads(); n != 1 {
		t.Errorf("opening the manifests read the revision %d times, want 1", n)
	}

	// A new revision redraws the rows: this one stays open, not read again.
	second := push("second")
	p.until("the new revision listed", fmt.Sprintf(`!!document.querySelector('details[data-manifests="%s"]')`, second), wait)
	p.until("the manifests still open", details+`.open && !!`+pre+` && `+pre+`.textContent.includes('"name": "first"')`, wait)
	idle("the environment, manifests open")
	if n := reads(); n != 1 {
		t.Errorf("the revision was read %d times, want once, when it was opened", n)
	}
}
