// Package demo is the world `make run` starts next to the service: a
// simulated cloud (simcloud) with a fixed account per provider and two
// light clusters (testcluster) in each, one of which goes down and comes
// back on a rhythm. Each cluster accepts exactly the bearer tokens simcloud
// would accept for it, so registering, probing and namespace discovery go
// through the real minters, SDKs and client-go end to end. It registers
// nothing: that is the user's part of the tour.
//
// The light clusters answer only /version and namespaces, so revisions
// pushed to them fail. When the real kube-apiserver and etcd are in the
// cache (infra/kube, `make kube-bins`), one of them also backs a third
// cluster per provider (demo-eks-apps, demo-gke-apps, demo-aks-apps) and
// every cluster the demo's cloud creates: those take revisions. Without
// the binaries, created clusters are light too (Demo.Real is nil).
//
// The real API server also hosts the agent of an agent-mode space
// (agent.go): InstallAgent, reached through the simulated cloud's console,
// applies the agent's manifests there and runs the agent in-process.
package demo

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"spaces/infra/kubetest"
	"spaces/infra/simcloud"
	"spaces/infra/testcluster"
	"spaces/shared/mint"
	"spaces/shared/space"
)

// The demo accounts' fixed identities: POST them as a cloud account's
// connection (Connection builds it); the simulated cloud lets Spaces in once
// the setup the answer carries is applied (simcloud's console,
// POST /console/apply-setup, or Cloud.ApplySetup) and the account verified.
const (
	AWSAccount = "210987654321"
	RoleARN    = "arn:aws:iam::" + AWSAccount + ":role/spaces-demo"
	AWSRegion  = "eu-west-1"

	GCPProject        = "acme-demo"
	GCPServiceAccount = "spaces@acme-demo.iam.gserviceaccount.com"

	AzureTenant        = "7d3c1f0e-5a4b-4c2d-9e8f-1a2b3c4d5e6f"
	AzureClient        = "0f9e8d7c-6b5a-4948-8372-615f4e3d2c1b"
	AzureSubscription  = "3a1b2c4d-5e6f-4a8b-9c0d-e1f2a3b4c5d6"
	AzureResourceGroup = "rg-demo"
	AzureLocation      = "westeurope"
)

// The demo accounts' networks, for cluster creation to name.
const (
	AWSSubnetA       = "subnet-0d3e0000000000001"
	AWSSubnetB       = "subnet-0d3e0000000000002"
	AWSSecurityGroup = "sg-0d3e0000000000003"
	GCPNetwork       = "demo-vpc"
	GCPSubnetwork    = "demo-europe-west1"
	AzureSubnet      = "/subscriptions/" + AzureSubscription + "/resourceGroups/" + AzureResourceGroup +
		"/providers/Microsoft.Network/virtualNetworks/vnet-demo/subnets/aks"
)

// DefaultCreateDelay is how long a cluster the demo's cloud creates takes
// to come up (twice that on EKS: the control plane, then the node group).
const DefaultCreateDelay = 40 * time.Second

// Connection is the cloud account connection for the demo account of p.
func Connection(p space.Provider) map[string]string {
	switch p {
	case space.AWS:
		return map[string]string{"roleArn": RoleARN}
	case space.GCP:
		return map[string]string{"projectId": GCPProject, "serviceAccountEmail": GCPServiceAccount}
	case space.Azure:
		return map[string]string{"tenantId": AzureTenant, "clientId": AzureClient, "subscriptionId": AzureSubscription}
	}
	return nil
}

// Spec describes one demo cluster.
type Spec struct {
	Provider space.Provider
	Name     string
	// Location is the AWS region, GCP region or Azure location.
	Location   string
	GitVersion string
	Platform   string
	// Flaps marks the cluster that goes down and comes back.
	Flaps bool
	// CertificateExpiresIn is how long the API server's serving
	// certificate stays valid from the demo's start (zero:
	// DefaultCertificateLife): one cluster's expires within 30 days, so
	// the fleet shows it (certificate_expires_within_days).
	CertificateExpiresIn time.Duration
	// Real marks a cluster served by the real kube-apiserver: it takes
	// revisions. It exists only when the binaries are in the cache.
	Real bool
}

// Config is the identity config that registers the cluster (POST /spaces).
func (s Spec) Config() space.Config {
	switch s.Provider {
	case space.AWS:
		return space.Config{"clusterName": s.Name, "region": s.Location}
	case space.GCP:
		return space.Config{"clusterName": s.Name, "region": s.Location, "projectId": GCPProject}
	}
	return space.Config{"clusterName": s.Name, "resourceGroup": AzureResourceGroup, "subscriptionId": AzureSubscription}
}

// Specs are the demo clusters, two per cloud; demo-aks-2 flaps.
var Specs = []Spec{
	{Provider: space.AWS, Name: "demo-eks-1", Location: AWSRegion, GitVersion: "v1.31.4-eks-2d5f260", Platform: "linux/amd64"},
	{Provider: space.AWS, Name: "demo-eks-2", Location: AWSRegion, GitVersion: "v1.30.8-eks-56e63d8", Platform: "linux/arm64"},
	{Provider: space.GCP, Name: "demo-gke-1", Location: "europe-west1", GitVersion: "v1.31.5-gke.1023000", Platform: "linux/amd64", CertificateExpiresIn: ExpiringCertificateLife},
	{Provider: space.GCP, Name: "demo-gke-2", Location: "us-central1", GitVersion: "v1.30.9-gke.1009000", Platform: "linux/amd64"},
	{Provider: space.Azure, Name: "demo-aks-1", Location: "westeurope", GitVersion: "v1.31.3", Platform: "linux/amd64"},
	{Provider: space.Azure, Name: "demo-aks-2", Location: "northeurope", GitVersion: "v1.30.7", Platform: "linux/amd64", Flaps: true},
	{Provider: space.AWS, Name: "demo-eks-apps", Location: AWSRegion, GitVersion: kubetest.KubernetesVersion, Platform: realPlatform, Real: true},
	{Provider: space.GCP, Name: "demo-gke-apps", Location: "europe-west1", GitVersion: kubetest.KubernetesVersion, Platform: realPlatform, Real: true},
	{Provider: space.Azure, Name: "demo-aks-apps", Location: AzureLocation, GitVersion: kubetest.KubernetesVersion, Platform: realPlatform, Real: true},
}

// DefaultCertificateLife is a demo API server's serving certificate's
// validity (the real kube-apiserver's own is ten years, infra/kubetest);
// ExpiringCertificateLife is demo-gke-1's, within the 30 days an operator
// is warned before.
const (
	DefaultCertificateLife  = 365 * 24 * time.Hour
	ExpiringCertificateLife = 20 * 24 * time.Hour
)

// Specs' facts that the fleet view shows: demo-gke-1's certificate expires
// within 30 days; the EKS versions (1.31, 1.30) are past EKS's standard
// support (supportwindows/eks.json), which TestDemoShowsFacts holds.

// realPlatform is the real API server's platform: this machine's.
const realPlatform = runtime.GOOS + "/" + runtime.GOARCH

// realBackend is the webhook key of the real kube-apiserver, shared by the
// real demo clusters and the created ones.
const realBackend = "demo-kube"

// Default rhythm of the flapping cluster.
const (
	DefaultFlapUp   = 4 * time.Minute
	DefaultFlapDown = 4 * time.Minute
)

// Options configures the demo; zero values take the defaults.
type Options struct {
	// FlapUp and FlapDown are how long the flapping cluster stays up and
	// then down, over and over (defaults DefaultFlapUp, DefaultFlapDown).
	FlapUp, FlapDown time.Duration
	Log              *slog.Logger
	// SetupsFile, when set, keeps the setups applied through the console
	// (one account per line) and applies them again at start: the
	// customers' clouds remember their trust across restarts of make run,
	// as the table remembers the accounts.
	SetupsFile string
	// CreatedFile, when set, keeps the clusters the cloud created and
	// brings them back at start, as SetupsFile does for setups. Their
	// content is on the real API server, which starts empty unless KubeDir
	// keeps it.
	CreatedFile string
	// KubeDir, when set, is where the real API server keeps its etcd data
	// across restarts (default: a temporary folder).
	KubeDir string
	// CreateDelay is how long a cluster the cloud creates takes to come up
	// (default DefaultCreateDelay).
	CreateDelay time.Duration
	// KubeBinDir holds kube-apiserver and etcd (default kubetest.BinDir());
	// without them the real clusters are left out.
	KubeBinDir string
}

// Cluster is a running demo cluster: a light testcluster, or (Real) one
// served by Demo.Real, with Cluster nil.
type Cluster struct {
	Spec
	*testcluster.Cluster
}

// Demo is the running demo world.
type Demo struct {
	Cloud    *simcloud.Cloud
	Clusters []Cluster
	// Real is the real kube-apiserver behind the Real clusters and the
	// created ones; nil when its binaries are not in the cache.
	Real *kubetest.Cluster
	// RealMissing says why Real is nil.
	RealMissing string
	// light backs the created clusters when Real is nil.
	light *testcluster.Cluster

	stop context.CancelFunc
	wg   sync.WaitGroup
	log  *slog.Logger

	// The agent on the private cluster (agent.go).
	agentMu  sync.Mutex
	agentURL string
	// agentMQTT trusts the local IoT Core's certificate (the agent's
	// presence channel; nil: the system's roots).
	agentMQTT *x509.CertPool
	agent     *agentRun
	agentDir  string
}

// Start starts the simulated cloud, the clusters and the flapping.
func Start(opts Options) (*Demo, error) {
	if opts.FlapUp <= 0 {
		opts.FlapUp = DefaultFlapUp
	}
	if opts.FlapDown <= 0 {
		opts.FlapDown = DefaultFlapDown
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	setups, created := newLog(opts.SetupsFile, opts.Log), newLog(opts.CreatedFile, opts.Log)
	if opts.CreateDelay <= 0 {
		opts.CreateDelay = DefaultCreateDelay
	}
	d := &Demo{log: opts.Log}
	sc, err := simcloud.Start(simcloud.Options{OnApply: setups.addSetup, OnCreate: created.addCluster, CreateDelay: opts.CreateDelay,
		OnInstallAgent: d.InstallAgent})
	if err != nil {
		return nil, fmt.Errorf("simulated cloud: %w", err)
	}
	d.Cloud = sc
	// The customer's role, service account and app exist but trust nobody
	// yet: each org's setup adds its own trust.
	if err := sc.SetTrustPolicy(RoleARN, []byte(`{"Version":"2012-10-17","Statement":[]}`)); err != nil {
		d.Close()
		return nil, err
	}
	sc.AddServiceAccount(GCPServiceAccount)
	sc.AddApp(AzureTenant, AzureClient)
	creator.Allow(sc)
	if err := setups.replay(applySetup(sc)); err != nil {
		d.Close()
		return nil, err
	}
	ca, err := testcluster.NewCA()
	if err != nil {
		d.Close()
		return nil, err
	}
	if err := d.startBackends(opts, ca); err != nil {
		d.Close()
		return nil, err
	}
	if err := restoreClusters(created, sc); err != nil {
		d.Close()
		return nil, err
	}
	for _, spec := range Specs {
		if spec.Real {
			if d.Real != nil {
				d.Clusters = append(d.Clusters, Cluster{Spec: spec})
				sc.AddCluster(cloudCluster(spec, realBackend, d.Real.URL, d.Real.CAPEM))
			}
			continue
		}
		// The cluster's name is its token-review backend key: each cluster
		// accepts the tokens simcloud would accept for it and no other.
		life := spec.CertificateExpiresIn
		if life == 0 {
			life = DefaultCertificateLife
		}
		cert, err := ca.ServerCertificateUntil(time.Now().Add(life))
		if err != nil {
			d.Close()
			return nil, err
		}
		tc, err := testcluster.New(testcluster.WithCA(ca), testcluster.WithHTTP2(), testcluster.WithServingCertificate(cert),
			testcluster.WithVersion(spec.GitVersion, spec.Platform), testcluster.WithTokenCheck(sc.TokenCheck(spec.Name)))
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
		}
		tc.SetTokens() // drop the random start token: only simcloud's tokens work
		d.Clusters = append(d.Clusters, Cluster{Spec: spec, Cluster: tc})
		sc.AddCluster(cloudCluster(spec, spec.Name, tc.URL(), tc.CAPEM()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	for _, c := range d.Clusters {
		if c.Flaps {
			d.wg.Go(func() { flap(ctx, c, opts) })
		}
	}
	return d, nil
}

// startBackends starts what serves the clusters the cloud creates: the
// real kube-apiserver when its binaries are in the cache (it also serves
// the Real demo clusters), else one light cluster.
func (d *Demo) startBackends(opts Options, ca *testcluster.CA) error {
	bin := opts.KubeBinDir
	if bin == "" {
		bin = kubetest.BinDir()
	}
	for _, f := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			d.RealMissing = "no " + f + " in " + bin + " (build it once: " + kubetest.BuildCommand + ")"
			break
		}
	}
	if d.RealMissing == "" && opts.KubeDir != "" {
		if err := os.MkdirAll(opts.KubeDir, 0o700); err != nil {
			return err
		}
	}
	if d.RealMissing == "" {
		kc, err := kubetest.StartCluster(context.Background(), kubetest.Options{BinDir: bin, Dir: opts.KubeDir,
			TokenWebhook: &kubetest.TokenWebhook{URL: d.Cloud.WebhookURL(realBackend), CAPEM: d.Cloud.CAPEM}})
		if err != nil {
			d.RealMissing = "the kube-apiserver did not start: " + err.Error()
			if kc != nil {
				// The reason is in the logs; a test failing on RealMissing
				// shows it.
				d.RealMissing += "\n" + kc.LogTail(15)
				opts.Log.Warn("demo kube-apiserver did not start", "log", kc.LogTail(30))
				kc.Close()
			}
		} else {
			d.Real = kc
			d.Cloud.SetCreationBackend(simcloud.Backend{Key: realBackend, Server: kc.URL, CAPEM: kc.CAPEM})
			return nil
		}
	}
	opts.Log.Warn("demo clusters are light: none takes revisions", "why", d.RealMissing)
	tc, err := testcluster.New(testcluster.WithCA(ca), testcluster.WithHTTP2(), testcluster.WithTokenCheck(d.Cloud.TokenCheck("demo-created")))
	if err != nil {
		return fmt.Errorf("created clusters' server: %w", err)
	}
	tc.SetTokens()
	d.light = tc
	d.Cloud.SetCreationBackend(simcloud.Backend{Key: "demo-created", Server: tc.URL(), CAPEM: tc.CAPEM()})
	return nil
}

// creator is the demo customers' grant to create clusters, and their
// networks.
var creator = simcloud.Creator{
	AWSAccount: AWSAccount, AWSRegion: AWSRegion, RoleARN: RoleARN, SubnetA: AWSSubnetA, SubnetB: AWSSubnetB, SecurityGroup: AWSSecurityGroup,
	GCPProject: GCPProject, ServiceAccount: GCPServiceAccount, GCPNetwork: GCPNetwork, GCPSubnetwork: GCPSubnetwork,
	AzureSubscription: AzureSubscription, AzurePrincipal: simcloud.AzurePrincipal(AzureTenant, AzureClient),
	AzureLocation: AzureLocation, AzureSubnet: AzureSubnet,
}

// CloudVersion is the version the cloud reports for the cluster, in its
// own words, agreeing with the cluster's /version: EKS names the minor
// ("1.31"), GKE the release ("1.31.5-gke.1023000"), AKS the patch
// ("1.31.3").
func (s Spec) CloudVersion() string {
	v := strings.TrimPrefix(s.GitVersion, "v")
	switch s.Provider {
	case space.AWS:
		if parts := strings.SplitN(v, ".", 3); len(parts) >= 2 {
			return parts[0] + "." + parts[1]
		}
	case space.Azure:
		v, _, _ = strings.Cut(v, "-")
	}
	return v
}

// cloudCluster is how simcloud knows the cluster: owned by the demo
// account of its provider and granted to the demo identity.
func cloudCluster(s Spec, backend, server string, caPEM []byte) simcloud.Cluster {
	c := simcloud.Cluster{Provider: s.Provider, Name: s.Name, Location: s.Location, Server: server, CAPEM: caPEM, Backend: backend,
		Version: s.CloudVersion()}
	switch s.Provider {
	case space.AWS:
		c.Account, c.Principals = AWSAccount, []string{RoleARN}
	case space.GCP:
		c.Account, c.Principals = GCPProject, []string{GCPServiceAccount}
	case space.Azure:
		c.Account, c.ResourceGroup = AzureSubscription, AzureResourceGroup
		c.Principals = []string{simcloud.AzurePrincipal(AzureTenant, AzureClient)}
	}
	return c
}

// flap keeps c up for FlapUp, then stopped (connection refused) for
// FlapDown, until ctx ends; it leaves the cluster listening.
func flap(ctx context.Context, c Cluster, opts Options) {
	up := true
	for {
		d := opts.FlapUp
		if !up {
			d = opts.FlapDown
		}
		select {
		case <-ctx.Done():
			if !up {
				_ = c.Start()
			}
			return
		case <-time.After(d):
		}
		var err error
		if up {
			err = c.Stop()
		} else {
			err = c.Start()
		}
		if err != nil {
			// Starting again can fail if another process took the port
			// meanwhile; the cluster then stays down, which the probes
			// report, and the next turn tries again.
			opts.Log.Warn("demo cluster did not switch", "cluster", c.Name, "up", !up, "error", err)
			continue
		}
		up = !up
		opts.Log.Info("demo cluster switched", "cluster", c.Name, "up", up)
	}
}

// Minter reaches the demo's cloud, with grants and accounts read from
// store.
func (d *Demo) Minter(store interface {
	mint.Grants
	mint.Accounts
}) *mint.Minter {
	return d.Cloud.Minter(store)
}

// Cluster returns the demo cluster called name.
func (d *Demo) Cluster(name string) (Cluster, error) {
	for _, c := range d.Clusters {
		if c.Name == name {
			return c, nil
		}
	}
	return Cluster{}, errors.New("no demo cluster " + name)
}

// Close stops the flapping, the clusters and the cloud.
func (d *Demo) Close() {
	if d.stop != nil {
		d.stop()
		d.wg.Wait()
	}
	d.stopAgent()
	for _, c := range d.Clusters {
		if c.Cluster != nil {
			c.Close()
		}
	}
	if d.Real != nil {
		d.Real.Close()
	}
	if d.light != nil {
		d.light.Close()
	}
	d.Cloud.Close()
}

// jsonLog is a file of JSON lines the demo keeps across restarts: the
// setups applied through the console, the clusters the cloud created. A
// nil *jsonLog keeps nothing.
type jsonLog struct {
	path string
	log  *slog.Logger
	mu   sync.Mutex
}

func newLog(path string, log *slog.Logger) *jsonLog {
	if path == "" {
		return nil
	}
	return &jsonLog{path: path, log: log}
}

// add appends v; a failure is logged (the change is live meanwhile, and
// only a restart would forget it).
func (l *jsonLog) add(v any) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	line, _ := json.Marshal(v)
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = f.Write(append(line, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		l.log.Warn("demo change not kept", "file", l.path, "error", err)
	}
}

// addSetup and addCluster are add for simcloud's hooks.
func (l *jsonLog) addSetup(acct space.CloudAccount) { l.add(acct) }
func (l *jsonLog) addCluster(r simcloud.Record)     { l.add(r) }

// replay hands every line to apply, in order.
func (l *jsonLog) replay(apply func([]byte) error) error {
	if l == nil {
		return nil
	}
	data, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := apply(line); err != nil {
			return fmt.Errorf("demo: %s line %d: %w", l.path, i+1, err)
		}
	}
	return nil
}

// applySetup applies a kept setup (a later one for the same role replaces
// the trust policy, as it does when a setup is first applied).
func applySetup(sc *simcloud.Cloud) func([]byte) error {
	return func(line []byte) error {
		var acct space.CloudAccount
		if err := json.Unmarshal(line, &acct); err != nil {
			return err
		}
		return sc.ApplySetup(acct)
	}
}

// restoreClusters brings back the clusters the cloud created; a cluster's
// last line (its EKS node group) is the one that counts.
func restoreClusters(l *jsonLog, sc *simcloud.Cloud) error {
	var last []simcloud.Record
	index := map[string]int{}
	err := l.replay(func(line []byte) error {
		var r simcloud.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		k := string(r.Provider) + "/" + r.Account + "/" + r.Location + "/" + r.ResourceGroup + "/" + r.Name
		if i, ok := index[k]; ok {
			last[i] = r
			return nil
		}
		index[k] = len(last)
		last = append(last, r)
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range last {
		if err := sc.Restore(r); err != nil {
			return err
		}
	}
	return nil
}

// ClusterSpec is a cluster the demo's cloud creates for p (with the demo
// account's networks): what a provisioning job may ask for.
func ClusterSpec(p space.Provider) space.ClusterSpec { return creator.Spec(p) }

// NewClusterConfig is the identity config of a cluster called name that
// the demo's cloud may create for p.
func NewClusterConfig(p space.Provider, name string) space.Config {
	switch p {
	case space.AWS:
		return space.Config{"clusterName": name, "region": AWSRegion}
	case space.GCP:
		return space.Config{"clusterName": name, "region": "europe-west1", "projectId": GCPProject}
	}
	return space.Config{"clusterName": name, "resourceGroup": AzureResourceGroup, "subscriptionId": AzureSubscription}
}
