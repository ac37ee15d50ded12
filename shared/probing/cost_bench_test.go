package probing_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"

	"spaces"
	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/infra/minttest"
	"spaces/infra/simcloud"
	"spaces/infra/testclock"
	"spaces/infra/testcluster"
	"spaces/shared/awsclient"
	"spaces/shared/kubecred"
	"spaces/shared/kubeprobe"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// sqsMirror sends every probe message to the real queue on the emulator
// (counted) and keeps a copy due on the fake clock, which is what the
// benchmark delivers: the emulator holds delayed messages for real seconds,
// and the simulated minutes pass faster than that.
type sqsMirror struct {
	real probing.Queue
	*clockQueue
}

func (q sqsMirror) Enqueue(ctx context.Context, msgs []probing.Delayed) error {
	if err := q.real.Enqueue(ctx, msgs); err != nil {
		return err
	}
	return q.clockQueue.Enqueue(ctx, msgs)
}

// spacesIn is how many spaces a batch of deliveries names (a message names
// one or several, probing.MaxSpaces).
func spacesIn(b testing.TB, ds []probing.Delivery) int {
	n := 0
	for _, d := range ds {
		m, err := probing.DecodeMessage(d.Body)
		if err != nil {
			b.Fatal(err)
		}
		n += len(m.Each())
	}
	return n
}

// deployed is what template.yaml configures for the probing functions.
type deployed struct {
	proberMemoryMB, schedulerMemoryMB, batchSize int
	// window is the event source's MaximumBatchingWindowInSeconds.
	window time.Duration
	// provisioned: the table's BillingMode is PROVISIONED, its capacity
	// kept at target use (TableTargetUtilization, a fraction).
	provisioned bool
	target      float64
	// systemLogLevel is the functions' LoggingConfig.SystemLogLevel (at
	// WARN Lambda writes no record of a successful invocation).
	systemLogLevel string
	// proberTracing, schedulerTracing: the functions' X-Ray tracing modes
	// (Active: Lambda records X-Ray's default share of the invocations).
	proberTracing, schedulerTracing string
}

func readTemplate(b testing.TB) deployed {
	// A node tree: the template's tags (!Ref, !GetAtt) need no resolving
	// for the few plain numbers read here.
	var root yaml.Node
	if err := yaml.Unmarshal(spaces.Template, &root); err != nil {
		b.Fatal(err)
	}
	get := func(n *yaml.Node, path ...string) *yaml.Node {
		for _, key := range path {
			if n == nil {
				return nil
			}
			if n.Kind == yaml.DocumentNode {
				n = n.Content[0]
			}
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					next = n.Content[i+1]
				}
			}
			n = next
		}
		return n
	}
	num := func(n *yaml.Node, def int) int {
		if n == nil {
			return def
		}
		v, err := strconv.Atoi(n.Value)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	// A function's settings as awscost reads them (its own, else
	// Globals', a parameter's default for a Ref).
	of := func(read func([]byte, string) (string, error), fn string) string {
		v, err := read(spaces.Template, fn)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	memory := func(fn string) int {
		m, err := awscost.MemoryMB(spaces.Template, fn)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	d := deployed{
		proberMemoryMB: memory("ProberFunction"), schedulerMemoryMB: memory("SchedulerFunction"),
		systemLogLevel: of(awscost.SystemLogLevel, "ProberFunction"),
		proberTracing:  of(awscost.Tracing, "ProberFunction"), schedulerTracing: of(awscost.Tracing, "SchedulerFunction"),
		batchSize: num(get(&root, "Resources", "ProberFunction", "Properties", "Events", "Probes", "Properties", "BatchSize"), 0),
		window:    time.Duration(num(get(&root, "Resources", "ProberFunction", "Properties", "Events", "Probes", "Properties", "MaximumBatchingWindowInSeconds"), 0)) * time.Second,
	}
	if d.batchSize == 0 {
		b.Fatal("ProberFunction has no SQS BatchSize in template.yaml")
	}
	if n := get(&root, "Resources", "SpacesTable", "Properties", "BillingMode"); n != nil && n.Value == "PROVISIONED" {
		d.provisioned = true
		d.target = float64(num(get(&root, "Parameters", "TableTargetUtilization", "Default"), 0)) / 100
		if d.target <= 0 {
			b.Fatal("SpacesTable is provisioned but TableTargetUtilization has no default in template.yaml")
		}
	}
	return d
}

// BenchmarkProbingCost measures what probing costs a month per 1,000
// spaces, end to end on the production path: the scheduler and the prober
// built by shared/wiring (as the Lambdas build them), the production minter
// (mint.Minter: the account read, the EKS, GKE and AKS minters and their
// caches) against the simulated clouds, the real store, queue and event bus
// on the emulator, and TLS test clusters that answer GET /version in 50 ms
// and check every token with the simulated cloud. 1,000 spaces (a third per
// cloud, 1% of them on a cluster that is down) run for one simulated minute
// of warm-up and then a measured window of 10 (a multiple of the 5-minute
// heartbeat; every EKS token is re-minted once in it, see the clock below).
//
// Every AWS request is counted by SDK middleware (awscost.Meter) with the
// capacity units it consumes, and priced from awscost's price table. What
// Lambda's SQS event source does on the prober's behalf (its receives and
// deletes) is not in this figure: BenchmarkProbingCostAtScale counts the
// requests the event source really sends, in real time. Batches are
// formed here as one poller with the batching window would form them: a batch opens with the first message due, takes every message due
// before its window ends, and is invoked then, or as soon as it holds
// BatchSize messages — or, for a variant with spacesPerBatch, that many
// spaces: at 1,000 spaces a message names about 31 spaces (a shard's page
// holds about 62), where at 10,000 and more it names about 48, so
// "after" forms the batches of a fleet whose messages are full (BatchSize ×
// MaxSpaces spaces), and BenchmarkProbingCostAtScale takes the invocations
// and sends of each fleet size from what it measures there. The fake clock
// moves one second at a time; the scheduler ticks every minute, as
// EventBridge Scheduler would.
//
// Requests are counted in this process, as above; Lambda duration is not
// taken from it. Here the prober runs up to 10 batches at once on a
// machine's cores shared with the emulator, the simulated clouds (whose
// STS verifies every EKS token a test cluster checks) and the test
// clusters, so a batch's wall time is mostly their CPU; and on a free
// core it gets more CPU than Lambda gives a small function. So every batch
// invoked here, in order, is handed again at its fake time (the warm-up's
// too, to warm the minter's cache alike) to the prober as one Lambda
// instance: a process of its own (this test binary, TestMain's
// runProberInstance) building the prober as this one does, against the
// same table, queue, clouds and clusters, served through the Lambda
// runtime API (lambdart.Runtime) one invocation at a time, in a cgroup
// holding it to Lambda's CPU share for the memory size (lambdart.CPUShare:
// MemorySize / 1,769 of a CPU, taking one of this machine's cores for a
// Graviton vCPU). Lambda duration is each measured-window invocation's,
// from the event handed to the runtime to its response posted, billed to
// the millisecond at the memory size: PROBER_MEMORY_MB (comma-separated,
// the first priced) or the variant's. Both are printed, with the
// instance's CPU time a space (the cgroup's usage) and TLS handshakes a
// probe (the test clusters' connections: 21 backends serve 1,000 spaces,
// so connections are reused more than across real clusters;
// PROBER_MAX_TRANSPORTS=1 makes nearly every probe a handshake). The replay
// finds the store as the window left it: a healthy space's probe reads and
// writes the same; a down space's write (1 % of the fleet) may find its
// version moved on. Without a cgroup file system it can write (root), the
// benchmark fails and says so.
//
// DynamoDB is priced both ways: on demand (each unit), and as provisioned
// capacity kept at the template's target use (awscost.Cost.Provisioned),
// with the load's profile per simulated second to show it is steady.
//
// Variants, in one run: before (a baseline of one-space messages: batches
// of 20 messages in a 1-second window, probed 20 at once, 512 MB, the table
// on demand), and after (template.yaml as it is, priced by its billing
// mode, its batches of up to BatchSize × MaxSpaces spaces). Every figure is
// per space probed (a message names one or several).
func BenchmarkProbingCost(b *testing.B) {
	dep := readTemplate(b)
	variants := []costVariant{
		{name: "before", batchSize: 20, window: time.Second, memoryMB: 512, concurrency: 20},
		afterVariant(dep),
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				m := measureProbingCost(b, dep, v)
				c, onDemand := m.cost, m.onDemand
				b.ReportMetric(c.Total(), "usd/month/1000-spaces-excl-event-source")
				b.ReportMetric(onDemand.Total(), "usd-if-on-demand")
				b.ReportMetric(c.Reads, "usd-reads")
				b.ReportMetric(c.Writes, "usd-writes")
				b.ReportMetric(c.SQS, "usd-sqs")
				b.ReportMetric(c.LambdaRequests+c.LambdaDuration, "usd-lambda")
				b.ReportMetric(c.Logs, "usd-logs")
				b.ReportMetric(c.EventBridge, "usd-eventbridge")
				for _, in := range m.instances {
					b.ReportMetric(in.lambda.GBSeconds()*awscost.PriceLambdaGBSecond*m.durationScale, fmt.Sprintf("usd-duration-at-%dMB", in.memoryMB))
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// afterVariant is template.yaml as it is, with batches of up to BatchSize
// full messages' spaces (see BenchmarkProbingCost).
func afterVariant(dep deployed) costVariant {
	return costVariant{name: "after", batchSize: dep.batchSize, window: dep.window, memoryMB: dep.proberMemoryMB,
		provisioned: dep.provisioned, spacesPerBatch: dep.batchSize * probing.MaxSpaces}
}

// costVariant is one configuration of the prober measured by
// BenchmarkProbingCost.
type costVariant struct {
	name      string
	batchSize int
	window    time.Duration
	memoryMB  int
	// concurrency overrides the prober's (0: its default).
	concurrency int
	// provisioned prices the table as provisioned capacity (else on demand).
	provisioned bool
	// spacesPerBatch closes a batch at this many spaces instead of
	// batchSize messages (0: by messages).
	spacesPerBatch int
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measured is what measureProbingCost measured.
type measured struct {
	// cost and onDemand: per 1,000 spaces per month, without the event
	// source's requests; cost priced by the variant's billing mode.
	cost, onDemand awscost.Cost
	// usage of the window, the spaces (probes) handled in it and their
	// batches' mean wall time.
	usage     awscost.Usage
	delivered int
	batchTime time.Duration
	// The window's scheduler SendMessageBatch calls and prober
	// invocations: BenchmarkProbingCostAtScale replaces them with those it
	// measures at each fleet size.
	schedulerSends, proberInvocations float64
	// spaceMinutes is the window's size: spaces × minutes.
	spaceMinutes float64
	// series: the custom metrics the prober and the scheduler published
	// in the window; idleSeries: the scheduler's, which it publishes
	// every tick with or without spaces.
	series, idleSeries int
	// instances: the prober's Lambda instance at each memory size, the
	// first priced; durationScale turns the window into a month of 1,000
	// spaces.
	instances     []instanceRun
	durationScale float64
	// The prober's log in the window, in bytes: its batch metric lines
	// ("probes", a batch and reason) and its beat lines (a shard a
	// minute, whatever the fleet); window is the window's minutes.
	logBatchLines, logBeatLines, window float64
}

func measureProbingCost(b *testing.B, dep deployed, v costVariant) measured {
	const (
		fleet    = 1000
		backends = 20 // healthy test clusters behind the 990 healthy spaces
		down     = 10 // spaces whose cluster is down
		warmUp   = time.Minute
		window   = 10 * time.Minute
		latency  = 50 * time.Millisecond
	)
	ctx := context.Background()
	env := emulatortest.Start(b)
	meter := awscost.New()
	// Space items pass 1 KB: their writes are sized by DynamoDB's rule.
	meter.SizeWith(awsclient.DynamoDB(env.Config, env.Endpoint))
	a := parts.AWS{Config: meter.Instrument(env.Config), Endpoint: env.Endpoint}
	table := env.Name(b, "SpacesTable")
	store := a.Store(table)
	// The simulated clouds keep real time (tokens, presigned URLs); the
	// minter's cache reads the fake clock, which starts 4 minutes ahead of
	// real time, so that every EKS token (15 minutes, minted in the
	// warm-up) is re-minted once in the window, as it would be in any 14
	// minutes.
	c := testclock.New(time.Now().UTC().Truncate(time.Second).Add(4 * time.Minute))
	sc := simcloud.StartForTest(b, simcloud.Options{})
	minter := sc.Minter(store)
	minter.Now = c.Now

	org := "org-" + uuid.NewString()[:8]
	svc := &space.Service{Store: store, Now: c.Now, NewID: uuid.NewString, StaleAfter: space.DefaultStaleAfter,
		Verifier: minter, Trust: minter.Trust}
	accounts := map[space.Provider]space.CloudAccount{}
	for p, conn := range map[space.Provider]map[string]string{
		space.AWS:   {"roleArn": minttest.RoleARN},
		space.GCP:   {"projectId": minttest.GCPProject, "serviceAccountEmail": minttest.ServiceAcct},
		space.Azure: {"tenantId": minttest.TenantID, "clientId": minttest.ClientID, "subscriptionId": minttest.Subscription},
	} {
		acct, err := svc.CreateAccount(ctx, org, space.NewAccountInput{Provider: p, Name: string(p), Connection: conn})
		if err != nil {
			b.Fatal(err)
		}
		// The customer applies the setup; the account is then verified.
		if err := sc.ApplySetup(acct); err != nil {
			b.Fatal(err)
		}
		if acct, err = svc.VerifyAccount(ctx, org, acct.ID); err != nil || !acct.Ready() {
			b.Fatalf("verify %s account: %v (%s)", p, err, acct.Status)
		}
		accounts[p] = acct
	}
	ca, err := testcluster.NewCA()
	if err != nil {
		b.Fatal(err)
	}
	var healthy []*testcluster.Cluster
	for range backends {
		cl := testcluster.NewForTest(b, testcluster.WithCA(ca), testcluster.WithTokenCheck(sc.TokenCheck("bench")))
		cl.SetMode(testcluster.Slow(latency))
		healthy = append(healthy, cl)
	}
	dead := testcluster.NewForTest(b, testcluster.WithCA(ca), testcluster.WithTokenCheck(sc.TokenCheck("bench-down")))
	dead.SetMode(testcluster.Down())

	// accepted is the test clusters' connections so far: a TLS handshake
	// each.
	accepted := func() int {
		n := dead.Accepted()
		for _, cl := range healthy {
			n += cl.Accepted()
		}
		return n
	}

	var reg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range fleet {
		p := space.Providers[i%len(space.Providers)]
		name := fmt.Sprintf("cost-%04d", i)
		backing, key := healthy[i%backends], "bench"
		if i%(fleet/down) == 0 {
			backing, key = dead, "bench-down"
		}
		cl := minttest.Cluster(p, name, backing.URL(), backing.CAPEM())
		cl.Backend = key
		sc.AddCluster(cl)
		sem <- struct{}{}
		reg.Go(func() {
			defer func() { <-sem }()
			if _, _, err := svc.Register(ctx, org, space.RegisterInput{Provider: p, SpaceType: space.TypeKubernetes,
				CloudAccountID: accounts[p].ID, Config: minttest.Config(p, name)}, ""); err != nil {
				b.Error(err)
			}
		})
	}
	reg.Wait()
	if b.Failed() {
		b.FailNow()
	}

	// Each function's log counted apart: CloudWatch Logs bills what they
	// write, their EMF metric lines included.
	log, proberLog := countingLogger()
	schedLog, schedulerLog := countingLogger()
	quiet := &metrics.Emitter{Log: log, Now: c.Now}
	queueURL := env.Resources["ProbeQueue"].URL
	checker := &kubeprobe.Prober{MaxTransports: 4 * (backends + 1)}
	b.Cleanup(checker.Close)
	p := wiring.Prober(a, wiring.ProberSettings{
		Common:     parts.Common{Table: table, StaleAfter: space.DefaultStaleAfter},
		ProbeQueue: queueURL, EventBus: env.Name(b, "EventBus"),
		Interval: space.DefaultProbeInterval,
	}, kubecred.Minter(minter), checker, log)
	if v.concurrency > 0 {
		p.Concurrency = v.concurrency
	}
	// PROBE_TIMEOUT (a duration) raises the prober's timeout of a mint
	// and of a GET /version (and kubeprobe's own) for a machine so loaded that a 50 ms answer
	// times out: its timeouts are the machine's, not a cluster's change,
	// and would turn a measurement of the steady state into one of
	// failures (their writes, re-probes and reads).
	if s := os.Getenv("PROBE_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.Fatalf("PROBE_TIMEOUT: %q", s)
		}
		p.Timeout, checker.Timeout = d, d
	}
	q := sqsMirror{real: p.Queue, clockQueue: &clockQueue{clock: c}}
	p.Now, p.Queue, p.Metrics = c.Now, q, quiet
	// The scheduler's sends counted apart (also in meter's usage).
	schedMeter := awscost.New()
	sa := parts.AWS{Config: schedMeter.Instrument(a.Config), Endpoint: env.Endpoint}
	s := wiring.Scheduler(sa, wiring.SchedulerSettings{Table: table, ProbeQueue: queueURL, Interval: space.DefaultProbeInterval}, schedLog)
	sq := sqsMirror{real: s.Queue, clockQueue: q.clockQueue}
	s.Now, s.Queue, s.Metrics = c.Now, sq, &metrics.Emitter{Log: schedLog, Now: c.Now}

	var (
		mu               sync.Mutex
		prober, schedler awscost.Lambda
		delivered        int
		batchTimes       []time.Duration
	)
	billed := func(d time.Duration) float64 { return math.Ceil(float64(d)/float64(time.Millisecond)) / 1000 }
	// Every batch invoked, in order, with its time: what the prober's
	// Lambda instance is handed afterwards (replayInstance).
	var (
		recorded []timedBatch
		profile  bool // in the measured window
	)
	invoke := func(batches [][]probing.Delivery) {
		var wg sync.WaitGroup
		conc := make(chan struct{}, 10)
		for _, batch := range batches {
			recorded = append(recorded, timedBatch{at: c.Now(), batch: batch, measured: profile})
			conc <- struct{}{}
			wg.Go(func() {
				defer func() { <-conc }()
				start := time.Now()
				if failed := p.HandleBatch(ctx, batch); len(failed) > 0 {
					b.Errorf("batch items failed: %v", failed)
				}
				d := time.Since(start)
				mu.Lock()
				prober.Invocations++
				prober.Seconds += billed(d)
				delivered += spacesIn(b, batch)
				batchTimes = append(batchTimes, d)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	// The batch being gathered and when its window opened: the messages due
	// in [openedAt, openedAt + window) are invoked together at the last
	// second of the window (up to a second before Lambda would).
	var (
		open     []probing.Delivery
		openedAt time.Time
		// The table's units of each simulated second of the window.
		lastRRU, lastWRU float64
		rruSec, wruSec   []float64
	)
	// full is how many of the open messages make a full batch (0: not
	// full yet).
	full := func(open []probing.Delivery) int {
		if v.spacesPerBatch == 0 {
			if len(open) >= v.batchSize {
				return v.batchSize
			}
			return 0
		}
		n, spaces := 0, 0
		for n < len(open) && spaces+spacesIn(b, open[n:n+1]) <= v.spacesPerBatch {
			spaces += spacesIn(b, open[n:n+1])
			n++
		}
		if n == len(open) && spaces < v.spacesPerBatch {
			return 0 // room for more
		}
		return n
	}
	nextTick := c.Now()
	run := func(end time.Time) {
		for now := c.Now(); now.Before(end); now = c.Now() {
			if !now.Before(nextTick) {
				start := time.Now()
				if _, err := s.Tick(ctx); err != nil {
					b.Fatal(err)
				}
				schedler.Invocations++
				schedler.Seconds += billed(time.Since(start))
				nextTick = nextTick.Add(space.DefaultProbeInterval)
			}
			for {
				if ds := q.due(); len(ds) > 0 {
					if len(open) == 0 {
						openedAt = now
					}
					open = append(open, ds...)
				}
				var batches [][]probing.Delivery
				for n := full(open); n > 0; n = full(open) {
					batches = append(batches, slices.Clone(open[:n]))
					open = open[n:]
					openedAt = now
				}
				if len(open) > 0 && !now.Before(openedAt.Add(v.window-time.Second)) {
					batches = append(batches, open)
					open = nil
				}
				if len(batches) == 0 {
					break
				}
				invoke(batches)
			}
			if profile {
				rru, wru := meter.Units()
				rruSec, wruSec = append(rruSec, rru-lastRRU), append(wruSec, wru-lastWRU)
				lastRRU, lastWRU = rru, wru
			}
			c.Advance(time.Second)
		}
	}
	run(c.Now().Add(warmUp))
	meter.Take()
	schedMeter.Take()
	prober, schedler, delivered, batchTimes = awscost.Lambda{}, awscost.Lambda{}, 0, nil
	proberLog.Reset()
	schedulerLog.Reset()
	cpu0, wall0, accepted0 := cpuTime(b), time.Now(), accepted()
	profile = true
	run(c.Now().Add(window))
	cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
	handshakes := accepted() - accepted0
	u := meter.Take()
	schedulerSends := schedMeter.Take().Requests["SQS SendMessageBatch"]
	prober.MemoryMB, schedler.MemoryMB = v.memoryMB, dep.schedulerMemoryMB

	// The prober's Lambda duration: the same batches, at the same times,
	// handed to the prober as one Lambda instance at each memory size.
	cfg := instanceConfig{Endpoint: env.Endpoint, Table: table, Queue: queueURL, Bus: env.Name(b, "EventBus"), Cloud: sc.Endpoints,
		MaxTransports: checker.MaxTransports, Concurrency: v.concurrency}
	if os.Getenv("PROBE_TIMEOUT") != "" {
		cfg.Timeout = p.Timeout
	}
	// PROBER_MAX_TRANSPORTS bounds the instance's connection pools (one a
	// cluster): 1 makes nearly every probe a new TLS handshake, as a fleet
	// of one cluster a space would, where 21 backends let the instance
	// reuse its connections.
	if s := os.Getenv("PROBER_MAX_TRANSPORTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("PROBER_MAX_TRANSPORTS: %q", s)
		}
		cfg.MaxTransports = n
	}
	var instances []instanceRun
	for _, mb := range instanceSizes(b, v.memoryMB) {
		instances = append(instances, replayInstance(b, cfg, mb, recorded, accepted, billed))
	}
	inProcess := prober
	prober = instances[0].lambda
	// Its log: the lines this process's prober wrote for those batches.
	prober.LogBytes, schedler.LogBytes = float64(proberLog.bytes.Load()), float64(schedulerLog.bytes.Load())
	prober.SystemLogLevel, schedler.SystemLogLevel = dep.systemLogLevel, dep.systemLogLevel

	maxItem, which := maxItemBytes(b, awsclient.DynamoDB(env.Config, env.Endpoint), table)
	// Scale the window to 30 days of 1,000 spaces.
	spaceMinutes := float64(fleet) * window.Minutes()
	scale := 1000 * 30 * 24 * 60 / spaceMinutes
	onDemand := awscost.Price(u, []awscost.Lambda{prober, schedler}, schedler.Invocations).Scale(scale)
	target := dep.target
	if target == 0 {
		target = 0.7 // Application Auto Scaling's usual target, for the comparison
	}
	provisioned := awscost.Price(u, []awscost.Lambda{prober, schedler}, schedler.Invocations).Provisioned(u, target).Scale(scale)
	cost := onDemand
	if v.provisioned {
		cost = provisioned
	}

	var sb strings.Builder
	batching := fmt.Sprintf("batch size %d messages", v.batchSize)
	if v.spacesPerBatch > 0 {
		batching = fmt.Sprintf("batches of up to %d spaces", v.spacesPerBatch)
	}
	fmt.Fprintf(&sb, "%s: %d spaces, %s measured, %d spaces handled in %v batches (%s, window %s, %d MB, table provisioned %t, probe timeout %s)\n",
		v.name, fleet, window, delivered, prober.Invocations, batching, v.window, v.memoryMB, v.provisioned, p.Timeout)
	perProbe := func(v float64) float64 { return v / float64(delivered) }
	for _, op := range u.Ops() {
		fmt.Fprintf(&sb, "  %-58s %8.0f requests  %.4f/space  RRU %.4f/space  WRU %.4f/space\n",
			op, u.Requests[op], perProbe(u.Requests[op]), perProbe(u.RRU[op]), perProbe(u.WRU[op]))
	}
	fmt.Fprintf(&sb, "  of the SendMessageBatch, the scheduler's: %.0f, %.4f/space\n", schedulerSends, perProbe(schedulerSends))
	fmt.Fprintf(&sb, "  EventBridge events put: %.0f; prober Lambda: %.3f s per invocation, %.4f GB-s per space; scheduler: %.3f s per tick\n",
		u.Events, prober.Seconds/prober.Invocations, prober.GBSeconds()/float64(delivered), schedler.Seconds/schedler.Invocations)
	fmt.Fprintf(&sb, "  logs: the prober's lines %.0f bytes a space, Lambda's records %.0f bytes a space (SystemLogLevel %q; estimated, awscost.PlatformLogBytes an invocation at INFO: %.0f bytes a space); the scheduler's lines %.0f bytes a tick\n",
		perProbe(prober.LogBytes), perProbe(prober.PlatformBytes()), dep.systemLogLevel, perProbe(prober.Invocations*awscost.PlatformLogBytes), schedler.LogBytes/schedler.Invocations)
	fmt.Fprintf(&sb, "  in this process (10 batches at once, sharing 2 cores with the emulator, the simulated clouds and the test clusters; not what Lambda bills): batch wall time p50 %s, max %s; %.4f GB-s per space at %d MB; TLS handshakes a probe %.4f; spaces per batch %.1f\n",
		percentile(batchTimes, .5), percentile(batchTimes, 1), inProcess.GBSeconds()/float64(delivered), inProcess.MemoryMB,
		float64(handshakes)/float64(delivered), float64(delivered)/inProcess.Invocations)
	scaleDuration := 1000 * 30 * 24 * 60 / (float64(fleet) * window.Minutes())
	for i, in := range instances {
		priced := ""
		if i == 0 {
			priced = " (priced)"
		}
		fmt.Fprintf(&sb, "  one Lambda instance at %d MB%s (%.3f vCPU by cgroup, one invocation at a time): duration p50 %s, mean %s, max %s; %.4f GB-s per space, $%.2f per 1,000 spaces a month; CPU %.2f ms per space (%d periods throttled); TLS handshakes a probe %.4f (the test clusters are %d backends: real clusters would need more); %d items failed\n",
			in.memoryMB, priced, in.vcpus, percentile(in.durations, .5), in.mean(), percentile(in.durations, 1),
			in.lambda.GBSeconds()/float64(in.probes), in.lambda.GBSeconds()*awscost.PriceLambdaGBSecond*scaleDuration,
			float64(in.cpu.Microseconds())/1000/float64(in.probes), in.throttled, float64(in.handshakes)/float64(in.probes), backends+1, in.failed)
	}
	// The whole process (emulator, simulated clouds, test clusters, the
	// scheduler and the prober) shares this CPU time: an upper bound on
	// the prober's own.
	fmt.Fprintf(&sb, "  process CPU %.1f s in %.1f s of wall time (%.2f cores): %.2f ms per space (upper bound of the prober's)\n",
		cpu.Seconds(), wall.Seconds(), cpu.Seconds()/wall.Seconds(), float64(cpu.Microseconds())/1000/float64(delivered))
	fmt.Fprintf(&sb, "  largest item: %d bytes (%s)\n", maxItem, which)
	// What provisioned capacity must carry: the mean, and how far the
	// busiest seconds rise above it (a second above the capacity spends
	// burst credit; minutes above it make auto scaling add capacity).
	load := func(name string, secs []float64) {
		mean := 0.0
		for _, x := range secs {
			mean += x
		}
		mean /= float64(max(1, len(secs)))
		// Auto scaling watches minutes: the busiest one's rate.
		busiest := 0.0
		for i := 0; i+60 <= len(secs); i += 60 {
			m := 0.0
			for _, x := range secs[i : i+60] {
				m += x
			}
			busiest = max(busiest, m/60)
		}
		capacity := mean / target
		fmt.Fprintf(&sb, "  table %s per second: mean %.2f, busiest minute %.2f (%.2f× capacity), p99 second %.0f, max second %.0f (%.2f× capacity); capacity at %.0f %% use %.2f\n",
			name, mean, busiest, busiest/capacity, quantile(secs, .99), quantile(secs, 1), quantile(secs, 1)/capacity, 100*target, capacity)
	}
	load("read units", rruSec)
	load("write units", wruSec)
	fmt.Fprintf(&sb, "  per 1,000 spaces per month, on demand (without the event source's receives and deletes): %s\n", onDemand)
	fmt.Fprintf(&sb, "  per 1,000 spaces per month, provisioned at %.0f %% (without the event source's receives and deletes): %s", 100*target, provisioned)
	// Printed, not logged: the testing package keeps only ten lines of a
	// benchmark's log.
	fmt.Println(sb.String())
	return measured{cost: cost, onDemand: onDemand, usage: u, delivered: delivered, batchTime: instances[0].mean(), spaceMinutes: spaceMinutes,
		schedulerSends: schedulerSends, proberInvocations: prober.Invocations, instances: instances, durationScale: scaleDuration,
		series: proberLog.Series() + schedulerLog.Series(), idleSeries: schedulerLog.Series(),
		logBatchLines: proberLog.Bytes("probes"), logBeatLines: proberLog.Bytes("beat"), window: window.Minutes()}
}

// quantile is the p-quantile of xs.
func quantile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// maxItemBytes scans the table for its largest item.
func maxItemBytes(b *testing.B, db *dynamodb.Client, table string) (int, string) {
	largest, which := 0, ""
	in := &dynamodb.ScanInput{TableName: aws.String(table)}
	for {
		out, err := db.Scan(context.Background(), in)
		if err != nil {
			b.Fatal(err)
		}
		for _, it := range out.Items {
			if n := awscost.ItemBytes(it); n > largest {
				largest, which = n, keyText(it)
			}
		}
		if out.LastEvaluatedKey == nil {
			return largest, which
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// keyText is an item's keys, to name it.
func keyText(it map[string]types.AttributeValue) string {
	var ks []string
	for _, k := range []string{"pk", "sk"} {
		if v, ok := it[k].(*types.AttributeValueMemberS); ok {
			ks = append(ks, v.Value)
		}
	}
	return strings.Join(ks, " ")
}

// percentile is the p-quantile of ds, to the millisecond.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))].Round(time.Millisecond)
}
