package kubetest_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/kubetest"
)

// The constants the package checks binaries against are the versions the
// build modules pin.
func TestVersionsMatchBuildModules(t *testing.T) {
	for _, c := range []struct{ file, module, want string }{
		{"../kube/build/go.mod", "k8s.io/kubernetes", kubetest.KubernetesVersion},
		{"../kube/build/etcd/go.mod", "go.etcd.io/etcd/server/v3", kubetest.EtcdVersion},
	} {
		data, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`(?m)^(?:require\s+|\s+)` + regexp.QuoteMeta(c.module) + `\s+(v\S+)`)
		m := re.FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no requirement on %s", c.file, c.module)
		}
		if got := string(m[1]); got != c.want {
			t.Errorf("%s pins %s %s, kubetest expects %s", c.file, c.module, got, c.want)
		}
	}
}

func TestCluster(t *testing.T) {
	ctx := context.Background()

	// A token webhook like the one a simulated cloud would run: it knows
	// one token, an admin.
	const webhookToken = "token-known-only-to-the-webhook"
	var reviews atomic.Int64
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reviews.Add(1)
		tr.Status = authnv1.TokenReviewStatus{}
		if tr.Spec.Token == webhookToken {
			tr.Status.Authenticated = true
			tr.Status.User = authnv1.UserInfo{Username: "cloud-user", Groups: []string{"system:masters"}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(tr)
	}))
	defer hook.Close()
	hookCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})

	start := time.Now()
	c := kubetest.Start(t, kubetest.Options{
		Tokens:       []kubetest.Token{{Token: "viewer-token", User: "no-rights", Groups: []string{"team-a"}}},
		TokenWebhook: &kubetest.TokenWebhook{URL: hook.URL, CAPEM: hookCA},
	})
	t.Logf("cluster ready at %s in %v", c.URL, time.Since(start).Round(time.Millisecond))

	cs := kubernetes.NewForConfigOrDie(c.RESTConfig())

	t.Run("truthful version", func(t *testing.T) {
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != kubetest.KubernetesVersion || v.Major != "1" || v.Minor != "37" {
			t.Errorf("version = %+v, want gitVersion %s major 1 minor 37", v, kubetest.KubernetesVersion)
		}
		if v.BuildDate == "" || v.BuildDate == "1970-01-01T00:00:00Z" {
			t.Errorf("buildDate not stamped: %q", v.BuildDate)
		}
	})

	t.Run("system namespaces", func(t *testing.T) {
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		for _, want := range []string{"default", "kube-system"} {
			if !slices.Contains(names, want) {
				t.Errorf("namespaces %v lack %q", names, want)
			}
		}
	})

	t.Run("create and read a namespace", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubetest-ns", Labels: map[string]string{"made-by": "kubetest"}}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().Namespaces().Get(ctx, "kubetest-ns", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels["made-by"] != "kubetest" || got.UID == "" {
			t.Errorf("read back %+v", got.ObjectMeta)
		}
	})

	t.Run("wrong token is 401 and changes nothing", func(t *testing.T) {
		bad := kubernetes.NewForConfigOrDie(c.RESTConfigForToken("not-a-token"))
		_, err := bad.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("list with a wrong token: err = %v, want 401 Unauthorized", err)
		}
		_, err = bad.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "must-not-exist"}}, metav1.CreateOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("create with a wrong token: err = %v, want 401 Unauthorized", err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "must-not-exist", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace made with a wrong token: get err = %v, want NotFound", err)
		}
	})

	t.Run("extra static token authenticates, RBAC forbids", func(t *testing.T) {
		viewer := kubernetes.NewForConfigOrDie(c.RESTConfigForToken("viewer-token"))
		_, err := viewer.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("list as a user without RBAC rights: err = %v, want 403 Forbidden", err)
		}
	})

	t.Run("token webhook", func(t *testing.T) {
		before := reviews.Load()
		cloud := kubernetes.NewForConfigOrDie(c.RESTConfigForToken(webhookToken))
		if _, err := cloud.CoreV1().Namespaces().Get(ctx, "kubetest-ns", metav1.GetOptions{}); err != nil {
			t.Errorf("get with the webhook's token: %v", err)
		}
		if reviews.Load() == before {
			t.Errorf("the apiserver never asked the webhook")
		}
	})

	t.Run("stop and restart keep URL, CA and data", func(t *testing.T) {
		url, ca := c.URL, string(c.CAPEM)
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		if c.Running() {
			t.Error("Running after Stop")
		}
		if _, err := cs.Discovery().ServerVersion(); err == nil {
			t.Fatal("/version answered while the apiserver is stopped")
		}
		if err := c.Restart(); err != nil {
			t.Fatal(err)
		}
		if c.URL != url || string(c.CAPEM) != ca {
			t.Errorf("restart moved the cluster: %s -> %s or changed its CA", url, c.URL)
		}
		// The same client as before the stop: same URL, same CA, same token.
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			t.Fatalf("/version after restart: %v", err)
		}
		if v.GitVersion != kubetest.KubernetesVersion {
			t.Errorf("gitVersion after restart = %q", v.GitVersion)
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "kubetest-ns", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("namespace created before the stop: %v", err)
		}
		if ns.Labels["made-by"] != "kubetest" {
			t.Errorf("namespace after restart: %+v", ns.ObjectMeta)
		}
	})
}

// A missing binary folder fails with the build instructions.
func TestMissingBinaries(t *testing.T) {
	c, err := kubetest.StartCluster(context.Background(), kubetest.Options{BinDir: t.TempDir()})
	if err == nil {
		c.Close()
		t.Fatal("StartCluster with no binaries succeeded")
	}
	if c != nil {
		t.Errorf("StartCluster returned a cluster with error %v", err)
	}
	for _, want := range []string{"kube-apiserver not found", "infra/kube/build.sh", "SPACES_KUBE_BIN_DIR"} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(err.Error()) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
