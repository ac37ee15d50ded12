package local

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/infra/demo"
	"spaces/shared/space"
)

// TestDevApplySetup: the local demo's "apply in the simulated cloud" route
// applies only an account of the caller's org (another org's is the API's
// 404 and changes nothing), takes only JSON, and after it the account
// verifies.
func TestDevApplySetup(t *testing.T) {
	st := startDemoStack(t)
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := accountOf(t, c.must(201, c.do("POST", "/cloud-accounts", map[string]any{
		"provider": space.GCP, "name": "gcp", "connection": demo.Connection(space.GCP)})))
	raw := *c
	raw.http = http.DefaultClient // the route is not the API's: no openapi.yaml check
	other := *newClient(t, st, "org-"+uuid.NewString()[:8])
	other.http = http.DefaultClient
	body := `{"account_id":"` + acct.ID + `"}`

	for _, tc := range []struct {
		name   string
		c      *client
		ctype  string
		body   string
		status int
	}{
		{"text/plain", &raw, "text/plain", body, 415},
		{"no account id", &raw, "application/json", `{}`, 400},
		{"another org's account", &other, "application/json", body, 404},
	} {
		r := tc.c.do("POST", DevApplySetupPath, tc.body, "Content-Type: "+tc.ctype)
		if r.status != tc.status || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s %s, want a %d problem", tc.name, r.status, r.header.Get("Content-Type"), r.body, tc.status)
		}
	}
	// Nothing was applied: the cloud still refuses the org.
	if r := c.do("POST", "/cloud-accounts/"+acct.ID+"/verify", nil); r.status != 422 {
		t.Fatalf("verified before the setup was applied: %d %s", r.status, r.body)
	}
	if r := raw.do("POST", DevApplySetupPath, body, "Content-Type: application/json"); r.status != 204 {
		t.Fatalf("apply: %d %s", r.status, r.body)
	}
	if got := c.must(200, c.do("POST", "/cloud-accounts/"+acct.ID+"/verify", nil)); got["status"] != "ready" {
		t.Errorf("verified after applying: %v", got)
	}
}

// TestConsoleApplySetupInSimulatedCloud: in the local console, a GCP
// account connected with the demo identity shows its setup as numbered
// steps with a copy button each and no API call or token, and "Apply in the
// simulated cloud" applies it and verifies: the demo goes on to the
// cluster picker instead of dead-ending at Verify. A refused verify is
// re-checked by the card only while it is open.
func TestConsoleApplySetupInSimulatedCloud(t *testing.T) {
	prefix := fmt.Sprintf("c%s-", uuid.NewString()[:8])
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log:   slog.New(slog.DiscardHandler),
		Names: func(id string) string { return prefix + id },
		Demo:  &demo.Options{},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute

	p.run("open the console", chromedp.Navigate(p.base+"/"))
	p.until("the sign-in form", `!!document.querySelector('#org-input')`, wait)
	org := "org-" + uuid.NewString()[:8]
	p.run("sign in", chromedp.SetValue(chromedp.CSS("#org-input"), org), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
	p.until("the spaces list", `document.querySelector('main').innerText.includes('No space is registered yet')`, wait)
	p.visit("open connect", "#/connect")
	p.until("the connect form", `!!document.querySelector('#prov-gcp')`, wait)
	// Before connecting, no setup text of the console's own (it disagreed
	// with the server's): only what happens next.
	if intro := p.text("#connect-form"); strings.Contains(intro, "shown once you connect") || strings.Contains(intro, "gcloud") {
		t.Errorf("the connect form shows a setup of its own:\n%s", intro)
	}
	p.run("choose GCP", chromedp.Click(chromedp.CSS("#prov-gcp")))
	p.until("the demo account offered", `!!document.querySelector('#use-demo')`, wait)
	p.run("use the demo account and connect", chromedp.Click(chromedp.CSS("#use-demo")), chromedp.Click(chromedp.CSS(`#connect-form button[type=submit]`)))
	p.until("the setup card", `!!document.querySelector('#apply-demo') && document.querySelector('#setup').innerText.includes('gcloud')`, wait)
	card := p.text("#setup-card")
	for _, bad := range []string{"curl", "$TOKEN", "Bearer", "/verify"} {
		if strings.Contains(card, bad) {
			t.Errorf("the setup card says %q:\n%s", bad, card)
		}
	}
	// GCP's setup: two gcloud commands and one instruction, each with its
	// copy button; the commands in code blocks.
	if got := p.eval(`[...document.querySelectorAll('#setup > li')].map(li => (li.querySelector('pre code') ? 'cmd' : 'text') + ':' + li.querySelectorAll('button.copy-step').length).join(' ')`); got != "cmd:1 cmd:1 text:1" {
		t.Errorf("the GCP setup's steps: %s, want cmd:1 cmd:1 text:1", got)
	}
	p.shot("setup-gcp")
	p.audit("trust setup (GCP, local demo)")

	// Verified too early, the card would ask again in 10 s; leaving the page
	// stops it.
	verifies := func() int {
		reqs, _ := proxy.stats()
		n := 0
		for _, r := range reqs {
			if strings.HasPrefix(r, "POST /cloud-accounts/") && strings.Contains(r, "/verify ") {
				n++
			}
		}
		return n
	}
	cardURL := p.eval(`location.hash`)
	p.run("verify too early", chromedp.Click(chromedp.CSS("#verify")))
	p.until("the automatic re-check announced", `document.querySelector('#setup-note').innerText.includes('Checking again in 10 s')`, wait)
	if n := verifies(); n != 1 {
		t.Fatalf("%d verify requests after one click, want 1", n)
	}
	p.visit("leave the card", "#/spaces")
	p.until("the spaces list", `!!document.querySelector('main h1')`, wait)
	time.Sleep(12 * time.Second)
	if n := verifies(); n != 1 {
		t.Errorf("%d verify requests after leaving the card, want still 1", n)
	}
	// Back on the card (the account is failed now): the demo still goes on.
	p.visit("back to the account", cardURL)
	p.until("the card of the refused account", `!!document.querySelector('#apply-demo') && document.querySelector('#setup-status').innerText.includes('failed')`, wait)
	p.run("apply in the simulated cloud", chromedp.Click(chromedp.CSS("#apply-demo")))
	p.until("the cluster picker", `!!document.querySelector('tr[data-cluster="demo-gke-1"]')`, wait)
	p.audit("cluster picker (GCP)")

	// The demo never dead-ends at provisioning either: the form offers the
	// simulated cloud's network, and the job asks for exactly that.
	p.visit("open provisioning", "#/jobs")
	p.until("the demo network offered", `!!document.querySelector('#job-use-demo')`, wait)
	p.run("use the demo network and provision", chromedp.Click(chromedp.CSS("#job-use-demo")),
		chromedp.SetValue(chromedp.CSS("#job-clusterName"), "console-gke"), chromedp.Click(chromedp.CSS("#provision")))
	p.until("the job listed", `[...document.querySelectorAll('#job-table tr')].some(tr => tr.innerText.includes('console-gke'))`, wait)
	p.shot("provision-demo")
	p.audit("provisioning form (demo)")
	var job struct {
		Config space.Config      `json:"config"`
		Spec   space.ClusterSpec `json:"spec"`
	}
	c := newClient(t, st, org)
	items := c.must(200, c.do("GET", "/provisioning-jobs", nil))["items"].([]any)
	raw, _ := json.Marshal(items[0])
	if err := json.Unmarshal(raw, &job); len(items) != 1 || err != nil {
		t.Fatalf("%d jobs (%v), want the one: %s", len(items), err, raw)
	}
	wantConfig := demo.NewClusterConfig(space.GCP, "console-gke")
	if !maps.Equal(job.Config, wantConfig) || !reflect.DeepEqual(job.Spec, demo.ClusterSpec(space.GCP)) {
		t.Errorf("the job asks for %+v %+v, want the demo's %+v %+v", job.Config, job.Spec, wantConfig, demo.ClusterSpec(space.GCP))
	}
}
