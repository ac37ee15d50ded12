package probing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/goformation/v7/intrinsics"

	"spaces"
	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/infra/lambdarules"
	"spaces/shared/awsclient"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// minutesPerMonth: the cost benchmarks' month, 30 days.
const minutesPerMonth = 30 * 24 * 60

// BenchmarkProbingCostAtScale prices probing per 1,000 spaces a month at
// 10³ and 10⁴ spaces (ESM_SIZES, comma-separated, overrides), and at 10⁶
// by extrapolation, with the event source's SQS requests counted as they
// are sent, and the stack's fixed costs apart.
//
//  1. What a probe costs apart from the event source: BenchmarkProbingCost's
//     "after" variant (template.yaml as it is: 1,000 spaces on a fake
//     clock, the production prober, minter and store, every request
//     metered, batches of up to BatchSize × MaxSpaces spaces, Lambda
//     duration measured on a prober instance held to Lambda's CPU share).
//     Its reads, writes, Lambda time, re-probes' sends and EventBridge are per space
//     probed and do not move with the fleet (BenchmarkGrowth: 1 read and
//     0.20 writes per probe at 10⁴, 10⁵ and 10⁶); the scheduler's sends
//     and the prober's invocations do (a message names more spaces in a
//     larger fleet), so they are taken from 2 at each size.
//  2. The event source, in real time, at each size: the probe index seeded
//     with that many spaces, the production scheduler (shared/wiring)
//     ticking every minute and sending each space's message with its
//     delay, and Lambda's event source mapping (lambdarules.Poller: five
//     pollers at least, 20-second long polls, the template's BatchSize and
//     MaximumBatchingWindowInSeconds, DeleteMessageBatch of what the
//     function acknowledged) delivering to a function that takes as long
//     per batch as the prober's Lambda instance took in 1 (its mean
//     duration at the priced memory size), and counts the spaces
//     its messages name: every figure is per space probed. Every request the
//     pollers send is counted by SDK middleware on their SQS client
//     (awscost.Meter), empty receives apart; the emulator answers a long
//     poll as soon as a delayed message becomes visible, as SQS does
//     (infra/emulator/kumo/patches/sqs-long-poll.patch). One minute of
//     warm-up (the first tick), then ESM_MINUTES (default 1) measured.
//  3. The same event source on an empty queue for a minute: what its idle
//     pollers cost a stack with no space.
//
// Fixed costs per stack, computed from the template and awscost's prices,
// not measured: the table's capacity minimums, as far as probing's load
// does not use them (provisioned capacity is the larger of the minimum and
// the load at the target use); every index's minimums whole (probing's
// only index load, the scheduler's Query of the probe index, is under 1 %
// of its reads and is priced with the table's); the alarms and the
// dashboard; the ProbeSchedules schedules and their scheduler invocations.
// The idle stack's figure adds the event source's idle polls (3).
func BenchmarkProbingCostAtScale(b *testing.B) {
	sizes := []int{1000, 10000}
	if s := os.Getenv("ESM_SIZES"); s != "" {
		sizes = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("ESM_SIZES: %q is not a fleet size", f)
			}
			sizes = append(sizes, n)
		}
	}
	minutes := 1
	if s := os.Getenv("ESM_MINUTES"); s != "" {
		var err error
		if minutes, err = strconv.Atoi(s); err != nil || minutes < 1 {
			b.Fatalf("ESM_MINUTES: %q", s)
		}
	}
	dep := readTemplate(b)
	fixed := readFixed(b)
	for b.Loop() {
		rest := measureProbingCost(b, dep, afterVariant(dep))
		idle := measureEventSource(b, 0, 1, rest.batchTime)
		var runs []esmRun
		for _, n := range sizes {
			runs = append(runs, measureEventSource(b, n, minutes, rest.batchTime))
		}
		report(b, dep, fixed, rest, idle, runs)
	}
	b.ReportMetric(0, "ns/op")
}

// esmRun is what the event source sent while a fleet of spaces was probed.
type esmRun struct {
	spaces, minutes int
	// esm: the pollers' requests; sends: the scheduler's.
	esm, sends awscost.Usage
	// handled: messages; probes: the spaces they named.
	handled, probes int64
	batches         int64
}

// measureEventSource runs the scheduler and the event source for a fleet
// of n spaces (0: an idle queue) in real time: a minute of warm-up (10 s
// when idle), then minutes measured.
func measureEventSource(b *testing.B, n, minutes int, batchTime time.Duration) esmRun {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := emulatortest.Start(b)
	table := env.Name(b, "SpacesTable")
	queue := env.Resources["ProbeQueue"]
	if n > 0 {
		seedIndex(b, awsclient.DynamoDB(env.Config, env.Endpoint), table, n)
	}
	log := discardLogger()
	sendMeter, esmMeter := awscost.New(), awscost.New()
	sched := wiring.Scheduler(parts.AWS{Config: sendMeter.Instrument(env.Config), Endpoint: env.Endpoint},
		wiring.SchedulerSettings{Table: table, ProbeQueue: queue.URL, Interval: space.DefaultProbeInterval}, log)
	fns, err := lambdarules.Read(spaces.Template)
	if err != nil {
		b.Fatal(err)
	}
	fn := fns.Get("ProberFunction")
	var handled, probes, batches atomic.Int64
	// The prober's place: every message acknowledged, each batch after
	// the prober's mean batch time.
	handler := func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
		time.Sleep(batchTime)
		n := 0
		for _, r := range ev.Records {
			m, err := probing.DecodeMessage(r.Body)
			if err != nil {
				b.Error(err)
				continue
			}
			n += len(m.Each())
		}
		handled.Add(int64(len(ev.Records)))
		probes.Add(int64(n))
		batches.Add(1)
		return lambdaevents.SQSEventResponse{}, nil
	}
	poller := &lambdarules.Poller{SQS: awsclient.SQS(esmMeter.Instrument(env.Config), env.Endpoint), QueueURL: queue.URL, QueueARN: queue.ARN,
		Function: &fn, Source: fn.Sources["Probes"], Pollers: lambdarules.MinPollers, Handler: handler, Log: log}
	var wg sync.WaitGroup
	wg.Go(func() { poller.Run(ctx) })
	if n > 0 {
		// EventBridge Scheduler's minute: each tick is its own invocation.
		wg.Go(func() {
			t := time.NewTicker(space.DefaultProbeInterval)
			defer t.Stop()
			for {
				wg.Go(func() {
					if _, err := sched.Tick(ctx); err != nil && ctx.Err() == nil {
						b.Error(err)
					}
				})
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
		time.Sleep(space.DefaultProbeInterval)
	} else {
		// Off the pollers' start, so that a minute holds three polls of each.
		time.Sleep(10 * time.Second)
	}
	sendMeter.Take()
	esmMeter.Take()
	handled.Store(0)
	probes.Store(0)
	batches.Store(0)
	time.Sleep(time.Duration(minutes) * time.Minute)
	run := esmRun{spaces: n, minutes: minutes, esm: esmMeter.Take(), sends: sendMeter.Take(), handled: handled.Load(), probes: probes.Load(), batches: batches.Load()}
	cancel()
	wg.Wait()
	return run
}

// fixedCosts are what the template fixes per stack, whatever the fleet.
type fixedCosts struct {
	// The table's own capacity minimums, which probing's load uses, and
	// the sum of its global secondary indexes' (indexes of them), which
	// it is not counted against: provisioned throughput is billed per
	// table and per index.
	tableRead, tableWrite float64
	indexRead, indexWrite float64
	indexes               int
	alarms, dashboards    int
	// optionalDashboards are dashboards a parameter leaves out by default
	// (CreateDashboard): priced apart, as the other side of that choice.
	optionalDashboards int
	// alarmMetrics: what CloudWatch bills alarms by, a metric a plain
	// alarm and every metric a metric-math alarm reads.
	alarmMetrics int
	schedules    float64 // ProbeSchedules
	// kmsKeys and secrets bill by the month; sqsSources are the SQS
	// event sources, each polling its queue whether or not it holds a
	// message.
	kmsKeys, secrets, sqsSources int
}

// readFixed reads the fixed costs from template.yaml's defaults: every
// DynamoDB table's ProvisionedThroughput and each of its indexes', whose
// numbers are the minimums auto scaling keeps (a Ref names a parameter).
func readFixed(b *testing.B) fixedCosts {
	js, err := intrinsics.ProcessYAML(spaces.Template, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		b.Fatal(err)
	}
	type throughput struct{ ReadCapacityUnits, WriteCapacityUnits any }
	var root struct {
		Parameters map[string]struct{ Default any }
		Conditions map[string]any
		Resources  map[string]struct {
			Type       string
			Condition  string
			Properties struct {
				Metrics                []struct{ MetricStat any }
				Events                 map[string]struct{ Type string }
				BillingMode            string
				ProvisionedThroughput  *throughput
				GlobalSecondaryIndexes []struct {
					IndexName             string
					ProvisionedThroughput *throughput
				}
			}
		}
	}
	if err := json.Unmarshal(js, &root); err != nil {
		b.Fatal(err)
	}
	value := func(v any) float64 {
		if ref, ok := v.(map[string]any); ok {
			v = root.Parameters[fmt.Sprint(ref["Ref"])].Default
		}
		n, err := strconv.ParseFloat(fmt.Sprint(v), 64)
		if err != nil {
			b.Fatalf("template capacity %v: %v", v, err)
		}
		return n
	}
	param := func(name string) float64 { return value(root.Parameters[name].Default) }
	// A condition at the parameters' defaults: the template's are
	// Fn::Equals of a Ref and a string, or Fn::Not of one.
	var holds func(c any) bool
	holds = func(c any) bool {
		m, _ := c.(map[string]any)
		if not, ok := m["Fn::Not"].([]any); ok && len(not) == 1 {
			return !holds(not[0])
		}
		eq, ok := m["Fn::Equals"].([]any)
		if !ok || len(eq) != 2 {
			b.Fatalf("condition %v: not Fn::Equals or Fn::Not", c)
		}
		side := func(v any) string {
			if ref, ok := v.(map[string]any); ok {
				return fmt.Sprint(root.Parameters[fmt.Sprint(ref["Ref"])].Default)
			}
			return fmt.Sprint(v)
		}
		return side(eq[0]) == side(eq[1])
	}
	f := fixedCosts{schedules: param("ProbeSchedules")}
	for name, r := range root.Resources {
		if r.Condition != "" && !holds(root.Conditions[r.Condition]) {
			if r.Type == "AWS::CloudWatch::Dashboard" {
				f.optionalDashboards++
			}
			continue
		}
		switch r.Type {
		case "AWS::CloudWatch::Alarm":
			f.alarms++
			n := 0
			for _, m := range r.Properties.Metrics {
				if m.MetricStat != nil {
					n++
				}
			}
			f.alarmMetrics += max(1, n)
		case "AWS::KMS::Key":
			f.kmsKeys++
		case "AWS::SecretsManager::Secret":
			f.secrets++
		case "AWS::Serverless::Function":
			for _, e := range r.Properties.Events {
				if e.Type == "SQS" {
					f.sqsSources++
				}
			}
		case "AWS::CloudWatch::Dashboard":
			f.dashboards++
		case "AWS::DynamoDB::Table":
			if r.Properties.BillingMode != "PROVISIONED" {
				continue
			}
			if r.Properties.ProvisionedThroughput == nil {
				b.Fatalf("%s: provisioned without ProvisionedThroughput", name)
			}
			f.tableRead += value(r.Properties.ProvisionedThroughput.ReadCapacityUnits)
			f.tableWrite += value(r.Properties.ProvisionedThroughput.WriteCapacityUnits)
			for _, ix := range r.Properties.GlobalSecondaryIndexes {
				if ix.ProvisionedThroughput == nil {
					b.Fatalf("%s: index %s has no ProvisionedThroughput", name, ix.IndexName)
				}
				f.indexRead += value(ix.ProvisionedThroughput.ReadCapacityUnits)
				f.indexWrite += value(ix.ProvisionedThroughput.WriteCapacityUnits)
				f.indexes++
			}
		}
	}
	return f
}

// report prints the table and reports the per-1,000 totals.
func report(b *testing.B, dep deployed, f fixedCosts, rest measured, idle esmRun, runs []esmRun) {
	var sb strings.Builder
	perMonth := func(r esmRun) float64 { return minutesPerMonth / float64(r.minutes) }
	idleCost := idle.esm.SQSRequests * perMonth(idle) * awscost.PriceSQSRequest
	fmt.Fprintf(&sb, "event source, idle (0 spaces, %d min): %.0f receives (%.0f empty), %.0f deletes: $%.2f a month per stack\n",
		idle.minutes, idle.esm.Requests["SQS ReceiveMessage"], idle.esm.EmptyReceives, idle.esm.Requests["SQS DeleteMessageBatch"], idleCost)
	// Per stack and month, whatever the fleet (computed from the template).
	capacity := func(units, price float64) float64 { return units * price * awscost.HoursPerMonth }
	readMin, writeMin := capacity(f.tableRead, awscost.PriceRCUHour), capacity(f.tableWrite, awscost.PriceWCUHour)
	indexMin := capacity(f.indexRead, awscost.PriceRCUHour) + capacity(f.indexWrite, awscost.PriceWCUHour)
	// The stack's standing items, whatever its fleet: alarms by their
	// metrics, the dashboard, the schedules' invocations, the keys and
	// the secret, and the idle polls of every SQS event source but the
	// probe queue's (measured with the fleet); and the custom metrics the
	// prober and scheduler published in the measured window, each a
	// metric-month (a fleet's reasons may add a few).
	alarms := float64(f.alarmMetrics) * awscost.PriceAlarmMonth
	schedules := f.schedules * minutesPerMonth * (awscost.PriceSchedulerInvoke + awscost.PriceLambdaRequest)
	keys := float64(f.kmsKeys)*awscost.PriceKMSKeyMonth + float64(f.secrets)*awscost.PriceSecretMonth
	otherPolls := float64(f.sqsSources-1) * idleCost
	custom := float64(rest.series) * awscost.PriceMetricMonth
	other := indexMin + alarms + float64(f.dashboards)*awscost.PriceDashboardMonth + schedules + keys + otherPolls + custom
	idleStack := readMin + writeMin + indexMin + alarms + float64(f.dashboards)*awscost.PriceDashboardMonth + schedules + keys +
		float64(f.sqsSources)*idleCost + float64(rest.idleSeries)*awscost.PriceMetricMonth
	fmt.Fprintf(&sb, "fixed per stack a month (computed from template.yaml's defaults and the idle polls measured): table minimums %.0f RCU $%.2f, %.0f WCU $%.2f; %d indexes' minimums %.0f RCU, %.0f WCU $%.2f; %d alarms of %d metrics $%.2f; %d dashboard $%.2f; %.0f schedules $%.2f; %d KMS keys and %d secret $%.2f; %d SQS event sources' idle polls $%.2f; custom metrics %d (%d with no space) $%.2f: $%.2f\n",
		f.tableRead, readMin, f.tableWrite, writeMin, f.indexes, f.indexRead, f.indexWrite, indexMin, f.alarms, f.alarmMetrics, alarms,
		f.dashboards, float64(f.dashboards)*awscost.PriceDashboardMonth, f.schedules, schedules, f.kmsKeys, f.secrets, keys,
		f.sqsSources, float64(f.sqsSources)*idleCost, rest.series, rest.idleSeries, custom, readMin+writeMin+other)
	fmt.Fprintf(&sb, "idle stack (0 spaces) a month: $%.2f; with the dashboard (CreateDashboard=true): $%.2f\n",
		idleStack, idleStack+float64(f.optionalDashboards)*awscost.PriceDashboardMonth)
	b.ReportMetric(idleStack, "usd/month-idle-stack")
	// Per 1,000 spaces a month, apart from the event source (measured at
	// 1,000): its scheduler sends and prober invocations are replaced by
	// those measured at each size, where messages name more spaces and
	// batches hold more (a month of 1,000 spaces: 1,000 probes a minute).
	perSpaceMonth := 1000.0 * minutesPerMonth
	scaleRest := perSpaceMonth / float64(rest.delivered)
	restSends := rest.schedulerSends * scaleRest * awscost.PriceSQSRequest
	restInvocations := rest.proberInvocations * scaleRest * awscost.PriceLambdaRequest
	ddbReads, ddbWrites := rest.cost.Reads, rest.cost.Writes
	nonDDB := rest.cost.Total() - ddbReads - ddbWrites - restSends - restInvocations
	// DynamoDB at a size: the steady window's writes are the beats, one a
	// shard with spaces a minute, whatever the fleet: a standing item of a
	// stack with spaces (none at 0: no shard beats), not a space's. Its
	// reads are the scheduler's index pages and the prober's fence, one a
	// message, which fall per space as pages and messages fill: measured
	// at each size below; the rest of them (the few GetItems) as at 1,000.
	beats := ddbWrites
	var restRRU float64
	for _, v := range rest.usage.RRU {
		restRRU += v
	}
	otherReads := ddbReads * (1 - rest.usage.RRU["DynamoDB Query"]/max(restRRU, 1))
	other += beats
	// The prober's log at a size: its beat lines are a stack's (a shard
	// a minute); its batch lines fall per space as batches fill (priced
	// by the batches a space at each size); the rest (a failure's or a
	// transition's line, Lambda's records) as at 1,000.
	logMonth := func(windowBytes float64) float64 {
		return windowBytes * minutesPerMonth / rest.window / 1e9 * awscost.PriceLogsGB
	}
	beatLogs := logMonth(rest.logBeatLines)
	batchLogs := logMonth(rest.logBatchLines) // per 1,000 a month at 1,000, batches of rest's size
	restBatchesPerProbe := rest.proberInvocations / float64(rest.delivered)
	otherLogs := rest.cost.Logs - beatLogs - batchLogs
	other += beatLogs
	logsAt := func(batches, probes float64) float64 {
		return otherLogs + batchLogs*(batches/max(probes, 1))/restBatchesPerProbe
	}
	fmt.Fprintf(&sb, "per 1,000 spaces a month without the event source (BenchmarkProbingCost after, %d spaces probed): %s; of it the scheduler's sends $%.2f and the prober's invocations $%.2f, replaced below by each size's\n",
		rest.delivered, rest.cost, restSends, restInvocations)

	// sizeOwn: the scheduler's sends and the prober's invocations at a size.
	// ddbReadsPer1000: the DynamoDB reads at this size, per 1,000 spaces
	// a month.
	line := func(label string, n float64, esmPer1000, emptyPer1000, sizeOwn, ddbReadsPer1000, logsPer1000 float64) float64 {
		k := n / 1000
		// Provisioned capacity is the larger of the minimum and the load.
		reads, writes := max(readMin, ddbReadsPer1000*k), max(writeMin, 0)
		fixedExcess := reads - ddbReadsPer1000*k + writes
		perSpace := nonDDB - rest.cost.Logs + logsPer1000 + sizeOwn + ddbReadsPer1000 + esmPer1000
		fixedAll := fixedExcess + other
		total := perSpace + fixedAll/k
		fmt.Fprintf(&sb, "  %-34s per-space $%6.2f (event source $%5.2f, of which empty receives $%.2f; scheduler sends and prober invocations $%.2f; DynamoDB reads $%.2f; Lambda duration, re-probe sends, EventBridge $%.2f; logs $%.2f) + fixed $%8.2f a stack (the beats' writes $%.2f, their log lines $%.2f) = $%7.2f per 1,000 a month\n",
			label, perSpace, esmPer1000, emptyPer1000, sizeOwn, ddbReadsPer1000, nonDDB-rest.cost.Logs, logsPer1000, fixedAll, beats, beatLogs, total)
		return total
	}
	readsAt := func(r esmRun) float64 {
		return (r.sends.RRU["DynamoDB Query"]+float64(r.handled))*perSpaceMonth/float64(max(1, r.probes))*awscost.PriceRRU + otherReads
	}
	var last esmRun
	for _, r := range runs {
		msgs, probes := float64(r.handled), float64(r.probes)
		rec, empty, del := r.esm.Requests["SQS ReceiveMessage"], r.esm.EmptyReceives, r.esm.Requests["SQS DeleteMessageBatch"]
		sends := r.sends.Requests["SQS SendMessageBatch"]
		fmt.Fprintf(&sb, "%d spaces, %d min measured: %d messages (%.2f spaces a message) in %d batches (%.1f messages, %.1f spaces a batch); receives %.0f (%.0f empty, %.2f messages a non-empty one), %.4f a message, %.4f a space; DeleteMessageBatch %.0f, %.4f a space; other SQS %.0f; scheduler SendMessageBatch %.0f, %.4f a space\n",
			r.spaces, r.minutes, r.handled, probes/max(1, msgs), r.batches, msgs/float64(max(1, r.batches)), probes/float64(max(1, r.batches)),
			rec, empty, r.esm.Received/max(1, rec-empty), rec/max(1, msgs), rec/max(1, probes), del, del/max(1, probes),
			r.esm.SQSRequests-rec-del, sends, sends/max(1, probes))
		// DynamoDB at this size: the scheduler's index pages (measured, its
		// Query units) and the fence, one strongly consistent read unit a
		// message of carried spaces (computed from the messages measured).
		fmt.Fprintf(&sb, "  DynamoDB at %d: the scheduler's index Query %.4f read units a space (%.0f units, %.0f queries); the fence at one unit a message %.4f a space (computed); together %.4f\n",
			r.spaces, r.sends.RRU["DynamoDB Query"]/max(1, probes), r.sends.RRU["DynamoDB Query"], r.sends.Requests["DynamoDB Query"],
			msgs/max(1, probes), (r.sends.RRU["DynamoDB Query"]+msgs)/max(1, probes))
		// Per space probed, for a month of 1,000 spaces.
		scale := perSpaceMonth / probes
		own := sends*scale*awscost.PriceSQSRequest + float64(r.batches)*scale*awscost.PriceLambdaRequest
		total := line(fmt.Sprintf("at %d (measured):", r.spaces), float64(r.spaces),
			r.esm.SQSRequests*scale*awscost.PriceSQSRequest, empty*scale*awscost.PriceSQSRequest, own, readsAt(r), logsAt(float64(r.batches), probes))
		b.ReportMetric(total, fmt.Sprintf("usd/month/1000-at-%d", r.spaces))
		// X-Ray, computed: the template traces every function actively, so
		// Lambda records the prober's invocations (and the scheduler's
		// ticks) by X-Ray's default rule.
		proberPerSecond := float64(r.batches) / (float64(r.minutes) * 60)
		schedPerSecond := f.schedules / 60
		// PassThrough: nothing recorded (the scheduler's invokes carry
		// no trace header, nor the probe messages an AWSTraceHeader).
		recorded := func(mode string, perSecond float64) float64 {
			if mode != "Active" {
				return 0
			}
			return awscost.XRaySampled(perSecond)
		}
		month := minutesPerMonth * 60 * awscost.PriceXRayTrace
		xray := (recorded(dep.proberTracing, proberPerSecond) + recorded(dep.schedulerTracing, schedPerSecond)) * month
		active := (awscost.XRaySampled(proberPerSecond) + awscost.XRaySampled(schedPerSecond)) * month
		fmt.Fprintf(&sb, "  X-Ray at %d (computed, not in the total above): prober %s (%.2f invocations a second), scheduler %s (%.3f a second): $%.2f a month, $%.2f per 1,000; both Active: $%.2f a month, $%.2f per 1,000\n",
			r.spaces, dep.proberTracing, proberPerSecond, dep.schedulerTracing, schedPerSecond, xray, xray/(float64(r.spaces)/1000), active, active/(float64(r.spaces)/1000))
		b.ReportMetric(xray/(float64(r.spaces)/1000), fmt.Sprintf("usd-xray/month/1000-at-%d", r.spaces))
		last = r
	}
	if last.spaces > 0 {
		// 10⁶: the largest measured size's requests per space (its pollers
		// found more messages per receive than smaller fleets', and its
		// pages more spaces per delay), and the fixed costs spread over
		// 1,000 thousands.
		scale := perSpaceMonth / float64(last.probes)
		own := last.sends.Requests["SQS SendMessageBatch"]*scale*awscost.PriceSQSRequest + float64(last.batches)*scale*awscost.PriceLambdaRequest
		total := line(fmt.Sprintf("at 1000000 (EXTRAPOLATED from %d):", last.spaces), 1e6,
			last.esm.SQSRequests*scale*awscost.PriceSQSRequest, 0, own, readsAt(last), logsAt(float64(last.batches), float64(last.probes)))
		b.ReportMetric(total, "usd/month/1000-at-1000000-extrapolated")
	}
	fmt.Println(sb.String())
}
