package local

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/shared/provisioning"
)

// Provisioning jobs in the browser: the view lists the org's jobs with
// their states and steps, a succeeded one linking its space, a failed one
// with the cloud's words and a Retry that takes it to success; the stopped
// revisions card sits beside them.
func TestConsoleProvisioningJobs(t *testing.T) {
	creator := &fakeCreator{polls: 1, refuse: "QuotaExceeded: no vCPU left in eu-central-1"}
	st := startWith(t, Config{
		Probing:        ProbingConfig{Disabled: true},
		Revisions:      RevisionsConfig{Disabled: true},
		Provisioning:   ProvisioningConfig{Creator: creator, PollInterval: time.Second, Wait: time.Second},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := c.account("aws")
	failed := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("aws", acct, "refused")))["id"].(string)
	waitJob(t, c, failed, provisioning.Failed)
	creator.mu.Lock()
	creator.refuse = ""
	creator.mu.Unlock()
	ok := c.must(201, c.do("POST", "/provisioning-jobs", jobBody("aws", acct, "fine")))["id"].(string)
	waitJob(t, c, ok, provisioning.Succeeded)

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	p.signIn(org)
	p.until("the spaces list", `!!document.querySelector('#spaces-table') || !!document.querySelector('.empty')`, wait)
	p.visit("open the provisioning jobs", "#/jobs")
	row := func(id string) string { return `document.querySelector('#job-table tr[data-job="` + id + `"]')` }
	p.until("both jobs listed", `!!(`+row(failed)+` && `+row(ok)+`)`, wait)
	if s := p.eval(row(ok) + `.dataset.state`); s != "succeeded" {
		t.Errorf("succeeded job shows %q", s)
	}
	steps := p.eval(`Array.from(` + row(ok) + `.querySelectorAll('li')).map(li => li.dataset.step).join(',')`)
	if steps != "queued,creating,waiting-ready,registering,succeeded" {
		t.Errorf("the succeeded job's steps: %q", steps)
	}
	if p.eval(`String(!!`+row(ok)+`.querySelector('a[href^="#/spaces/"]'))`) != "true" {
		t.Error("the succeeded job does not link its space")
	}
	if txt := p.eval(row(failed) + `.innerText`); !strings.Contains(txt, "QuotaExceeded: no vCPU left") {
		t.Errorf("the failed job does not show the cloud's words: %q", txt)
	}
	if txt := p.text("#stopped-revisions"); !strings.Contains(txt, "No stopped revision") {
		t.Errorf("the stopped revisions card: %q", txt)
	}
	p.shot("20-provisioning-jobs")
	p.audit("provisioning jobs")
	// The refusal is not retryable as is: the button says to fix the cause
	// first (here the cause is gone: the creator no longer refuses).
	if b := p.text(`#job-table tr[data-job="` + failed + `"] button`); b != "Retry after fixing the cause" {
		t.Errorf("the failed job's first button reads %q", b)
	}
	p.run("retry the failed job", chromedp.Click(chromedp.CSS(`#job-table tr[data-job="`+failed+`"] button`)))
	p.until("the retried job succeeded", `!!(`+row(failed)+` && `+row(failed)+`.dataset.state === 'succeeded')`, wait)
	if n := spaceCount(t, c); n != 2 {
		t.Errorf("%d spaces after the retry, want 2", n)
	}
}
