// Package local runs the whole service on one machine: the embedded AWS
// emulator with the resources template.yaml declares, and the same handlers
// the Lambda functions run, wired the way AWS wires them.
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
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces"
	agent "spaces/agent/client"
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
	// (make run; never in tests), every write on disk before it is
	// acknowledged.
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
	// Provisioning configures the provisioning jobs' steps.
	Provisioning ProvisioningConfig
	// ConsoleRefresh is how often the web console polls (default 5s).
	ConsoleRefresh time.Duration
	// Tracing is where every hop's spans go, as in the functions (nil:
	// spans are made, their ids logged and carried, and exported nowhere).
	Tracing *tracing.Tracing
	// Log is wrapped in tracing.LogHandler, as the functions' logger is.
	Log *slog.Logger
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
	// Leftovers are the test resources an earlier version's test runs had
	// persisted into the data folder, removed at start.
	Leftovers []string
	// Broker is the local AWS IoT Core of the agents' presence channel
	// (presence.go); MQTTRoots trusts its certificate (an agent's
	// Config.MQTTRoots).
	Broker    *iotcore.Broker
	MQTTRoots *x509.CertPool

	tick             func(context.Context, json.RawMessage) lambdarules.AsyncResult
	stopProbing      func()
	stopCascade      func()
	stopRevisions    func()
	stopProvisioning func()
	stopDiscovery    func()
	stopPresence     func()
	servers          []*http.Server
	emu              *emulator.Emulator
	errc             chan error
}

// Start brings the stack up and returns once every listener is ready.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	cfg.defaults()
	if cfg.LeaseInterval != 0 && cfg.LeaseInterval < agent.MinLeaseInterval {
		return nil, fmt.Errorf("LeaseInterval %s is below the agent's floor, %s", cfg.LeaseInterval, agent.MinLeaseInterval)
	}
	emu, err := emulator.StartWith(ctx, emulator.Options{Persist: cfg.Persist})
	if err != nil {
		return nil, fmt.Errorf("start emulator: %w", err)
	}
	st := &Stack{emu: emu, EmulatorURL: emu.URL, DataDir: emu.DataDir, errc: make(chan error, 4)}
	ok := false
	defer func() {
		if !ok {
			st.Close()
		}
	}()
	// Refuse to run on an emulator that would silently never cascade.
	if err := emu.Check(ctx); err != nil {
		return nil, err
	}
	if emu.DataDir != "" {
		if st.Leftovers, err = emu.RemoveTestLeftovers(ctx, spaces.Template); err != nil {
			return nil, fmt.Errorf("remove test leftovers from %s: %w", emu.DataDir, err)
		}
	}
	res, err := emu.CreateResources(ctx, spaces.Template, cfg.Names)
	if err != nil {
		return nil, fmt.Errorf("create resources: %w", err)
	}
	st.Resources = res
	if st.Functions, err = lambdarules.Read(spaces.Template); err != nil {
		return nil, err
	}
	st.AWS = emu.Config()
	// Messages sent within an invocation carry its trace header, as the
	// SDK's do inside Lambda (loop detection counts on it).
	st.AWS.APIOptions = append(st.AWS.APIOptions, lambdarules.CarryTraceHeader)
	if err := st.recordIAM(cfg); err != nil {
		return nil, err
	}
	st.aws = parts.AWS{Config: st.AWS, Endpoint: emu.URL}
	st.Table = res["SpacesTable"].Name
	if cfg.Demo != nil {
		if err := st.startDemo(&cfg, st.aws.Store(st.Table)); err != nil {
			return nil, err
		}
	}
	st.Minter = cfg.Minter
	// The agents' presence channel starts first: the workflows below wake
	// agents through it. Its authorizer is AgentFunction's, built below.
	var agentFn *agents.Handlers
	if err := st.startBroker(cfg, func(ctx context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
		return lambdarules.Handler(st.Functions.Get("AgentFunction"), agentFn.Authorize)(ctx, req)
	}); err != nil {
		return nil, err
	}
	if err := st.startProbing(cfg); err != nil {
		return nil, fmt.Errorf("probing: %w", err)
	}
	if err := st.startCascade(cfg); err != nil {
		return nil, fmt.Errorf("cascade: %w", err)
	}
	if err := st.startRevisions(cfg); err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	if err := st.startProvisioning(cfg); err != nil {
		return nil, fmt.Errorf("provisioning: %w", err)
	}

	keyCfg := auth.LocalConfig{KeyPath: filepath.Join(cfg.DataDir, "dev-jwt.pem")}
	verifier, err := auth.NewLocalVerifier(keyCfg)
	if err != nil {
		return nil, err
	}
	if st.Signer, err = auth.NewSigner(keyCfg); err != nil {
		return nil, err
	}
	settings := api.Settings{
		Common:       parts.Common{Table: st.Table, StaleAfter: cfg.StaleAfter, LeaseCadence: space.LeaseCadence(cfg.LeaseInterval)},
		CursorSecret: "spaces-local:" + verifier.KeyID(),
		// Registration probes go where the local prober reads, if it runs.
		RevisionsQueue:    res["RevisionsQueue"].URL,
		ProvisioningQueue: res["ProvisioningQueue"].URL,
	}
	if !cfg.Probing.Disabled {
		settings.ProbeQueue = res["ProbeQueue"].URL
	}
	// The cluster side is its own function, as deployed; without a minter
	// no cloud is reachable and the catalog asks none.
	disc := discovery.New(st.aws, discovery.Settings{Common: settings.Common, Wakes: st.wakes()}, discovery.Options{Auth: verifier, Minter: cfg.Minter, Log: cfg.Log})
	opts := api.Options{Auth: verifier, Log: cfg.Log}
	if cfg.Minter != nil {
		if settings.DiscoveryFunction, err = st.startDiscovery(cfg, disc); err != nil {
			return nil, err
		}
		opts.Cloud, opts.Trust = api.CloudCall(st.aws, settings), &cfg.Minter.Trust
	}
	handler, svc, err := api.New(st.aws, settings, opts)
	if err != nil {
		return nil, err
	}
	st.Service = svc
	// The agent's routes are their own function's, as deployed, as are the
	// presence channel's authorizer and lifecycle events.
	agentFn = agents.NewHandlers(st.aws, agents.Settings{Common: settings.Common, ProbeQueue: settings.ProbeQueue,
		Presence: space.PresenceConfig{Endpoint: st.Broker.MQTTAddr(), Authorizer: agentAuthorizer, ClientPrefix: agentClientIDPre}},
		agents.Options{Log: cfg.Log})
	if err := st.startPresence(cfg, agentFn); err != nil {
		return nil, err
	}
	if st.APIURL, err = st.serve(cfg.APIAddr, st.withConsole(cfg, tracehttp.Handler(cfg.Tracing, routeByFunction(
		st.Functions.Get("ApiFunction").Gateway(handler.Handler()),
		st.Functions.Get("DiscoveryFunction").Gateway(disc.HTTP))))); err != nil {
		return nil, fmt.Errorf("api listener: %w", err)
	}
	// The agent's routes are not the gateway's: AgentFunction's function
	// URL, on a listener of its own, as deployed.
	agentURL, err := st.Functions.Get("AgentFunction").FunctionURL(agentFn.HTTP)
	if err != nil {
		return nil, err
	}
	if st.AgentURL, err = st.serve(cfg.AgentAddr, tracehttp.Handler(cfg.Tracing, agentURL)); err != nil {
		return nil, fmt.Errorf("agent listener: %w", err)
	}
	if st.Demo != nil {
		// The demo's agent calls out to the agent's routes.
		if err := st.Demo.ServeAgents(st.AgentURL, st.MQTTRoots); err != nil {
			return nil, err
		}
	}
	if cfg.EmulatorAddr != "" {
		target, _ := url.Parse(emu.URL)
		if st.PublicURL, err = st.serve(cfg.EmulatorAddr, httputil.NewSingleHostReverseProxy(target)); err != nil {
			return nil, fmt.Errorf("emulator listener: %w", err)
		}
	}
	ok = true
	return st, nil
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

func (st *Stack) serve(addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	// ReadTimeout bounds the whole request, body included, so a client
	// trickling a byte every few seconds cannot hold a connection (a body
	// is at most 64 KiB); IdleTimeout closes idle keep-alive connections.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 20 * time.Second, IdleTimeout: time.Minute}
	st.servers = append(st.servers, srv)
	go func() {
		if err := srv.Serve(problemconn.Listener{Listener: ln}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			st.errc <- err
		}
	}()
	return "http://" + ln.Addr().String(), nil
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

// Close stops the listeners (letting requests in flight finish), the demo
// and the emulator.
func (st *Stack) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st.stopProbing != nil {
		st.stopProbing()
	}
	if st.stopCascade != nil {
		st.stopCascade()
	}
	if st.stopRevisions != nil {
		st.stopRevisions()
	}
	if st.stopProvisioning != nil {
		st.stopProvisioning()
	}
	if st.stopDiscovery != nil {
		st.stopDiscovery()
	}
	if st.Broker != nil {
		st.Broker.Close() // its last lifecycle events reach the queue first
	}
	if st.stopPresence != nil {
		st.stopPresence()
	}
	for _, s := range st.servers {
		_ = s.Shutdown(ctx)
	}
	if st.Demo != nil {
		st.Demo.Close()
	}
	st.emu.Close()
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
