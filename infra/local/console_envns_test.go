package local

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/demo"
	"spaces/shared/space"
)

// TestConsoleEnvironmentNamespace: the Environments create form checks the
// namespace against the chosen space's cluster (the demo's real
// kube-apiserver): an existing one is said to exist; a missing one is said
// to make the first push fail, with "Create namespace … too", which creates
// it after the environment (the result shown, the namespace on the API
// server, a revision deployed into it); left unticked, nothing is created;
// a listing that fails (the cluster unreachable) says the first push will
// fail until the namespace exists. A revision that failed for want of its
// namespace gets a hint on the environment's page.
func TestConsoleEnvironmentNamespace(t *testing.T) {
	st := startWith(t, Config{
		Demo:           &demo.Options{},
		Probing:        ProbingConfig{Interval: 2 * time.Second},
		Revisions:      RevisionsConfig{Wait: time.Second},
		ConsoleRefresh: time.Second,
	})
	if st.Demo.Real == nil {
		t.Fatalf("the demo has no real API server: %s", st.Demo.RealMissing)
	}
	admin := kubernetes.NewForConfigOrDie(st.Demo.Real.RESTConfig())
	org := "org-" + uuid.NewString()[:8]
	c := newClient(t, st, org)
	var real demo.Spec
	for _, s := range demo.Specs {
		if s.Provider == space.AWS && s.Real {
			real = s
		}
	}
	acct := c.connect(st.Demo.Cloud, real.Provider, demo.Connection(real.Provider))
	spaceID := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": real.Provider, "space_type": "kubernetes",
		"cloud_account_id": acct, "config": real.Config()}))["id"].(string)
	waitActive(t, c, spaceID)
	sfx := strings.ToLower(uuid.NewString()[:6])
	there, web, bare := "there-"+sfx, "web-"+sfx, "bare-"+sfx
	if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: there}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nsExists := func(name string) bool {
		_, err := admin.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	proxy := newConsoleProxy(t, st, nil)
	var unreachable atomic.Bool
	proxy.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if !unreachable.Load() || r.Method != "GET" || !strings.HasSuffix(r.URL.Path, "/namespaces") {
			return false
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"type":"urn:spaces:problem:unavailable","title":"Service Unavailable","status":503,"reason":"Unreachable","detail":"the cluster refused the connection"}`)
		return true
	}
	p := &page{t: t, ctx: browser(t), base: proxy.srv.URL, shots: screenshotDir(t)}
	const wait = time.Minute
	p.signIn(org)
	p.until("the spaces list", `!!document.querySelector('#spaces-table')`, wait)
	p.visit("open environments", "#/environments")
	p.until("the picker offers the cluster", `!!document.querySelector('#env-space option[value="`+spaceID+`"]')`, wait)
	check := `document.querySelector('#env-ns-check')`
	fill := func(name string) {
		t.Helper()
		p.eval(`document.querySelector('#env-name').value = ''`)
		p.run("name "+name, chromedp.SendKeys(chromedp.CSS("#env-name"), name))
		p.eval(fmt.Sprintf(`(s => { s.value = %q; s.dispatchEvent(new Event('change')); return ''; })(document.querySelector('#env-space'))`, spaceID))
	}
	envID := func(name string) string {
		for _, e := range c.must(200, c.do("GET", "/environments?limit=100", nil))["items"].([]any) {
			if m := e.(map[string]any); m["name"] == name {
				return m["id"].(string)
			}
		}
		t.Fatalf("no environment %s", name)
		return ""
	}

	// A namespace the cluster has.
	fill(there)
	p.until("the namespace said to exist", check+`.dataset.state === 'exists' && `+check+`.innerText.includes('`+there+`')`, wait)

	// A missing one: said, and offered; created after the environment.
	fill(web)
	p.until("the missing namespace said", check+`.dataset.state === 'missing' && `+check+`.innerText.includes('first push will fail')`, wait)
	if got := p.eval(check + `.innerText`); !strings.Contains(got, "Create namespace "+web+" too") {
		t.Errorf("no offer to create the namespace: %q", got)
	}
	p.audit("environments, the namespace missing")
	p.shot("env-namespace-missing")
	p.run("create the environment and its namespace", chromedp.Click(chromedp.CSS(`#env-form button[type=submit]`)))
	p.until("the environment listed", `!!document.querySelector('tr[data-env="`+web+`"]')`, wait)
	p.until("the namespace's creation said", `!!document.querySelector('#env-ns-result [data-ns-result="created"]')`, wait)
	if !nsExists(web) {
		t.Errorf("the namespace %s is not on the cluster", web)
	}

	// Left unticked: the environment alone.
	fill(bare)
	p.until("the missing namespace said", check+`.dataset.state === 'missing' && `+check+`.innerText.includes('`+bare+`')`, wait)
	p.eval(`document.querySelector('#env-ns-create').click(), ''`)
	p.until("the offer unticked", `!document.querySelector('#env-ns-create').checked`, wait)
	p.run("create the environment alone", chromedp.Click(chromedp.CSS(`#env-form button[type=submit]`)))
	p.until("the environment listed", `!!document.querySelector('tr[data-env="`+bare+`"]')`, wait)
	if n := p.eval(`String(document.querySelectorAll('#env-ns-result [data-ns-result]').length)`); n != "0" {
		t.Errorf("a namespace result shown for an environment created alone: %s", n)
	}
	if nsExists(bare) {
		t.Errorf("the namespace %s was created though unticked", bare)
	}

	// The cluster unreachable: the namespaces cannot be listed.
	unreachable.Store(true)
	fill("later-" + sfx)
	p.until("the unknown namespace said", check+`.dataset.state === 'unknown' && `+check+`.innerText.includes('first push will fail until the namespace')`, wait)
	unreachable.Store(false)

	// Revisions: deployed into the namespace created with its environment;
	// failed for want of one, with a hint on the environment's page.
	push := func(env string) map[string]any {
		id := c.must(202, c.do("POST", "/environments/"+envID(env)+"/revisions", map[string]any{"manifests": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app"}}}}))["id"].(string)
		var m map[string]any
		eventually(t, env+" revision claimed", func() bool {
			m = c.must(200, c.do("GET", "/revisions/"+id, nil))
			return m["state"] == "deployed" || m["state"] == "failed"
		})
		return m
	}
	if m := push(web); m["state"] != "deployed" {
		t.Errorf("the revision into the namespace created with the environment: %v", m)
	}
	m := push(bare)
	if m["state"] != "failed" {
		t.Fatalf("the revision into a missing namespace: %v", m)
	}
	t.Logf("failed revision's reason: %v", m["reason"])
	p.visit("open the environment", "#/environments/"+envID(bare))
	p.until("the hint about the namespace", `!!document.querySelector('#ns-missing') && document.querySelector('#ns-missing').innerText.includes('`+bare+`')`, wait)
	p.audit("environment, its namespace missing")
	p.visit("open the other environment", "#/environments/"+envID(web))
	p.until("its revision listed", `!!document.querySelector('#rev-table tr[data-state="deployed"]')`, wait)
	if p.eval(`String(!!document.querySelector('#ns-missing'))`) != "false" {
		t.Error("a namespace hint on an environment whose revision deployed")
	}
}
