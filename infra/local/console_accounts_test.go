package local

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// TestConsoleDuplicateAccount: connecting an identity the org has
// connected already is asked about first, naming the account that has it,
// with nothing sent; submitted again, it is connected.
func TestConsoleDuplicateAccount(t *testing.T) {
	st := startWith(t, Config{Probing: ProbingConfig{Disabled: true}, ConsoleRefresh: time.Second})
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	first := c.account("aws") // "aws prod", arn:aws:iam::123456789012:role/spaces
	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	posts := func() int {
		reqs, _ := proxy.stats()
		n := 0
		for _, r := range reqs {
			if strings.HasPrefix(r, "POST /cloud-accounts ") {
				n++
			}
		}
		return n
	}
	p.signIn(org)
	p.until("the list", `!!document.querySelector('#spaces-table, .empty')`, wait)
	p.visit("the accounts", "#/connect")
	p.until("the account listed", `!!document.querySelector('#accounts-table tr[data-account="`+first+`"]')`, wait)
	p.run("connect the same role", chromedp.SetValue(chromedp.CSS("#acct-name"), "aws again"),
		chromedp.SetValue(chromedp.CSS("#conn-roleArn"), "arn:aws:iam::123456789012:role/spaces"),
		chromedp.Click(chromedp.CSS(`#connect-form button[type=submit]`)))
	p.until("the warning", `!!document.querySelector('#dup-warning a[href="#/accounts/`+first+`/clusters"]')`, wait)
	if n := posts(); n != 0 {
		t.Errorf("the duplicate was sent before it was confirmed (%d POSTs)", n)
	}
	p.audit("accounts (same identity)")
	p.run("connect it anyway", chromedp.Click(chromedp.CSS(`#connect-form button[type=submit]`)))
	p.until("the new account's clusters", `location.hash.startsWith('#/accounts/') && !location.hash.includes('`+first+`')`, wait)
	if n := posts(); n != 1 {
		t.Errorf("connecting it anyway sent %d POSTs, want 1", n)
	}
	if n := len(c.must(200, c.do("GET", "/cloud-accounts", nil))["items"].([]any)); n != 2 {
		t.Errorf("the org has %d accounts, want 2", n)
	}
}
