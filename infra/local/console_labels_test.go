package local

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// TestConsoleLabels: labels set through the API show as chips in the
// list and on the space's page; the list filters by a label selector
// whose value lives in the URL (a reload keeps it; a malformed one is
// explained, not hidden); the space's page edits the labels, refusing a
// bad one before sending it. Every new screen passes axe.
func TestConsoleLabels(t *testing.T) {
	prefix := fmt.Sprintf("l%s-", uuid.NewString()[:8])
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log:            slog.New(slog.DiscardHandler),
		Names:          func(id string) string { return prefix + id },
		Probing:        ProbingConfig{Disabled: true},
		ConsoleRefresh: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	acct := c.account("aws")
	ids := map[string]string{}
	for _, s := range []struct {
		name   string
		labels map[string]string
	}{
		{"eu-prod", map[string]string{"env": "prod", "example.com/team": "payments"}},
		{"us-prod", map[string]string{"env": "prod"}},
		{"eu-dev", map[string]string{"env": "dev"}},
		{"bare", nil},
	} {
		body := registerBody("aws", acct, s.name)
		if s.labels != nil {
			body["labels"] = s.labels
		}
		ids[s.name] = c.must(201, c.do("POST", "/spaces", body))["id"].(string)
	}

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	rows := func(n int) string {
		return fmt.Sprintf(`document.querySelectorAll('#spaces-table tbody tr').length === %d`, n)
	}
	names := `[...document.querySelectorAll('#spaces-table tbody tr')].map(r => r.dataset.name).sort().join(',')`
	p.run("open the console", chromedp.Navigate(p.base+"/"))
	p.until("the sign-in form", `!!document.querySelector('#org-input')`, wait)
	p.run("sign in", chromedp.SetValue(chromedp.CSS("#org-input"), org), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
	p.until("the list", rows(4), wait)
	chips := func(name string) string {
		return p.eval(fmt.Sprintf(`[...document.querySelectorAll('tr[data-name=%q] .chip')].map(c => c.textContent).join(' ')`, name))
	}
	if got := chips("eu-prod"); got != "env=prod example.com/team=payments" {
		t.Errorf("eu-prod's chips: %q", got)
	}
	if got := chips("bare"); got != "" {
		t.Errorf("a space without labels shows chips: %q", got)
	}

	// The selector filters, in the URL.
	p.run("filter by env=prod", chromedp.SendKeys(chromedp.CSS("#f-labels"), "env=prod\n"))
	p.until("the prod spaces", rows(2)+` && location.hash === '#/spaces?labels=env%3Dprod'`, wait)
	if got := p.eval(names); got != "eu-prod,us-prod" {
		t.Errorf("env=prod shows %s", got)
	}
	p.shot("labels-01-filtered")
	p.audit("spaces (label selector)")
	p.run("reload", chromedp.Reload())
	p.untilAcrossLoads("the filter after a reload", rows(2)+` && document.querySelector('#f-labels').value === 'env=prod'`, wait)

	// Set-based, then malformed: the problem names the parameter.
	p.visit("a set-based selector", "#/spaces?labels="+"env%20notin%20(prod)")
	p.until("the spaces not in prod", rows(2)+` && document.querySelector('#f-labels').value === 'env notin (prod)'`, wait)
	if got := p.eval(names); got != "bare,eu-dev" {
		t.Errorf("env notin (prod) shows %s", got)
	}
	p.visit("a malformed selector", "#/spaces?labels="+"env%20in%20(")
	p.until("the selector's error", `[...document.querySelectorAll('.alert.error')].some(e => e.textContent.includes('label selector is not valid') && e.textContent.includes('label_selector'))`, wait)
	p.audit("spaces (malformed selector)")

	// A chip filters by itself.
	p.visit("the whole list", "#/spaces")
	p.until("the list", rows(4), wait)
	p.run("click a chip", chromedp.Click(chromedp.CSS(`tr[data-name="eu-prod"] .chip[data-label-key="example.com/team"] a`)))
	p.until("the team's spaces", rows(1)+` && location.hash === '#/spaces?labels=example.com%2Fteam%3Dpayments'`, wait)

	// The space's page: chips, then an edit.
	p.visit("us-prod's page", "#/spaces/"+ids["us-prod"])
	p.until("its labels", `document.querySelector('#labels-list') && document.querySelector('#labels-list').textContent === 'env=prod'`, wait)
	p.run("edit", chromedp.Click(chromedp.CSS("#labels-edit")))
	p.until("the editor", `!document.querySelector('#labels-form').hidden && document.querySelector('#labels-input').value === 'env=prod'`, wait)
	p.audit("space (labels editor)")
	// A bad key is refused in the page, before anything is sent.
	before := c.must(200, c.do("GET", "/spaces/"+ids["us-prod"], nil))["version"]
	p.run("type a bad label", chromedp.SetValue(chromedp.CSS("#labels-input"), "env=prod, -bad=x"), chromedp.Click(chromedp.CSS("#labels-save")))
	p.until("the field's error", `document.querySelector('#labels-input').getAttribute('aria-invalid') === 'true' && document.querySelector('#labels-form .err').textContent.includes('-bad')`, wait)
	p.audit("space (labels editor, refused)")
	if after := c.must(200, c.do("GET", "/spaces/"+ids["us-prod"], nil))["version"]; after != before {
		t.Errorf("a refused edit changed the space: version %v, was %v", after, before)
	}
	p.run("type good labels", chromedp.SetValue(chromedp.CSS("#labels-input"), "env=prod, tier=gold"), chromedp.Click(chromedp.CSS("#labels-save")))
	p.until("the saved labels", `document.querySelector('#labels-form').hidden && document.querySelector('#labels-list').textContent === 'env=prodtier=gold'`, wait)
	p.shot("labels-02-edited")
	if got := c.must(200, c.do("GET", "/spaces/"+ids["us-prod"], nil))["labels"]; !reflect.DeepEqual(got, map[string]any{"env": "prod", "tier": "gold"}) {
		t.Errorf("after the edit the API answers labels %v", got)
	}
	p.visit("the gold spaces", "#/spaces?labels=tier%3Dgold")
	p.until("one gold space", rows(1)+` && document.querySelector('#spaces-table tbody tr').dataset.name === 'us-prod'`, wait)
}
