package testcluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"spaces/infra/testcluster"
	"spaces/infra/testwait"
)

var systemNamespaces = []string{"default", "kube-node-lease", "kube-public", "kube-system"}

// recordContentTypes wraps cfg's transport to record the Content-Type of
// every request body client-go sends.
func recordContentTypes(cfg *rest.Config) func() []string {
	var mu sync.Mutex
	var seen []string
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if ct := r.Header.Get("Content-Type"); ct != "" {
				mu.Lock()
				seen = append(seen, ct)
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func names(list *corev1.NamespaceList) []string {
	var out []string
	for _, ns := range list.Items {
		out = append(out, ns.Name)
	}
	return out
}

func TestClientsetNamespaces(t *testing.T) {
	c := testcluster.NewForTest(t)
	ctx := t.Context()
	cfg := c.RESTConfig()
	sent := recordContentTypes(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if got := names(list); !slices.Equal(got, systemNamespaces) {
		t.Fatalf("namespaces = %v, want %v", got, systemNamespaces)
	}

	created, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"owner": "spaces"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.Name != "team-a" || created.UID == "" || created.ResourceVersion == "" ||
		created.Status.Phase != corev1.NamespaceActive || created.CreationTimestamp.IsZero() ||
		created.Labels["owner"] != "spaces" || created.Labels[corev1.LabelMetadataName] != "team-a" {
		t.Fatalf("created namespace is not filled in like the API server does: %+v", created)
	}
	// The typed clientset prefers protobuf for namespaces: the create above
	// proves the server decodes it.
	if got := sent(); len(got) != 1 || got[0] != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("request content types = %v, want one protobuf body", got)
	}

	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: err = %v, want AlreadyExists", err)
	}

	got, err := cs.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
	if err != nil || got.UID != created.UID {
		t.Fatalf("get: %v, %+v", err, got)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get missing: err = %v, want NotFound", err)
	}
	list, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list); !slices.Contains(got, "team-a") || len(got) != 5 {
		t.Fatalf("namespaces after create = %v", got)
	}
}

func TestCreateNamespaceAsJSON(t *testing.T) {
	c := testcluster.NewForTest(t)
	cfg := c.RESTConfig()
	cfg.ContentType = "application/json"
	sent := recordContentTypes(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "env-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if !strings.HasPrefix(ns.Name, "env-") || len(ns.Name) != len("env-")+5 {
		t.Fatalf("generated name = %q", ns.Name)
	}
	if got := sent(); len(got) != 1 || got[0] != "application/json" {
		t.Fatalf("request content types = %v, want one JSON body", got)
	}
	if !slices.Contains(c.Namespaces(), ns.Name) {
		t.Fatalf("cluster does not hold %s: %v", ns.Name, c.Namespaces())
	}
}

func TestCreateNamespaceRejectsBadInput(t *testing.T) {
	c := testcluster.NewForTest(t)
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "Team_A", strings.Repeat("a", 64), "-lead"} {
		_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("create %q: err = %v, want Invalid", name, err)
			continue
		}
		var st apierrors.APIStatus
		if !errors.As(err, &st) || st.Status().Details == nil || len(st.Status().Details.Causes) == 0 ||
			st.Status().Details.Causes[0].Field != "metadata.name" {
			t.Errorf("create %q: the error does not name metadata.name: %v", name, err)
		}
	}

	// A body that is not a namespace at all.
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`
	resp := rawRequest(t, c, http.MethodPost, "/api/v1/namespaces", c.Token(), body)
	if resp.code != http.StatusBadRequest || !strings.Contains(resp.body, "not a Namespace") {
		t.Fatalf("POST a pod: %d %s", resp.code, resp.body)
	}
	resp = rawRequest(t, c, http.MethodPost, "/api/v1/namespaces", c.Token(), "{not json")
	if resp.code != http.StatusBadRequest {
		t.Fatalf("POST garbage: %d %s", resp.code, resp.body)
	}
	resp = rawRequest(t, c, http.MethodPost, "/api/v1/namespaces", c.Token(), `{"metadata":{"name":"`+strings.Repeat("x", 2<<20)+`"}}`)
	if resp.code != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST 2 MiB: %d", resp.code)
	}
	// Nothing was stored by any of it.
	if got := c.Namespaces(); !slices.Equal(got, systemNamespaces) {
		t.Fatalf("bad input changed the namespaces: %v", got)
	}
}

func TestDiscoveryAndDynamicClients(t *testing.T) {
	c := testcluster.NewForTest(t, testcluster.WithVersion("v1.30.2-eks-1552ad0", "linux/arm64"))
	cfg := c.RESTConfig()

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil || v.GitVersion != "v1.30.2-eks-1552ad0" || v.Platform != "linux/arm64" || v.Major != "1" || v.Minor != "30" {
		t.Fatalf("version: %v %+v", err, v)
	}
	_, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	found := false
	for _, rl := range resources {
		for _, r := range rl.APIResources {
			found = found || (rl.GroupVersion == "v1" && r.Name == "namespaces" && !r.Namespaced)
		}
	}
	if !found {
		t.Fatalf("discovery does not list v1 namespaces: %+v", resources)
	}

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ul, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("dynamic list: %v", err)
	}
	if len(ul.Items) != len(systemNamespaces) || ul.Items[0].GetName() != "default" {
		t.Fatalf("dynamic list = %d items", len(ul.Items))
	}
}

func TestTokens(t *testing.T) {
	c := testcluster.NewForTest(t, testcluster.WithTokens("alpha", "beta"))
	if c.Token() != "alpha" {
		t.Fatalf("Token() = %q", c.Token())
	}
	check := func(token string, want int) {
		t.Helper()
		if got := rawRequest(t, c, http.MethodGet, "/version", token, "").code; got != want {
			t.Fatalf("token %q: %d, want %d", token, got, want)
		}
	}
	check("alpha", 200)
	check("beta", 200)
	check("gamma", 401)
	check("", 401)
	c.AddToken("gamma")
	check("gamma", 200)
	c.RevokeToken("alpha")
	check("alpha", 401)
	c.SetTokens("delta")
	check("beta", 401)
	check("delta", 200)
	if got := c.Served401(); got != 4 {
		t.Fatalf("Served401 = %d, want 4", got)
	}
	if got := c.Requests("/version"); got != 8 {
		t.Fatalf("Requests(/version) = %d, want 8", got)
	}

	// The typed client sees a 401 as Unauthorized.
	cfg := c.RESTConfig()
	cfg.BearerToken = "wrong"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("list with a wrong token: %v", err)
	}
}

// A token check approves tokens outside the accepted set, per request,
// and sees every token it is asked about with the request's context; the
// accepted set still works without asking it.
func TestTokenCheck(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	c := testcluster.NewForTest(t, testcluster.WithTokens("static"), testcluster.WithTokenCheck(func(ctx context.Context, token string) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, token)
		return ctx.Err() == nil && strings.HasPrefix(token, "signed.")
	}))
	for _, tc := range []struct {
		token string
		want  int
	}{{"signed.one", 200}, {"static", 200}, {"forged", 401}, {"", 401}, {"signed.two", 200}} {
		if got := rawRequest(t, c, http.MethodGet, "/version", tc.token, "").code; got != tc.want {
			t.Errorf("token %q: %d, want %d", tc.token, got, tc.want)
		}
	}
	c.SetTokens() // only the check is left
	if got := rawRequest(t, c, http.MethodGet, "/version", "static", "").code; got != 401 {
		t.Errorf("static token after SetTokens(): %d, want 401", got)
	}
	if got := rawRequest(t, c, http.MethodGet, "/api/v1/namespaces", "signed.three", "").code; got != 200 {
		t.Errorf("namespaces with an approved token: %d, want 200", got)
	}
	mu.Lock()
	defer mu.Unlock()
	// Not asked about the static token while it was accepted, nor about an
	// empty one.
	if want := []string{"signed.one", "forged", "signed.two", "static", "signed.three"}; !slices.Equal(asked, want) {
		t.Errorf("asked %q, want %q", asked, want)
	}
	if got := c.Served401(); got != 3 {
		t.Errorf("Served401 = %d, want 3", got)
	}
}

func TestModes(t *testing.T) {
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode testcluster.Mode
		path string
		code int    // 0: the request fails
		body string // substring of the answer
	}{
		{testcluster.Healthy(), "/version", 200, `"gitVersion":"v1.31.4"`},
		{testcluster.Down(), "/version", 0, ""},
		{testcluster.Unauthorized(), "/version", 401, `"reason":"Unauthorized"`},
		{testcluster.Forbidden(), "/api/v1/namespaces", 403, `"reason":"Forbidden"`},
		{testcluster.Garbled(), "/version", 200, "<<garbled"},
		{testcluster.BadVersion(), "/version", 200, `"gitVersion":"not-a-version"`},
		{testcluster.BadVersion(), "/api/v1/namespaces", 200, `"kind":"NamespaceList"`},
		{testcluster.ServerError(), "/version", 500, `"reason":"InternalError"`},
		{testcluster.Slow(20 * time.Millisecond), "/version", 200, `"platform":"linux/amd64"`},
		{testcluster.Trickle(time.Millisecond), "/api", 200, `"versions":["v1"]`},
		{testcluster.Hang(), "/version", 0, ""},
	} {
		t.Run(tc.mode.String()+tc.path, func(t *testing.T) {
			c := testcluster.NewForTest(t, testcluster.WithCA(ca))
			c.SetMode(tc.mode)
			if c.Mode() != tc.mode {
				t.Fatalf("Mode() = %v", c.Mode())
			}
			client := httpClient(t, c)
			if tc.code == 0 {
				client.Timeout = 300 * time.Millisecond // Hang never answers
			}
			resp := do(t, client, c, tc.path, c.Token())
			if resp.code != tc.code || !strings.Contains(resp.body, tc.body) {
				t.Fatalf("%d %q (err %v), want %d with %q", resp.code, resp.body, resp.err, tc.code, tc.body)
			}
			if tc.code != 0 && resp.contentType != "application/json" {
				t.Fatalf("Content-Type = %q", resp.contentType)
			}
		})
	}
}

func TestUnauthorizedOnceAndNext(t *testing.T) {
	c := testcluster.NewForTest(t)
	c.SetMode(testcluster.UnauthorizedOnce())
	var got []int
	for range 3 {
		got = append(got, rawRequest(t, c, http.MethodGet, "/version", c.Token(), "").code)
	}
	if !slices.Equal(got, []int{401, 200, 200}) || c.Served401() != 1 {
		t.Fatalf("UnauthorizedOnce: %v, 401s %d", got, c.Served401())
	}

	c.SetMode(testcluster.Garbled())
	c.Next(testcluster.ServerError(), testcluster.Healthy(), testcluster.UnauthorizedOnce())
	got = nil
	for range 5 {
		got = append(got, rawRequest(t, c, http.MethodGet, "/api/v1/namespaces", c.Token(), "").code)
	}
	// Next's modes first, one request each, then the base mode (Garbled: 200).
	if !slices.Equal(got, []int{500, 200, 401, 200, 200}) {
		t.Fatalf("Next: %v", got)
	}
	// SetMode drops what Next queued.
	c.Next(testcluster.ServerError())
	c.SetMode(testcluster.Healthy())
	if code := rawRequest(t, c, http.MethodGet, "/version", c.Token(), "").code; code != 200 {
		t.Fatalf("after SetMode: %d", code)
	}
}

func TestStopAndStartKeepTheAddress(t *testing.T) {
	c := testcluster.NewForTest(t)
	url := c.URL()
	client := httpClient(t, c)
	// A kept-alive connection must not survive Stop.
	if r := do(t, client, c, "/version", c.Token()); r.code != 200 {
		t.Fatalf("before stop: %+v", r)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	r := do(t, client, c, "/version", c.Token())
	if r.err == nil || !strings.Contains(r.err.Error(), "connection refused") {
		t.Fatalf("stopped: %+v, want connection refused", r)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if c.URL() != url {
		t.Fatalf("URL changed: %s -> %s", url, c.URL())
	}
	if r := do(t, client, c, "/version", c.Token()); r.code != 200 {
		t.Fatalf("after start: %+v", r)
	}
	c.Close()
	if err := c.Start(); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

func TestDownCutsOpenConnections(t *testing.T) {
	c := testcluster.NewForTest(t)
	client := httpClient(t, c)
	if r := do(t, client, c, "/version", c.Token()); r.code != 200 {
		t.Fatalf("healthy: %+v", r)
	}
	c.SetMode(testcluster.Down())
	if r := do(t, client, c, "/version", c.Token()); r.err == nil {
		t.Fatalf("down: %+v, want an error", r)
	}
	c.SetMode(testcluster.Healthy())
	if r := do(t, client, c, "/version", c.Token()); r.code != 200 {
		t.Fatalf("back up: %+v", r)
	}
}

// A slow or hung handler gives up when its client does: the server's
// connection closes while the cluster keeps running.
func TestSlowAndHangHonourCancellation(t *testing.T) {
	for _, m := range []testcluster.Mode{testcluster.Slow(time.Hour), testcluster.Trickle(time.Hour)} {
		t.Run(m.String(), func(t *testing.T) {
			c := testcluster.NewForTest(t)
			c.SetMode(m)
			client := httpClient(t, c)
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL()+"/version", nil)
			req.Header.Set("Authorization", "Bearer "+c.Token())
			resp, err := client.Do(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want deadline exceeded", err)
			}
			waitFor(t, "the handler to give up", func() bool { return c.OpenConns() == 0 })
			if c.Accepted() != 1 {
				t.Fatalf("Accepted = %d", c.Accepted())
			}
		})
	}
}

// Close returns even with handlers and connections hung.
func TestCloseReleasesHungWork(t *testing.T) {
	c, err := testcluster.New(testcluster.WithHTTP2())
	if err != nil {
		t.Fatal(err)
	}
	client := httpClient(t, c)
	c.Next(testcluster.Hang()) // one hung request on an accepted connection
	go do(t, client, c, "/version", c.Token())
	waitFor(t, "the hung request", func() bool { return c.Requests("/version") == 1 })
	c.SetMode(testcluster.Hang()) // and new connections swallowed whole
	go do(t, httpClient(t, c), c, "/version", c.Token())

	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close blocked on hung work")
	}
}

// Modes, tokens and counters change under concurrent requests (run with
// -race).
func TestConcurrentUse(t *testing.T) {
	c := testcluster.NewForTest(t, testcluster.WithHTTP2())
	client := httpClient(t, c)
	modes := []testcluster.Mode{testcluster.Healthy(), testcluster.ServerError(), testcluster.Garbled(), testcluster.UnauthorizedOnce(), testcluster.BadVersion()}
	stop := make(chan struct{})
	var flips sync.WaitGroup
	flips.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.SetMode(modes[i%len(modes)])
			c.AddToken("extra")
			c.RevokeToken("extra")
			time.Sleep(100 * time.Microsecond)
		}
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				r := do(t, client, c, "/api/v1/namespaces", c.Token())
				if r.err != nil || (r.code != 200 && r.code != 401 && r.code != 500) {
					t.Errorf("unexpected answer %+v", r)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	flips.Wait()
	if got := c.Requests("/api/v1/namespaces"); got != 400 {
		t.Fatalf("Requests = %d, want 400", got)
	}
}

func TestNotFoundIsAStatus(t *testing.T) {
	c := testcluster.NewForTest(t)
	r := rawRequest(t, c, http.MethodGet, "/apis/apps/v1/deployments", c.Token(), "")
	if r.code != 404 || !strings.Contains(r.body, `"kind":"Status"`) || r.contentType != "application/json" {
		t.Fatalf("%+v", r)
	}
	r = rawRequest(t, c, http.MethodGet, "/api/v1/namespaces?watch=true", c.Token(), "")
	if r.code != 400 {
		t.Fatalf("watch: %+v", r)
	}
}

type answer struct {
	code        int
	body        string
	contentType string
	err         error
}

func httpClient(t testing.TB, c *testcluster.Cluster) *http.Client {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.CAPEM()) {
		t.Fatal("CAPEM holds no certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func do(t testing.TB, client *http.Client, c *testcluster.Cluster, path, token string) answer {
	return doRequest(t, client, c, http.MethodGet, path, token, "")
}

func rawRequest(t testing.TB, c *testcluster.Cluster, method, path, token, body string) answer {
	return doRequest(t, httpClient(t, c), c, method, path, token, body)
}

func doRequest(t testing.TB, client *http.Client, c *testcluster.Cluster, method, path, token, body string) answer {
	req, err := http.NewRequest(method, c.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return answer{err: err}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, body: string(b), contentType: resp.Header.Get("Content-Type"), err: err}
}

// waitFor polls cond: the server learns of a client's close asynchronously.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, testwait.Timeout, what, cond)
}
