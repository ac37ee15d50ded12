package local

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/demo"
	"spaces/shared/space"
)

// TestConsoleAgentMode registers a cluster in agent mode from the console
// and watches its space turn active: the picker offers the connectivity
// choice; the space's page shows the install command and its bootstrap
// Secret once (the token is in the Secret's manifest, never in the
// command, and kept nowhere: not in storage, not in the URL, not on the
// page once left), says it waits for the first connection (unknown,
// AgentNotConnected); the agent is then started with the token the page
// showed, as the proof test does (the demo's InstallAgent: the rendered
// manifests applied to the real kube-apiserver, the agent in-process as
// its ServiceAccount), and the same page turns active by itself, its facts
// card showing the node count the agent reported by minor. The list
// and the page show the connectivity beside the status. Every new screen
// passes axe-core.
func TestConsoleAgentMode(t *testing.T) {
	st := startWith(t, Config{
		Demo:           &demo.Options{},
		Probing:        ProbingConfig{Interval: time.Second},
		ConsoleRefresh: time.Second,
	})
	if st.Demo.Real == nil {
		t.Fatalf("the demo has no real API server for the agent: %s", st.Demo.RealMissing)
	}
	org := "org-" + uuid.NewString()[:8]
	// A ready demo AWS account (the console's connect flow is
	// TestConsoleInBrowser's).
	c := newClient(t, st, org)
	acct := c.must(201, c.do("POST", "/cloud-accounts", map[string]any{"provider": "aws", "name": "demo", "connection": demo.Connection(space.AWS)}))
	if err := st.Demo.Cloud.ApplySetup(accountOf(t, acct)); err != nil {
		t.Fatal(err)
	}
	acctID := acct["id"].(string)
	c.must(200, c.do("POST", "/cloud-accounts/"+acctID+"/verify", nil))

	proxy := newConsoleProxy(t, st, nil)
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	p.signIn(org)
	p.until("the spaces list", `document.querySelector('main').innerText.includes('No space is registered yet')`, wait)

	// The picker offers the connectivity; choose the agent.
	p.visit("the cluster picker", "#/accounts/"+acctID+"/clusters")
	p.until("the region form", `!!document.querySelector('#region')`, wait)
	p.run("choose the region", chromedp.SetValue(chromedp.CSS("#region"), demo.AWSRegion), chromedp.Click(chromedp.CSS(`#region-form button`)))
	p.until("demo-eks-apps in the picker", `!!document.querySelector('tr[data-cluster="demo-eks-apps"] button')`, wait)
	if got := p.eval(`document.querySelector('#connectivity input:checked').value`); got != "direct" {
		t.Errorf("the picker's default connectivity is %q, want direct", got)
	}
	p.run("choose agent mode", chromedp.Click(chromedp.CSS(`#conn-mode-agent`)))
	p.shot("agent-01-picker")
	p.audit("cluster picker (connectivity choice)")
	p.run("register demo-eks-apps in agent mode", chromedp.Click(chromedp.CSS(`tr[data-cluster="demo-eks-apps"] button`)))

	// The space's page: the install command, once, and the wait.
	p.until("the install command", `location.hash.startsWith('#/spaces/') && !!document.querySelector('#install-command')`, wait)
	id := p.eval(`location.hash.slice('#/spaces/'.length)`)
	p.until("waiting for the first connection", `document.querySelector('h1 .badge').dataset.status === 'unknown' &&
		!!document.querySelector('h1 [data-reason="AgentNotConnected"]') && !!document.querySelector('h1 [data-connectivity="agent"]') &&
		document.querySelector('#agent-state').dataset.state === 'unknown'`, wait)
	// Waiting is no failure: there is none to count yet.
	if probe := p.text("#probe"); regexp.MustCompile(`Consecutive failures\s*[1-9]`).MatchString(probe) {
		t.Errorf("while waiting for the agent the probe card counts failures: %q", probe)
	}
	install, manifest := p.text("#install-command"), p.text("#install-manifest")
	m := regexp.MustCompile(`\n  token: "(spb1\.[^"]+)"`).FindStringSubmatch(manifest)
	if m == nil || install != "kubectl apply -f spaces-agent.yaml -f -" || !strings.Contains(manifest, "name: spaces-agent-bootstrap") {
		t.Fatalf("the page shows %q and %q, not the install command and its bootstrap Secret", install, manifest)
	}
	token := m[1]
	if note := p.text("#install-note"); strings.Contains(note, " ago") {
		t.Errorf("the token's expiry reads %q", note)
	}
	if kept := p.eval(`location.href + JSON.stringify(localStorage) + JSON.stringify(sessionStorage) + document.cookie`); strings.Contains(kept, token) {
		t.Errorf("the bootstrap token is kept in the URL, storage or a cookie")
	}
	p.shot("agent-02-install")
	p.audit("agent space (install command, waiting)")
	if sp := c.must(200, c.do("GET", "/spaces/"+id, nil)); sp["connectivity"] != "agent" || sp["status"] != "unknown" {
		t.Fatalf("the registered space is %v %v, want agent, unknown", sp["connectivity"], sp["status"])
	}

	// The customer runs the install: the agent starts with the page's token
	// and the same page turns active.
	p.eval(`window.__marker = 'same page'`)
	// Its cluster's nodes (Node objects on the real API server, their
	// kubelet versions set through the status subresource), which the
	// agent counts for the facts card.
	admin := kubernetes.NewForConfigOrDie(st.Demo.Real.RESTConfig())
	for i, v := range []string{"v1.31.2", "v1.31.5", "v1.30.4"} {
		n, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + string(rune('a'+i))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.NodeInfo.KubeletVersion = v
		if _, err := admin.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Demo.InstallAgent(t.Context(), token); err != nil {
		t.Fatal(err)
	}
	p.until("the agent space active", `document.querySelector('h1 .badge').dataset.status === 'active' &&
		document.querySelector('#agent-state').dataset.state === 'active'`, wait)
	if p.eval(`window.__marker`) != "same page" {
		t.Error("the page was reloaded while waiting for the agent")
	}
	p.until("the cluster's version from the lease", `document.querySelector('#probe').innerText.includes('v1.')`, wait)
	p.until("the node count from the agent", `document.querySelector('#space-nodes').textContent === '3 (v1.31: 2, v1.30: 1)'`, wait)
	// On the same page: the spent install command is gone, and the
	// namespaces card shows the agent's report without a reload.
	p.until("the spent command gone", `!document.querySelector('#install-command') && !!document.querySelector('#agent-reissue')`, wait)
	p.until("the agent's namespaces", `document.querySelector('#ns-agent').innerText.includes('As the agent reported') && !!document.querySelector('#ns-table tr[data-ns="kube-system"]')`, wait)
	if p.eval(`window.__marker`) != "same page" {
		t.Error("the page was reloaded while waiting for the agent's report")
	}
	p.shot("agent-03-active")
	p.audit("agent space (active)")

	// The list shows the connectivity beside the status.
	p.visit("the spaces list", "#/spaces")
	p.until("the agent space listed as active via agent", `!!document.querySelector('tr[data-space="`+id+`"] [data-status="active"]') &&
		!!document.querySelector('tr[data-space="`+id+`"] [data-connectivity="agent"]')`, wait)
	p.audit("spaces list (agent space)")

	// Back on the page, the command is gone: it was shown once.
	p.visit("the space again", "#/spaces/"+id)
	p.until("the page without the command", `!!document.querySelector('#agent-reissue') && !document.querySelector('#install-command')`, wait)
	if strings.Contains(p.eval(`document.body.innerText`), token) {
		t.Error("the bootstrap token is on the page after it was left")
	}
	// A new command can be issued (a reinstall), shown once the same way.
	p.run("issue a new install command", chromedp.Click(chromedp.CSS("#agent-reissue")))
	p.until("the new install command", `!!document.querySelector('#install-command')`, wait)
	if again := p.text("#install-manifest"); !strings.Contains(again, `token: "spb1.`) || strings.Contains(again, token) {
		t.Errorf("the re-issued command is %q", again)
	}
	p.audit("agent space (re-issued install command)")
}
