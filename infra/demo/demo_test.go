package demo_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"spaces/infra/demo"
	"spaces/infra/testwait"
	"spaces/shared/kubeapply"
	"spaces/shared/kubecred"
	"spaces/shared/space"
)

func httpClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
}

// version asks the cluster's /version with token: the status, or 0 when
// the connection is refused or cut (a Stop in the middle of the request).
func version(t *testing.T, c demo.Cluster, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", c.URL()+"/version", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := httpClient(c.CAPEM()).Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		// A Stop between the accept and the request: net/http's transport
		// reports it with this text alone (no exported error).
		err != nil && strings.Contains(err.Error(), "server closed idle connection") {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// Every demo cluster is in the cloud, registrable with its config, and
// accepts only simcloud's tokens; the flapping one goes down and comes back.
func TestDemo(t *testing.T) {
	d, err := demo.Start(demo.Options{FlapUp: 300 * time.Millisecond, FlapDown: 300 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if d.Real == nil {
		t.Fatalf("no real API server: %s", d.RealMissing)
	}
	per := map[space.Provider]int{}
	flapping, real := 0, 0
	for _, c := range d.Clusters {
		per[c.Provider]++
		if c.Real {
			real++
			if c.Cluster != nil {
				t.Errorf("%s is real but has a light cluster", c.Name)
			}
			continue
		}
		if c.Flaps {
			flapping++
			continue
		}
		if len(demo.Connection(c.Provider)) == 0 {
			t.Errorf("%s: no connection for %s", c.Name, c.Provider)
		}
		for k, v := range c.Config() {
			if reason := space.ValidateConfigValue(c.Provider, k, v); reason != "" {
				t.Errorf("%s: config %s=%q %s", c.Name, k, v, reason)
			}
		}
		// Neither a made-up token nor the cluster's own start token works.
		for _, tok := range []string{"made-up", c.Token()} {
			if got := version(t, c, tok); got != http.StatusUnauthorized {
				t.Errorf("%s: token %q answered %d, want 401", c.Name, tok, got)
			}
		}
	}
	if per[space.AWS] != 3 || per[space.GCP] != 3 || per[space.Azure] != 3 || flapping != 1 || real != 3 {
		t.Fatalf("clusters per provider %v, %d flapping, %d real; want 3 each, 1 flapping, 3 real", per, flapping, real)
	}
	if _, err := d.Cluster("demo-nope"); err == nil {
		t.Error("Cluster found a cluster that does not exist")
	}

	c, err := d.Cluster("demo-aks-2")
	if err != nil {
		t.Fatal(err)
	}
	// A stop cuts a request wherever it is (dial, TLS handshake, request),
	// and where depends on the machine's speed: any transport error is the
	// cluster down (0).
	waitFor := func(want int) {
		t.Helper()
		testwait.Eventually(t, testwait.Timeout, fmt.Sprintf("%s answering %d (0: down)", c.Name, want), func() bool {
			req, _ := http.NewRequest("GET", c.URL()+"/version", nil)
			req.Header.Set("Authorization", "Bearer x")
			res, err := httpClient(c.CAPEM()).Do(req)
			if err != nil {
				return want == 0
			}
			res.Body.Close()
			return res.StatusCode == want
		})
	}
	waitFor(0)
	waitFor(http.StatusUnauthorized)
	waitFor(0)
}

// Setups applied through the console are applied again when the demo
// starts over with the same file: the simulated customers' clouds keep
// their trust across restarts of make run, as the table keeps the accounts.
func TestSetupsSurviveARestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "setups.jsonl")
	opts := demo.Options{SetupsFile: file, Log: slog.New(slog.DiscardHandler)}
	acct := space.CloudAccount{ID: "acct-1", OrgID: "acme", Provider: space.AWS,
		Connection: map[string]string{"roleArn": demo.RoleARN, "externalId": space.NewExternalID()}}
	verify := func(d *demo.Demo) error {
		p := d.Cloud.Providers()[space.AWS].(interface {
			VerifyAccount(context.Context, space.CloudAccount) error
		})
		return p.VerifyAccount(t.Context(), acct)
	}

	d, err := demo.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(d); err == nil {
		t.Fatal("the demo role trusts Spaces before any setup")
	}
	raw, _ := json.Marshal(acct)
	res, err := d.Cloud.HTTPClient().Post(d.Cloud.URL+"/console/apply-setup", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if err := verify(d); res.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("after the console: %d, %v", res.StatusCode, err)
	}
	d.Close()

	d, err = demo.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if err := verify(d); err != nil {
		t.Errorf("after a restart: %v", err)
	}
}

// A cluster the demo's cloud created is there again after a restart with
// the same files, on the real API server, with what was applied to it.
func TestCreatedClustersSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	opts := demo.Options{SetupsFile: filepath.Join(dir, "setups.jsonl"), CreatedFile: filepath.Join(dir, "created.jsonl"),
		KubeDir: filepath.Join(dir, "kube"), CreateDelay: 100 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	acct := space.CloudAccount{ID: "acct-1", OrgID: "acme", Provider: space.GCP, Status: space.AccountReady,
		Connection: map[string]string{"projectId": demo.GCPProject, "serviceAccountEmail": demo.GCPServiceAccount}}
	cfg, spec, token := demo.NewClusterConfig(space.GCP, "kept"), demo.ClusterSpec(space.GCP), "job-1"
	s := space.Space{Provider: space.GCP, Config: cfg}

	d, err := demo.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	if d.Real == nil {
		d.Close()
		t.Fatalf("no real API server: %s", d.RealMissing)
	}
	if err := d.Cloud.ApplySetup(acct); err != nil {
		t.Fatal(err)
	}
	gke := d.Cloud.Providers()[space.GCP].(interface {
		space.ClusterCreator
		Mint(context.Context, space.CloudAccount, space.Space) (kubecred.Credentials, error)
	})
	p, err := gke.StartCreate(t.Context(), acct, cfg, spec, token)
	if err == nil {
		if waited := testwait.UntilEvery(testwait.Timeout, 100*time.Millisecond, func() bool {
			if !p.Done {
				p, err = gke.Advance(t.Context(), acct, cfg, spec, token, p.Operation)
			}
			return err != nil || p.Done
		}); err == nil {
			err = waited
		}
	}
	if err != nil || !p.Done {
		d.Close()
		t.Fatalf("create: %+v %v", p, err)
	}
	creds, err := gke.Mint(t.Context(), acct, s)
	if err == nil {
		// Spaces applies into no shared namespace (default included).
		_, err = kubernetes.NewForConfigOrDie(&rest.Config{Host: creds.Server, BearerToken: creds.Token,
			TLSClientConfig: rest.TLSClientConfig{CAData: creds.CAData}}).CoreV1().Namespaces().Create(t.Context(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{})
	}
	if err == nil {
		err = (&kubeapply.Applier{}).Apply(t.Context(), creds, "kept", []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "kept"}, "data": map[string]any{"k": "v"}}})
	}
	d.Close()
	if err != nil {
		t.Fatal(err)
	}

	d, err = demo.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if err := d.Cloud.ApplySetup(acct); err != nil { // applied outside the console: not kept
		t.Fatal(err)
	}
	gke = d.Cloud.Providers()[space.GCP].(interface {
		space.ClusterCreator
		Mint(context.Context, space.CloudAccount, space.Space) (kubecred.Credentials, error)
	})
	creds, err = gke.Mint(t.Context(), acct, s)
	if err != nil {
		t.Fatalf("mint after the restart: %v", err)
	}
	cm, err := kubernetes.NewForConfigOrDie(&rest.Config{Host: creds.Server, BearerToken: creds.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: creds.CAData}}).CoreV1().ConfigMaps("kept").Get(t.Context(), "kept", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("after the restart the cluster holds %v %v", cm, err)
	}
	if again, err := gke.StartCreate(t.Context(), acct, cfg, spec, token); err != nil || !again.Done {
		t.Errorf("the job's start delivered again after the restart: %+v %v", again, err)
	}
}
