package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"spaces"
	"spaces/infra/demo"
	"spaces/infra/openapitest"
	"spaces/infra/testwait"
	"spaces/shared/console"
	"spaces/shared/space"
)

// consoleProxy stands between the browser and the local stack: the
// console's own files and the development sign-in pass through; every other
// request is an API request and must be one the OpenAPI document describes
// (checked before it is sent, whatever the server would answer), and its
// answer must follow the document too.
type consoleProxy struct {
	t      testing.TB
	v      *openapitest.Validator
	assets map[string]bool
	srv    *httptest.Server
	mu     sync.Mutex
	api    []string // "METHOD /path?query status" of every API request
	bad    []string
	n304   int
	// hook, when set before the browser starts, sees each API request
	// first and answers it itself by returning true (a slow or failing
	// API for the tests of the console's bugs).
	hook func(w http.ResponseWriter, r *http.Request) bool
	// around, when set before the browser starts, is called as each API
	// request that passes goes to the stack, and what it returns once it
	// is answered (requests in flight, for the bulk work's bound).
	around func(r *http.Request) func()
}

// newConsoleProxy fronts st; ui, when not nil, serves the console's own
// files instead of the stack (another sign-in configuration).
func newConsoleProxy(t testing.TB, st *Stack, ui http.Handler) *consoleProxy {
	validatorOnce.Do(func() { validator = openapitest.New(t, spaces.OpenAPI) })
	p := &consoleProxy{t: t, v: validator, assets: map[string]bool{"GET /": true, "GET /console/config.json": true, "POST " + DevSignInPath: true, "POST " + DevApplySetupPath: true}}
	_ = fs.WalkDir(console.Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			p.assets["GET /console/"+path] = true
		}
		return nil
	})
	target, _ := url.Parse(st.APIURL)
	plain := httputil.NewSingleHostReverseProxy(target)
	checked := httputil.NewSingleHostReverseProxy(target)
	checked.Transport = checkRequests{p, openapitest.RoundTripper(t, validator, http.DefaultTransport)}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.assets[r.Method+" "+r.URL.Path] {
			if ui != nil {
				ui.ServeHTTP(w, r)
				return
			}
			plain.ServeHTTP(w, r)
			return
		}
		if p.hook != nil && p.hook(w, r) {
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		if p.around != nil {
			done := p.around(r)
			checked.ServeHTTP(rec, r)
			done()
		} else {
			checked.ServeHTTP(rec, r)
		}
		p.mu.Lock()
		p.api = append(p.api, fmt.Sprintf("%s %s %d", r.Method, r.URL.RequestURI(), rec.code))
		if rec.code == http.StatusNotModified {
			p.n304++
		}
		p.mu.Unlock()
	}))
	t.Cleanup(p.srv.Close)
	return p
}

type checkRequests struct {
	p    *consoleProxy
	next http.RoundTripper
}

func (c checkRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	if m := c.p.v.RequestMismatches(req, body); len(m) > 0 {
		c.p.mu.Lock()
		c.p.bad = append(c.p.bad, fmt.Sprintf("%s %s: %s", req.Method, req.URL.RequestURI(), strings.Join(m, "; ")))
		c.p.mu.Unlock()
		c.p.t.Errorf("the console sent a request openapi.yaml does not describe: %s %s\n  - %s", req.Method, req.URL.RequestURI(), strings.Join(m, "\n  - "))
	}
	return c.next.RoundTrip(req)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (p *consoleProxy) stats() (requests []string, notModified int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.api...), p.n304
}

// browser starts Debian's chromium headless with nothing that reaches
// outside the machine, in a fresh profile.
func browser(t testing.TB) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: make test installs it (apt-get install -y chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// page drives one browser tab in a test.
type page struct {
	t       testing.TB
	ctx     context.Context
	base    string
	shots   string
	axe     string   // axe-core's source, once loaded
	audited []string // the screens audit checked
}

func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		p.t.Fatalf("%s: %v", what, err)
	}
}

// until waits for a JavaScript expression to be truthy (a bound against
// hanging, not a timing goal).
func (p *page) until(what, expr string, limit time.Duration) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, limit+5*time.Second)
	defer cancel()
	// An expression that throws (an element not drawn yet) is not true
	// yet: chromedp's Poll would end at the first exception.
	guarded := "(() => { try { return !!(" + expr + "); } catch (e) { return false; } })()"
	if ok, err := chromedp.Run(ctx, chromedp.Poll[bool](guarded, chromedp.WithPollingTimeout(limit), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil || !ok {
		p.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		text, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText.slice(0, 1500)`))
		recent, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(window.__spacesStats ? window.__spacesStats.recent : []).map(r => r.method + ' ' + r.path + ' ' + r.status).join('\n')`))
		p.t.Fatalf("waiting for %s (%s): %v\npage: %s\nthe console's last requests:\n%s", what, expr, err, text, recent)
	}
}

// untilAcrossLoads is until for an expression that must hold after the page
// has navigated away and back (a sign-in redirect): evaluation errors while
// the page changes are retried.
func (p *page) untilAcrossLoads(what, expr string, limit time.Duration) {
	p.t.Helper()
	var err error
	if testwait.UntilEvery(limit, 100*time.Millisecond, func() bool {
		// An evaluation cut by the page's navigation never answers: each
		// try has its own bound, one a busy machine does not reach.
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		defer cancel()
		var ok bool
		ok, err = chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		return err == nil && ok
	}) != nil {
		p.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		p.t.Fatalf("waiting %s for %s (%s): %v", limit, what, expr, err)
	}
}

// idleScript, run in every document before the console's own code, counts
// what an idle screen does in window.__net: the timer ticks (every
// setInterval callback; the console's only interval is its refresh), the
// ticks that ran (sent a request before returning: a tick that finds the
// previous one still busy sends none), the ticks still running, and the
// requests in flight. A request's count (__spacesStats) and its fetch start
// in the same task and end in the same task, so whenever no request is out
// and no tick is running, the counters agree with each other.
const idleScript = `(() => {
  const net = window.__net = { ticks: 0, ran: 0, running: 0, inflight: 0 };
  const fetch = window.fetch.bind(window);
  window.fetch = (...a) => { net.inflight++; return fetch(...a).finally(() => { net.inflight--; }); };
  const every = window.setInterval.bind(window);
  window.setInterval = (fn, ms, ...a) => every((...b) => {
    net.ticks++;
    const sent = window.__spacesStats ? window.__spacesStats.requests : 0;
    const v = fn(...b);
    if (window.__spacesStats && window.__spacesStats.requests !== sent) {
      net.ran++;
      if (v && typeof v.finally === 'function') { net.running++; v.finally(() => { net.running--; }); }
    }
    return v;
  }, ms, ...a);
})()`

// watchIdle makes every document the page opens from now on keep
// window.__net (idleScript); call it before the first navigation.
func (p *page) watchIdle() {
	p.t.Helper()
	if _, err := chromedp.Call(p.ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: idleScript}); err != nil {
		p.t.Fatalf("install the idle counters: %v", err)
	}
}

// idleCounts is one consistent reading of an idle screen's counters.
type idleCounts struct {
	Ticks, Ran, Requests, NotModified int
}

// quiet waits until at least ran ticks have run in the document and then
// for a moment with no request out and no tick running, and reads the
// counters there (a bound against hanging, not a timing goal).
func (p *page) quiet(what string, ran int) idleCounts {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](fmt.Sprintf(`new Promise(done => {
		const check = () => {
			const n = window.__net, s = window.__spacesStats;
			if (n && s && n.ran >= %d && n.inflight === 0 && n.running === 0) done([n.ticks, n.ran, s.requests, s.notModified]);
			else setTimeout(check, 20);
		};
		check();
	})`, ran), chromedp.EvalAwaitPromise))
	if err != nil || len(v) != 4 {
		p.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		p.t.Fatalf("waiting for %s (%d ticks run, then nothing out): %v", what, ran, err)
	}
	return idleCounts{Ticks: v[0], Ran: v[1], Requests: v[2], NotModified: v[3]}
}

// settled waits until the screen on view has run a tick of its own after
// the one it starts with (ticks never overlap, so its first answers are
// in) and nothing is out, and reads the counters there.
func (p *page) settled(what string) idleCounts {
	p.t.Helper()
	return p.quiet(what+", a tick run", p.quiet(what, 0).Ran+1)
}

// idleWindow measures n ticks run of the screen on view, left alone, in
// which nothing changed: a request answered other than 304 means the
// screen saw a change (a probe's write, a job's end) and rightly read
// again, which is not idleness, so that window is measured again, at most
// 5 times. The caller judges the counts; a screen that never answers 304
// still ends here, with its last window.
func (p *page) idleWindow(what string, n int) (from, to idleCounts) {
	p.t.Helper()
	for try := range 5 {
		from = p.settled(what)
		to = p.quiet(fmt.Sprintf("%s, %d more ticks run", what, n), from.Ran+n)
		if changed := (to.Requests - from.Requests) - (to.NotModified - from.NotModified); changed == 0 {
			return from, to
		} else if try < 4 {
			p.t.Logf("%s: %d requests answered with a change in the window; measuring again", what, changed)
		}
	}
	return from, to
}

// axeVersion is the axe-core release make test installs (make browser)
// into the cache outside the repository.
const axeVersion = "4.11.0"

func axeSource(t testing.TB) string {
	home, _ := os.UserHomeDir()
	file := filepath.Join(home, ".cache", "spaces", "axe-"+axeVersion, "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("axe-core %s is not installed (make test installs it): %v", axeVersion, err)
	}
	return string(b)
}

// audit runs axe-core's WCAG 2 A and AA rules on the screen as it is and
// fails on every violation.
func (p *page) audit(screen string) {
	p.t.Helper()
	if p.axe == "" {
		p.axe = axeSource(p.t)
	}
	if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](p.axe+";true")); err != nil {
		p.t.Fatalf("load axe-core: %v", err)
	}
	res, err := chromedp.Run(p.ctx, chromedp.Evaluate[struct {
		Passes     int
		Violations []any
	}](`axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}).then(r => ({passes: r.passes.length,
		violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, targets: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("axe-core on %s: %v", screen, err)
	}
	if len(res.Violations) > 0 {
		p.t.Errorf("accessibility violations (axe-core %s, WCAG 2.1 A/AA) on %s: %v", axeVersion, screen, res.Violations)
	}
	if res.Passes == 0 {
		p.t.Errorf("axe-core checked nothing on %s", screen)
	}
	p.audited = append(p.audited, screen)
}

// visit moves the single-page app to a route (a fragment change, no reload).
func (p *page) visit(what, hash string) {
	p.t.Helper()
	p.eval(`location.hash = ` + strconv.Quote(hash))
}

// eval evaluates a JavaScript expression that yields a string.
func (p *page) eval(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (p *page) shot(name string) {
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(p.shots, name+".png")
	if err := os.WriteFile(file, buf, 0o644); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p.t.Logf("screenshot %s", file)
}

func (p *page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		p.t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// screenshotDir is where the browser tests save their screenshots: outside
// the repository ($SPACES_SCREENSHOTS, else a temporary folder kept after
// the run so the screens can be looked at).
func screenshotDir(t testing.TB) string {
	dir := os.Getenv("SPACES_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "spaces-console-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The BYOC flow end to end in a real browser against the local stack with
// the demo clouds: sign in, connect an AWS account, pick demo-eks-1,
// register, see it go active without reloading, open its timeline, create a
// namespace, create an environment, deregister with the confirmation that
// lists the cascade, see the environment gated, re-bind it, watch a flapping
// cluster go inactive and back in the list, and see that another org sees
// none of it. Every API request the console makes is checked against
// openapi.yaml by the proxy in front of the stack.
func TestConsoleInBrowser(t *testing.T) {
	st := startWith(t, Config{
		// The flapping cluster stays up long enough to be seen active and
		// down long enough for three failed probes a second apart.
		Demo:           &demo.Options{FlapUp: 8 * time.Second, FlapDown: 12 * time.Second},
		Probing:        ProbingConfig{Interval: time.Second},
		ConsoleRefresh: time.Second,
	})
	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	org := "org-" + uuid.NewString()[:8]
	const wait = time.Minute

	// Sign in (development sign-in for an org).
	p.run("open the console", chromedp.Navigate(p.base+"/"))
	p.until("the sign-in form", `!!document.querySelector('#org-input')`, wait)
	p.shot("01-sign-in")
	p.audit("sign-in")
	p.run("sign in", chromedp.SetValue(chromedp.CSS("#org-input"), org), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
	p.until("the empty spaces list", `document.querySelector('main').innerText.includes('No space is registered yet')`, wait)
	stored := p.eval(`location.href + ' ' + document.cookie`)
	if strings.Contains(stored, "ey") {
		t.Errorf("a token is in the URL or a cookie: %s", stored)
	}
	p.shot("02-spaces-empty")
	p.audit("spaces (empty)")

	// Connect an AWS account with the demo identity, typed in.
	conn := demo.Connection(space.AWS)
	p.run("open connect", chromedp.Click(chromedp.CSS(`nav a[href="#/connect"]`)))
	p.until("the connect form", `!!document.querySelector('#conn-roleArn')`, wait)
	p.run("fill the connection",
		chromedp.SendKeys(chromedp.CSS("#acct-name"), "demo aws"),
		chromedp.SendKeys(chromedp.CSS("#conn-roleArn"), "arn:aws:iam::bad"),
		chromedp.Click(chromedp.CSS(`#connect-form button[type=submit]`)))
	// A bad role ARN is named next to its field.
	p.until("the field error on roleArn", `document.querySelector('#conn-roleArn').getAttribute('aria-invalid') === 'true' && !!document.querySelector('#conn-roleArn-err')`, wait)
	p.shot("03-connect-field-error")
	p.audit("connect account (with a field error)")
	p.run("fix the role ARN",
		chromedp.SetValue(chromedp.CSS("#conn-roleArn"), conn["roleArn"]),
		chromedp.Click(chromedp.CSS(`#connect-form button[type=submit]`)))

	// The account is pending: the page shows the setup Spaces generated for
	// this org, as numbered steps each with its copy button, without the
	// API's verify call or a token (the card has its own button), and, in
	// the local stack, the button that applies it in the simulated cloud.
	p.until("the setup and its verify button", `!!document.querySelector('#verify') && document.querySelector('#setup').innerText.includes('sts:ExternalId')`, wait)
	p.shot("03b-connect-setup")
	p.audit("trust setup")
	card := p.text("#setup-card")
	for _, bad := range []string{"curl", "$TOKEN", "Bearer", "/verify", "POST "} {
		if strings.Contains(card, bad) {
			t.Errorf("the setup card says %q:\n%s", bad, card)
		}
	}
	if steps := p.eval(`String(document.querySelectorAll('#setup > li').length) + ' ' + document.querySelectorAll('#setup > li > button.copy-step').length`); steps != "2 2" {
		t.Errorf("the AWS setup's steps and their copy buttons: %s, want 2 2", steps)
	}
	if p.eval(`String(!!document.querySelector('#apply-demo'))`) != "true" {
		t.Error("the local console has no Apply in the simulated cloud button")
	}
	// Verified before the setup is applied: refused, and the status line
	// says so (it used to keep saying pending); the card checks again by
	// itself.
	p.until("the status line before verifying", `document.querySelector('#setup-status').innerText.includes('pending')`, wait)
	p.run("verify too early", chromedp.Click(chromedp.CSS("#verify")))
	p.until("the refusal on the status line", `document.querySelector('#setup-status').innerText.includes('failed (AccessDenied)')`, wait)
	p.until("the automatic re-check announced", `document.querySelector('#setup-note').innerText.includes('Checking again in 10 s')`, wait)
	p.audit("trust setup (refused)")
	// The customer applies it in their cloud (here the simulated one): the
	// card's next check finds it and moves on to the cluster picker.
	acctID := p.eval(`location.hash.split('/')[2]`)
	pending, err := st.Service.GetAccount(t.Context(), org, acctID)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Demo.Cloud.ApplySetup(pending); err != nil {
		t.Fatal(err)
	}

	// Pick demo-eks-1 in the region and register it.
	p.until("the cluster picker", `!!document.querySelector('#region')`, wait)
	p.run("choose the region", chromedp.SetValue(chromedp.CSS("#region"), demo.AWSRegion), chromedp.Click(chromedp.CSS(`#region-form button`)))
	p.until("demo-eks-1 in the picker", `!!document.querySelector('tr[data-cluster="demo-eks-1"] button')`, wait)
	p.shot("04-cluster-picker")
	p.audit("cluster picker")
	p.run("register demo-eks-1", chromedp.Click(chromedp.CSS(`tr[data-cluster="demo-eks-1"] button`)))
	p.until("the space detail", `location.hash.startsWith('#/spaces/') && !!document.querySelector('#identity')`, wait)
	eks1 := p.eval(`location.hash.slice('#/spaces/'.length)`)
	// It turns active on this page without a reload.
	p.eval(`window.__marker = 'same page'`)
	p.until("demo-eks-1 active", `document.querySelector('h1 .badge').dataset.status === 'active'`, wait)
	same := p.eval(`window.__marker`)
	if same != "same page" {
		t.Error("the page was reloaded while waiting for the space to turn active")
	}
	// The timeline shows the active band, the probe its server version.
	p.until("an active band in the timeline", `!!document.querySelector('#history svg .band-active')`, wait)
	p.until("the probe's server version", `document.querySelector('#probe').innerText.includes('v1.')`, wait)

	// Create a namespace there.
	p.run("create a namespace", chromedp.SendKeys(chromedp.CSS("#ns-name"), "payments"), chromedp.SendKeys(chromedp.CSS("#ns-labels"), "team=payments"),
		chromedp.Click(chromedp.CSS(`#ns-form button[type=submit]`)))
	p.until("the new namespace listed", `!!document.querySelector('#ns-table tr[data-ns="payments"]')`, wait)
	dc, err := st.Demo.Cluster("demo-eks-1")
	if err != nil {
		t.Fatal(err)
	}
	if !containsString(dc.Namespaces(), "payments") {
		t.Errorf("the cluster holds %v, want payments among them", dc.Namespaces())
	}
	p.shot("05-space-detail")
	p.audit("space detail")

	// A second cluster through the picker, where demo-eks-1 is now marked
	// registered and linked to its space.
	p.visit("open the picker again", "#/connect")
	p.until("the account listed", `!!document.querySelector('#accounts-table a')`, wait)
	p.run("pick from the account", chromedp.Click(chromedp.CSS(`#accounts-table a`)))
	p.until("demo-eks-1 marked registered", `!!document.querySelector('tr[data-cluster="demo-eks-1"] a[href="#/spaces/`+eks1+`"]')`, wait)
	p.run("register demo-eks-2", chromedp.Click(chromedp.CSS(`tr[data-cluster="demo-eks-2"] button`)))
	p.until("demo-eks-2 active", `location.hash.startsWith('#/spaces/') && document.querySelector('h1') && document.querySelector('h1').innerText.includes('demo-eks-2') && document.querySelector('h1 .badge').dataset.status === 'active'`, wait)

	// Create an environment on demo-eks-1 with the picker.
	p.run("open environments", chromedp.Click(chromedp.CSS(`nav a[href="#/environments"]`)))
	p.until("the picker offers demo-eks-1", `!!document.querySelector('#env-space option[value="`+eks1+`"]')`, wait)
	p.run("create an environment", chromedp.SendKeys(chromedp.CSS("#env-name"), "checkout"),
		chromedp.SetValue(chromedp.CSS("#env-space"), eks1), chromedp.SendKeys(chromedp.CSS("#env-namespace"), "payments"),
		chromedp.Click(chromedp.CSS(`#env-form button[type=submit]`)))
	p.until("the environment listed, ready", `!!document.querySelector('tr[data-env="checkout"] .badge.s-active')`, wait)

	// Deregister demo-eks-1: the confirmation lists the environment.
	p.visit("open demo-eks-1", "#/spaces/"+eks1)
	p.until("the bound environment on the space", `!!document.querySelector('#bound-envs') && document.querySelector('#bound-envs').innerText.includes('checkout')`, wait)
	p.run("ask to deregister", chromedp.Click(chromedp.CSS("#deregister")))
	p.until("the confirmation", `!!document.querySelector('#deregister-dialog[open]')`, wait)
	cascade := p.text("#cascade-list")
	for _, want := range []string{"gate 1 environment", "checkout", "no kubeconfig can be minted", "running"} {
		if !strings.Contains(cascade, want) {
			t.Errorf("the confirmation does not say %q:\n%s", want, cascade)
		}
	}
	p.shot("06-deregister-confirmation")
	p.audit("deregister confirmation")
	p.run("confirm", chromedp.Click(chromedp.CSS("#deregister-confirm")))
	p.until("back on the list without demo-eks-1", `location.hash === '#/spaces' && !!document.querySelector('tr[data-name="demo-eks-2"]') && !document.querySelector('tr[data-space="`+eks1+`"]')`, wait)

	// The cascade gates the environment; the page shows it without a reload.
	p.run("open environments", chromedp.Click(chromedp.CSS(`nav a[href="#/environments"]`)))
	p.until("the gate banner", `!!document.querySelector('tr[data-env="checkout"] [data-gate="Space deregistered"]')`, wait)
	// The gated environment names the deregistered space (its tombstone),
	// and the space's own page says when and by whom, not a bare 404.
	p.until("the tombstone on the gated environment", `!!document.querySelector('tr[data-env="checkout"] [data-tombstone="`+eks1+`"]') && document.querySelector('tr[data-env="checkout"] [data-tombstone]').innerText.includes('demo-eks-1')`, wait)
	p.shot("07-environment-gated")
	p.audit("environments (gated)")
	// Its page refuses a push before it is sent, and says why.
	p.run("open the gated environment", chromedp.Click(chromedp.CSS(`tr[data-env="checkout"] td a`)))
	p.until("Push disabled with the reason", `!!document.querySelector('#push-form') && document.querySelector('#push-form button[type=submit]').disabled && document.querySelector('#push-note').textContent.includes('re-bind')`, wait)
	p.visit("open the deregistered space", "#/spaces/"+eks1)
	p.until("its tombstone", `!!document.querySelector('#tombstone') && document.querySelector('h1').innerText.includes('demo-eks-1')`, wait)
	if txt := p.text("#tombstone"); !strings.Contains(txt, "deregistered") || !strings.Contains(txt, " by ") {
		t.Errorf("the deregistered space's page: %q", txt)
	}
	p.audit("deregistered space")
	p.run("open environments", chromedp.Click(chromedp.CSS(`nav a[href="#/environments"]`)))
	p.until("the gate banner again", `!!document.querySelector('tr[data-env="checkout"] [data-gate="Space deregistered"]')`, wait)
	// Re-bind it to demo-eks-2, once the picker's choices have come.
	p.until("demo-eks-2 among the choices", `[...document.querySelectorAll('tr[data-env="checkout"] select option')].some(o => o.textContent.startsWith('demo-eks-2'))`, wait)
	eks2 := p.eval(`[...document.querySelectorAll('tr[data-env="checkout"] select option')].find(o => o.textContent.startsWith('demo-eks-2')).value`)
	p.run("re-bind", chromedp.SetValue(chromedp.CSS(`tr[data-env="checkout"] select`), eks2), chromedp.Click(chromedp.CSS(`tr[data-env="checkout"] .rebind button`)))
	p.until("the environment ready again", `!!document.querySelector('tr[data-env="checkout"] .badge.s-active') && document.querySelector('tr[data-env="checkout"]').innerText.includes('demo-eks-2')`, wait)

	// A flapping cluster, registered through the API, seen going inactive
	// and back on the list, which only polls.
	c := newClient(t, st, org)
	var flapping demo.Spec
	for _, s := range demo.Specs {
		if s.Flaps {
			flapping = s
		}
	}
	acct := c.connect(st.Demo.Cloud, flapping.Provider, demo.Connection(flapping.Provider))
	c.must(201, c.do("POST", "/spaces", map[string]any{"provider": flapping.Provider, "space_type": "kubernetes", "cloud_account_id": acct, "config": flapping.Config()}))
	p.run("open the list", chromedp.Click(chromedp.CSS(`nav a[href="#/spaces"]`)))
	p.eval(`window.__marker = 'list'`)
	row := `document.querySelector('tr[data-name="` + flapping.Name + `"] .badge')`
	p.until("the flapping space listed", row+` !== null`, wait)
	p.until("the flapping space inactive", row+`.dataset.status === 'inactive'`, wait)
	p.until("its reason shown", `document.querySelector('tr[data-name="`+flapping.Name+`"] [data-reason]').dataset.reason === 'Unreachable'`, wait)
	// Its Region is the location its cloud answered at registration, not
	// its resource group.
	p.until("its location as its region", `document.querySelector('tr[data-name="`+flapping.Name+`"] td[data-label="Region"]').innerText === '`+flapping.Location+`'`, wait)
	p.until("the inactive count", `document.querySelector('[data-count="inactive"] b').textContent === '1'`, wait)
	p.shot("08-spaces-list-inactive")
	p.audit("spaces (one inactive)")
	p.until("the flapping space active again", row+`.dataset.status === 'active'`, wait)
	same = p.eval(`window.__marker`)
	if same != "list" {
		t.Error("the list was reloaded while watching the flapping space")
	}
	p.shot("09-spaces-list")

	// Polling an unchanged page costs 304s; a phone-width view still shows
	// every space.
	_, n304 := proxy.stats()
	if n304 == 0 {
		t.Error("the list polled without a single 304")
	}
	p.run("phone width", chromedp.EmulateViewport(390, 844))
	p.until("the list at phone width", `document.querySelectorAll('#spaces-table tbody tr').length === 2`, wait)
	p.shot("10-spaces-list-phone")
	p.audit("spaces at phone width")
	p.run("desktop width", chromedp.EmulateViewport(1280, 900))

	// Another org sees none of it.
	p.run("sign out", chromedp.Click(chromedp.CSS("#signout")))
	p.until("the sign-in form", `!!document.querySelector('#org-input')`, wait)
	p.run("sign in as another org", chromedp.SetValue(chromedp.CSS("#org-input"), org+"-other"), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
	p.until("an empty list for the other org", `document.querySelector('main').innerText.includes('No space is registered yet')`, wait)
	p.visit("open demo-eks-2 as the other org", "#/spaces/"+eks2)
	p.until("not found for the other org", `document.querySelector('main').innerText.includes('another org')`, wait)
	p.visit("open environments as the other org", "#/environments")
	p.until("no environment for the other org", `document.querySelector('main').innerText.includes('No environment yet')`, wait)

	requests, _ := proxy.stats()
	if len(requests) == 0 {
		t.Fatal("the proxy saw no API request")
	}
	for _, r := range requests {
		if strings.Contains(r, "token") || strings.Contains(r, "ey") && strings.Contains(r, ".") && strings.Contains(r, "access") {
			t.Errorf("a request line carries a token: %s", r)
		}
	}
	t.Logf("%d API requests, every one checked against openapi.yaml; screens audited with axe-core: %s; screenshots in %s",
		len(requests), strings.Join(p.audited, ", "), p.shots)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// signIn opens the console and signs in as org with the development
// sign-in.
func (p *page) signIn(org string) {
	p.t.Helper()
	p.run("open the console", chromedp.Navigate(p.base+"/"))
	p.until("the sign-in form", `!!document.querySelector('#org-input')`, time.Minute)
	p.run("sign in", chromedp.SetValue(chromedp.CSS("#org-input"), org), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
}
