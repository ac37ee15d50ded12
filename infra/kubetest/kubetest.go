// Package kubetest runs a real Kubernetes control plane — upstream
// kube-apiserver backed by a real etcd, both on loopback — for end-to-end
// tests of every Kubernetes call Spaces makes.
//
// The binaries are built once from the Go module proxy by infra/kube/build.sh
// (`make kube-bins`) into a cache folder outside the repository; see
// infra/kube/README.md. Start finds them there (or in $SPACES_KUBE_BIN_DIR)
// and fails the test with instructions when they are missing: tests that
// need a cluster are never skipped.
//
//	c := kubetest.Start(t, kubetest.Options{})
//	cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
//
// Each cluster has its own CA, serving certificate for 127.0.0.1, admin token
// (group system:masters), service-account key, etcd data directory and free
// ports. Stop takes the apiserver down (etcd and its data stay); Restart
// brings it back on the same URL with the same CA and data.
package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"spaces/infra/loopport"
)

// KubernetesVersion is the kube-apiserver version the binaries are built at
// (k8s.io/kubernetes in infra/kube/build/go.mod); it is also the last element
// of the default binary folder.
const KubernetesVersion = "v1.37.2"

// EtcdVersion is the etcd version the binaries are built at
// (go.etcd.io/etcd/server/v3 in infra/kube/build/etcd/go.mod).
const EtcdVersion = "v3.7.3"

// BuildCommand is what a developer runs once to build the binaries.
const BuildCommand = "make kube-bins   (or: bash infra/kube/build.sh)"

// Options configures a cluster. The zero value is a working cluster with only
// the admin token.
type Options struct {
	// Tokens are extra static bearer tokens, besides the admin token. The
	// apiserver reads its token file only at start, so these are fixed for
	// the cluster's life; use TokenWebhook for tokens that come and go.
	Tokens []Token

	// TokenWebhook, if set, makes the apiserver ask this webhook about bearer
	// tokens it does not know (authentication.k8s.io/v1 TokenReview).
	TokenWebhook *TokenWebhook

	// APIServerArgs are appended to kube-apiserver's flags; a later flag wins.
	APIServerArgs []string

	// ReadyTimeout bounds the wait for etcd and for the apiserver's /readyz,
	// at start and at each Restart. Default 3 min: a hang bound, not a
	// measure; under make test-stress beside other builds a start took more
	// than the 60 s it once was.
	ReadyTimeout time.Duration

	// BinDir is the folder holding kube-apiserver and etcd. Default:
	// $SPACES_KUBE_BIN_DIR, else DefaultBinDir().
	BinDir string

	// Dir is where StartCluster keeps certificates, token files, the etcd
	// data and the logs. Default: a new temporary folder that Close removes.
	// Start uses t.TempDir().
	Dir string
}

// Token is a static bearer token and the identity it stands for.
type Token struct {
	Token  string
	User   string
	UID    string // optional
	Groups []string
}

// TokenWebhook is a token authentication webhook: an HTTPS (or HTTP) URL that
// answers authentication.k8s.io/v1 TokenReview POSTs.
type TokenWebhook struct {
	URL string
	// CAPEM verifies the webhook's serving certificate. Empty means the
	// system roots.
	CAPEM []byte
	// CacheTTL is how long the apiserver caches the webhook's answers.
	// Zero (the default here, unlike the apiserver's 2 m) disables the
	// cache, so a revoked token fails on its next request.
	CacheTTL time.Duration
}

// Cluster is a running etcd + kube-apiserver.
type Cluster struct {
	// URL is the apiserver's base URL, https://127.0.0.1:<port>.
	URL string
	// CAPEM is the PEM CA certificate that signed the apiserver's certificate.
	CAPEM []byte
	// AdminToken is a bearer token of user "kubetest-admin" in system:masters.
	AdminToken string
	// Dir holds the certificates, token file, etcd data and logs.
	Dir string
	// APIServerLog and EtcdLog are the processes' log files.
	APIServerLog, EtcdLog string

	binDir        string
	apiserverBin  string
	apiserverArgs []string
	readyTimeout  time.Duration
	removeDir     bool

	mu        sync.Mutex
	etcd      *proc
	apiserver *proc // nil while stopped
	closed    bool
}

// DefaultBinDir is where infra/kube/build.sh puts the binaries:
// ${SPACES_CACHE_DIR:-$HOME/.cache/spaces}/kube/<KubernetesVersion>.
func DefaultBinDir() string {
	root := os.Getenv("SPACES_CACHE_DIR")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		root = filepath.Join(home, ".cache", "spaces")
	}
	return filepath.Join(root, "kube", KubernetesVersion)
}

// BinDir is the folder Start takes the binaries from: $SPACES_KUBE_BIN_DIR if
// set, else DefaultBinDir().
func BinDir() string {
	if d := os.Getenv("SPACES_KUBE_BIN_DIR"); d != "" {
		return d
	}
	return DefaultBinDir()
}

// Start starts a cluster for the test and stops it when the test ends. On
// any problem it fails the test (t.Fatal) — it never skips. If the test
// fails, the tails of the etcd and apiserver logs are printed.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	ctx := context.Background()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl)
			defer cancel()
		}
	}
	c, err := StartCluster(ctx, opts)
	if c != nil {
		t.Cleanup(func() {
			c.Close()
			if t.Failed() {
				t.Log(c.LogTail(100))
			}
		})
	}
	if err != nil {
		t.Fatalf("kubetest: %v", err) // the cleanup above prints the logs
	}
	return c
}

// StartCluster starts a cluster outside a test's life, e.g. one shared by a
// package's tests from TestMain. The caller must Close it. On error the
// returned Cluster, if not nil, has its processes stopped and its logs still
// readable (LogTail) until Close.
func StartCluster(ctx context.Context, opts Options) (*Cluster, error) {
	binDir := opts.BinDir
	if binDir == "" {
		binDir = BinDir()
	}
	if err := checkBinaries(binDir); err != nil {
		return nil, err
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 3 * time.Minute
	}
	c := &Cluster{
		AdminToken:   randomToken(),
		binDir:       binDir,
		apiserverBin: filepath.Join(binDir, "kube-apiserver"),
		readyTimeout: opts.ReadyTimeout,
	}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "kubetest-")
		if err != nil {
			return nil, err
		}
		opts.Dir, c.removeDir = d, true
	}
	c.Dir = opts.Dir
	c.APIServerLog = filepath.Join(c.Dir, "kube-apiserver.log")
	c.EtcdLog = filepath.Join(c.Dir, "etcd.log")

	if err := c.start(ctx, opts); err != nil {
		c.closeKeepDir()
		return c, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, opts Options) error {
	p, err := writePKI(c.Dir)
	if err != nil {
		return fmt.Errorf("generate certificates: %w", err)
	}
	c.CAPEM = p.caPEM

	tokenFile := filepath.Join(c.Dir, "tokens.csv")
	tokens := append([]Token{{Token: c.AdminToken, User: "kubetest-admin", UID: "kubetest-admin",
		Groups: []string{"system:masters"}}}, opts.Tokens...)
	if err := writeTokenFile(tokenFile, tokens); err != nil {
		return err
	}

	// Each port was free a moment ago; another test's child may bind it
	// first, so a start that lost its port is tried again on new ones.
	var etcdClient string
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return fmt.Errorf("find free ports: %w", err)
		}
		etcdClient = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		etcdPeer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir := filepath.Join(c.Dir, "etcd-data")
		// etcd: one member, loopback only, no fsync (test data is disposable).
		etcdArgs := []string{
			"--name=kubetest",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + etcdClient,
			"--advertise-client-urls=" + etcdClient,
			"--listen-peer-urls=" + etcdPeer,
			"--initial-advertise-peer-urls=" + etcdPeer,
			"--initial-cluster=kubetest=" + etcdPeer,
			"--initial-cluster-state=new",
			"--unsafe-no-fsync",
			"--log-level=warn",
		}
		from := logSize(c.EtcdLog)
		c.etcd, err = startProc(filepath.Join(c.binDir, "etcd"), etcdArgs, c.EtcdLog)
		if err != nil {
			return err
		}
		etcdCtx, cancel := context.WithTimeout(ctx, c.readyTimeout)
		err = waitHTTP(etcdCtx, c.etcd, "etcd", &http.Client{Timeout: 2 * time.Second},
			etcdClient+"/health", "")
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || !bindLost(c.EtcdLog, from) || attempt == bindAttempts {
			return err
		}
		// A new member on new URLs needs an empty data directory.
		if err := os.RemoveAll(dataDir); err != nil {
			return err
		}
	}

	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--etcd-servers=" + etcdClient,
		"--tls-cert-file=" + p.certFile,
		"--tls-private-key-file=" + p.keyFile,
		"--authorization-mode=RBAC",
		"--anonymous-auth=false",
		"--token-auth-file=" + tokenFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPubKeyFile,
		"--service-account-signing-key-file=" + p.saKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		"--profiling=false",
	}
	if w := opts.TokenWebhook; w != nil {
		cfg := filepath.Join(c.Dir, "token-webhook.kubeconfig")
		if err := writeWebhookKubeconfig(cfg, w); err != nil {
			return err
		}
		args = append(args,
			"--authentication-token-webhook-config-file="+cfg,
			"--authentication-token-webhook-version=v1",
			"--authentication-token-webhook-cache-ttl="+w.CacheTTL.String(),
		)
	}
	args = append(args, opts.APIServerArgs...)

	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return fmt.Errorf("find a free port: %w", err)
		}
		c.URL = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		// Last, so that it wins: the port is ours to choose.
		c.apiserverArgs = append(append([]string(nil), args...), "--secure-port="+strconv.Itoa(ports[0]))
		from := logSize(c.APIServerLog)
		err = c.startAPIServerLocked(ctx)
		if err == nil || !errors.Is(err, errExited) || !bindLost(c.APIServerLog, from) || attempt == bindAttempts {
			return err
		}
	}
}

// freePorts is loopport.Free; a test replaces it to hand out a taken port.
var freePorts = loopport.Free

// bindAttempts bounds the starts on new ports after one lost its port.
const bindAttempts = 5

// errExited marks a process that exited before it was ready.
var errExited = errors.New("exited before it was ready")

// logSize is where the next start's lines begin in a log file.
func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// bindLost reports whether the log written since from says the process
// could not bind its port: another process took it after loopport.Free
// found it free.
func bindLost(path string, from int64) bool {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < from {
		return false
	}
	return bytes.Contains(data[from:], []byte("address already in use"))
}

// startAPIServerLocked starts kube-apiserver and waits for /readyz.
func (c *Cluster) startAPIServerLocked(ctx context.Context) error {
	ap, err := startProc(c.apiserverBin, c.apiserverArgs, c.APIServerLog)
	if err != nil {
		return err
	}
	c.apiserver = ap
	ctx, cancel := context.WithTimeout(ctx, c.readyTimeout)
	defer cancel()
	client := c.httpClient()
	// /readyz, then the system namespaces: their controller creates them just
	// after the apiserver turns ready, and tests expect them.
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default", "/api/v1/namespaces/kube-system"} {
		if err := waitHTTP(ctx, ap, "kube-apiserver", client, c.URL+path, c.AdminToken); err != nil {
			ap.stop(0)
			c.apiserver = nil
			return err
		}
	}
	return nil
}

// RESTConfig is a client-go config for the admin user (system:masters).
func (c *Cluster) RESTConfig() *rest.Config {
	return c.RESTConfigForToken(c.AdminToken)
}

// RESTConfigForToken is a client-go config that authenticates with token.
func (c *Cluster) RESTConfigForToken(token string) *rest.Config {
	return &rest.Config{
		Host:            c.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), c.CAPEM...)},
	}
}

// Running reports whether the apiserver is up (not Stopped).
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apiserver != nil
}

// Stop takes kube-apiserver down (SIGTERM, then SIGKILL after 15 s) and
// returns once its port is closed. etcd and all data stay, for Restart.
// Stopping a stopped cluster does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("kubetest: cluster is closed")
	}
	if c.apiserver == nil {
		return nil
	}
	c.apiserver.stop(15 * time.Second)
	c.apiserver = nil
	return nil
}

// Restart brings kube-apiserver (back) up on the same URL with the same CA,
// tokens and etcd data, stopping it first if it is running, and waits for
// /readyz.
func (c *Cluster) Restart() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("kubetest: cluster is closed")
	}
	if c.apiserver != nil {
		c.apiserver.stop(15 * time.Second)
		c.apiserver = nil
	}
	if err := c.startAPIServerLocked(context.Background()); err != nil {
		return fmt.Errorf("kubetest: restart: %w", err)
	}
	return nil
}

// Close stops kube-apiserver and etcd and, if StartCluster made Dir, removes
// it. Start registers it with t.Cleanup. Closing twice does nothing.
func (c *Cluster) Close() {
	c.closeKeepDir()
	if c.removeDir {
		os.RemoveAll(c.Dir)
	}
}

func (c *Cluster) closeKeepDir() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.apiserver != nil {
		c.apiserver.stop(5 * time.Second)
		c.apiserver = nil
	}
	if c.etcd != nil {
		c.etcd.stop(5 * time.Second)
	}
}

// LogTail returns the last n lines of the etcd and kube-apiserver logs.
func (c *Cluster) LogTail(n int) string {
	var b strings.Builder
	for _, f := range []string{c.EtcdLog, c.APIServerLog} {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(&b, "--- %s: %v\n", f, err)
			continue
		}
		lines := strings.SplitAfter(string(data), "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > n {
			fmt.Fprintf(&b, "--- last %d of %d lines of %s\n", n, len(lines), f)
			lines = lines[len(lines)-n:]
		} else {
			fmt.Fprintf(&b, "--- %s\n", f)
		}
		for _, l := range lines {
			b.WriteString(l)
		}
		if len(lines) > 0 && !strings.HasSuffix(lines[len(lines)-1], "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func (c *Cluster) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAPEM)
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
	}
}

// checked remembers binary folders whose versions were already verified.
var checked sync.Map // bin dir -> error

// checkBinaries verifies, once per process and folder, that both binaries
// exist and are of the pinned versions.
func checkBinaries(dir string) error {
	if v, ok := checked.Load(dir); ok {
		err, _ := v.(error)
		return err
	}
	err := func() error {
		want := map[string]string{
			"kube-apiserver": "Kubernetes " + KubernetesVersion,
			"etcd":           "etcd Version: " + strings.TrimPrefix(EtcdVersion, "v"),
		}
		for _, name := range []string{"kube-apiserver", "etcd"} {
			bin := filepath.Join(dir, name)
			if _, err := os.Stat(bin); err != nil {
				return fmt.Errorf("%s not found in %s (%v).\n"+
					"Build the test binaries once (about 15 minutes, cached outside the repository):\n\t%s\n"+
					"or point SPACES_KUBE_BIN_DIR at a folder holding kube-apiserver %s and etcd %s",
					name, dir, err, BuildCommand, KubernetesVersion, EtcdVersion)
			}
			out, err := exec.Command(bin, "--version").CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte(want[name])) {
				return fmt.Errorf("%s does not report %q (got %q, %v); rebuild with:\n\t%s",
					bin, want[name], strings.TrimSpace(string(out)), err, BuildCommand)
			}
		}
		return nil
	}()
	checked.Store(dir, err)
	return err
}

func writeTokenFile(path string, tokens []Token) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	for _, tk := range tokens {
		if tk.Token == "" || tk.User == "" {
			return fmt.Errorf("static token needs Token and User (got user %q)", tk.User)
		}
		rec := []string{tk.Token, tk.User, tk.UID}
		if len(tk.Groups) > 0 {
			rec = append(rec, strings.Join(tk.Groups, ","))
		}
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o600)
}

// writeWebhookKubeconfig writes the kubeconfig (JSON is valid YAML) the
// apiserver uses to reach the token webhook.
func writeWebhookKubeconfig(path string, w *TokenWebhook) error {
	if w.URL == "" {
		return errors.New("TokenWebhook.URL is empty")
	}
	if w.CacheTTL < 0 {
		return errors.New("TokenWebhook.CacheTTL is negative")
	}
	type cluster struct {
		Server                   string `json:"server"`
		CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	}
	cfg := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"clusters":        []any{map[string]any{"name": "webhook", "cluster": cluster{w.URL, w.CAPEM}}},
		"users":           []any{map[string]any{"name": "apiserver", "user": map[string]any{}}},
		"contexts":        []any{map[string]any{"name": "webhook", "context": map[string]string{"cluster": "webhook", "user": "apiserver"}}},
		"current-context": "webhook",
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// proc is a started child process whose output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, valid after done
}

func startProc(bin string, args []string, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "=== %s %s: %s %s\n", time.Now().Format(time.RFC3339Nano), filepath.Base(bin),
		bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{name: filepath.Base(bin), cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(logf, "=== %s %s exited: %v\n", time.Now().Format(time.RFC3339Nano), p.name, p.err)
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs and waits.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	if grace > 0 {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitHTTP polls url until it answers 200, the process exits, or ctx ends.
func waitHTTP(ctx context.Context, p *proc, what string, client *http.Client, url, token string) error {
	start := time.Now()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s %w (%v); its log is in the output", what, errExited, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %v (last answer: %s)", what, url,
				time.Since(start).Round(time.Millisecond), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
