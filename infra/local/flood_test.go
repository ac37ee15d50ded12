package local

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	agent "spaces/agent/client"
	"spaces/infra/awscost"
	"spaces/infra/iotcore"
	"spaces/infra/lambdarules"
	"spaces/infra/testwait"
	"spaces/shared/agentwake"
	"spaces/shared/awsclient"
	"spaces/shared/space"
)

// The flood: real agents (agent/client's Run, paho included) connected
// and active on the local stack while anonymous callers flood the agent
// function's URL on its real routes and junk CONNECTs flood IoT Core,
// the attack on the public edge (docs/operating.md, "The public edge").
// TestAgentsStayActiveThroughAFlood keeps the property in the suite;
// BenchmarkAgentFlood measures it at the goal's size and prices the flood.

// floodPlan is one flood's size.
type floodPlan struct {
	agents   int           // agent spaces, each with its real agent
	renewing int           // of which renew their credential at every round (RenewBefore of a whole day)
	flood    time.Duration // how long the flood runs
	anonRPS  int           // anonymous requests a second at the agent URL
	junkRPS  int           // junk CONNECTs a second at IoT Core
	// retry is the agents' RetryDelay (0: the agent's default, 5 s).
	retry time.Duration
	// wake: at the flood's start, the renewing agents are woken (as
	// Spaces wakes an agent with work), so each renews at once, under the
	// flood, besides its fallback renewal.
	wake bool
	// cut: at the flood's start, the MQTT connections of this many agents
	// (after the renewing ones) are ended, as a network blip would: each
	// reconnects under the flood (the authorizer) and renews over HTTP.
	cut int
	// untilServed: the flood goes on past its length until every renewing
	// agent's renewal and every cut agent's reconnect has been served
	// (bounded by testwait.Timeout more).
	untilServed bool
	// mqttRetry is the agents' MQTTRetry (0: the agent's default).
	mqttRetry time.Duration
}

// calls counts one agent's calls to the agent URL by route.
type calls struct {
	credAttempts, credServed, cred429    atomic.Int64
	leaseAttempts, leaseServed, lease429 atomic.Int64
	other                                atomic.Int64
}

// countingAgentTransport counts an agent's calls and their answers.
type countingAgentTransport struct {
	base http.RoundTripper
	c    *calls
}

func (t countingAgentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var attempts, served, throttled *atomic.Int64
	switch {
	case r.URL.Path == "/agent/credential":
		attempts, served, throttled = &t.c.credAttempts, &t.c.credServed, &t.c.cred429
	case strings.HasSuffix(r.URL.Path, "/lease"):
		attempts, served, throttled = &t.c.leaseAttempts, &t.c.leaseServed, &t.c.lease429
	default:
		t.c.other.Add(1)
		return t.base.RoundTrip(r)
	}
	attempts.Add(1)
	resp, err := t.base.RoundTrip(r)
	switch {
	case err != nil:
	case resp.StatusCode == http.StatusOK:
		served.Add(1)
	case resp.StatusCode == http.StatusTooManyRequests:
		throttled.Add(1)
	}
	return resp, err
}

// fleetAgent is one agent space and its running agent.
type fleetAgent struct {
	id, clientID string
	renewing     bool
	calls        calls
	done         chan error
}

// fakeClusters are the agents' clusters, one API server for all, each
// cluster under a path of its own: /version and the agent's state Secret,
// all an agent needs of its cluster here (no nodes, no binding: their
// absence is logged and carried on with).
type fakeClusters struct {
	mu      sync.Mutex
	secrets map[string][]byte // by cluster
	srv     *http.Server
	url     string
}

func newFakeClusters(tb testing.TB) *fakeClusters {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	fc := &fakeClusters{secrets: map[string][]byte{}, url: "http://" + ln.Addr().String()}
	fc.srv = &http.Server{Handler: http.HandlerFunc(fc.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = fc.srv.Serve(ln) }()
	tb.Cleanup(func() { _ = fc.srv.Close() })
	return fc
}

func (fc *fakeClusters) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/c/")
	cluster, p, _ := strings.Cut(rest, "/")
	p = "/" + p
	w.Header().Set("Content-Type", "application/json")
	switch {
	case !ok:
		http.NotFound(w, r)
	case p == "/version":
		_, _ = w.Write([]byte(`{"gitVersion":"v1.34.2","platform":"linux/amd64"}`))
	case p == "/api/v1/namespaces/agent/secrets/state" && r.Method == http.MethodGet:
		fc.mu.Lock()
		b, ok := fc.secrets[cluster]
		fc.mu.Unlock()
		if !ok {
			b = []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"state","namespace":"agent","resourceVersion":"1"}}`)
		}
		_, _ = w.Write(b)
	case p == "/api/v1/namespaces/agent/secrets/state" && r.Method == http.MethodPut:
		var sec corev1.Secret
		if err := json.NewDecoder(r.Body).Decode(&sec); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fc.mu.Lock()
		n, _ := strconv.Atoi(sec.ResourceVersion)
		sec.ResourceVersion = strconv.Itoa(n + 1)
		b, _ := json.Marshal(sec)
		fc.secrets[cluster] = b
		fc.mu.Unlock()
		_, _ = w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

func (fc *fakeClusters) kube(tb testing.TB, cluster string) kubernetes.Interface {
	k, err := kubernetes.NewForConfig(&rest.Config{Host: fc.url + "/c/" + cluster, QPS: -1,
		ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// floodFleet is the agents on a stack.
type floodFleet struct {
	st     *Stack
	agents []*fleetAgent
	byID   map[string]*fleetAgent
	cancel context.CancelFunc
	once   sync.Once
	// meter, when set, counts AgentFunction's AWS requests (the stack's
	// Config.Meter); runFlood reads what the flood's window used.
	meter *awscost.Meter
}

// startFleet registers plan.agents agent spaces and starts their agents,
// and waits until every one is connected and its space active.
func startFleet(tb testing.TB, st *Stack, plan floodPlan) *floodFleet {
	tb.Helper()
	c := newClient(tb, st, "acme")
	acct := c.account("aws")
	clusters := newFakeClusters(tb)
	base, err := agent.CheckURL(st.AgentURL)
	if err != nil {
		tb.Fatal(err)
	}
	// One pool of connections for the fleet's calls, as many as agents.
	tr := &http.Transport{MaxIdleConnsPerHost: plan.agents, IdleConnTimeout: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	f := &floodFleet{st: st, byID: map[string]*fleetAgent{}, cancel: cancel}
	tb.Cleanup(f.stop)
	quiet := slog.New(slog.DiscardHandler)
	dir := tb.TempDir()
	for i := range plan.agents {
		reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes",
			"cloud_account_id": acct, "config": configFor("aws", fmt.Sprintf("flood-%04d", i)), "connectivity": "agent"}))
		id := reg["id"].(string)
		boot := filepath.Join(dir, id)
		if err := os.WriteFile(boot, []byte(reg["agent_bootstrap"].(map[string]any)["token"].(string)), 0o600); err != nil {
			tb.Fatal(err)
		}
		a := &fleetAgent{id: id, clientID: space.AgentClientID(agentClientIDPre, id), renewing: i < plan.renewing, done: make(chan error, 1)}
		cfg := agent.Config{AgentURL: base, BootstrapFile: boot, Kube: clusters.kube(tb, strconv.Itoa(i)), Namespace: "agent", StateSecret: "state",
			HTTP: &http.Client{Timeout: 30 * time.Second, Transport: countingAgentTransport{base: tr, c: &a.calls}},
			Log:  quiet, RetryDelay: plan.retry, MQTTRoots: st.MQTTRoots, MQTTRetry: plan.mqttRetry}
		if a.renewing {
			// Less than a day left, always: every round renews.
			cfg.RenewBefore = space.AgentCredentialTTL
		}
		go func() { a.done <- agent.Run(ctx, cfg) }()
		f.agents = append(f.agents, a)
		f.byID[id] = a
	}
	testwait.Eventually(tb, max(testwait.Timeout, time.Duration(plan.agents)*200*time.Millisecond), "every agent connected and its space active", func() bool {
		for _, a := range f.agents {
			if !st.Broker.Connected(a.clientID) {
				return false
			}
		}
		st := f.statuses(tb)
		for _, a := range f.agents {
			if st.status[a.id] != space.Active {
				return false
			}
		}
		return true
	})
	return f
}

// stop stops the agents and waits for them (once: the benchmark stops
// them before pricing, the cleanup again).
func (f *floodFleet) stop() {
	f.once.Do(func() {
		f.cancel()
		for _, a := range f.agents {
			<-a.done
		}
	})
}

// fleetState is the stored status of every space, and the transitions to
// inactive ever recorded in their history.
type fleetState struct {
	status   map[string]space.Status
	inactive map[string]int // transitions to inactive, by space
}

// statuses reads every space's stored status and history in one scan.
func (f *floodFleet) statuses(tb testing.TB) fleetState {
	tb.Helper()
	db := awsclient.DynamoDB(f.st.AWS, f.st.EmulatorURL)
	out := fleetState{status: map[string]space.Status{}, inactive: map[string]int{}}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(f.st.Table), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("pk, sk, #s, #to, id, space_id"),
		ExpressionAttributeNames: map[string]string{"#s": "status", "#to": "to"}})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		for _, it := range page.Items {
			var m map[string]any
			if err := attributevalue.UnmarshalMap(it, &m); err != nil {
				tb.Fatal(err)
			}
			pk, sk, id, spaceID := str(m, "pk"), str(m, "sk"), str(m, "id"), str(m, "space_id")
			switch {
			case strings.HasPrefix(pk, "ORG#") && strings.HasPrefix(sk, "SPACE#") && f.byID[id] != nil:
				out.status[id] = space.Status(str(m, "status"))
			case strings.HasPrefix(sk, "HIST#") && str(m, "to") == string(space.Inactive) && f.byID[spaceID] != nil:
				out.inactive[spaceID]++
			}
		}
	}
	return out
}

func str(m map[string]any, k string) string { v, _ := m[k].(string); return v }

// pace calls send rps times a second, spread evenly, from workers
// goroutines, until stop closes; a send that finds every worker busy is
// counted as late (sent later), so the rate achieved is what was sent.
func pace(rps, workers int, stop <-chan struct{}, send func(i int64)) (wait func() (sent int64)) {
	if rps <= 0 {
		return func() int64 { return 0 }
	}
	tokens := make(chan int64, workers*4)
	var wg sync.WaitGroup
	var sent atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range tokens {
				send(i)
				sent.Add(1)
			}
		}()
	}
	go func() {
		defer close(tokens)
		start := time.Now()
		var n int64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				for due := int64(now.Sub(start).Seconds() * float64(rps)); n < due; n++ {
					select {
					case tokens <- n:
					case <-stop:
						return
					}
				}
			}
		}
	}()
	return func() int64 { wg.Wait(); return sent.Load() }
}

// anonStats counts the anonymous requests and their answers.
type anonStats struct {
	sent, throttled, invoked, failed atomic.Int64
}

// anonymous is request i of the flood at the agent URL: the agent's real
// routes, with a forged credential of a real space (well formed: its
// conditional write is tried and refused), a forged bootstrap, a junk
// bearer, or none, some with a body.
func anonymous(agentURL string, ids []string, i int64) (*http.Request, error) {
	id := ids[int(i)%len(ids)]
	forged := func(prefix string) string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return prefix + id + "." + base64.RawURLEncoding.EncodeToString(b)
	}
	var method, path, bearer, body string
	switch i % 6 {
	case 0:
		method, path, bearer = http.MethodPost, "/agent/credential", forged("spa1.")
	case 1:
		method, path, bearer, body = http.MethodPut, "/agent/spaces/"+id+"/lease", forged("spa1."), `{"agent_version":"x","server_version":{"gitVersion":"v1.34.2"}}`
	case 2:
		method, path, bearer = http.MethodPost, "/agent/exchange", forged("spb1.")
	case 3:
		method, path, bearer, body = http.MethodPut, "/agent/spaces/"+id+"/namespaces", "junk", `{"items":[]}`
	case 4:
		method, path, body = http.MethodPut, "/agent/spaces/"+id+"/lease", `{}`
	default:
		method, path = http.MethodGet, "/"
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, agentURL+path, rd)
	if err != nil {
		return nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// junkStats counts the junk CONNECTs and their answers.
type junkStats struct {
	sent, refused, accepted, failed atomic.Int64
}

// junkConnect is junk CONNECT i: over TLS to IoT Core, MQTT 3.1.1, with
// no token, a token and no signature, or a forged credential's token and
// a signature that does not verify, under the client id of a real agent
// or of none; it answers whether the broker accepted it.
func junkConnect(addr string, dial *tls.Config, clientIDs []string, i int64) (bool, error) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	secret := base64.RawURLEncoding.EncodeToString(b)
	clientID := clientIDs[int(i)%len(clientIDs)]
	q := url.Values{"x-amz-customauthorizer-name": {agentAuthorizer}}
	password := "spa1.x." + secret
	switch i % 4 {
	case 0: // unsigned: the authorizer's name only
	case 1: // a token and no signature
		q.Set(agentTokenKeyName, secret)
	case 2: // a forged credential's token, a signature that does not verify
		q.Set(agentTokenKeyName, secret)
		q.Set(iotcore.SignatureParam, base64.StdEncoding.EncodeToString(b))
	default: // not an agent's client id
		clientID = "junk-" + secret[:8]
		q.Set(agentTokenKeyName, secret)
		q.Set(iotcore.SignatureParam, base64.StdEncoding.EncodeToString(append(b, b...)))
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, dial)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(connectPacket(clientID, "?"+q.Encode(), password)); err != nil {
		return false, err
	}
	var ack [4]byte
	if _, err := io.ReadFull(bufio.NewReader(conn), ack[:]); err != nil {
		// IoT Core closes a refused connection, CONNACK or not.
		return false, nil
	}
	return ack[0] == 0x20 && ack[3] == 0, nil
}

// connectPacket is an MQTT 3.1.1 CONNECT (clean session, keep-alive 30 s)
// with a username and a password.
func connectPacket(clientID, username, password string) []byte {
	field := func(s string) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(s))), s...) }
	var body []byte
	body = append(body, field("MQTT")...)
	body = append(body, 4, 0xC2, 0, 30) // level 4; username, password, clean session; keep-alive
	body = append(body, field(clientID)...)
	body = append(body, field(username)...)
	body = append(body, field(password)...)
	pk := []byte{0x10}
	for n := len(body); ; {
		d := byte(n % 128)
		if n /= 128; n > 0 {
			d |= 0x80
		}
		pk = append(pk, d)
		if n == 0 {
			break
		}
	}
	return append(pk, body...)
}

// floodResult is what one flood showed.
type floodResult struct {
	ticks         int  // stored statuses read, one per prober tick
	served        bool // every renewing agent's renewal served, every cut agent reconnected, by the flood's end
	reconnected   int  // cut agents connected again by the flood's end
	falseInactive int  // spaces ever stored inactive (status or history) while their agent ran
	disconnected  int  // agents found not connected at a tick
	anon          anonStats
	junk          junkStats
	elapsed       time.Duration
	// The agents' calls during the flood, summed.
	credAttempts, credServed, cred429    int64
	leaseAttempts, leaseServed, lease429 int64
	maxRenewal429                        int64 // the most 429s one renewing agent met
	renewingServed                       int   // renewing agents whose renewal during the flood was served
	// The functions' use during the flood, and IoT Core's.
	agentFn, presenceFn lambdaUse
	iot                 iotcore.Usage
	// dynamo is AgentFunction's DynamoDB use in the window (with a meter),
	// the agents' own calls included.
	dynamo awscost.Usage
}

type lambdaUse struct {
	invocations int64
	gbSeconds   float64
	throttled   int64
}

// runFlood floods the stack's public edge for plan.flood while the fleet
// runs, reading every space's stored status at every prober tick (every
// tick, a read after it).
func runFlood(tb testing.TB, f *floodFleet, plan floodPlan, tick time.Duration) *floodResult {
	tb.Helper()
	st := f.st
	res := &floodResult{}
	ids := make([]string, len(f.agents))
	clientIDs := make([]string, len(f.agents))
	for i, a := range f.agents {
		ids[i], clientIDs[i] = a.id, a.clientID
	}
	type before struct{ cred, credServed, cred429, lease, leaseServed, lease429 int64 }
	was := make([]before, len(f.agents))
	for i, a := range f.agents {
		was[i] = before{a.calls.credAttempts.Load(), a.calls.credServed.Load(), a.calls.cred429.Load(),
			a.calls.leaseAttempts.Load(), a.calls.leaseServed.Load(), a.calls.lease429.Load()}
	}
	agentFn, presenceFn := st.Functions.Get("AgentFunction"), st.Functions.Get("PresenceFunction")
	agentUse, presenceUse := agentFn.Usage(), presenceFn.Usage()
	agentThrottled, presenceThrottled := agentFn.Throttled(), presenceFn.Throttled()
	iot := st.Broker.Usage()
	if f.meter != nil {
		f.meter.Take()
	}

	stop := make(chan struct{})
	floodHTTP := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}}
	anonDone := pace(plan.anonRPS, 64, stop, func(i int64) {
		req, err := anonymous(st.AgentURL, ids, i)
		if err != nil {
			res.anon.failed.Add(1)
			return
		}
		resp, err := floodHTTP.Do(req)
		if err != nil {
			res.anon.failed.Add(1)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			res.anon.throttled.Add(1)
		} else {
			res.anon.invoked.Add(1)
		}
	})
	host, _, _ := net.SplitHostPort(st.Broker.MQTTAddr())
	dial := &tls.Config{RootCAs: st.MQTTRoots, ServerName: host, MinVersion: tls.VersionTLS12}
	junkDone := pace(plan.junkRPS, 32, stop, func(i int64) {
		ok, err := junkConnect(st.Broker.MQTTAddr(), dial, clientIDs, i)
		switch {
		case err != nil:
			res.junk.failed.Add(1)
		case ok:
			res.junk.accepted.Add(1)
		default:
			res.junk.refused.Add(1)
		}
	})
	start := time.Now()
	testwait.Eventually(tb, testwait.Timeout, "the agent URL answers 429", func() bool { return res.anon.throttled.Load() > 0 })
	w := st.wakes()
	wakes := &agentwake.Publisher{Endpoint: w.Endpoint, Prefix: w.Prefix, AWS: st.AWS, HTTP: w.HTTP}
	var cut []*fleetAgent
	for i, a := range f.agents {
		switch {
		case a.renewing && plan.wake:
			if err := wakes.Wake(context.Background(), a.id); err != nil {
				tb.Errorf("wake %s: %v", a.id, err)
			}
		case i >= plan.renewing && i < plan.renewing+plan.cut:
			cut = append(cut, a)
			if err := wakes.Disconnect(context.Background(), a.id); err != nil {
				tb.Errorf("disconnect %s: %v", a.id, err)
			}
		}
	}
	served := func() bool {
		for i, a := range f.agents {
			if a.renewing && a.calls.credServed.Load() == was[i].credServed {
				return false
			}
		}
		for _, a := range cut {
			if !st.Broker.Connected(a.clientID) {
				return false
			}
		}
		return true
	}
	ever := map[string]bool{}
	check := func() {
		s := f.statuses(tb)
		res.ticks++
		for _, a := range f.agents {
			if s.status[a.id] == space.Inactive || s.inactive[a.id] > 0 {
				ever[a.id] = true
			}
			if !st.Broker.Connected(a.clientID) {
				res.disconnected++
			}
		}
	}
	end, bound := start.Add(plan.flood), start.Add(plan.flood+testwait.Timeout)
	for time.Now().Before(end) || (plan.untilServed && !served() && time.Now().Before(bound)) {
		time.Sleep(max(min(tick, time.Until(end)), 250*time.Millisecond))
		check()
	}
	res.served = served()
	res.reconnected = 0
	for _, a := range cut {
		if st.Broker.Connected(a.clientID) {
			res.reconnected++
		}
	}
	close(stop)
	res.anon.sent.Store(anonDone())
	res.junk.sent.Store(junkDone())
	res.elapsed = time.Since(start)
	if f.meter != nil {
		res.dynamo = f.meter.Take()
	}

	a2, p2 := agentFn.Usage().Sub(agentUse), presenceFn.Usage().Sub(presenceUse)
	res.agentFn = lambdaUse{a2.Invocations, a2.GBSeconds(), agentFn.Throttled() - agentThrottled}
	res.presenceFn = lambdaUse{p2.Invocations, p2.GBSeconds(), presenceFn.Throttled() - presenceThrottled}
	u := st.Broker.Usage()
	res.iot = iotcore.Usage{Messages: u.Messages - iot.Messages, AuthorizerCalls: u.AuthorizerCalls - iot.AuthorizerCalls,
		RulesTriggered: u.RulesTriggered - iot.RulesTriggered, RuleActions: u.RuleActions - iot.RuleActions}
	// A last read after the flood: what it left behind.
	check()
	res.falseInactive = len(ever)
	for i, a := range f.agents {
		cred429 := a.calls.cred429.Load() - was[i].cred429
		res.credAttempts += a.calls.credAttempts.Load() - was[i].cred
		res.credServed += a.calls.credServed.Load() - was[i].credServed
		res.cred429 += cred429
		res.leaseAttempts += a.calls.leaseAttempts.Load() - was[i].lease
		res.leaseServed += a.calls.leaseServed.Load() - was[i].leaseServed
		res.lease429 += a.calls.lease429.Load() - was[i].lease429
		if a.renewing {
			res.maxRenewal429 = max(res.maxRenewal429, cred429)
			if a.calls.credServed.Load() > was[i].credServed {
				res.renewingServed++
			}
		}
	}
	return res
}

// TestAgentsStayActiveThroughAFlood: agents connected and active stay
// active through a flood of the public edge (anonymous requests over the
// agent URL's rate, answered 429, and junk CONNECTs at IoT Core), and
// what they need of Spaces during it is still served: a credential
// renewal of each agent woken with work, after the 429s it meets (the
// agent retries), and the reconnect of each agent whose MQTT connection
// was cut (the authorizer, PresenceFunction's, which the flood cannot
// take), followed by its HTTP renewal. Junk CONNECTs invoke no function:
// IoT Core refuses them on their token's signature (with the broker model
// invoking the authorizer despite a failed signature, the test fails on
// the authorizer's invocations). It does not catch the authorizer put on
// AgentFunction's executions: the flood holds all 5 only at moments, and
// a cut agent whose reconnect was refused then retries a second later.
func TestAgentsStayActiveThroughAFlood(t *testing.T) {
	st := startWith(t, Config{Probing: ProbingConfig{Interval: 2 * time.Second}, LeaseInterval: agent.MinLeaseInterval})
	plan := floodPlan{agents: 24, renewing: 8, cut: 4, flood: 10 * time.Second, anonRPS: 300, junkRPS: 40,
		retry: time.Second, mqttRetry: time.Second, wake: true, untilServed: true}
	f := startFleet(t, st, plan)
	res := runFlood(t, f, plan, 2*time.Second)
	t.Logf("flood: %d anonymous requests (%d answered 429, %d invoked), %d junk CONNECTs (%d refused); agents: %d/%d credential renewals served (%d answered 429), %d/%d leases served (%d answered 429); %d status reads",
		res.anon.sent.Load(), res.anon.throttled.Load(), res.anon.invoked.Load(), res.junk.sent.Load(), res.junk.refused.Load(),
		res.credServed, res.credAttempts, res.cred429, res.leaseServed, res.leaseAttempts, res.lease429, res.ticks)
	if res.falseInactive != 0 {
		t.Errorf("%d spaces were stored inactive while their agents ran", res.falseInactive)
	}
	if res.anon.throttled.Load() == 0 {
		t.Error("the flood was never answered 429: it did not saturate the URL")
	}
	if !res.served {
		t.Errorf("not served during the flood: %d of %d renewing agents renewed, %d of %d cut agents reconnected",
			res.renewingServed, plan.renewing, res.reconnected, plan.cut)
	}
	if res.cred429 == 0 {
		t.Error("no renewal met a 429: the renewals did not compete with the flood")
	}
	if res.junk.accepted.Load() != 0 {
		t.Errorf("%d junk CONNECTs accepted", res.junk.accepted.Load())
	}
	if res.junk.refused.Load() == 0 {
		t.Error("no junk CONNECT was refused: the CONNECT flood did not run")
	}
	// The only authorizer invocations are the cut agents' reconnects.
	if res.iot.AuthorizerCalls > int64(2*plan.cut) {
		t.Errorf("%d authorizer invocations during the flood for %d reconnects: junk CONNECTs invoke the authorizer", res.iot.AuthorizerCalls, plan.cut)
	}
}

// envInt is the environment's integer k, else def.
func envInt(tb testing.TB, k string, def int) int {
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		tb.Fatalf("%s=%q: not a count", k, v)
	}
	return n
}

// Prices, us-east-1: Lambda (arm64, the first 6 billion GB-s) requests and
// duration (https://aws.amazon.com/lambda/pricing/), a throttled request
// not billed; IoT Core messaging per message of up to 5 KB, a refused
// CONNECT metered as one (https://aws.amazon.com/iot-core/pricing/, and
// infra/iotcore's Usage); DynamoDB on demand as awscost prices it; KMS
// asymmetric requests (ECC Sign) $0.15 per 10,000
// (https://aws.amazon.com/kms/pricing/).
const (
	floodPriceKMSSign        = 0.15 / 1e4
	floodPriceLambdaRequest  = 0.20 / 1e6
	floodPriceLambdaGBSecond = 0.0000133334
	floodPriceIoTMessage     = 1.00 / 1e6
)

// BenchmarkAgentFlood measures the goal of the public edge: FLOOD_AGENTS
// (default 1000) real agents connected and active on the local stack
// through FLOOD_FOR (default 10m) of FLOOD_ANON_RPS (1000) anonymous
// requests a second at the agent URL and FLOOD_CONNECT_RPS (200) junk
// CONNECTs a second at IoT Core. FLOOD_RENEWING (default a tenth of the
// agents) renew their credential at every round and are woken at the
// flood's start; every agent's fallback renewal (space.PresenceFallback)
// falls in a flood of 10 minutes. The stack's statuses are read at every
// prober tick (one minute, as deployed). Reported: spaces stored
// inactive (the goal: 0), the agents' renewals attempted, served and
// answered 429, the flood's requests answered 429 and invoked, each
// function's invocations during the flood, and the flood's cost an hour
// at list prices: AgentFunction's requests and duration the flood caused
// (its invoked requests, at the function's mean billed duration in the
// window), IoT Core's messages (the junk CONNECTs), and AgentFunction's
// DynamoDB units in the window (awscost; the agents' own renewals
// included, so a bound on the flood's). The goal's run takes about 13
// minutes and 1.2 GB; FLOOD_AGENTS=40 FLOOD_FOR=20s checks the benchmark
// itself in under a minute.
func BenchmarkAgentFlood(b *testing.B) {
	agents := envInt(b, "FLOOD_AGENTS", 1000)
	plan := floodPlan{agents: agents, renewing: envInt(b, "FLOOD_RENEWING", agents/10), wake: true,
		anonRPS: envInt(b, "FLOOD_ANON_RPS", 1000), junkRPS: envInt(b, "FLOOD_CONNECT_RPS", 200), flood: 10 * time.Minute}
	if v := os.Getenv("FLOOD_FOR"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("FLOOD_FOR=%q: %v", v, err)
		}
		plan.flood = d
	}
	for b.Loop() {
		meter := awscost.New()
		meter.Only(func(ctx context.Context) bool { return lambdarules.FunctionOf(ctx) == "AgentFunction" })
		st := startWith(b, Config{Probing: ProbingConfig{Interval: space.DefaultProbeInterval}, Meter: meter})
		setup := time.Now()
		f := startFleet(b, st, plan)
		f.meter = meter
		b.Logf("%d agents connected and active in %s", agents, time.Since(setup).Round(time.Second))
		res := runFlood(b, f, plan, space.DefaultProbeInterval)
		f.stop()
		secs := res.elapsed.Seconds()
		invoked := float64(res.anon.invoked.Load())
		// The flood's share of AgentFunction's billed duration: its
		// invoked requests at the window's mean.
		agentCalls := float64(res.agentFn.invocations)
		gbs := 0.0
		if agentCalls > 0 {
			gbs = res.agentFn.gbSeconds / agentCalls * invoked
		}
		perHour := 3600 / secs
		lambdaReq := invoked * floodPriceLambdaRequest * perHour
		lambdaDur := gbs * floodPriceLambdaGBSecond * perHour
		iot := float64(res.iot.Messages) * floodPriceIoTMessage * perHour
		// AgentFunction's DynamoDB use in the window, the agents' own
		// renewals included (a bound on the flood's).
		ddb := (res.dynamo.TotalRRU()*awscost.PriceRRU + res.dynamo.TotalWRU()*awscost.PriceWRU) * perHour
		// Its KMS signatures, the agents' own renewals' (a forged
		// secret spends none: TestForgedSecretsSpendNoSignature).
		signs := res.dynamo.Requests["KMS Sign"]
		kms := signs * floodPriceKMSSign * perHour
		b.ReportMetric(float64(res.falseInactive), "false-inactive")
		b.ReportMetric(float64(res.ticks), "status-reads")
		b.ReportMetric(float64(res.anon.sent.Load())/secs, "anon-req/s")
		b.ReportMetric(float64(res.anon.throttled.Load())/secs, "anon-429/s")
		b.ReportMetric(invoked/secs, "anon-invoked/s")
		b.ReportMetric(float64(res.junk.sent.Load())/secs, "junk-connect/s")
		b.ReportMetric(float64(res.junk.accepted.Load()), "junk-accepted")
		b.ReportMetric(float64(res.credAttempts), "renewals-attempted")
		b.ReportMetric(float64(res.credServed), "renewals-served")
		b.ReportMetric(float64(res.cred429), "renewals-429")
		b.ReportMetric(float64(res.maxRenewal429), "max-429s-one-renewal")
		b.ReportMetric(float64(res.renewingServed), "renewing-agents-served")
		b.ReportMetric(float64(res.leaseAttempts), "leases-attempted")
		b.ReportMetric(float64(res.leaseServed), "leases-served")
		b.ReportMetric(float64(res.lease429), "leases-429")
		b.ReportMetric(float64(res.disconnected), "agents-seen-disconnected")
		b.ReportMetric(agentCalls, "AgentFunction-invocations")
		b.ReportMetric(float64(res.agentFn.throttled), "AgentFunction-throttled")
		b.ReportMetric(float64(res.presenceFn.invocations), "PresenceFunction-invocations")
		b.ReportMetric(float64(res.iot.AuthorizerCalls), "authorizer-calls")
		b.ReportMetric(float64(res.iot.Messages), "iot-messages")
		b.ReportMetric(lambdaReq+lambdaDur, "lambda-$/h")
		b.ReportMetric(iot, "iot-$/h")
		b.ReportMetric(res.dynamo.TotalWRU()/secs, "AgentFunction-WRU/s")
		b.ReportMetric(res.dynamo.TotalRRU()/secs, "AgentFunction-RRU/s")
		b.ReportMetric(ddb, "dynamodb-$/h")
		b.ReportMetric(signs, "kms-signs")
		b.ReportMetric(kms, "kms-$/h")
		b.ReportMetric(lambdaReq+lambdaDur+iot+ddb+kms, "flood-$/h")
		b.Logf("AgentFunction's AWS requests in the window: %v", res.dynamo.Requests)
		if res.falseInactive != 0 {
			b.Errorf("%d spaces stored inactive during the flood", res.falseInactive)
		}
	}
}

// TestForgedSecretsSpendNoSignature: a well-formed forged credential or
// bootstrap of a real space, presented to the agent URL by anyone, is
// refused without a KMS signature (the dearest step of a request, and a
// quota shared with the agents' own renewals): the credential's token is
// signed only once the presented secret is proven. The agent's own
// exchange and renewal are each signed once.
func TestForgedSecretsSpendNoSignature(t *testing.T) {
	meter := awscost.New()
	meter.Only(func(ctx context.Context) bool { return lambdarules.FunctionOf(ctx) == "AgentFunction" })
	st := startWith(t, Config{Probing: ProbingConfig{Disabled: true}, Meter: meter})
	c := newClient(t, st, "acme")
	reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes",
		"cloud_account_id": c.account("aws"), "config": configFor("aws", "forged"), "connectivity": "agent"}))
	id := reg["id"].(string)
	boot := reg["agent_bootstrap"].(map[string]any)["token"].(string)
	forged := func(prefix string) string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return prefix + id + "." + base64.RawURLEncoding.EncodeToString(b)
	}
	signs := func() float64 { return meter.Take().Requests["KMS Sign"] }
	signs()
	for _, call := range []struct{ method, path, bearer string }{
		{http.MethodPost, "/agent/exchange", forged("spb1.")},
		{http.MethodPost, "/agent/credential", forged("spa1.")},
	} {
		if code, body := agentCall(t, st, call.method, call.path, call.bearer, nil); code != http.StatusUnauthorized {
			t.Fatalf("%s %s with a forged secret: %d %s", call.method, call.path, code, body)
		}
	}
	if n := signs(); n != 0 {
		t.Errorf("forged secrets spent %v KMS signatures", n)
	}
	code, body := agentCall(t, st, http.MethodPost, "/agent/exchange", boot, nil)
	var ex agentCredential
	if err := json.Unmarshal(body, &ex); err != nil || code != http.StatusOK || ex.TokenSignature == "" {
		t.Fatalf("exchange: %d %s", code, body)
	}
	code, body = agentCall(t, st, http.MethodPost, "/agent/credential", ex.Credential, nil)
	var renewed agentCredential
	if err := json.Unmarshal(body, &renewed); err != nil || code != http.StatusOK || renewed.TokenSignature == "" {
		t.Fatalf("renewal: %d %s", code, body)
	}
	if n := signs(); n != 2 {
		t.Errorf("the exchange and the renewal made %v KMS signatures, want one each", n)
	}
}
