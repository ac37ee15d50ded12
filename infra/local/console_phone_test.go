package local

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces/infra/demo"
	"spaces/shared/space"
)

// TestConsoleAtPhoneWidth: at 390 px (a phone) no screen scrolls sideways:
// the page is never wider than the window (where one does, the test names
// the elements that stick out; the environments include a gated one with
// its Re-bind controls), no button's word is broken over lines, and the
// status history's axis times are at least 10 px tall. And every screen, left open and idle, sends
// one request a refresh tick that runs. Then, in dark mode (the system
// setting), every screen is dark and has no axe violation (contrast
// included).
func TestConsoleAtPhoneWidth(t *testing.T) {
	st := startWith(t, Config{
		// The job's cluster comes up at once, so that it has ended before
		// the idle checks (below).
		Demo:           &demo.Options{CreateDelay: time.Second},
		Probing:        ProbingConfig{Interval: 2 * time.Second},
		ConsoleRefresh: time.Second,
	})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := c.connect(st.Demo.Cloud, space.AWS, demo.Connection(space.AWS))
	id := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes", "cloud_account_id": acct,
		"config": map[string]string{"clusterName": "demo-eks-1", "region": demo.AWSRegion}}))["id"].(string)
	waitActive(t, c, id)
	env := c.must(201, c.do("POST", "/environments", map[string]any{"name": "phone", "space_id": id}))["id"].(string)
	rev := c.must(202, c.do("POST", "/environments/"+env+"/revisions", map[string]any{"manifests": []any{map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "phone"}, "data": map[string]any{"k": "v"}}}}))["id"].(string)

	job := c.must(201, c.do("POST", "/provisioning-jobs", map[string]any{"provider": "aws", "cloud_account_id": acct,
		"config": map[string]string{"clusterName": "phone-eks-with-a-rather-long-name", "region": demo.AWSRegion},
		"spec": map[string]any{"kubernetes_version": "1.31",
			"node_pool": map[string]any{"machine_type": "m5.large", "min_nodes": 1, "max_nodes": 3, "desired_nodes": 2},
			"network": map[string]any{"subnet_ids": []string{"subnet-0d3e0000000000001", "subnet-0d3e0000000000002"},
				"security_group_ids": []string{"sg-0d3e0000000000003"}}}}, "Idempotency-Key: phone-1"))["id"].(string)
	// Everything above has ended before the idle checks: the revision, and
	// the job with its space's first probe. A change while a screen is idle
	// (the job's space registered, then probed active) makes it read again,
	// rightly, and a busy machine put one inside the spaces screen's window.
	eventually(t, "the revision ended", func() bool {
		s := c.must(200, c.do("GET", "/revisions/"+rev, nil))["state"]
		return s == "deployed" || s == "failed"
	})
	eventually(t, "the job ended and its space probed", func() bool {
		j := c.must(200, c.do("GET", "/provisioning-jobs/"+job, nil))
		if j["state"] == "failed" {
			return true
		}
		sid, _ := j["space_id"].(string)
		return j["state"] == "succeeded" && sid != "" && c.must(200, c.do("GET", "/spaces/"+sid, nil))["status"] != "unknown"
	})

	// A gated environment: its row holds the gate and the Re-bind controls.
	gatedSpace := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes", "cloud_account_id": acct,
		"config": map[string]string{"clusterName": "demo-eks-2", "region": demo.AWSRegion}}))["id"].(string)
	c.must(201, c.do("POST", "/environments", map[string]any{"name": "gated-on-a-phone", "space_id": gatedSpace}))
	c.must(204, c.do("DELETE", "/spaces/"+gatedSpace, nil))

	// An account not verified yet: its page is the trust setup card.
	pending := c.must(201, c.do("POST", "/cloud-accounts", map[string]any{"provider": "gcp", "name": "pending", "connection": demo.Connection(space.GCP)}))["id"].(string)

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	p.watchIdle()
	const wait = time.Minute
	p.run("phone width", chromedp.EmulateViewport(390, 844))
	p.signIn(org)
	screens := []struct {
		name, hash, ready string
		polls             bool // refreshes every tick
	}{
		{"spaces", "#/spaces", `!!document.querySelector('#spaces-table tbody tr')`, true},
		{"space", "#/spaces/" + id, `!!document.querySelector('#ns-table') && !!document.querySelector('#history svg')`, true},
		{"connect", "#/connect", `!!document.querySelector('#connect-form')`, false},
		{"clusters", "#/accounts/" + acct + "/clusters", `!!document.querySelector('#region')`, false},
		{"trust setup", "#/accounts/" + pending + "/clusters", `!!document.querySelector('#setup-card')`, false},
		{"environments", "#/environments", `!!document.querySelector('tr[data-env="gated-on-a-phone"] .rebind select option[value]:not([value=""])')`, true},
		{"environment", "#/environments/" + env, `document.querySelector('main').innerText.includes('phone')`, true},
		{"jobs", "#/jobs", `document.querySelector('main').innerText.includes('phone-eks-with-a-rather-long-name')`, true},
		{"activity", "#/activity", `!!document.querySelector('#activity-table tr[data-kind="provisioning_job.created"]')`, true},
	}
	for _, s := range screens {
		p.visit("open "+s.name, s.hash)
		p.until(s.name+" at phone width", s.ready, wait)
		if s.polls {
			// Idle: each tick that runs sends one request, whatever the
			// screen polls. How many a minute that makes is
			// BenchmarkConsoleIdleRequests's figure.
			from, to := p.idleWindow(s.name+", idle", 3)
			t.Logf("%s, idle: %d requests, %d of them 304, in %d ticks run (%d ticks)", s.name, to.Requests-from.Requests, to.NotModified-from.NotModified, to.Ran-from.Ran, to.Ticks-from.Ticks)
			if sent, ran := to.Requests-from.Requests, to.Ran-from.Ran; sent != ran {
				t.Errorf("%s, idle, sent %d requests in %d ticks run, want one a tick", s.name, sent, ran)
			}
		} else {
			p.quiet(s.name+", nothing out", 0)
		}
		// What loaded after the first rows is in: the screen as it stays.
		wide := p.eval(`(() => {
			const w = document.documentElement.clientWidth;
			if (document.documentElement.scrollWidth <= w) return '';
			return [...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > w + 1)
				.slice(0, 6).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : '') + ' ' + Math.round(e.getBoundingClientRect().right) + 'px').join(', ') || 'the page';
		})()`)
		if wide != "" {
			p.shot("phone-wide-" + s.name)
			t.Errorf("%s scrolls sideways at 390 px: %s", s.name, wide)
		}
		if got, _ := strconv.Atoi(p.eval(`String(document.documentElement.scrollWidth)`)); got > 390 {
			t.Errorf("%s is %d px wide at 390 px", s.name, got)
		}
		// A button's word is never broken over lines (Cancel as Ca/nc/el).
		if broken := p.eval(`[...document.querySelectorAll('main button')].filter(b => b.offsetParent && b.getBoundingClientRect().height >= 2 * parseFloat(getComputedStyle(b).lineHeight)).map(b => b.textContent).join(', ')`); broken != "" {
			t.Errorf("%s at 390 px breaks the buttons %s over lines", s.name, broken)
		}
		if s.name == "environment" {
			// A revision that never waited for its space shows no "0" attempts.
			p.until("the revision's attempts", `!!document.querySelector('#rev-table td[data-label="Attempts"]')`, wait)
			if got := p.text(`#rev-table td[data-label="Attempts"]`); got != "—" {
				t.Errorf("a revision that never waited shows attempts %q, want —", got)
			}
		}
		if s.name == "space" {
			// The history's axis times are text at a readable size, not
			// scaled down with the drawing.
			if got := p.eval(`(() => { const l = [...document.querySelectorAll('#history .axis span, #history svg text')];
				return l.length >= 3 && l.every(e => e.getBoundingClientRect().height >= 10) ? 'readable' : l.map(e => e.getBoundingClientRect().height.toFixed(1)).join(' '); })()`); got != "readable" {
				t.Errorf("the status history's axis labels at 390 px are %s px tall", got)
			}
		}
	}

	p.run("dark mode, desktop width", chromedp.EmulateViewport(1280, 900),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return err
		}))
	for _, s := range screens {
		p.visit("open "+s.name+" (dark)", s.hash)
		p.until(s.name+" in dark mode", s.ready+` && getComputedStyle(document.body).backgroundColor === 'rgb(13, 17, 23)'`, wait)
		if s.polls {
			p.settled(s.name + " (dark)")
		} else {
			p.quiet(s.name+" (dark), nothing out", 0)
		}
		p.audit(s.name + " (dark)")
	}
	p.shot("dark-jobs")
}
