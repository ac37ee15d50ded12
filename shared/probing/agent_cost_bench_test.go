package probing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces"

	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/infra/staticminter"
	"spaces/shared/awsclient"
	"spaces/shared/kubens"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/wiring"
	agentfn "spaces/shared/wiring/agents"
	"spaces/shared/wiring/parts"
)

// nsReport is an agent's namespaces report: a small cluster's 12.
var nsReport = func() string {
	var items []string
	for i := range 12 {
		items = append(items, fmt.Sprintf(`{"name":"team-%02d","phase":"Active","labels":{"kubernetes.io/metadata.name":"team-%02d","team":"t%d"},"created_at":"2026-12-01T00:00:00Z"}`, i, i, i))
	}
	return `{"items":[` + strings.Join(items, ",") + `],"creates":[]}`
}()

// Channel prices for the agent's requests, us-east-1, per request:
// API Gateway HTTP API, first 300 million a month
// (https://aws.amazon.com/api-gateway/pricing/); a Lambda function URL
// adds nothing to the function's own request and duration charges
// (https://docs.aws.amazon.com/lambda/latest/dg/urls-configuration.html,
// https://aws.amazon.com/lambda/pricing/).
const (
	priceHTTPAPIRequest     = 1.00 / 1e6
	priceFunctionURLRequest = 0.0
)

// BenchmarkAgentLeaseCost measures what an agent space costs a month per
// 1,000 spaces, on the production path: each agent renews its lease every
// space.LeaseInterval through the real API handler (httpapi, space.Agents,
// the DynamoDB store), and the scheduler and prober built by shared/wiring
// check every agent space each minute (from what the tick carries of the
// space, an eventually consistent read of its lease; no mint, no GET
// /version), on the real table and queue on the
// emulator. 100 agent spaces run 2 simulated minutes of warm-up, then a
// measured window of 10. Every AWS request is counted by awscost.Meter;
// the SQS event source's receives and deletes are counted per batch of 10
// as in BenchmarkProbingCost. Lambda time is each handler call's wall
// time rounded up to the millisecond, at the template's memory sizes. The
// figure is priced for two channels carrying the agent's requests: the
// agent function's Lambda function URL (as deployed) and, for
// comparison, an HTTP API route. This is the channel without
// AgentMQTTEndpoint; the presence channel's figure, as deployed, is
// infra/fleetsim's BenchmarkAgentFleetMonth (a month of real agents on
// the broker model, counted rather than assumed).
func BenchmarkAgentLeaseCost(b *testing.B) {
	for b.Loop() {
		measureAgentCost(b)
	}
}

func measureAgentCost(b *testing.B) {
	const (
		warmUp = 2 * time.Minute
		window = 10 * time.Minute
	)
	// AGENT_SPACES sets the fleet (default 100): the prober's messages
	// carry more spaces in a larger one.
	fleet := 100
	if v := os.Getenv("AGENT_SPACES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("AGENT_SPACES=%q is not a positive number", v)
		}
		fleet = n
	}
	dep := readTemplate(b)
	ctx := context.Background()
	env := emulatortest.Start(b)
	meter := awscost.New()
	// Space items pass 1 KB: their writes are sized by DynamoDB's rule.
	meter.SizeWith(awsclient.DynamoDB(env.Config, env.Endpoint))
	a := parts.AWS{Config: meter.Instrument(env.Config), Endpoint: env.Endpoint}
	table := env.Name(b, "SpacesTable")
	store := a.Store(table)
	c := newClock()
	svc := &space.Service{Store: store, Now: c.Now, NewID: uuid.NewString, StaleAfter: space.DefaultStaleAfter}
	agents := &space.Agents{Store: store, Spaces: store, Now: c.Now, Work: store, Revisions: store}
	// The agent function as deployed (shared/wiring/agents).
	settings := agentfn.Settings{Common: parts.Common{Table: table, StaleAfter: space.DefaultStaleAfter}}
	h := agentfn.New(a, settings, agentfn.Options{Now: c.Now, Log: discardLogger()})
	renewEvery := space.LeaseInterval

	org := "org-" + uuid.NewString()[:8]
	acct, err := svc.CreateAccount(ctx, org, space.NewAccountInput{Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		b.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1
	if err := store.SaveAccount(ctx, acct); err != nil {
		b.Fatal(err)
	}
	type agent struct {
		id, cred string
		next     time.Time
	}
	var fleetAgents []*agent
	for i := range fleet {
		s, _, err := svc.Register(ctx, org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
			CloudAccountID: acct.ID, Config: space.Config{"clusterName": fmt.Sprintf("agent-%03d", i), "region": "us-east-1"},
			Connectivity: space.ViaAgent}, "")
		if err != nil {
			b.Fatal(err)
		}
		boot, err := agents.IssueBootstrap(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		cred, err := agents.Exchange(ctx, boot.Token)
		if err != nil {
			b.Fatal(err)
		}
		// Agents start at their own moment: renewals spread over the interval.
		fleetAgents = append(fleetAgents, &agent{id: s.ID, cred: cred.Credential,
			next: c.Now().Add(time.Duration(i) * renewEvery / time.Duration(fleet))})
	}

	log := discardLogger()
	queueURL := env.Resources["ProbeQueue"].URL
	p := wiring.Prober(a, wiring.ProberSettings{
		Common:     parts.Common{Table: table, StaleAfter: space.DefaultStaleAfter},
		ProbeQueue: queueURL, EventBus: env.Name(b, "EventBus"),
		Interval: space.DefaultProbeInterval,
	}, &staticminter.Static{}, nil, log) // an agent space is never minted nor probed
	q := sqsMirror{real: p.Queue, clockQueue: &clockQueue{clock: c}}
	p.Now, p.Queue = c.Now, q
	sched := wiring.Scheduler(a, wiring.SchedulerSettings{Table: table, ProbeQueue: queueURL, Interval: space.DefaultProbeInterval}, log)
	sched.Now, sched.Queue = c.Now, q

	billed := awscost.Billed
	var (
		agentFn, prober, scheduler awscost.Lambda
		renewals, checks           int
		esm                        float64
		refused                    int
	)
	body := `{"agent_version":"0.1.0","server_version":{"gitVersion":"v1.37.2","platform":"linux/arm64"}}`
	var reports int
	call := func(method, path, cred, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+cred)
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		agentFn.Invocations++
		agentFn.Seconds += billed(time.Since(start))
		return rec
	}
	doWork := func(id, cred string, rec *httptest.ResponseRecorder) int {
		var ans struct {
			Work space.AgentWork `json:"work"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			b.Fatal(err)
		}
		n := 0
		if ans.Work.NamespacesWanted {
			if r := call("PUT", "/agent/spaces/"+id+"/namespaces", cred, nsReport); r.Code != http.StatusNoContent {
				b.Fatalf("namespaces report: %d %s", r.Code, r.Body)
			}
			n++
		}
		for _, rv := range ans.Work.Revisions {
			if r := call("PUT", "/agent/spaces/"+id+"/revisions/"+rv.ID, cred, fmt.Sprintf(`{"version":%d,"error":""}`, rv.Version)); r.Code != http.StatusNoContent {
				b.Fatalf("revision report: %d %s", r.Code, r.Body)
			}
			n++
		}
		return n
	}
	var open []probing.Delivery
	var openedAt time.Time
	nextTick := c.Now()
	run := func(end time.Time) {
		for now := c.Now(); now.Before(end); now = c.Now() {
			if !now.Before(nextTick) {
				start := time.Now()
				if _, err := sched.Tick(ctx); err != nil {
					b.Fatal(err)
				}
				scheduler.Invocations++
				scheduler.Seconds += billed(time.Since(start))
				nextTick = nextTick.Add(space.DefaultProbeInterval)
			}
			for _, ag := range fleetAgents {
				if now.Before(ag.next) {
					continue
				}
				rec := call("PUT", "/agent/spaces/"+ag.id+"/lease", ag.cred, body)
				if rec.Code != http.StatusOK {
					refused++
				}
				renewals++
				// The agent does the work the answer carries and reports it
				// (agent/client): each report is a request of its own.
				reports += doWork(ag.id, ag.cred, rec)
				ag.next = ag.next.Add(renewEvery)
			}
			// The template's batching, as BenchmarkProbingCost models it: a
			// batch opens with the first message due and is invoked when it
			// holds BatchSize messages or its window ends.
			if ds := q.due(); len(ds) > 0 {
				if len(open) == 0 {
					openedAt = now
				}
				open = append(open, ds...)
			}
			var batches [][]probing.Delivery
			for len(open) >= dep.batchSize {
				batches, open, openedAt = append(batches, slices.Clone(open[:dep.batchSize])), open[dep.batchSize:], now
			}
			if len(open) > 0 && !now.Before(openedAt.Add(dep.window-time.Second)) {
				batches, open = append(batches, open), nil
			}
			for _, batch := range batches {
				start := time.Now()
				if failed := p.HandleBatch(ctx, batch); len(failed) > 0 {
					b.Fatalf("batch items failed: %v", failed)
				}
				prober.Invocations++
				prober.Seconds += billed(time.Since(start))
				esm += math.Ceil(float64(len(batch)) / 10)
				checks += spacesIn(b, batch)
			}
			c.Advance(time.Second)
		}
	}
	run(c.Now().Add(warmUp))
	meter.Take()
	warmReports := reports
	agentFn, prober, scheduler, renewals, checks, esm, reports = awscost.Lambda{}, awscost.Lambda{}, awscost.Lambda{}, 0, 0, 0, 0
	run(c.Now().Add(window))
	u := meter.Take()
	idleReports := reports
	if refused > 0 {
		b.Fatalf("%d renewals refused", refused)
	}
	for _, ag := range fleetAgents {
		if s, err := store.GetSpace(ctx, org, ag.id); err != nil || s.Status != space.Active {
			b.Fatalf("space %s is %s (%v) with its agent renewing", ag.id, s.Status, err)
		}
	}
	u.Requests["SQS ReceiveMessage (Lambda event source)"] += esm
	u.Requests["SQS DeleteMessageBatch (Lambda event source)"] += esm
	u.SQSRequests += 2 * esm
	agentMemory, err := awscost.MemoryMB(spaces.Template, "AgentFunction")
	if err != nil {
		b.Fatal(err)
	}
	agentFn.MemoryMB, prober.MemoryMB, scheduler.MemoryMB = agentMemory, dep.proberMemoryMB, dep.schedulerMemoryMB

	scale := 1000 * 30 * 24 * 60 / (float64(fleet) * window.Minutes())
	base := awscost.Price(u, []awscost.Lambda{agentFn, prober, scheduler}, scheduler.Invocations)
	if dep.provisioned {
		base = base.Provisioned(u, dep.target)
	}
	base = base.Scale(scale)
	gateway := float64(renewals) * scale * priceHTTPAPIRequest
	functionURL := float64(renewals) * scale * priceFunctionURLRequest

	var sb strings.Builder
	fmt.Fprintf(&sb, "%d agent spaces, %s measured: %d lease renewals (every %s), %d prober checks in %.0f invocations; table provisioned %t\n",
		fleet, window, renewals, renewEvery, checks, prober.Invocations, dep.provisioned)
	per := func(n float64, by int) float64 { return n / float64(by) }
	for _, op := range u.Ops() {
		fmt.Fprintf(&sb, "  %-50s %7.0f requests  RRU %8.1f  WRU %8.1f\n", op, u.Requests[op], u.RRU[op], u.WRU[op])
	}
	fmt.Fprintf(&sb, "  lease handler: %.2f ms billed per renewal; prober: %.2f ms per check\n",
		1000*per(agentFn.Seconds, renewals), 1000*per(prober.Seconds, checks))
	fmt.Fprintf(&sb, "  $/month per 1,000 agent spaces: DynamoDB reads %.2f, writes %.2f, SQS %.2f, Lambda %.2f + %.2f, EventBridge %.2f = %.2f before the channel\n",
		base.Reads, base.Writes, base.SQS, base.LambdaRequests, base.LambdaDuration, base.EventBridge, base.Total())
	fmt.Fprintf(&sb, "  channel: Lambda function URL (as deployed) %.2f -> total %.2f; HTTP API route %.2f -> total %.2f\n",
		functionURL, base.Total()+functionURL, gateway, base.Total()+gateway)
	fmt.Fprintf(&sb, "  work reports: %d in the warm-up (each agent's first namespace list), %d in the measured window (no work was asked for: the lease answer carries none, at no request of its own)\n",
		warmReports, idleReports)

	// The work itself, priced per item: a user lists an agent space's
	// namespaces (discovery: the space, the agent's list, the ask), a
	// claim hands a revision to the agent, and the agent's next renewal
	// carries both and it reports them.
	disc := &kubens.Service{Spaces: svc, Agent: store, Now: c.Now}
	for _, ag := range fleetAgents {
		if _, err := disc.List(ctx, org, ag.id); err != nil {
			b.Fatal(err)
		}
	}
	asked := meter.Take()
	var pushed []space.Revision
	for i, ag := range fleetAgents {
		r := space.Revision{ID: uuid.NewString(), OrgID: org, EnvironmentID: uuid.NewString(), SpaceID: ag.id, Namespace: "web",
			Manifests: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": fmt.Sprintf("cm-%d", i)},
				"data": map[string]any{"k": "v"}}}, State: space.RevisionPending, CreatedAt: c.Now(), UpdatedAt: c.Now(), Version: 1}
		if err := store.CreateRevision(ctx, r); err != nil {
			b.Fatal(err)
		}
		pushed = append(pushed, r)
	}
	meter.Take() // the push is the same for every space
	for _, r := range pushed {
		if err := store.HandRevision(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	handed := meter.Take()
	reports = 0
	for _, ag := range fleetAgents {
		if reports += doWork(ag.id, ag.cred, call("PUT", "/agent/spaces/"+ag.id+"/lease", ag.cred, body)); reports%2 != 0 {
			b.Fatalf("agent %s did not get both works", ag.id)
		}
	}
	worked := meter.Take()
	fmt.Fprintf(&sb, "  per work item, over %d agent spaces (the renewal that carries the work is %d UpdateItem of its own, counted above):\n", fleet, fleet)
	for _, part := range []struct {
		what string
		u    awscost.Usage
	}{{"a user's namespace list (discovery)", asked}, {"a revision handed (claimer)", handed}, {"renewal + reports (agent)", worked}} {
		for _, op := range part.u.Ops() {
			fmt.Fprintf(&sb, "    %-38s %-28s %6.2f requests  RRU %5.2f  WRU %5.2f per space\n", part.what, op,
				part.u.Requests[op]/float64(fleet), part.u.RRU[op]/float64(fleet), part.u.WRU[op]/float64(fleet))
		}
	}
	b.Log(sb.String())
	b.ReportMetric(base.Total()+gateway, "usd/month/1000-agent-spaces-httpapi")
	b.ReportMetric(base.Total()+functionURL, "usd/month/1000-agent-spaces-function-url")
	b.ReportMetric(0, "ns/op")
}
