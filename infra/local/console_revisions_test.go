package local

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/infra/demo"
)

// Revisions in the browser: a revision pushed to an environment whose space
// (the flapping demo cluster) is down stops after its claims; the console
// shows Re-enqueue disabled with the reason while the space is inactive,
// enabled once it is active again, and re-enqueues it. The revisions come
// from the API, not from the browser's storage: a teammate's push (over
// the API) is listed beside the browser's, and both stopped ones are on the
// Environments page's "Stopped revisions" (and not on the Jobs page).
func TestConsoleRevisions(t *testing.T) {
	st := startWith(t, Config{
		// Down long enough for three failed probes and three claims.
		Demo:           &demo.Options{FlapUp: 8 * time.Second, FlapDown: 30 * time.Second},
		Probing:        ProbingConfig{Interval: time.Second},
		Revisions:      RevisionsConfig{Backoff: time.Second, Wait: time.Second},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	var flapping demo.Spec
	for _, s := range demo.Specs {
		if s.Flaps {
			flapping = s
		}
	}
	acct := c.connect(st.Demo.Cloud, flapping.Provider, demo.Connection(flapping.Provider))
	spaceID := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": flapping.Provider, "space_type": "kubernetes",
		"cloud_account_id": acct, "config": flapping.Config()}))["id"].(string)
	// The environment picker refuses an inactive space: create the
	// environment while the cluster is up.
	var envID string
	for envID == "" {
		waitActive(t, c, spaceID)
		if r := c.do("POST", "/environments", map[string]any{"name": "web", "space_id": spaceID}); r.status == 201 {
			envID = r.json(t)["id"].(string)
		}
	}
	waitStatus(t, c, spaceID, "inactive", time.Minute)

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	p.signIn(org)
	p.until("the spaces list", `!!document.querySelector('#spaces-table')`, wait)
	// A teammate pushes first, from elsewhere.
	teammate := c.must(202, c.do("POST", "/environments/"+envID+"/revisions", map[string]any{"manifests": []any{
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "teammate"}}}}))["id"].(string)
	p.visit("open the environment", "#/environments/"+envID)
	p.until("the push form", `!!document.querySelector('#push-form')`, wait)
	teammateRow := fmt.Sprintf(`document.querySelector('#rev-table tr[data-revision="%s"]')`, teammate)
	p.until("the teammate's revision listed", `!!`+teammateRow, wait)
	p.run("push a revision", chromedp.Click(chromedp.CSS(`#push-form button[type=submit]`)))
	p.until("two revisions listed", `document.querySelectorAll('#rev-table tbody tr').length === 2`, wait)
	row := `document.querySelector('#rev-table tbody tr')` // the newest: the browser's
	if p.eval(row+`.dataset.revision`) == teammate {
		t.Error("the newest revision listed first is the teammate's, not the one just pushed")
	}
	mine := p.eval(row + `.dataset.revision`)
	p.until("the revision stopped", row+` && `+row+`.dataset.state === 'stopped'`, wait)
	p.until("the teammate's revision stopped", teammateRow+`.dataset.state === 'stopped'`, wait)
	p.visit("open the environments page", "#/environments")
	for _, id := range []string{mine, teammate} {
		p.until("a stopped revision on the environments page", fmt.Sprintf(`!!document.querySelector('#stopped-revisions tr[data-revision="%s"]')`, id), wait)
	}
	if got := p.eval(`document.querySelector('#stopped-revisions tr[data-revision="` + mine + `"]').innerText`); !strings.Contains(got, "re-enqueue once it is active") {
		t.Errorf("the stopped revision on the environments page gives no reason for its disabled Re-enqueue: %q", got)
	}
	p.audit("environments with stopped revisions")
	p.visit("open the jobs page", "#/jobs")
	p.until("the jobs page", `!!document.querySelector('#jobs') && !document.querySelector('#jobs .loading')`, wait)
	if p.eval(`String(!!document.querySelector('#stopped-revisions'))`) != "false" {
		t.Error("the jobs page still shows the stopped revisions")
	}
	p.visit("back to the environment", "#/environments/"+envID)
	p.until("the revisions again", `document.querySelectorAll('#rev-table tbody tr').length === 2`, wait)
	// Well inside the 30 s the cluster is down: the button waits, and says why.
	if p.eval(`String(`+row+`.querySelector('button').disabled)`) != "true" {
		t.Error("Re-enqueue is enabled while the space is inactive")
	}
	if why := p.eval(row + `.innerText`); !strings.Contains(why, "inactive: re-enqueue once it is active") {
		t.Errorf("the disabled Re-enqueue gives no reason: %q", why)
	}
	p.shot("11-revision-stopped")
	p.audit("environment with a stopped revision")
	// The space is inactive: the push form says a revision would wait.
	if note := p.text("#push-note"); !strings.Contains(note, "waits for it") {
		t.Errorf("the push note on an inactive space: %q", note)
	}
	p.until("Re-enqueue enabled once the space is active", row+`.dataset.state === 'stopped' && !`+row+`.querySelector('button').disabled`, wait)
	if cell := p.eval(row + `.lastElementChild.textContent`); cell != "Re-enqueue" {
		t.Errorf("the enabled Re-enqueue's cell reads %q, want the button alone", cell)
	}
	p.run("re-enqueue", chromedp.Click(chromedp.CSS(`#rev-table tbody tr button`)))
	p.until("the revision claimed again", row+`.dataset.state !== 'stopped'`, wait)
	p.shot("12-revision-re-enqueued")
	t.Logf("revision state after re-enqueue: %s", p.eval(row+`.dataset.state`))
}
