package fleetsim_test

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"spaces"
	"spaces/infra/awscost"
	"spaces/infra/iotcore"
	"spaces/shared/probing"
)

// BenchmarkAgentFleetMonth is what an agent space costs a month per 1,000
// on the presence channel as deployed (AgentMQTTEndpoint set, token
// signing on), counted from a simulated month of the fleet rather than
// assumed: FLEET_AGENTS (default 10) steady agents run FLEET_DAYS (default
// 30) simulated days in the simulation of TestFleetForAWeek (the real
// agent and its paho client, the broker model with the template's
// authorizer and topic rule, the agent and presence functions' handlers,
// the prober's minute check of every agent space, on the store in the
// emulator). The channel works all month: no cut, so the month's every
// reconnect is one the service causes itself (the authorizer's hourly
// refresh refusing a connection's password once its credential has been
// renewed), and the simulation's minute checks (no false inactive, every
// space active and its presence connected) hold throughout, or the
// benchmark fails.
//
// Counted, and priced with awscost's prices: every AWS request of the two
// functions and the prober (awscost.Meter, DynamoDB writes sized as
// billed; KMS Sign, one per credential issued); each function's
// invocations and billed duration (each call's wall time rounded up to
// the millisecond, at the template's MemorySize) and the CloudWatch Logs
// of Lambda's records of each invocation at the template's SystemLogLevel
// (awscost.Lambda.PlatformBytes: none of a successful one at WARN; the
// functions' own lines are not counted); IoT Core's connection
// minutes and messages as the broker model meters them (iotcore.Usage:
// CONNECT and SUBSCRIBE, not pings), and the lifecycle events the
// template's rule selects (a rule triggered, an SQS action, and on the
// presence queue the action's send and the event source's receive and
// delete, one each: an upper bound). The prober's checks of agent spaces
// are priced as deployed at 1,000 agent spaces: the scheduler packs them
// probing.MaxSpaces a message, each message one invocation (BatchSize 1),
// one receive and one delete, sent 10 a SendMessageBatch; the checks'
// reads and duration are the measured ones (per check; at the fleet's
// few a message, its per-message share is an upper bound). Not in the
// figure, as not per agent: the stack's fixed part (the scheduler's
// ticks and beats, the SQS event sources' idle polls, the KMS key's $1 a
// month: BENCHMARKS.md's idle stack), and the scheduler's reads of the
// agent spaces' index entries (half a unit a minute per 4 KB of them).
func BenchmarkAgentFleetMonth(b *testing.B) {
	agents, days := envInt(b, "FLEET_AGENTS", 10), envInt(b, "FLEET_DAYS", 30)
	if agents > probing.MaxSpaces {
		b.Fatalf("FLEET_AGENTS=%d: at most %d (one tick message, as the prober's pricing takes it)", agents, probing.MaxSpaces)
	}
	for b.Loop() {
		fleetMonth(b, agents, days)
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}

func fleetMonth(b *testing.B, n, days int) {
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	end := start.Add(time.Duration(days) * 24 * time.Hour)
	meter := awscost.New()
	s := newSim(b, start, meter)
	for i := range n {
		s.register(fmt.Sprintf("agent-%02d", i))
	}
	began := time.Now()
	stopped := s.run(start, end, nil)
	real := time.Since(began)
	u := meter.Take()
	iot := s.broker.Usage()
	accepted, _ := s.net.counts()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.failOnProblems(b, "the channel failed: ", stopped.Sub(start))
	for _, a := range s.fleet {
		if !s.broker.Connected(a.clientID) {
			b.Errorf("%s is not connected at the end", a.name)
		}
		if got, want := s.renewals[a.sp.ID], 2*days-1; got < want {
			b.Errorf("%s renewed its credential %d times in %d days, want %d (every 12 h)", a.name, got, days, want)
		}
	}
	if s.seen[iotcore.EventConnectFailed] > 0 {
		b.Errorf("%d connect_failed events in a month with no cut: an agent presented a credential the authorizer refused at CONNECT", s.seen[iotcore.EventConnectFailed])
	}
	// Each reconnect of a working month follows a refresh that refused the
	// connection's password after a renewal: more is a reconnect storm.
	reconnects := accepted - n
	renewals := 0
	for _, a := range s.fleet {
		renewals += s.renewals[a.sp.ID]
	}
	if reconnects > renewals {
		b.Errorf("%d reconnects for %d credential renewals: reconnects the renewals do not explain (disconnect reasons %v)", reconnects, renewals, s.reasons)
	}
	if b.Failed() {
		return
	}

	memory := func(fn string) int {
		m, err := awscost.MemoryMB(spaces.Template, fn)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	// Lambda's own records of each invocation, at the template's level.
	logLevel := func(fn string) string {
		l, err := awscost.SystemLogLevel(spaces.Template, fn)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	ticks := float64(s.checks) / float64(n)
	// Per 1,000 agent spaces for a 30-day month.
	scale := 1000 / float64(n) * 30 / float64(days)
	perAgent := 30 / float64(days) / float64(n) // a count, per agent a month

	// The prober at 1,000 agent spaces: its messages as the scheduler
	// packs them, each an invocation, a receive and a delete, sent ten a
	// batch; its checks' duration as measured.
	msgs := ticks * math.Ceil(1000/float64(probing.MaxSpaces)) * 30 / float64(days)
	proberFn := awscost.Lambda{Invocations: msgs, Seconds: s.fns.prober.Seconds * scale, MemoryMB: memory("ProberFunction"), SystemLogLevel: logLevel("ProberFunction")}
	proberSQS := msgs*2 + math.Ceil(msgs/10)
	agentFn := s.fns.agent
	agentFn.MemoryMB, agentFn.SystemLogLevel = memory("AgentFunction"), logLevel("AgentFunction")
	presenceFn := awscost.Lambda{Invocations: s.fns.authorizer.Invocations + s.fns.presence.Invocations,
		Seconds: s.fns.authorizer.Seconds + s.fns.presence.Seconds, MemoryMB: memory("PresenceFunction"), SystemLogLevel: logLevel("PresenceFunction")}
	fleetCost := awscost.Price(u, []awscost.Lambda{agentFn, presenceFn}, 0).Scale(scale)
	proberCost := awscost.Price(awscost.Usage{SQSRequests: proberSQS}, []awscost.Lambda{proberFn}, 0)
	events := float64(s.ruleEvents)
	channel := awscost.Cost{
		SQS: 3 * events * awscost.PriceSQSRequest,
		IoT: iot.ConnectionMinutes*awscost.PriceIoTMinute + float64(iot.Messages)*awscost.PriceIoTMessage +
			events*(awscost.PriceIoTRule+awscost.PriceIoTAction),
	}.Scale(scale)
	total := fleetCost.Add(proberCost).Add(channel)
	lambdaCost := func(fns ...awscost.Lambda) awscost.Cost { return awscost.Price(awscost.Usage{}, fns, 0) }
	agentLambda := lambdaCost(agentFn).Scale(scale)
	presenceLambda := lambdaCost(presenceFn).Scale(scale)

	var sb strings.Builder
	fmt.Fprintf(&sb, "%d agents, %d simulated days in %s of real time; per agent a month (counted): %.1f connects (%.1f reconnects), %.1f credential renewals (%.1f KMS Sign), %.1f authorizer calls (%d refused; %d refreshes in all), %.1f lifecycle events to the queue, %.1f agent-function requests, %.0f connection minutes, %.1f IoT messages; disconnect reasons %v, prober checks %d\n",
		n, days, real.Round(time.Second), float64(accepted)*perAgent, float64(reconnects)*perAgent, float64(renewals)*perAgent,
		u.Requests["KMS Sign"]*perAgent, float64(iot.AuthorizerCalls)*perAgent, s.refused, s.swept.Refreshed,
		events*perAgent, agentFn.Invocations*perAgent, iot.ConnectionMinutes*perAgent, float64(iot.Messages)*perAgent, s.reasons, s.checks)
	for _, op := range u.Ops() {
		fmt.Fprintf(&sb, "  %-40s %9.0f requests  RRU %9.1f  WRU %9.1f  (%.2f a agent a month)\n", op, u.Requests[op], u.RRU[op], u.WRU[op], u.Requests[op]*perAgent)
	}
	per := func(l awscost.Lambda) float64 { return 1000 * l.Seconds / math.Max(1, l.Invocations) }
	fmt.Fprintf(&sb, "  billed ms per call: agent function %.2f, authorizer %.2f, lifecycle event %.2f, prober %.2f per check\n",
		per(agentFn), per(s.fns.authorizer), per(s.fns.presence), 1000*s.fns.prober.Seconds/math.Max(1, float64(s.checks)))
	fmt.Fprintf(&sb, "  $/month per 1,000 agent spaces: DynamoDB reads %.2f, writes %.2f; SQS %.2f (prober %.2f, presence queue %.2f); Lambda requests %.2f, duration %.2f (agent function %.2f, presence function %.2f, prober %.2f); IoT Core %.2f; KMS Sign %.2f; CloudWatch Logs %.2f (Lambda's records of each invocation at the template's SystemLogLevel, awscost.Lambda.PlatformBytes; the functions' own lines not counted) = %.2f (goal ≤ 15; the KMS key's $1 a month is the stack's)\n",
		total.Reads, total.Writes, total.SQS, proberCost.SQS, channel.SQS, total.LambdaRequests, total.LambdaDuration,
		agentLambda.Total(), presenceLambda.Total(), proberCost.LambdaRequests+proberCost.LambdaDuration, total.IoT, total.KMS, total.Logs, total.Total())
	b.Log(sb.String())

	unit := "usd/month/1000-agents"
	b.ReportMetric(total.Total(), unit)
	for _, it := range []struct {
		name string
		v    float64
	}{{"dynamodb-reads", total.Reads}, {"dynamodb-writes", total.Writes}, {"sqs", total.SQS},
		{"lambda-requests", total.LambdaRequests}, {"lambda-duration", total.LambdaDuration},
		{"iot-minutes", iot.ConnectionMinutes * awscost.PriceIoTMinute * scale},
		{"iot-messages", float64(iot.Messages) * awscost.PriceIoTMessage * scale},
		{"iot-rules", events * (awscost.PriceIoTRule + awscost.PriceIoTAction) * scale},
		{"kms-sign", total.KMS}, {"logs", total.Logs}} {
		b.ReportMetric(it.v, "usd-"+it.name+"/month/1000-agents")
	}
	b.ReportMetric(float64(reconnects)*perAgent, "reconnects/agent/month")
	b.ReportMetric(float64(iot.AuthorizerCalls)*perAgent, "authorizer-calls/agent/month")
	b.ReportMetric(u.Requests["KMS Sign"]*perAgent, "kms-signs/agent/month")
	b.ReportMetric(0, "ns/op")
}
