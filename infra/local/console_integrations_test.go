package local

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"spaces/shared/space"
)

// TestConsoleIntegrations: the Integrations screen in a real browser
// against the local stack and a real HTTPS receiver. No event type is said
// under the checkboxes with nothing sent; a URL the API refuses (http to a
// public host, a private address), and a selector that does not parse,
// show the API's own message under their field and create nothing; a
// created endpoint's secret is shown once, with Copy, and a reload no
// longer shows it; pause and resume from the list; on the endpoint's page
// a test event reaches the receiver and its 2xx attempt is in the delivery
// log, Replay sends it again under the same webhook-id, and "Replay since"
// too; Edit shows a refused URL's message under the field and changes
// nothing, then changes the URL, description and event types (read back
// through the API); a rotated secret is shown once and both secrets sign the next
// delivery; the log pages with the API's cursor; an endpoint the receiver
// answered 410 Gone, and one whose deliveries failed for five days, are
// said disabled, with why, in a banner on both screens and on the nav item
// (in words, not colour alone), not on another org's, and Resume clears
// it; Delete asks first;
// axe finds no violation on either screen, in light or dark mode.
// Left idle, each screen sends one request a tick; at 390 px neither is
// wider than the window, nor is the edit form. Every request the console sends is checked
// against openapi.yaml by the proxy.
func TestConsoleIntegrations(t *testing.T) {
	rc := newHookReceiver(t)
	st := startWith(t, Config{Probing: ProbingConfig{Disabled: true}, ConsoleRefresh: time.Second,
		Webhooks: WebhooksConfig{Roots: rc.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone(), Wait: time.Second}})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	endpoints := func() []any { return c.must(200, c.do("GET", "/webhook-endpoints", nil))["items"].([]any) }
	received := func(id string) []hookRequest {
		var out []hookRequest
		for _, r := range rc.requests() {
			if r.header.Get("webhook-id") == id {
				out = append(out, r)
			}
		}
		return out
	}

	p.watchIdle()
	p.signIn(org)
	p.until("the spaces list", `!!document.querySelector('#spaces-table, .empty')`, wait)
	p.run("open Integrations from the nav", chromedp.Click(chromedp.CSS(`nav a[href="#/integrations"]`)))
	p.until("no endpoint yet", `document.querySelector('#endpoints').innerText.includes('No endpoint yet') && !!document.querySelector('#endpoint-form')`, wait)
	p.audit("integrations (empty)")

	// No event type: said under the checkboxes, nothing sent (openapi.yaml
	// forbids an empty list).
	p.run("add with no event type", chromedp.SetValue(chromedp.CSS("#ep-url"), rc.srv.URL+"/hooks"), chromedp.Click(chromedp.CSS(`#endpoint-form button[type=submit]`)))
	p.until("the event types' error", `document.querySelector('#ep-types .err')?.textContent === 'must name at least one event type'`, wait)
	if reqs, _ := proxy.stats(); containsPrefix(reqs, "POST /webhook-endpoints ") {
		t.Errorf("an endpoint with no event type was sent: %v", reqs)
	}

	// Refused by the API (two URLs, a selector that does not parse): its
	// own message under the field it names, nothing created.
	i := 0
	for _, bad := range []struct {
		url, selector, input string
	}{
		{"http://hooks.example.com/spaces", "", "#ep-url"},
		{"https://10.1.2.3/spaces", "", "#ep-url"},
		{rc.srv.URL + "/hooks", "env in (prod", "#ep-selector"},
	} {
		i++
		body := map[string]any{"url": bad.url, "event_types": []string{"space.registered"}}
		if bad.selector != "" {
			body["label_selector"] = bad.selector
		}
		r := c.do("POST", "/webhook-endpoints", body)
		if r.status != 422 {
			t.Fatalf("the API answered %v with %d, want 422: %s", body, r.status, r.body)
		}
		reason := r.json(t)["errors"].([]any)[0].(map[string]any)["reason"].(string)
		p.eval(fmt.Sprintf(`(() => { document.querySelector('#ep-type-space-registered').checked = true;
			document.querySelector('#ep-url').value = %q; document.querySelector('#ep-selector').value = %q; return ''; })()`, bad.url, bad.selector))
		p.run(fmt.Sprintf("add refused %d", i), chromedp.Click(chromedp.CSS(`#endpoint-form button[type=submit]`)))
		p.until(fmt.Sprintf("the API's message for refused %d", i), fmt.Sprintf(`document.querySelector(%q).getAttribute('aria-invalid') === 'true' &&
			document.querySelector(%q).closest('.field').querySelector('.err')?.textContent === %q`, bad.input, bad.input, reason), wait)
		if n := len(endpoints()); n != 0 {
			t.Fatalf("refusing %v left %d endpoints, want 0", body, n)
		}
	}
	p.audit("integrations (refused URL)")
	if got := p.eval(`document.querySelector('#endpoints').innerText`); !strings.Contains(got, "No endpoint yet") {
		t.Errorf("after the refused URLs the list shows %q", got)
	}

	// Created: the secret once, with Copy.
	p.eval(`(() => { document.querySelector('#ep-selector').value = ''; return ''; })()`)
	p.run("add the receiver", chromedp.SetValue(chromedp.CSS("#ep-url"), rc.srv.URL+"/hooks"),
		chromedp.SetValue(chromedp.CSS("#ep-description"), "console test"),
		chromedp.Click(chromedp.CSS(`#endpoint-form button[type=submit]`)))
	p.until("the secret shown", `/^whsec_/.test(document.querySelector('#endpoint-secret')?.textContent || '') &&
		document.querySelector('#secret-card').innerText.includes('You will not see it again') && !!document.querySelector('#secret-copy') &&
		!!document.querySelector('#endpoints-table tr[data-state="enabled"]')`, wait)
	list := endpoints()
	if len(list) != 1 {
		t.Fatalf("%d endpoints after one was added, want 1", len(list))
	}
	id := list[0].(map[string]any)["id"].(string)
	if got := fmt.Sprint(list[0].(map[string]any)["event_types"]); got != "[space.registered]" {
		t.Errorf("the endpoint wants %s, want [space.registered] (the box ticked)", got)
	}
	secret := p.text("#endpoint-secret")
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("the secret shown, %q: %v", secret, err)
	}
	p.shot("integrations-01-secret")
	p.audit("integrations (secret shown)")
	p.run("copy it", chromedp.Click(chromedp.CSS("#secret-copy")))
	p.until("copied, or said how to copy", `['Secret copied.', 'Copying was refused: select the text and copy it.'].includes(document.querySelector('#flash').innerText.trim())`, wait)

	// A reload forgets it: not on the page, not in the browser's storage.
	p.run("reload", chromedp.Reload())
	p.until("the list after the reload", `!!document.querySelector('#endpoints-table tr[data-endpoint="`+id+`"]')`, wait)
	if got := p.eval(`String(document.body.innerText.includes('whsec_') || !!document.querySelector('#endpoint-secret') ||
		JSON.stringify(localStorage).includes('whsec_') || JSON.stringify(sessionStorage).includes('whsec_'))`); got != "false" {
		t.Error("the secret is still shown or stored after a reload")
	}

	// Pause and resume from the list.
	p.run("pause", chromedp.Click(chromedp.CSS(`button[data-pause="`+id+`"]`)))
	p.until("paused", `!!document.querySelector('#endpoints-table tr[data-endpoint="`+id+`"][data-state="paused"] button[data-resume]')`, wait)
	if s := c.must(200, c.do("GET", "/webhook-endpoints/"+id, nil))["state"]; s != "paused" {
		t.Errorf("after Pause the endpoint is %v", s)
	}
	p.run("resume", chromedp.Click(chromedp.CSS(`button[data-resume="`+id+`"]`)))
	p.until("enabled again", `!!document.querySelector('#endpoints-table tr[data-endpoint="`+id+`"][data-state="enabled"] button[data-pause]')`, wait)

	// The endpoint's page: a test event, its attempt in the log.
	p.run("open the endpoint", chromedp.Click(chromedp.CSS(`#endpoints-table tr[data-endpoint="`+id+`"] a`)))
	p.until("the endpoint's page", `!!document.querySelector('#endpoint') && !!document.querySelector('#send-test') && document.querySelector('#deliveries').innerText.includes('No delivery attempt yet')`, wait)
	p.run("send a test event", chromedp.Click(chromedp.CSS("#send-test")))
	p.until("the test event queued", `!!document.querySelector('[data-test-id]')`, wait)
	testID := p.eval(`document.querySelector('[data-test-id]').dataset.testId`)
	row := `#deliveries-table tr[data-webhook-id="` + testID + `"]`
	p.until("its 2xx attempt in the log", `(() => { const r = document.querySelector('`+row+`');
		return !!r && r.dataset.verdict === 'delivered' && +r.dataset.status >= 200 && +r.dataset.status < 300 &&
			r.querySelector('td[data-label="Status"]').innerText.includes(r.dataset.status) && r.querySelector('td[data-label="Event"]').innerText.includes('webhook.test'); })()`, wait)
	p.until("the test event's result", `(() => { const r = document.querySelector('#test-result');
		return !!r && r.dataset.verdict === 'delivered' && r.textContent.includes('the receiver answered ' + r.dataset.status); })()`, wait)
	if got := received(testID); len(got) != 1 {
		t.Fatalf("the receiver got the test event %d times, want 1", len(got))
	} else if err := verifier.Verify(got[0].body, got[0].header); err != nil {
		t.Errorf("the test event does not verify with the secret shown: %v", err)
	}
	p.shot("integrations-02-log")
	p.audit("endpoint (delivery log)")

	// Replay it: the receiver gets it again under the same webhook-id.
	p.run("replay it", chromedp.Click(chromedp.CSS(row+` button[data-replay]`)))
	p.until("the replay queued", `!!document.querySelector('[data-replayed-id="`+testID+`"]')`, wait)
	eventually(t, "the replay at the receiver", func() bool { return len(received(testID)) == 2 })
	again := received(testID)[1]
	if err := verifier.Verify(again.body, again.header); err != nil {
		t.Errorf("the replay does not verify: %v", err)
	}
	p.until("the replay's attempt in the log", `document.querySelectorAll('`+row+`').length === 2`, wait)

	// Replay since an hour ago (the field's default): the same event again.
	p.run("replay since", chromedp.Click(chromedp.CSS("#replay-since-go")))
	p.until("replayed since", `+(document.querySelector('[data-replayed]')?.dataset.replayed || 0) >= 1`, wait)
	eventually(t, "the replay since at the receiver", func() bool { return len(received(testID)) == 3 })

	// Rotate: the new secret once, and both sign during the overlap.
	p.run("rotate", chromedp.Click(chromedp.CSS("#rotate-secret")))
	p.until("the new secret", `/^whsec_/.test(document.querySelector('#endpoint-secret')?.textContent || '') && document.querySelector('#endpoint-secret').textContent !== `+strconv.Quote(secret)+` &&
		document.querySelector('#secret-note').innerText.includes('both sign')`, wait)
	fresh, err := standardwebhooks.NewWebhook(p.text("#endpoint-secret"))
	if err != nil {
		t.Fatal(err)
	}
	p.run("send another test event", chromedp.Click(chromedp.CSS("#send-test")))
	p.until("the second test event queued", `!!document.querySelector('[data-test-id]') && document.querySelector('[data-test-id]').dataset.testId !== '`+testID+`'`, wait)
	second := p.eval(`document.querySelector('[data-test-id]').dataset.testId`)
	eventually(t, "the second test event at the receiver", func() bool { return len(received(second)) == 1 })
	got := received(second)[0]
	if err := fresh.Verify(got.body, got.header); err != nil {
		t.Errorf("after the rotation the delivery does not verify with the new secret: %v", err)
	}
	if err := verifier.Verify(got.body, got.header); err != nil {
		t.Errorf("during the overlap the delivery does not verify with the old secret: %v", err)
	}

	// Paged with the API's cursor: 21 attempts are a page of 20 and an
	// older page holding the first test event's.
	for range 17 {
		c.must(202, c.do("POST", "/webhook-endpoints/"+id+"/test", nil))
	}
	eventually(t, "21 attempts in the log", func() bool {
		return len(c.must(200, c.do("GET", "/webhook-endpoints/"+id+"/deliveries?limit=100", nil))["items"].([]any)) == 21
	})
	p.until("a full first page", `document.querySelectorAll('#deliveries-table tbody tr').length === 20 && !document.querySelector('#log-older').disabled && document.querySelector('#log-newer').disabled`, wait)
	p.run("older", chromedp.Click(chromedp.CSS("#log-older")))
	p.until("the older page", `document.querySelectorAll('#deliveries-table tbody tr').length === 1 && !!document.querySelector('`+row+`') &&
		document.querySelector('#log-older').disabled && document.querySelector('#log-page').textContent === 'page 2'`, wait)
	p.run("newer", chromedp.Click(chromedp.CSS("#log-newer")))
	p.until("the first page again", `document.querySelectorAll('#deliveries-table tbody tr').length === 20 && document.querySelector('#log-page').textContent === 'page 1'`, wait)

	// Edited from its page: a refused URL gets the API's message under the
	// field and changes nothing; then a description and a second event type.
	before := c.must(200, c.do("GET", "/webhook-endpoints/"+id, nil))
	badURL := "http://hooks.example.com/spaces"
	r := c.do("PATCH", "/webhook-endpoints/"+id, map[string]any{"url": badURL})
	if r.status != 422 {
		t.Fatalf("the API answered the PATCH of %s with %d, want 422: %s", badURL, r.status, r.body)
	}
	reason := r.json(t)["errors"].([]any)[0].(map[string]any)["reason"].(string)
	p.run("edit", chromedp.Click(chromedp.CSS("#edit-endpoint")))
	p.until("the edit form, filled in", `document.querySelector('#endpoint-edit #ep-url')?.value === '`+rc.srv.URL+`/hooks' &&
		document.querySelector('#endpoint-edit #ep-type-space-registered').checked && document.querySelector('#endpoint-edit #ep-description').value === 'console test'`, wait)
	p.run("edit refused", chromedp.SetValue(chromedp.CSS("#endpoint-edit #ep-url"), badURL), chromedp.Click(chromedp.CSS(`#endpoint-edit button[type=submit]`)))
	p.until("the API's message under the URL", fmt.Sprintf(`document.querySelector('#endpoint-edit #ep-url').getAttribute('aria-invalid') === 'true' &&
		document.querySelector('#endpoint-edit #ep-url').closest('.field').querySelector('.err')?.textContent === %q`, reason), wait)
	p.audit("endpoint (edit refused)")
	if after := c.must(200, c.do("GET", "/webhook-endpoints/"+id, nil)); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused edit changed the endpoint: %v, was %v", after, before)
	}
	p.run("edit saved", chromedp.SetValue(chromedp.CSS("#endpoint-edit #ep-url"), rc.srv.URL+"/edited"),
		chromedp.SetValue(chromedp.CSS("#endpoint-edit #ep-description"), "edited in the console"),
		chromedp.Click(chromedp.CSS("#endpoint-edit #ep-type-space-deregistered")),
		chromedp.Click(chromedp.CSS(`#endpoint-edit button[type=submit]`)))
	p.until("the changed endpoint shown", `!document.querySelector('#endpoint-edit') && document.querySelector('#endpoint').innerText.includes('edited in the console') &&
		document.querySelector('#endpoint').innerText.includes('/edited')`, wait)
	edited := c.must(200, c.do("GET", "/webhook-endpoints/"+id, nil))
	if edited["url"] != rc.srv.URL+"/edited" || edited["description"] != "edited in the console" || fmt.Sprint(edited["event_types"]) != "[space.registered space.deregistered]" {
		t.Errorf("after the edit the API has %v", edited)
	}

	idle(p, "the endpoint's page")

	// At a phone's width neither screen is wider than the window.
	p.run("phone width", chromedp.EmulateViewport(390, 844))
	p.until("the log at phone width", `document.querySelectorAll('#deliveries-table tbody tr').length === 20`, wait)
	p.shot("integrations-03-phone-endpoint")
	if w, _ := strconv.Atoi(p.eval(`String(document.documentElement.scrollWidth)`)); w > 390 {
		t.Errorf("the endpoint's page is %d px wide at 390 px", w)
	}
	p.run("edit at phone width", chromedp.Click(chromedp.CSS("#edit-endpoint")))
	p.until("the edit form at phone width", `!!document.querySelector('#endpoint-edit')`, wait)
	if w, _ := strconv.Atoi(p.eval(`String(document.documentElement.scrollWidth)`)); w > 390 {
		t.Errorf("the endpoint's page with its edit form is %d px wide at 390 px", w)
	}
	p.run("edit cancelled", chromedp.Click(chromedp.CSS("#edit-cancel")))
	p.until("the edit form gone", `!document.querySelector('#endpoint-edit')`, wait)

	// 410 Gone disables it: a banner on its page and the list, and the nav
	// item, in words.
	rc.setStatus(http.StatusGone)
	p.run("a test event the receiver refuses as gone", chromedp.Click(chromedp.CSS("#send-test")))
	p.until("the disabled banner", `(() => { const b = document.querySelector('#disabled-banner');
		return !!b && b.getAttribute('role') === 'alert' && b.innerText.includes('disabled') && b.innerText.includes('410 Gone') &&
			!!document.querySelector('#endpoint [data-state="disabled"]'); })()`, wait)
	p.until("the nav item says it", `(document.querySelector('#nav-integrations-alert')?.textContent || '').includes('1 disabled')`, wait)
	rc.setStatus(http.StatusNoContent)
	p.run("desktop width", chromedp.EmulateViewport(1280, 900))
	p.audit("endpoint (disabled)")

	// Another endpoint whose deliveries failed for five days (the domain's
	// rule, applied to a run that began six days ago).
	other := c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{"url": rc.srv.URL + "/other", "event_types": []string{"revision.failed"}}))["id"].(string)
	now := time.Now()
	if _, err := st.webhookStore().UpdateWebhook(context.Background(), org, other, space.Update[space.WebhookEndpoint]{At: now,
		Apply: func(e space.WebhookEndpoint) (space.WebhookEndpoint, error) {
			e, _ = e.AfterAttempt(space.RetryLater, now.Add(-6*24*time.Hour))
			return e.AfterAttempt(space.RetryLater, now)
		}}); err != nil {
		t.Fatal(err)
	}
	if s := c.must(200, c.do("GET", "/webhook-endpoints/"+other, nil)); s["state"] != "disabled" || s["state_reason"] != space.ReasonFailedTooLong {
		t.Fatalf("the failing endpoint is %v (%v)", s["state"], s["state_reason"])
	}
	p.visit("the list", "#/integrations")
	p.until("both disabled in the list's banner", `(() => { const b = document.querySelector('#disabled-banner');
		return !!b && b.innerText.includes('2 endpoints are disabled') && !!b.querySelector('[data-disabled="`+id+`"]') &&
			b.querySelector('[data-disabled="`+other+`"]').innerText.includes('every delivery failed for five days') &&
			document.querySelectorAll('#endpoints-table tr[data-state="disabled"]').length === 2; })()`, wait)
	p.until("the nav item says both", `(document.querySelector('#nav-integrations-alert')?.textContent || '').includes('2 disabled')`, wait)
	p.shot("integrations-04-disabled")
	p.audit("integrations (disabled)")
	p.run("phone width", chromedp.EmulateViewport(390, 844))
	p.until("the list at phone width", `document.querySelectorAll('#endpoints-table tr[data-state="disabled"]').length === 2`, wait)
	if w, _ := strconv.Atoi(p.eval(`String(document.documentElement.scrollWidth)`)); w > 390 {
		t.Errorf("the Integrations list is %d px wide at 390 px", w)
	}
	p.shot("integrations-05-phone-list")
	p.run("desktop width", chromedp.EmulateViewport(1280, 900))
	// The nav item says it from another screen too.
	p.visit("the spaces", "#/spaces")
	p.until("the spaces list", `!!document.querySelector('#spaces-table, .empty')`, wait)
	if got := p.eval(`document.querySelector('nav a[href="#/integrations"]').innerText`); !strings.Contains(got, "2 disabled") {
		t.Errorf("on the spaces screen the nav item reads %q", got)
	}

	// Another org signed in on the same page sees no mark; back, it is there.
	p.run("sign out", chromedp.Click(chromedp.CSS("#signout")))
	p.until("the sign-in form", `!!document.querySelector('#org-input')`, wait)
	p.run("sign in as another org", chromedp.SetValue(chromedp.CSS("#org-input"), org+"-other"), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
	p.until("the other org's spaces", `document.querySelector('#org').textContent.includes('-other') && !!document.querySelector('#spaces-table, .empty')`, wait)
	p.quiet("the other org, nothing out", 0)
	if got := p.eval(`document.querySelector('nav a[href="#/integrations"]').innerText`); got != "Integrations" {
		t.Errorf("another org's nav item reads %q", got)
	}
	p.run("sign out again", chromedp.Click(chromedp.CSS("#signout")))
	p.until("the sign-in form", `!!document.querySelector('#org-input')`, wait)
	p.run("sign in as the org", chromedp.SetValue(chromedp.CSS("#org-input"), org), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
	p.until("the nav item says both again", `(document.querySelector('#nav-integrations-alert')?.textContent || '').includes('2 disabled')`, wait)

	// Resume both: the banner and the nav's mark go.
	p.visit("the list", "#/integrations")
	p.until("the list", `document.querySelectorAll('#endpoints-table button[data-resume]').length === 2`, wait)
	p.run("resume the first", chromedp.Click(chromedp.CSS(`button[data-resume="`+id+`"]`)))
	p.until("one left disabled", `document.querySelector('#disabled-banner')?.innerText.includes('An endpoint is disabled') && (document.querySelector('#nav-integrations-alert')?.textContent || '').includes('1 disabled')`, wait)
	p.run("resume the other", chromedp.Click(chromedp.CSS(`button[data-resume="`+other+`"]`)))
	p.until("none disabled", `!document.querySelector('#disabled-banner') && !document.querySelector('#nav-integrations-alert') && document.querySelectorAll('#endpoints-table tr[data-state="enabled"]').length === 2`, wait)

	// Delete asks first.
	p.run("delete", chromedp.Click(chromedp.CSS(`button[data-delete="`+other+`"]`)))
	p.until("the confirmation", `!!document.querySelector('button[data-delete-confirm="`+other+`"]')`, wait)
	if n := len(endpoints()); n != 2 {
		t.Fatalf("asking to delete left %d endpoints, want 2 (nothing deleted yet)", n)
	}
	p.run("confirm", chromedp.Click(chromedp.CSS(`button[data-delete-confirm="`+other+`"]`)))
	p.until("deleted", `!document.querySelector('#endpoints-table tr[data-endpoint="`+other+`"]') && !!document.querySelector('#endpoints-table tr[data-endpoint="`+id+`"]')`, wait)
	if n := len(endpoints()); n != 1 {
		t.Errorf("%d endpoints after one was deleted, want 1", n)
	}
	idle(p, "the list")

	// Dark mode (the system setting): both screens dark, no axe violation.
	p.run("dark mode", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	p.until("the list in dark mode", `!!document.querySelector('#endpoints-table') && getComputedStyle(document.body).backgroundColor === 'rgb(13, 17, 23)'`, wait)
	p.audit("integrations (dark)")
	p.visit("the endpoint", "#/integrations/"+id)
	p.until("the endpoint in dark mode", `document.querySelectorAll('#deliveries-table tbody tr').length === 20`, wait)
	p.audit("endpoint (dark)")
	reqs, _ := proxy.stats()
	t.Logf("%d API requests, every one checked against openapi.yaml; screens audited: %s", len(reqs), strings.Join(p.audited, ", "))
}

// idle: the screen on view, left alone, sends one request a tick that runs.
func idle(p *page, screen string) {
	p.t.Helper()
	from, to := p.idleWindow(screen+", idle", 3)
	if sent, ran := to.Requests-from.Requests, to.Ran-from.Ran; sent != ran {
		p.t.Errorf("%s, idle, sent %d requests in %d ticks run, want one a tick", screen, sent, ran)
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
