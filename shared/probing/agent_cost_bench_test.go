package probing_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"

	"spaces"

	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/infra/staticminter"
	"spaces/shared/httpapi"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

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
// check every agent space each minute (a read of the space and of its
// lease; no mint, no GET /version), on the real table and queue on the
// emulator. 100 agent spaces run 2 simulated minutes of warm-up, then a
// measured window of 10. Every AWS request is counted by awscost.Meter;
// the SQS event source's receives and deletes are counted per batch of 10
// as in BenchmarkProbingCost. Lambda time is each handler call's wall
// time rounded up to the millisecond, at the template's memory sizes. The
// figure is priced for two channels carrying the agent's requests: the
// HTTP API route (as deployed) and a Lambda function URL.
func BenchmarkAgentLeaseCost(b *testing.B) {
	for b.Loop() {
		measureAgentCost(b)
	}
}

func measureAgentCost(b *testing.B) {
	const (
		fleet  = 100
		warmUp = 2 * time.Minute
		window = 10 * time.Minute
	)
	dep := readTemplate(b)
	ctx := context.Background()
	env := emulatortest.Start(b)
	meter := awscost.New()
	a := parts.AWS{Config: meter.Instrument(env.Config), Endpoint: env.Endpoint}
	table := env.Name(b, "SpacesTable")
	store := a.Store(table)
	c := newClock()
	svc := &space.Service{Store: store, Now: c.Now, NewID: uuid.NewString, StaleAfter: space.DefaultStaleAfter}
	agents := &space.Agents{Store: store, Spaces: store, Now: c.Now}
	api := &httpapi.API{Spaces: svc, Agents: agents, Log: discardLogger()}
	h := api.Handler()

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
			next: c.Now().Add(time.Duration(i) * space.LeaseInterval / fleet)})
	}

	log := discardLogger()
	queueURL := env.Resources["ProbeQueue"].URL
	p := wiring.Prober(a, wiring.ProberSettings{
		Common:     parts.Common{Table: table, StaleAfter: space.DefaultStaleAfter},
		ProbeQueue: queueURL, EventBus: env.Name(b, "EventBus"),
		Heartbeat: space.DefaultHeartbeat, Interval: space.DefaultProbeInterval,
	}, &staticminter.Static{}, nil, log) // an agent space is never minted nor probed
	q := sqsMirror{real: p.Queue, clockQueue: &clockQueue{clock: c}}
	p.Now, p.Queue = c.Now, q
	sched := wiring.Scheduler(a, wiring.SchedulerSettings{Table: table, ProbeQueue: queueURL, Interval: space.DefaultProbeInterval}, log)
	sched.Now, sched.Queue = c.Now, q

	billed := func(d time.Duration) float64 { return math.Ceil(float64(d)/float64(time.Millisecond)) / 1000 }
	var (
		apiFn, prober, scheduler awscost.Lambda
		renewals, checks         int
		esm                      float64
		refused                  int
	)
	body := `{"agent_version":"0.1.0","server_version":{"gitVersion":"v1.37.2","platform":"linux/arm64"}}`
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
				req := httptest.NewRequest("PUT", "/agent/spaces/"+ag.id+"/lease", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+ag.cred)
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, req)
				apiFn.Invocations++
				apiFn.Seconds += billed(time.Since(start))
				if rec.Code != http.StatusOK {
					refused++
				}
				renewals++
				ag.next = ag.next.Add(space.LeaseInterval)
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
	apiFn, prober, scheduler, renewals, checks, esm = awscost.Lambda{}, awscost.Lambda{}, awscost.Lambda{}, 0, 0, 0
	run(c.Now().Add(window))
	u := meter.Take()
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
	apiFn.MemoryMB, prober.MemoryMB, scheduler.MemoryMB = apiMemoryMB(b), dep.proberMemoryMB, dep.schedulerMemoryMB

	scale := 1000 * 30 * 24 * 60 / (float64(fleet) * window.Minutes())
	base := awscost.Price(u, []awscost.Lambda{apiFn, prober, scheduler}, scheduler.Invocations)
	if dep.provisioned {
		base = base.Provisioned(u, dep.target)
	}
	base = base.Scale(scale)
	gateway := float64(renewals) * scale * priceHTTPAPIRequest
	functionURL := float64(renewals) * scale * priceFunctionURLRequest

	var sb strings.Builder
	fmt.Fprintf(&sb, "%d agent spaces, %s measured: %d lease renewals (every %s), %d prober checks in %.0f invocations; table provisioned %t\n",
		fleet, window, renewals, space.LeaseInterval, checks, prober.Invocations, dep.provisioned)
	per := func(n float64, by int) float64 { return n / float64(by) }
	for _, op := range u.Ops() {
		fmt.Fprintf(&sb, "  %-50s %7.0f requests  RRU %8.1f  WRU %8.1f\n", op, u.Requests[op], u.RRU[op], u.WRU[op])
	}
	fmt.Fprintf(&sb, "  lease handler: %.2f ms billed per renewal; prober: %.2f ms per check\n",
		1000*per(apiFn.Seconds, renewals), 1000*per(prober.Seconds, checks))
	fmt.Fprintf(&sb, "  $/month per 1,000 agent spaces: DynamoDB reads %.2f, writes %.2f, SQS %.2f, Lambda %.2f + %.2f, EventBridge %.2f = %.2f before the channel\n",
		base.Reads, base.Writes, base.SQS, base.LambdaRequests, base.LambdaDuration, base.EventBridge, base.Total())
	fmt.Fprintf(&sb, "  channel: HTTP API route %.2f -> total %.2f; Lambda function URL %.2f -> total %.2f\n",
		gateway, base.Total()+gateway, functionURL, base.Total()+functionURL)
	b.Log(sb.String())
	b.ReportMetric(base.Total()+gateway, "usd/month/1000-agent-spaces-httpapi")
	b.ReportMetric(base.Total()+functionURL, "usd/month/1000-agent-spaces-function-url")
	b.ReportMetric(0, "ns/op")
}

// apiMemoryMB is ApiFunction's memory: its own MemorySize, else the
// template's Globals.
func apiMemoryMB(b *testing.B) int {
	type memory struct {
		MemorySize int `yaml:"MemorySize"`
	}
	var t struct {
		Globals struct {
			Function memory `yaml:"Function"`
		} `yaml:"Globals"`
		Resources struct {
			ApiFunction struct {
				Properties memory `yaml:"Properties"`
			} `yaml:"ApiFunction"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(spaces.Template, &t); err != nil {
		b.Fatal(err)
	}
	if m := t.Resources.ApiFunction.Properties.MemorySize; m > 0 {
		return m
	}
	if t.Globals.Function.MemorySize == 0 {
		b.Fatal("no MemorySize for ApiFunction in template.yaml")
	}
	return t.Globals.Function.MemorySize
}
