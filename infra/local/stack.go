// Package local runs the whole service on one machine: the embedded AWS
// emulator with the resources template.yaml declares, and the same handlers
// the Lambda functions run, wired the way AWS wires them.
//
// With Config.Persist (make run), what AWS keeps durably survives a kill of
// the process: the emulator's data (items, stream records, messages, those
// in flight included) and, beside it, each stream poller's checkpoint, as
// Lambda's event source mapping keeps one (StreamPoller.Checkpoint),
// written from the first start on. A restart resumes each stream after its
// checkpoint, not at LATEST, which would skip what was written before the
// kill and not yet handled; what was handled and not yet checkpointed is
// handled again (at least once: webhook receivers drop the duplicate by
// its webhook-id). TestNoEventLostAcrossKill9 counts the events delivered
// across kills.
package local

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces"
	agent "spaces/agent/client"
	"spaces/infra/awscost"
	"spaces/infra/demo"
	"spaces/infra/emulator"
	"spaces/infra/iotcore"
	"spaces/infra/lambdarules"
	"spaces/infra/problemconn"
	"spaces/shared/auth"
	"spaces/shared/cascade"
	"spaces/shared/httpapi"
	"spaces/shared/mint"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/tracing"
	"spaces/shared/tracing/tracehttp"
	"spaces/shared/wiring"
	"spaces/shared/wiring/agents"
	"spaces/shared/wiring/api"
	"spaces/shared/wiring/discovery"
	"spaces/shared/wiring/parts"
)

// Config is the local stack's configuration; zero values take the defaults.
type Config struct {
	// APIAddr is where the REST API listens (default 127.0.0.1:8080; use
	// 127.0.0.1:0 in tests).
	APIAddr string
	// AgentAddr is where AgentFunction's function URL listens, the agent's
	// routes (default: an ephemeral port on APIAddr's host; make run
	// fixes 127.0.0.1:8081).
	AgentAddr string
	// EmulatorAddr is a fixed loopback address that forwards to the emulator
	// so `aws --endpoint-url` can inspect it (default 127.0.0.1:4566; empty
	// with NoEmulatorPort).
	EmulatorAddr   string
	NoEmulatorPort bool
	// DataDir holds the development JWT key (default .local).
	DataDir string
	// Persist keeps the emulator's state in $KUMO_DATA_DIR across restarts
	// (make run; never in tests but the crash tests' child stacks), every
	// write on disk before it is acknowledged, and the stream pollers'
	// checkpoints beside it.
	Persist bool
	// Names maps a template logical id to a physical name (default: the
	// logical id itself). Tests pass a unique prefix.
	Names func(logicalID string) string
	// StaleAfter is how old a probe may get before its status reads as
	// unknown (default space.DefaultStaleAfter).
	StaleAfter time.Duration
	// Minter reaches the clouds for registration checks, the cluster picker,
	// namespace discovery and probes (nil: no cloud is reachable; clusters
	// are registered unchecked and every probe fails CredentialsUnavailable).
	Minter *mint.Minter
	// Demo, when set, starts the demo clusters in a simulated cloud (package
	// demo) and reaches them with its minter; Minter must then be nil. It
	// registers nothing.
	Demo *demo.Options
	// Probing configures the scheduler ticker and the probe queue poller.
	Probing ProbingConfig
	// LeaseInterval is the agents' lease cadence, told to them and judged
	// by the prober (default space.LeaseInterval, the deployed one; at
	// least the agent's floor, agent.MinLeaseInterval). Tests shorten it.
	LeaseInterval time.Duration
	// Cascade configures the stream poller that drives the deregistration
	// cascade.
	Cascade CascadeConfig
	// Revisions configures the deployment revision claims.
	Revisions RevisionsConfig
	// Webhooks configures the webhook deliveries.
	Webhooks WebhooksConfig
	// Provisioning configures the provisioning jobs' steps.
	Provisioning ProvisioningConfig
	// ConsoleRefresh is how often the web console polls (default 10s).
	ConsoleRefresh time.Duration
	// Tracing is where every hop's spans go, as in the functions (nil:
	// spans are made, their ids logged and carried, and exported nowhere).
	Tracing *tracing.Tracing
	// Log is wrapped in tracing.LogHandler, as the functions' logger is.
	Log *slog.Logger
	// Meter, when set, counts the AWS requests made with the stack's SDK
	// configuration (cost benchmarks; awscost.Meter.Only keeps one
	// function's, lambdarules.FunctionOf).
	Meter *awscost.Meter
}

func (c *Config) defaults() {
	if c.APIAddr == "" {
		c.APIAddr = "127.0.0.1:8080"
	}
	if c.AgentAddr == "" {
		host, _, err := net.SplitHostPort(c.APIAddr)
		if err != nil {
			host = "127.0.0.1"
		}
		c.AgentAddr = net.JoinHostPort(host, "0")
	}
	if c.EmulatorAddr == "" && !c.NoEmulatorPort {
		c.EmulatorAddr = "127.0.0.1:4566"
	}
	if c.DataDir == "" {
		c.DataDir = ".local"
	}
	if c.Names == nil {
		c.Names = func(id string) string { return id }
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = space.DefaultStaleAfter
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	c.Log = slog.New(tracing.LogHandler(c.Log.Handler()))
}

// Stack is a running local stack.
type Stack struct {
	APIURL string
	// AgentURL is AgentFunction's function URL, where agents call out to
	// (the deployed stack's AgentUrl output).
	AgentURL    string
	EmulatorURL string // the in-process emulator
	PublicURL   string // the fixed-port forwarder, if any
	DataDir     string // where the emulator persists ("" in memory only)
	Resources   emulator.Resources
	AWS         aws.Config // SDK configuration pointed at the emulator
	aws         parts.AWS  // the same, for the workflows' constructors
	Table       string     // the spaces table's physical name
	Signer      *auth.Signer
	Service     *space.Service
	// ProbeQueue enqueues a registration probe (the hook the registration
	// path calls once wired).
	ProbeQueue probing.Enqueuer
	// Demo is the running demo world (nil without Config.Demo).
	Demo *demo.Demo
	// Minter is the stack's minter (Config.Minter, or the demo's): also
	// the space.ClusterCreator that provisions clusters in its clouds.
	Minter *mint.Minter
	// Cascade is the deregistration cascade the stream poller drives, and
	// CascadeSource the template's event source it follows.
	Cascade       *cascade.Cascade
	CascadeSource emulator.StreamSource
	// Provisioner runs the provisioning jobs' steps (nil when disabled).
	Provisioner *wiring.Provisioning
	// Functions are the template's functions' rules, under which every
	// invocation runs (package lambdarules).
	Functions lambdarules.Functions
	// Leftovers are the test resources found persisted in the data folder
	// (RemoveTestLeftovers), removed at start.
	Leftovers []string
	// Broker is the local AWS IoT Core of the agents' presence channel
	// (presence.go); MQTTRoots trusts its certificate (an agent's
	// Config.MQTTRoots).
	Broker    *iotcore.Broker
	MQTTRoots *x509.CertPool
	// authorizerInvocations counts PresenceFunction's invocations as the
	// agents' custom authorizer (what IoT Core bills and Lambda runs).
	authorizerInvocations atomic.Int64

	tick  func(context.Context, json.RawMessage) lambdarules.AsyncResult
	stops []func() // the started parts' stops, in the order they started
	emu   *emulator.Emulator
	errc  chan error
}

// Start brings the stack up, one part after the other, and returns once
// every listener is ready.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	cfg.defaults()
	if cfg.LeaseInterval != 0 && cfg.LeaseInterval < agent.MinLeaseInterval {
		return nil, fmt.Errorf("LeaseInterval %s is below the agent's floor, %s", cfg.LeaseInterval, agent.MinLeaseInterval)
	}
	st := &starting{Stack: &Stack{errc: make(chan error, 4)}, ctx: ctx}
	for _, p := range st.parts() {
		stop, err := p.start(&cfg)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		if stop != nil {
			st.stops = append(st.stops, stop)
		}
	}
	return st.Stack, nil
}

// part is one piece of the stack. start brings it up and returns what
// stops it (nil if nothing needs stopping); when it fails, it leaves
// nothing of its own running. A part may set cfg for the parts after it.
type part struct {
	name  string
	start func(cfg *Config) (stop func(), err error)
}

// starting is a stack while Start brings it up, with what one part builds
// for a later one.
type starting struct {
	*Stack
	ctx      context.Context
	verifier *auth.LocalVerifier
	// agents are AgentFunction's handlers: its routes (the presence
	// channel's are PresenceFunction's, startPresence).
	agents *agents.Handlers
	// disc is the discovery function, and discoveryFunction its name in
	// the emulator's Lambda ("" when no cloud is reachable).
	disc              *discovery.Function
	discoveryFunction string
	catalog           http.Handler
}

// parts are the stack's parts in the order they start; Close stops them in
// the reverse order.
func (st *starting) parts() []part {
	return []part{
		{"emulator", st.startEmulator},
		{"resources", st.createResources},
		{"demo", st.startDemo},
		// The agents' presence channel starts before the workflows: they
		// wake agents through it.
		{"presence", st.startPresence},
		{"probing", st.startProbing},
		{"cascade", st.startCascade},
		{"revisions", st.startRevisions},
		{"webhooks", st.startWebhooks},
		{"provisioning", st.startProvisioning},
		{"keys", st.loadKeys},
		{"discovery", st.startDiscovery},
		{"catalog", st.buildCatalog},
		{"api listener", st.serveAPI},
		{"agent listener", st.serveAgentRoutes},
		{"demo agents", st.startDemoAgents},
		{"emulator listener", st.serveEmulator},
	}
}

// startEmulator starts the embedded AWS emulator, persisting if
// Config.Persist.
func (st *starting) startEmulator(cfg *Config) (func(), error) {
	emu, err := emulator.StartWith(st.ctx, emulator.Options{Persist: cfg.Persist})
	if err != nil {
		return nil, err
	}
	st.emu, st.EmulatorURL, st.DataDir = emu, emu.URL, emu.DataDir
	// Refuse to run on an emulator that would silently never cascade.
	if err := emu.Check(st.ctx); err != nil {
		emu.Close()
		return nil, err
	}
	return emu.Close, nil
}

// createResources creates the template's resources in the emulator (after
// removing what earlier test runs persisted there) and reads its
// functions' rules.
func (st *starting) createResources(cfg *Config) (func(), error) {
	var err error
	if st.DataDir != "" {
		if st.Leftovers, err = st.emu.RemoveTestLeftovers(st.ctx, spaces.Template); err != nil {
			return nil, fmt.Errorf("remove test leftovers from %s: %w", st.DataDir, err)
		}
	}
	if st.Resources, err = st.emu.CreateResources(st.ctx, spaces.Template, cfg.Names); err != nil {
		return nil, err
	}
	if st.Functions, err = lambdarules.Read(spaces.Template); err != nil {
		return nil, err
	}
	st.AWS = st.emu.Config()
	// Messages sent within an invocation carry its trace header, as the
	// SDK's do inside Lambda (loop detection counts on it).
	st.AWS.APIOptions = append(st.AWS.APIOptions, lambdarules.CarryTraceHeader)
	if cfg.Meter != nil {
		st.AWS = cfg.Meter.Instrument(st.AWS)
	}
	if err := st.recordIAM(*cfg); err != nil {
		return nil, err
	}
	st.aws = parts.AWS{Config: st.AWS, Endpoint: st.EmulatorURL}
	st.Table = st.Resources["SpacesTable"].Name
	return nil, nil
}

// common is what every function is told about the table and the clocks.
func (st *starting) common(cfg *Config) parts.Common {
	return parts.Common{Table: st.Table, StaleAfter: cfg.StaleAfter, LeaseCadence: space.LeaseCadence(cfg.LeaseInterval)}
}

// probeQueue is where registrations and the presence channel ask for
// probes: the queue the local prober reads, if it runs.
func (st *starting) probeQueue(cfg *Config) string {
	if cfg.Probing.Disabled {
		return ""
	}
	return st.Resources["ProbeQueue"].URL
}

// loadKeys loads the development JWT key (making it on first use): the
// API verifies with it and Stack.Signer mints with it.
func (st *starting) loadKeys(cfg *Config) (func(), error) {
	keyCfg := auth.LocalConfig{KeyPath: filepath.Join(cfg.DataDir, "dev-jwt.pem")}
	var err error
	if st.verifier, err = auth.NewLocalVerifier(keyCfg); err != nil {
		return nil, err
	}
	st.Signer, err = auth.NewSigner(keyCfg)
	return nil, err
}

// buildCatalog builds ApiFunction's handler, the catalog, which asks the
// discovery function its cloud questions when a cloud is reachable.
func (st *starting) buildCatalog(cfg *Config) (func(), error) {
	settings := api.Settings{
		Common:            st.common(cfg),
		CursorSecret:      "spaces-local:" + st.verifier.KeyID(),
		RevisionsQueue:    st.Resources["RevisionsQueue"].URL,
		ProvisioningQueue: st.Resources["ProvisioningQueue"].URL,
		ProbeQueue:        st.probeQueue(cfg),
		DiscoveryFunction: st.discoveryFunction,
		WebhookKey:        st.Resources["WebhookSecretsKey"].Name,
		WebhookQueue:      st.Resources["WebhooksQueue"].URL,
		// Receivers on the developer's machine (make run, the tests).
		AllowLoopbackWebhooks: true,
	}
	opts := api.Options{Auth: st.verifier, Log: cfg.Log}
	if cfg.Minter != nil {
		opts.Cloud, opts.Trust = api.CloudCall(st.aws, settings), &cfg.Minter.Trust
	}
	handler, svc, err := api.New(st.aws, settings, opts)
	if err != nil {
		return nil, err
	}
	st.catalog, st.Service = handler.Handler(), svc
	return nil, nil
}

// serveAPI serves the gateway's routes: the catalog's and the discovery
// function's, beside the console.
func (st *starting) serveAPI(cfg *Config) (stop func(), err error) {
	st.APIURL, stop, err = st.serve(cfg.APIAddr, st.withConsole(*cfg, tracehttp.Handler(cfg.Tracing, routeByFunction(
		st.Functions.Get("ApiFunction").Gateway(st.catalog),
		st.Functions.Get("DiscoveryFunction").Gateway(st.disc.HTTP)))))
	return stop, err
}

// serveAgentRoutes serves the agent's routes, which are not the
// gateway's: AgentFunction's function URL, on a listener of its own, as
// deployed.
func (st *starting) serveAgentRoutes(cfg *Config) (stop func(), err error) {
	h, err := st.Functions.Get("AgentFunction").FunctionURL(st.agents.HTTP)
	if err != nil {
		return nil, err
	}
	st.AgentURL, stop, err = st.serve(cfg.AgentAddr, tracehttp.Handler(cfg.Tracing, h))
	return stop, err
}

// startDemoAgents tells the demo where its agent calls out to, the agent's
// routes.
func (st *starting) startDemoAgents(*Config) (func(), error) {
	if st.Demo == nil {
		return nil, nil
	}
	return nil, st.Demo.ServeAgents(st.AgentURL, st.MQTTRoots)
}

// serveEmulator forwards Config.EmulatorAddr to the emulator, if set.
func (st *starting) serveEmulator(cfg *Config) (stop func(), err error) {
	if cfg.EmulatorAddr == "" {
		return nil, nil
	}
	target, _ := url.Parse(st.EmulatorURL)
	st.PublicURL, stop, err = st.serve(cfg.EmulatorAddr, httputil.NewSingleHostReverseProxy(target))
	return stop, err
}

// routeByFunction sends the cluster-side routes to the discovery function's
// handler and everything else to the catalog's, as the gateway's routes
// do. A request is only matched against the route patterns here; the
// catalog's mux answers unknown paths (the agent's among them: they are
// on AgentFunction's URL) and wrong methods.
func routeByFunction(catalog, cluster http.Handler) http.Handler {
	patterns := http.NewServeMux()
	for _, r := range httpapi.ClusterRoutes() {
		patterns.Handle(r, cluster)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, pattern := patterns.Handler(r); pattern != "" && canonicalPath(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		catalog.ServeHTTP(w, r)
	})
}

// canonicalPath: the mux would redirect a non-canonical path; the catalog
// answers it with its 404 problem instead.
func canonicalPath(p string) bool { return p != "" && path.Clean(p) == p }

// serve serves h on addr and returns its URL and what shuts it down,
// letting requests in flight finish.
func (st *Stack) serve(addr string, h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	// ReadTimeout bounds the whole request, body included, so a client
	// trickling a byte every few seconds cannot hold a connection (a body
	// is at most 64 KiB); IdleTimeout closes idle keep-alive connections.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 20 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := srv.Serve(problemconn.Listener{Listener: ln}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			st.errc <- err
		}
	}()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// inBackground runs run in a goroutine, as an event source's poller runs
// beside the stack; the returned stop cancels run's context and returns
// once run has.
func inBackground(run func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// Err reports a listener that stopped unexpectedly.
func (st *Stack) Err() <-chan error { return st.errc }

// Close stops the stack's parts in the reverse order they started: the
// listeners first (letting requests in flight finish), the emulator last.
// Closing again does nothing.
func (st *Stack) Close() {
	for i := len(st.stops) - 1; i >= 0; i-- {
		st.stops[i]()
	}
	st.stops = nil
}

// function is the template's function id, whose rules its invocations run
// under.
func (st *Stack) function(id string) *lambdarules.Function {
	f := st.Functions.Get(id)
	return &f
}

// Tick is one event of the scheduler's schedule, invoked asynchronously
// as EventBridge Scheduler invokes it; it returns once Lambda's rules have
// decided the event's fate (handled, or dropped after its attempts).
func (st *Stack) Tick(ctx context.Context, input json.RawMessage) lambdarules.AsyncResult {
	if st.tick == nil {
		panic("local: probing is disabled: no scheduler runs")
	}
	return st.tick(ctx, input)
}
