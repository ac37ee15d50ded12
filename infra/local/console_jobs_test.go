package local

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/shared/provisioning"
)

// Provisioning jobs in the browser: the view lists the org's jobs with
// their states and steps, a succeeded one linking its space, a failed one
// with the cloud's words and a Retry that takes it to success; jobs only,
// no stopped revisions (they are on the environments page); the form starts a job, the API's field
// errors shown beside their inputs with nothing stored.
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
	// Jobs only: the stopped revisions are on the environments page.
	if p.eval(`String(!!document.querySelector('#stopped-revisions'))`) != "false" || strings.Contains(p.eval(`document.querySelector('main').innerText`), "Stopped revisions") {
		t.Error("the jobs page shows the stopped revisions")
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

	// The provisioning form. Values only the API can judge (a machine type
	// EC2 has no such name, one subnet) come back beside their inputs, and
	// nothing is stored; fixed, the job is created once and followed.
	jobs := func() int { return len(c.must(200, c.do("GET", "/provisioning-jobs", nil))["items"].([]any)) }
	p.until("the form", `!!document.querySelector('#provision-form #job-account option')`, wait)
	if p.eval(`String(!!document.querySelector('#job-use-demo'))`) != "false" {
		t.Error("the form offers demo values outside the demo")
	}
	p.run("fill the form with what the API refuses",
		chromedp.SetValue(chromedp.CSS("#job-clusterName"), "console-eks"), chromedp.SetValue(chromedp.CSS("#job-region"), "eu-central-1"),
		chromedp.SetValue(chromedp.CSS("#job-version"), "1.31"), chromedp.SetValue(chromedp.CSS("#job-machine"), "large please"),
		chromedp.SetValue(chromedp.CSS("#job-subnet_ids"), "subnet-0a1b2c3d"), chromedp.SetValue(chromedp.CSS("#job-tags"), "team=platform"),
		chromedp.Click(chromedp.CSS("#provision")))
	p.until("the API's field errors beside their inputs", `document.querySelector('#job-machine').getAttribute('aria-invalid') === 'true' && document.querySelector('#job-subnet_ids').getAttribute('aria-invalid') === 'true'`, wait)
	if txt := p.text("#provision-form"); !strings.Contains(txt, "EC2 instance type") || !strings.Contains(txt, "two availability zones") {
		t.Errorf("the form's errors do not say the API's reasons:\n%s", txt)
	}
	p.audit("provisioning form (refused)")
	if n := jobs(); n != 2 {
		t.Errorf("%d jobs after a refused form, want 2 (nothing stored)", n)
	}
	var sent []string
	proxy.hook = func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == "POST" && r.URL.Path == "/provisioning-jobs" {
			sent = append(sent, r.Header.Get("Idempotency-Key"))
		}
		return false
	}
	p.run("fix it and provision", chromedp.SetValue(chromedp.CSS("#job-machine"), "m5.large"),
		chromedp.SetValue(chromedp.CSS("#job-subnet_ids"), "subnet-0a1b2c3d, subnet-4e5f6a7b"), chromedp.Click(chromedp.CSS("#provision")))
	p.until("the new job listed", `[...document.querySelectorAll('#job-table tr')].some(tr => tr.innerText.includes('console-eks'))`, wait)
	if len(sent) != 1 || sent[0] == "" {
		t.Errorf("the form sent %d creates with Idempotency-Keys %q, want one with a key", len(sent), sent)
	}
	var made map[string]any
	for _, j := range c.must(200, c.do("GET", "/provisioning-jobs", nil))["items"].([]any) {
		if m := j.(map[string]any); m["config"].(map[string]any)["clusterName"] == "console-eks" {
			made = m
		}
	}
	if made == nil {
		t.Fatal("no job for console-eks")
	}
	spec, _ := json.Marshal(made["spec"])
	if want := `{"kubernetes_version":"1.31","network":{"subnet_ids":["subnet-0a1b2c3d","subnet-4e5f6a7b"]},"node_pool":{"desired_nodes":2,"machine_type":"m5.large","max_nodes":3,"min_nodes":1},"tags":{"team":"platform"}}`; string(spec) != want {
		t.Errorf("the job's spec:\n%s\nwant\n%s", spec, want)
	}
	waitJob(t, c, made["id"].(string), provisioning.Succeeded)
}

// TestConsoleJobSettingsChanged: a job the cloud refused for its own
// settings cannot be edited, so its row offers "Change the settings": the
// job is canceled (which frees its cluster's name) and its settings fill
// the form, where the refused one is changed and the cluster provisioned
// again. The machine type box suggests the provider's common types.
func TestConsoleJobSettingsChanged(t *testing.T) {
	creator := &fakeCreator{polls: 1, refuse: "InvalidParameterException: unsupported Kubernetes version"}
	st := startWith(t, Config{
		Probing:        ProbingConfig{Disabled: true},
		Revisions:      RevisionsConfig{Disabled: true},
		Provisioning:   ProvisioningConfig{Creator: creator, PollInterval: time.Second, Wait: time.Second},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := c.account("aws")
	body := jobBody("aws", acct, "settings")
	failed := c.must(201, c.do("POST", "/provisioning-jobs", body))["id"].(string)
	if j := waitJob(t, c, failed, provisioning.Failed); j["failure"].(map[string]any)["retryable"] != false {
		t.Fatalf("the refused job's failure is retryable: %v", j["failure"])
	}
	creator.mu.Lock()
	creator.refuse = ""
	creator.mu.Unlock()

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	p.signIn(org)
	p.until("the spaces list", `!!document.querySelector('#spaces-table') || !!document.querySelector('.empty')`, wait)
	p.visit("open the provisioning jobs", "#/jobs")
	row := `document.querySelector('#job-table tr[data-job="` + failed + `"]')`
	change := `[...` + row + `.querySelectorAll('button')].find(b => b.textContent === 'Change the settings')`
	p.until("the failed job's Change the settings", `!!`+row+` && !!`+change+` && !!document.querySelector('#provision-form')`, wait)
	if got := p.eval(`[...document.querySelectorAll('#job-machines option')].map(o => o.value).join(',')`); !strings.Contains(got, "m6i.large") {
		t.Errorf("the machine type suggestions for AWS: %q", got)
	}
	p.eval(change + `.click(), ''`)
	p.until("the job canceled and its settings in the form", row+`.dataset.state === 'canceled' && document.querySelector('#job-clusterName').value === 'settings' &&
		document.querySelector('#job-version').value === '`+body["spec"].(map[string]any)["kubernetes_version"].(string)+`' && document.querySelector('#job-machine').value === 'm5.large' &&
		document.querySelector('#job-subnet_ids').value === 'subnet-0a1b2c3d, subnet-4e5f6a7b' && document.querySelector('#job-tags').value === 'team=platform' &&
		document.activeElement === document.querySelector('#job-version')`, wait)
	if j := c.must(200, c.do("GET", "/provisioning-jobs/"+failed, nil)); j["state"] != "canceled" {
		t.Errorf("the refused job is %v after Change the settings, want canceled", j["state"])
	}
	p.run("change the version and provision again", chromedp.SetValue(chromedp.CSS("#job-version"), "1.32"), chromedp.Click(chromedp.CSS("#provision")))
	p.until("the new job succeeded", `[...document.querySelectorAll('#job-table tr')].some(r => r.dataset.job !== '`+failed+`' && r.dataset.state === 'succeeded')`, wait)
	var jobs struct {
		Items []struct {
			ID, State string
			Config    map[string]string
			Spec      struct {
				KubernetesVersion string `json:"kubernetes_version"`
			}
		}
	}
	if err := json.Unmarshal(c.do("GET", "/provisioning-jobs", nil).body, &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 2 {
		t.Fatalf("%d jobs, want the canceled one and the new one", len(jobs.Items))
	}
	for _, j := range jobs.Items {
		if j.ID != failed && (j.State != "succeeded" || j.Config["clusterName"] != "settings" || j.Spec.KubernetesVersion != "1.32") {
			t.Errorf("the new job: %+v, want succeeded for settings at 1.32", j)
		}
	}
	p.audit("provisioning jobs (settings changed)")
}
