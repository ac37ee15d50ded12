package fleetsim_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"spaces"
	agent "spaces/agent/client"
	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/infra/iotcore"
	"spaces/infra/testclock"
	"spaces/infra/testcluster"
	"spaces/shared/agentwake"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/kmssign"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/wiring/agents"
	"spaces/shared/wiring/parts"
)

// The stack's names, as the local stack's.
const (
	stack      = "spaces"
	prefix     = stack + "_"
	authorizer = stack + "-agent"
	// tokenKeyName is the template's AgentAuthorizer TokenKeyName.
	tokenKeyName = "spaces-token"
)

// Bounds the simulation holds each agent space to, checked at every
// simulated minute (after that minute's prober tick):
//   - detect: an agent down this long is inactive (the agent mode's 180 s,
//     plus the minute tick and the broker's keep-alive timeout, which ends
//     a silently cut connection 1.5 × 30 s after its last ping);
//   - recover: an agent up again this long is active, and its stored
//     presence is connected;
//   - justify: only a cut at least this long may make a space inactive
//     (3 missed 35 s intervals plus the grace need 110 s without a sign of
//     life): a shorter one making it inactive is a false inactive.
const (
	detect  = 4 * time.Minute
	recover = 2 * time.Minute
	justify = time.Minute
)

// span is a stretch of time an agent is down: its network cut, or its
// credential dead until a new bootstrap is applied.
type span struct {
	from, to time.Time
	how      cut
}

// simAgent is one agent of the fleet and what the test knows of it.
type simAgent struct {
	name     string
	sp       space.Space
	clientID string
	tr       *tracker
	cfg      agent.Config
	boot     string
	done     chan error
	down     []span
	goneAt   time.Time // deregistered
	status   space.Status
	active   bool // has been active once
	detected map[int]time.Duration
	back     map[int]time.Duration
}

// downAt: whether a is down at t, and since when.
func (a *simAgent) downAt(t time.Time) (bool, time.Time) {
	for _, s := range a.down {
		if !t.Before(s.from) && t.Before(s.to) {
			return true, s.from
		}
	}
	return false, time.Time{}
}

// upSince is when a's last down span ended before t (zero: never down).
func (a *simAgent) upSince(t time.Time) (time.Time, *span) {
	var last *span
	for i := range a.down {
		if !a.down[i].to.After(t) && (last == nil || a.down[i].to.After(last.to)) {
			last = &a.down[i]
		}
	}
	if last == nil {
		return time.Time{}, nil
	}
	return last.to, last
}

// sim is the fleet, the service's parts and the simulated clock.
type sim struct {
	t       testing.TB
	ctx     context.Context
	clk     *testclock.Clock
	timers  *timers
	seq     *marks
	net     *network
	broker  *iotcore.Broker
	store   *dynamostore.Store
	h       *agents.Handlers
	uses    *space.Agents
	prober  *probing.Prober
	sched   *probing.Scheduler
	ticks   *tickQueue
	agentSv *httptest.Server
	wakes   *agentwake.Publisher
	roots   tlsRoots
	fleet   []*simAgent
	quiet   *slog.Logger

	mu       sync.Mutex
	queued   []string         // lifecycle events the template's rule sent to the presence queue
	seen     map[string]int   // lifecycle events published, by type
	reasons  map[string]int   // disconnectReason of disconnected events
	resets   int              // connected events at version 0 after a higher one
	lastVer  map[string]int64 // last connected version, by client
	probes   []queuedProbe    // the probe queue (re-probes)
	trans    []space.Transition
	authz    int
	refused  int
	renewals map[string]int // credential renewals answered, by space
	swept    iotcore.Swept
	problems []string
	stuck    bool // an instant did not settle: the simulation stops

	// What the month's cost is priced from (BenchmarkAgentFleetMonth):
	// each function's invocations and billed duration, the lifecycle
	// events the template's rule sent to the presence queue, and the
	// prober's checks of agent spaces.
	fns        struct{ agent, authorizer, presence, prober awscost.Lambda }
	ruleEvents int
	checks     int
}

type tlsRoots = *tls.Config

type queuedProbe struct {
	at   time.Time
	body string
}

// Enqueue is the probe queue on the simulated clock (probing.Queue).
func (s *sim) Enqueue(_ context.Context, msgs []probing.Delayed) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.probes = append(s.probes, queuedProbe{at: s.clk.Now().Add(m.Delay), body: m.Message.Encode()})
	}
	return nil
}

// PublishTransition records the transitions the prober stores
// (probing.Publisher): the fleet's statuses as stored, checked against
// the table every simulated hour.
func (s *sim) PublishTransition(_ context.Context, tr space.Transition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trans = append(s.trans, tr)
	for _, a := range s.fleet {
		if a.sp.ID == tr.SpaceID {
			a.status = tr.To
			if tr.To == space.Active {
				a.active = true
			}
		}
	}
	return nil
}

func (s *sim) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, s.clk.Now().Format("Mon 15:04:05")+": "+fmt.Sprintf(format, args...))
}

// failOnProblems reports every problem the run met and stops tb if there
// was one; s.mu is held by the caller.
func (s *sim) failOnProblems(tb testing.TB, what string, ran time.Duration) {
	tb.Helper()
	for _, p := range s.problems {
		tb.Error(p)
	}
	if len(s.problems) > 0 {
		tb.Fatalf("%sstopped at %s of simulated time", what, ran)
	}
}

func (s *sim) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stuck || len(s.problems) >= 5
}

// newSim starts the service's parts for a fleet. A meter, if any, counts
// every AWS request of the agent and presence functions and of the
// prober (not the test's own reads and writes).
func newSim(t testing.TB, start time.Time, meter *awscost.Meter) *sim {
	s := &sim{t: t, ctx: t.Context(), clk: testclock.New(start), seen: map[string]int{}, reasons: map[string]int{},
		lastVer: map[string]int64{}, renewals: map[string]int{},
		quiet: slog.New(slog.DiscardHandler), seq: newMarks()}
	s.timers = &timers{clk: s.clk}
	env := emulatortest.Start(t)
	aws := parts.AWS{Config: env.Config, Endpoint: env.Endpoint}
	table := env.Name(t, "SpacesTable")
	s.store = aws.Store(table, dynamostore.WithClock(s.clk.Now))
	if meter != nil {
		// Space items pass 1 KB: their writes are sized by DynamoDB's rule.
		meter.SizeWith(awsclient.DynamoDB(env.Config, env.Endpoint))
		aws.Config = meter.Instrument(env.Config)
	}
	proberStore := aws.Store(table, dynamostore.WithClock(s.clk.Now))

	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	server, roots, err := ca.LoopbackTLS()
	if err != nil {
		t.Fatal(err)
	}
	trs, err := iotcore.TopicRulesFromTemplate(spaces.Template)
	if err != nil {
		t.Fatal(err)
	}
	var rules []iotcore.Rule
	for _, tr := range trs {
		if tr.QueueLogicalID != "AgentPresenceQueue" {
			continue
		}
		rules = append(rules, iotcore.Rule{Name: tr.Name, SQL: tr.SQLFor(stack), Action: func(_ context.Context, payload []byte) error {
			s.mu.Lock()
			s.queued = append(s.queued, string(payload))
			s.ruleEvents++
			s.mu.Unlock()
			return nil
		}})
	}
	if len(rules) == 0 {
		t.Fatal("the template has no topic rule sending to AgentPresenceQueue")
	}
	// Every lifecycle event, counted (what the settling waits for) and
	// read for the report.
	rules = append(rules, iotcore.Rule{Name: "all", SQL: "SELECT * FROM '$aws/events/presence/+/+'", Action: s.observe})

	// The presence function: the authorizer and the queue's consumer; the
	// agent function: the agent routes. One set of handlers serves both
	// here, on the simulated clock.
	// Token signing on, as deployed: the agents present their credential's
	// token signed by the template's AgentTokenKey.
	tokenKey := env.Resources["AgentTokenKey"].Name
	pemKey, err := kmssign.PublicKeyPEM(s.ctx, awsclient.KMS(env.Config, env.Endpoint), tokenKey)
	if err != nil {
		t.Fatal(err)
	}
	signing, err := iotcore.SigningFromPEM(tokenKeyName, map[string]string{"current": pemKey})
	if err != nil {
		t.Fatal(err)
	}
	var h *agents.Handlers
	s.broker, err = iotcore.Start(s.ctx, iotcore.Config{TLS: server, Now: s.clk.Now, Log: s.quiet, Rules: rules, ManualSweep: true,
		Signing: map[string]iotcore.Signing{authorizer: signing},
		Authorizers: map[string]iotcore.Authorizer{authorizer: func(ctx context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
			began := time.Now()
			resp, err := h.Authorize(ctx, req)
			took := time.Since(began)
			s.mu.Lock()
			s.fns.authorizer.Invocations++
			s.fns.authorizer.Seconds += awscost.Billed(took)
			s.authz++
			if !resp.IsAuthenticated {
				s.refused++
			}
			s.mu.Unlock()
			return resp, err
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.broker.Close)
	dial := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if s.net, err = newNetwork(server, s.broker.MQTTAddr(), dial, s.seq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.net.close)
	s.roots = dial

	settings := agents.Settings{Common: parts.Common{Table: table, StaleAfter: space.DefaultStaleAfter},
		Presence: space.PresenceConfig{Endpoint: s.net.addr(), Authorizer: authorizer, ClientPrefix: prefix, TokenKeyName: tokenKeyName},
		TokenKey: tokenKey}
	h = agents.NewHandlers(aws, settings, agents.Options{Now: s.clk.Now, Log: s.quiet})
	s.h = h
	s.uses = &space.Agents{Store: s.store, Spaces: s.store, Now: s.clk.Now}
	s.agentSv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		began := time.Now()
		h.HTTP.ServeHTTP(rec, r)
		took := time.Since(began)
		s.mu.Lock()
		s.fns.agent.Invocations++
		s.fns.agent.Seconds += awscost.Billed(took)
		s.mu.Unlock()
		if r.URL.Path == "/agent/credential" && rec.code == http.StatusOK {
			if tok, err := space.ParseAgentCredential(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")); err == nil {
				s.mu.Lock()
				s.renewals[tok.SpaceID]++
				s.mu.Unlock()
			}
		}
	}))
	t.Cleanup(s.agentSv.Close)
	s.prober = probing.NewProber(probing.Prober{Store: proberStore, Leases: proberStore, Queue: s, Events: s, Now: s.clk.Now, Log: s.quiet})
	// The scheduler as deployed, on the unmetered store: its index reads
	// are the stack's, not an agent's (BenchmarkAgentFleetMonth).
	s.ticks = &tickQueue{}
	s.sched = probing.NewScheduler(probing.Scheduler{Targets: &fleetIndex{Store: s.store}, Queue: s.ticks, Now: s.clk.Now, Log: s.quiet})
	s.wakes = &agentwake.Publisher{Endpoint: s.broker.DataURL(), Prefix: prefix, AWS: env.Config,
		HTTP: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: dial}}}
	return s
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) { r.code = code; r.ResponseWriter.WriteHeader(code) }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// observe reads every lifecycle event the broker publishes.
func (s *sim) observe(_ context.Context, payload []byte) error {
	var e struct {
		ClientID         string `json:"clientId"`
		EventType        string `json:"eventType"`
		VersionNumber    *int64 `json:"versionNumber"`
		DisconnectReason string `json:"disconnectReason"`
	}
	if err := json.Unmarshal(payload, &e); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.seq.poke()
	s.seen[e.EventType]++
	switch e.EventType {
	case "disconnected":
		s.reasons[e.DisconnectReason]++
	case "connected":
		if last, ok := s.lastVer[e.ClientID]; ok && *e.VersionNumber == 0 && last > 0 {
			s.resets++
		}
		s.lastVer[e.ClientID] = *e.VersionNumber
	}
	return nil
}

// register registers an agent space with a bootstrap and starts its
// agent.
func (s *sim) register(name string) *simAgent {
	t := s.t
	now := s.clk.Now()
	org := uuid.NewString()
	acct := space.CloudAccount{ID: uuid.NewString(), OrgID: org, Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"},
		Status:     space.AccountReady, CreatedAt: now, Version: 1}
	if err := s.store.CreateAccount(s.ctx, acct); err != nil {
		t.Fatal(err)
	}
	sp := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: acct.ID, Connectivity: space.ViaAgent,
		Config: space.Config{"clusterName": name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36), "region": "us-east-1"}}, now)
	if err := s.store.Register(s.ctx, sp, space.Idempotency{}); err != nil {
		t.Fatal(err)
	}
	a := &simAgent{name: name, sp: sp, clientID: space.AgentClientID(prefix, sp.ID), tr: &tracker{seq: s.seq},
		boot: filepath.Join(t.TempDir(), "token"), status: sp.Status, detected: map[int]time.Duration{}, back: map[int]time.Duration{}}
	s.net.set(a.clientID, up)
	base, _ := url.Parse(s.agentSv.URL)
	a.cfg = agent.Config{AgentURL: base, BootstrapFile: a.boot, Kube: fakeKube(t, a.tr), Namespace: "agent", StateSecret: "state",
		HTTP: &http.Client{Timeout: 30 * time.Second, Transport: &transport{n: s.net, id: a.clientID, base: http.DefaultTransport, tr: a.tr}},
		Log:  s.quiet, Clock: agentClock{t: s.timers, tr: a.tr}, MQTTRoots: s.roots.RootCAs,
		MQTTRetry: 20 * time.Millisecond}
	s.fleet = append(s.fleet, a)
	s.bootstrap(a)
	return a
}

// bootstrap issues a bootstrap for a, mounts it and starts its agent (a
// pod that starts, or restarts after exiting).
func (s *sim) bootstrap(a *simAgent) {
	b, err := s.uses.IssueBootstrap(s.ctx, a.sp)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(a.boot, []byte(b.Token+"\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
	a.done = make(chan error, 1)
	a.tr.running.Store(true)
	go func() {
		err := agent.Run(s.ctx, a.cfg)
		a.tr.running.Store(false)
		a.tr.lastAct.Store(a.tr.seq.Add(1))
		a.done <- err
	}()
}

// expectConnected: a's presence channel should be up (settling waits for
// it): its agent runs, and it is neither cut, nor dead, nor deregistered.
func (s *sim) expectConnected(a *simAgent, now time.Time) bool {
	down, _ := a.downAt(now)
	return a.tr.running.Load() && a.goneAt.IsZero() && !down && s.net.isUp(a.clientID)
}

// settle waits, in real time, until everything the instant set off is
// done: each agent parked on the simulated clock after reacting to its
// connection's last CONNACK or loss, each agent that should be connected
// connected, and every connection the broker accepted or closed published
// as a lifecycle event. A bound that passes is a problem (the presence
// channel did not come back).
func (s *sim) settle(now time.Time) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		why := ""
		accepted, ended := s.net.counts()
		s.mu.Lock()
		connected, disconnected := s.seen["connected"], s.seen["disconnected"]
		s.mu.Unlock()
		if connected != accepted || disconnected != ended {
			why = fmt.Sprintf("lifecycle events: %d connected, %d disconnected for %d accepted, %d ended connections", connected, disconnected, accepted, ended)
		}
		for _, a := range s.fleet {
			up, acked, lost := s.net.live(a.clientID)
			if !a.tr.parked(max(acked, lost)) {
				why = fmt.Sprintf("%s is not parked (calls under way %d, last call %d, last wait %d, last CONNACK %d, last loss %d)",
					a.name, a.tr.inflight.Load(), a.tr.lastAct.Load(), a.tr.lastAfter.Load(), acked, lost)
			} else if s.expectConnected(a, now) && (!up || !s.broker.Connected(a.clientID)) {
				// The broker too: a connection it has begun to close (a
				// refresh refused) may still look up on the wire, and its
				// disconnected event follows asynchronously.
				why = a.name + "'s presence channel is not connected"
			}
		}
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			s.problem("not settled within 20 s of real time: %s", why)
			s.mu.Lock()
			s.stuck = true
			s.mu.Unlock()
			return
		}
		select {
		case <-s.seq.changed:
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// deliver hands the lifecycle events the rule queued to the presence
// function, as the queue's event source does, one batch.
func (s *sim) deliver() {
	s.mu.Lock()
	q := s.queued
	s.queued = nil
	s.mu.Unlock()
	if len(q) == 0 {
		return
	}
	var ev events.SQSEvent
	for i, body := range q {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: strconv.Itoa(i), Body: body})
	}
	began := time.Now()
	resp, err := s.h.Presence(s.ctx, ev)
	took := time.Since(began)
	s.mu.Lock()
	// One invocation an event: the queue's event source has no batching
	// window, and events this sparse come one a poll (an upper bound).
	s.fns.presence.Invocations += float64(len(q))
	s.fns.presence.Seconds += float64(len(q)) * awscost.Billed(took/time.Duration(len(q)))
	s.mu.Unlock()
	if err != nil || len(resp.BatchItemFailures) > 0 {
		s.problem("presence batch failed: %v %v", err, resp.BatchItemFailures)
	}
}

// tickQueue keeps the scheduler's tick messages, which the simulation
// delivers at once.
type tickQueue struct {
	mu   sync.Mutex
	msgs []probing.Delayed
}

func (q *tickQueue) Enqueue(_ context.Context, msgs []probing.Delayed) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, msgs...)
	return nil
}

func (q *tickQueue) take() []probing.Delayed {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.msgs
	q.msgs = nil
	return out
}

// fleetIndex is the store's probe index as the scheduler reads it, for a
// fleet of agent spaces only: it lists no direct space without reading
// (the simulation has none), and after the first tick it reads only the
// agent shards that first tick found holding a space (the fleet registers
// before it runs; a space deregistered later leaves its shard read), so
// that a simulated minute costs no more emulator requests than the
// fleet's size.
type fleetIndex struct {
	*dynamostore.Store
	mu     sync.Mutex
	shards map[int]bool // nil until the first tick's reads
	seen   map[int]bool
	reads  int
}

func (x *fleetIndex) ProbeTargets(context.Context, int, string, int) ([]space.ProbeTarget, string, error) {
	return nil, "", nil
}

func (x *fleetIndex) AgentProbeTargets(ctx context.Context, shard int, after string, limit int) ([]space.ProbeTarget, string, error) {
	x.mu.Lock()
	skip := x.shards != nil && !x.shards[shard]
	x.mu.Unlock()
	if skip {
		return nil, "", nil
	}
	out, next, err := x.Store.AgentProbeTargets(ctx, shard, after, limit)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.shards == nil {
		if x.seen == nil {
			x.seen = map[int]bool{}
		}
		if len(out) > 0 {
			x.seen[shard] = true
		}
		if x.reads++; x.reads == x.ProbeShards() {
			x.shards = x.seen
		}
	}
	return out, next, err
}

// probe runs the probe messages due, and at a minute the scheduler's tick
// of the agent spaces: its messages as the scheduler packs them (each
// space carrying what the index holds of it), delivered at once whatever
// their delay (a lease check needs no spreading, and the fleet is checked
// right after), without the beat its last message carries (a write a
// minute for the whole fleet: the stack's, not an agent's).
func (s *sim) probe(now time.Time, tick bool) {
	s.mu.Lock()
	var due []string
	keep := s.probes[:0]
	for _, p := range s.probes {
		if p.at.After(now) {
			keep = append(keep, p)
		} else {
			due = append(due, p.body)
		}
	}
	s.probes = keep
	s.mu.Unlock()
	checks := 0
	if tick {
		out, err := s.sched.Tick(s.ctx)
		if err != nil {
			s.problem("scheduler tick: %v", err)
		}
		for _, m := range s.ticks.take() {
			m.Message.Beat, m.Message.Tick = "", nil
			due = append(due, m.Message.Encode())
		}
		checks = out.Spaces
	}
	for i, body := range due {
		began := time.Now()
		failed := s.prober.HandleBatch(s.ctx, []probing.Delivery{{MessageID: strconv.Itoa(i), Body: body, ReceiveCount: 1}})
		took := time.Since(began)
		s.mu.Lock()
		s.fns.prober.Invocations++ // the probe queue's BatchSize is 1
		s.fns.prober.Seconds += awscost.Billed(took)
		s.mu.Unlock()
		if len(failed) > 0 {
			s.problem("probe message failed: %s", body)
		}
	}
	s.mu.Lock()
	s.checks += checks
	s.mu.Unlock()
}

// check holds each live agent space to the truth at a minute.
func (s *sim) check(now time.Time, readPresence, readStatus bool) {
	for _, a := range s.fleet {
		if !a.goneAt.IsZero() {
			continue
		}
		s.mu.Lock()
		st, wasActive := a.status, a.active
		s.mu.Unlock()
		down, since := a.downAt(now)
		upAt, last := a.upSince(now)
		settled := !down && (last == nil || now.Sub(upAt) >= recover)
		switch {
		case down && now.Sub(since) >= detect && st != space.Inactive:
			s.problem("%s down since %s and %s, not inactive", a.name, since.Format("Mon 15:04:05"), st)
		case st == space.Inactive && !(down && now.Sub(since) >= justify) &&
			!(last != nil && now.Sub(upAt) < recover && last.to.Sub(last.from) >= justify):
			s.problem("%s is inactive, up (and %s after any cut of %s or more): a false inactive", a.name, recover, justify)
		case settled && wasActive && st != space.Active:
			s.problem("%s up and %s", a.name, st)
		}
		for i, sp := range a.down {
			if _, ok := a.detected[i]; !ok && st == space.Inactive && down && since.Equal(sp.from) {
				a.detected[i] = now.Sub(sp.from)
			}
			if _, ok := a.back[i]; !ok && st == space.Active && !down && last != nil && last.from.Equal(sp.from) {
				a.back[i] = now.Sub(sp.to)
			}
		}
		if readPresence && settled {
			l, err := s.store.GetLease(s.ctx, a.sp.ID)
			if err != nil {
				s.t.Fatal(err)
			}
			if l.Presence == nil || !l.Presence.Connected {
				// A reconnect at this instant may have its connected event
				// still on the way (mochi publishes it as it notices the
				// session, after settle saw the connection): settle and
				// deliver once more, at the same instant, before judging. A
				// presence that stays wrong (the version bug) still fails.
				s.settle(now)
				s.deliver()
				if l, err = s.store.GetLease(s.ctx, a.sp.ID); err != nil {
					s.t.Fatal(err)
				}
			}
			if l.Presence == nil || !l.Presence.Connected {
				s.problem("%s up, and its stored presence is %+v", a.name, l.Presence)
			}
		}
		if readStatus {
			got, err := s.store.GetSpace(s.ctx, a.sp.OrgID, a.sp.ID)
			if err != nil {
				s.t.Fatal(err)
			}
			if got.Status != st {
				s.problem("%s: the table says %s, the prober's transitions %s", a.name, got.Status, st)
			}
		}
	}
}

// TestFleetForAWeek runs three agents for seven simulated days: each the
// real agent (agent/client's Run, its paho client and its MQTT
// reconnects), through a network the test cuts, to the broker model with
// the template's authorizer (token signing on, as deployed: each CONNECT
// carries its credential's token signed by the template's AgentTokenKey)
// and presence rule, whose events reach the presence function; the agent routes and the prober on the store in the
// emulator; one simulated clock for all (the broker sweeps its deadlines
// when told, paho's keep-alive pings are sent by the network at every 30
// simulated seconds). "steady" is never cut: it renews its credential
// every 12 h while connected, IoT Core refreshes its authorizer every hour
// with the password it connected with, which is refused once the renewed
// credential's overlap ends, and it reconnects with the renewed one.
// "cuts" loses its network for 5 s (reset), 10 min (silent: the broker
// sees the keep-alive time out), 2 h (reset: its version number restarts
// at 0) and 26 h (silent: its credential expires, its agent stops at the
// 401, and a bootstrap re-issued 10 min later brings it back). "leaves"
// has a 5 s silent and a 10 min reset cut and is deregistered on day 6:
// its connection is ended at once (DeleteConnection, as the cascade does)
// and its agent stops.
//
// At every simulated minute each live space's stored status is the truth
// within the bounds above (detect, recover, justify: no false inactive);
// every 5 minutes an agent up for recover has a connected presence stored;
// every hour the table's status is the one the prober's transitions say.
func TestFleetForAWeek(t *testing.T) {
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	end := start.Add(7 * 24 * time.Hour)
	s := newSim(t, start, nil)
	steady, cuts, leaves := s.register("steady"), s.register("cuts"), s.register("leaves")
	day := func(d int, hm time.Duration) time.Time { return start.Add(time.Duration(d)*24*time.Hour + hm) }
	cutFor := func(a *simAgent, from time.Time, d time.Duration, how cut, deadUntil time.Time) {
		to := from.Add(d)
		if deadUntil.After(to) {
			to = deadUntil
		}
		a.down = append(a.down, span{from: from, to: to, how: how})
	}
	cutFor(cuts, day(0, 3*time.Hour), 5*time.Second, reset, time.Time{})
	cutFor(cuts, day(1, 5*time.Hour), 10*time.Minute, silent, time.Time{})
	cutFor(cuts, day(2, 7*time.Hour), 2*time.Hour, reset, time.Time{})
	reissue := day(4, 11*time.Hour+10*time.Minute) // 10 min after the 26 h cut ends
	cutFor(cuts, day(3, 9*time.Hour), 26*time.Hour, silent, reissue)
	cutFor(leaves, day(1, 13*time.Hour), 5*time.Second, silent, time.Time{})
	cutFor(leaves, day(5, 2*time.Hour), 10*time.Minute, reset, time.Time{})
	deregister := day(6, 2*time.Hour)

	// The script: each cut's start and end on the network, the re-issue
	// and the deregistration.
	var script []action
	for _, a := range s.fleet {
		for _, sp := range a.down {
			cutEnd := sp.to
			if sp.to.Equal(reissue) { // the network is back 10 min before
				cutEnd = day(3, 9*time.Hour).Add(26 * time.Hour)
			}
			script = append(script, action{sp.from, func() { s.net.set(a.clientID, sp.how) }},
				action{cutEnd, func() { s.net.set(a.clientID, up) }})
		}
	}
	script = append(script, action{reissue, func() {
		select {
		case err := <-cuts.done:
			if !errors.Is(err, agent.ErrRefused) {
				s.problem("cuts' agent ended with %v, want ErrRefused (its credential expired during the cut)", err)
			}
		default:
			s.problem("cuts' agent still runs 10 min after a 26 h cut: its credential should have expired")
		}
		s.bootstrap(cuts)
	}}, action{deregister, func() {
		sp, err := s.store.GetSpace(s.ctx, leaves.sp.OrgID, leaves.sp.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.store.Deregister(s.ctx, sp.OrgID, sp.ID, sp.Version, s.clk.Now(), "test"); err != nil {
			t.Fatal(err)
		}
		leaves.goneAt = s.clk.Now()
		if err := s.wakes.Disconnect(s.ctx, leaves.sp.ID); err != nil {
			s.problem("DeleteConnection: %v", err)
		}
	}})
	now := s.run(start, end, script)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.failOnProblems(t, "", now.Sub(start))
	t.Logf("7 simulated days: lifecycle events %v, disconnect reasons %v, version resets seen %d, authorizer calls %d (%d refused), refreshes %d, keep-alive or TTL closes %d, credential renewals %v, transitions %d",
		s.seen, s.reasons, s.resets, s.authz, s.refused, s.swept.Refreshed, s.swept.Kicked, s.renewalsByName(), len(s.trans))
	for _, a := range s.fleet {
		for i, sp := range a.down {
			if d, ok := a.detected[i]; ok {
				t.Logf("%s down %s for %s: inactive at the check %v in, active at the check %v after", a.name, sp.from.Format("Mon 15:04:05"), sp.to.Sub(sp.from), d, a.back[i])
			} else {
				t.Logf("%s down %s for %s: never inactive", a.name, sp.from.Format("Mon 15:04:05"), sp.to.Sub(sp.from))
			}
		}
	}

	// What the week must have exercised, and how it ended.
	if n := s.renewals[steady.sp.ID]; n != 13 {
		t.Errorf("steady renewed its credential %d times in 7 days, want 13 (every 12 h)", n)
	}
	if s.swept.Refreshed < 7*24 {
		t.Errorf("%d authorizer refreshes, want at least one an hour", s.swept.Refreshed)
	}
	if s.reasons[iotcore.ReasonAuthError] < 13 {
		t.Errorf("%d refreshes refused the connection's original password, want one after each of steady's renewals at least", s.reasons[iotcore.ReasonAuthError])
	}
	for _, r := range []string{iotcore.ReasonConnectionLost, iotcore.ReasonKeepAliveTimeout, iotcore.ReasonAPIInitiated} {
		if s.reasons[r] == 0 {
			t.Errorf("no %s disconnect in the week", r)
		}
	}
	if s.resets < 2 {
		t.Errorf("%d version resets seen, want the 2 h and the 26 h cuts' at least", s.resets)
	}
	if s.seen[iotcore.EventConnectFailed] == 0 {
		t.Errorf("no connect_failed event: the expired credential's reconnects after the 26 h cut were refused")
	}
	for i := range cuts.down {
		if cuts.down[i].to.Sub(cuts.down[i].from) >= justify {
			if _, ok := cuts.detected[i]; !ok {
				t.Errorf("cuts' cut %d was never detected", i)
			}
		} else if _, ok := cuts.detected[i]; ok {
			t.Errorf("cuts' 5 s cut made it inactive")
		}
	}
	select {
	case err := <-leaves.done:
		if !errors.Is(err, agent.ErrRefused) {
			t.Errorf("leaves' agent ended with %v, want ErrRefused", err)
		}
	default:
		t.Errorf("leaves' agent still runs after its space was deregistered")
	}
	if s.broker.Connected(leaves.clientID) {
		t.Errorf("leaves is still connected after its deregistration")
	}
	if l, err := s.store.GetLease(s.ctx, leaves.sp.ID); err != nil || l.RenewedAt != nil || l.Presence != nil {
		t.Errorf("leaves' lease after deregistration: %+v, %v; want none (no event brings it back)", l, err)
	}
	for _, a := range []*simAgent{steady, cuts} {
		if !s.broker.Connected(a.clientID) {
			t.Errorf("%s is not connected at the end", a.name)
		}
	}
}

// action is a step of a simulation's script, done at its instant.
type action struct {
	at time.Time
	do func()
}

// run moves the simulated clock from start to end: every 15 s, and to
// each agent's next wait, each action of the script and each probe
// message due; at each instant it does what is due, sends the live
// agents' keep-alive pings every 30 s, sweeps the broker's deadlines,
// settles, delivers the lifecycle events, runs the prober (its tick
// every minute) and, each minute, checks the fleet (check). It stops
// early once the simulation has failed, and answers where it stopped.
func (s *sim) run(start, end time.Time, script []action) time.Time {
	sort.SliceStable(script, func(i, j int) bool { return script[i].at.Before(script[j].at) })
	const grid = 15 * time.Second
	now := start
	s.settle(now)
	for now.Before(end) && !s.failed() {
		next := now.Truncate(grid).Add(grid)
		if at := s.timers.next(); !at.IsZero() && at.Before(next) {
			next = latest(at, now)
		}
		if len(script) > 0 && script[0].at.Before(next) {
			next = latest(script[0].at, now)
		}
		s.mu.Lock()
		for _, p := range s.probes {
			if p.at.Before(next) {
				next = latest(p.at, now)
			}
		}
		s.mu.Unlock()
		now = next
		s.clk.Set(now)
		for len(script) > 0 && !script[0].at.After(now) {
			script[0].do()
			script = script[1:]
		}
		s.timers.fire(now)
		onGrid := now.Equal(now.Truncate(grid))
		if onGrid && now.Equal(now.Truncate(2*grid)) {
			s.net.ping()
		}
		sw := s.broker.Sweep()
		s.swept.Kicked += sw.Kicked
		s.swept.Refreshed += sw.Refreshed
		s.settle(now)
		s.deliver()
		minute := now.Equal(now.Truncate(time.Minute))
		s.probe(now, minute)
		if minute {
			s.check(now, now.Equal(now.Truncate(5*time.Minute)), now.Equal(now.Truncate(time.Hour)))
		}
	}
	return now
}

func (s *sim) renewalsByName() map[string]int {
	out := map[string]int{}
	for _, a := range s.fleet {
		out[a.name] = s.renewals[a.sp.ID]
	}
	return out
}

// fakeKube is the API server calls of an agent with no work to do: GET
// /version and its state Secret, each call marked on tr.
func fakeKube(t testing.TB, tr *tracker) kubernetes.Interface {
	var mu sync.Mutex
	secret := corev1.Secret{}
	secret.Name, secret.Namespace, secret.ResourceVersion = "state", "agent", "1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/version":
			_, _ = w.Write([]byte(`{"gitVersion":"v1.34.2","platform":"linux/amd64"}`))
		case r.URL.Path == "/api/v1/namespaces/agent/secrets/state" && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(secret)
		case r.URL.Path == "/api/v1/namespaces/agent/secrets/state" && r.Method == http.MethodPut:
			var sec corev1.Secret
			if err := json.NewDecoder(r.Body).Decode(&sec); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			n, _ := strconv.Atoi(secret.ResourceVersion)
			sec.ResourceVersion = strconv.Itoa(n + 1)
			secret = sec
			_ = json.NewEncoder(w).Encode(secret)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	k, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return kubeTracked{rt, tr} }})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type kubeTracked struct {
	base http.RoundTripper
	tr   *tracker
}

func (k kubeTracked) RoundTrip(r *http.Request) (*http.Response, error) {
	k.tr.begin()
	defer k.tr.end()
	resp, err := k.base.RoundTrip(r)
	if err == nil {
		// The body is read after RoundTrip; read it here so the call is
		// over when the mark says so.
		b, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		if rerr != nil {
			return nil, rerr
		}
	}
	return resp, err
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
