package probing_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/infra/staticminter"
	"spaces/infra/testcluster"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/kubeprobe"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/sqsqueue"
	"spaces/shared/wiring/parts"
)

// counter counts AWS calls by operation (X-Amz-Target).
type counter struct {
	base http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
	took map[string]time.Duration // from request to the answer's headers, by operation
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndex(op, "."); i >= 0 {
		op = op[i+1:]
	}
	start := time.Now()
	res, err := c.base.RoundTrip(r)
	c.mu.Lock()
	c.n[op]++
	c.took[op] += time.Since(start)
	c.mu.Unlock()
	return res, err
}

// mean is the mean time one call of op took.
func (c *counter) mean(op string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[op] == 0 {
		return 0
	}
	return c.took[op] / time.Duration(c.n[op])
}

func (c *counter) get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

func (c *counter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = map[string]int{}
	c.took = map[string]time.Duration{}
}

func countingEnv(b *testing.B) (*emulatortest.Env, aws.Config, *counter) {
	env := emulatortest.Start(b)
	cnt := &counter{base: &http.Transport{MaxIdleConnsPerHost: 256}, n: map[string]int{}, took: map[string]time.Duration{}}
	cfg := env.Config.Copy()
	cfg.HTTPClient = &http.Client{Transport: cnt}
	return env, cfg, cnt
}

// probeShard is the shard the store gives a space (dynamostore's
// probeShard, keys.go: FNV-1a 32-bit of the id, mod 16). Its two lowest
// bits are those of probing.Jitter's FNV-1a 64-bit hash, so a shard's
// spaces fall on 15 of the minute's 60 seconds: a page's spaces that share
// a delay, which the scheduler sends in one message, are 4 times as many as
// with shards independent of the delay.
func probeShard(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("%02d", h.Sum32()%16)
}

// seedIndex writes n probe-index entries (the attributes the index needs,
// the shard as the store sets it) with BatchWriteItem, 25 at a time.
// seedDigest is the probe digest of an active EKS space probed once.
func seedDigest(id string) string {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return space.DigestOf(space.Space{ID: id, Version: 2, Status: space.Active, Provider: space.AWS,
		CloudAccountID: "0b5d3c52-4d7e-4b0e-9a43-2f0d6c1e8a11", Connectivity: space.Direct,
		Config: space.Config{"clusterName": "cost-" + id[:4], "region": "us-east-1"},
		Probe:  space.Probe{LastProbeAt: &at, LastSuccessAt: &at, ServerVersion: &space.ServerVersion{GitVersion: "v1.31.4-eks-1", Platform: "linux/amd64"}}}).String()
}

func seedIndex(b *testing.B, db *dynamodb.Client, table string, n int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for start := 0; start < n; start += 25 {
		var reqs []types.WriteRequest
		for i := start; i < min(start+25, n); i++ {
			id := uuid.NewString()
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "ORG#bench"}, "sk": &types.AttributeValueMemberS{Value: "SPACE#" + id},
				"id": &types.AttributeValueMemberS{Value: id}, "org_id": &types.AttributeValueMemberS{Value: "bench"},
				"probe_shard": &types.AttributeValueMemberS{Value: probeShard(id)},
				// The digest of a probed EKS space, as its writes store it.
				"pd": &types.AttributeValueMemberS{Value: seedDigest(id)},
			}}})
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for len(reqs) > 0 {
				out, err := db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
				if err != nil {
					b.Error(err)
					return
				}
				reqs = out.UnprocessedItems[table]
			}
		})
	}
	wg.Wait()
}

// BenchmarkSchedulerFanOut fans out 10,000, 100,000 and 300,000 spaces
// from the probe index on the emulator to the probe queue: wall time per
// tick, the messages (up to probing.MaxSpaces spaces each) and
// SendMessageBatch calls against the ⌈messages/10⌉ minimum, index pages and
// DynamoDB Query calls, and the mean time of one Query page and of one
// SendMessageBatch as the emulator answered them (what a per-invocation
// capacity is computed from). The emulator's Query scans the whole table
// for every page, so 300,000 takes minutes.
func BenchmarkSchedulerFanOut(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 300_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchFanOut(b, n, false) })
		// The same read of the index with the messages counted but not
		// sent: the DynamoDB side alone.
		b.Run(fmt.Sprint(n)+"/index-only", func(b *testing.B) { benchFanOut(b, n, true) })
	}
}

type countQueue struct {
	mu sync.Mutex
	n  int
}

func (q *countQueue) Enqueue(_ context.Context, msgs []probing.Delayed) error {
	q.mu.Lock()
	q.n += len(msgs)
	q.mu.Unlock()
	return nil
}

func benchFanOut(b *testing.B, n int, indexOnly bool) {
	env, cfg, cnt := countingEnv(b)
	table := env.Name(b, "SpacesTable")
	seedIndex(b, awsclient.DynamoDB(env.Config, env.Endpoint), table, n)
	store := dynamostore.New(awsclient.DynamoDB(cfg, env.Endpoint), table)
	q := sqsqueue.New(awsclient.SQS(cfg, env.Endpoint), env.Resources["ProbeQueue"].URL)
	s := probing.NewScheduler(probing.Scheduler{Targets: store, Queue: parts.ProbeQueue{Q: q}, Metrics: &metrics.Emitter{Log: discardLogger()}, Log: discardLogger()})
	if indexOnly {
		s.Queue = &countQueue{}
	}
	cnt.reset()
	var last probing.FanOut
	ticks := 0
	for b.Loop() {
		out, err := s.Tick(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if out.Spaces != n {
			b.Fatalf("fanned out %d of %d", out.Spaces, n)
		}
		last = out
		ticks++
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(ticks), "ms/tick")
	b.ReportMetric(float64(cnt.get("SendMessageBatch"))/float64(ticks), "sqs-calls/tick")
	// A message names up to probing.MaxSpaces spaces of a page; a
	// SendMessageBatch carries up to 10 messages.
	b.ReportMetric(float64(last.Messages), "messages/tick")
	b.ReportMetric(math.Ceil(float64(last.Messages)/10), "sqs-min-calls")
	b.ReportMetric(float64(last.Pages), "index-pages/tick")
	b.ReportMetric(float64(cnt.get("Query"))/float64(ticks), "ddb-queries/tick")
	b.ReportMetric(float64(cnt.mean("Query").Microseconds())/1e3, "ms/query")
	if !indexOnly {
		b.ReportMetric(float64(cnt.mean("SendMessageBatch").Microseconds())/1e3, "ms/sqs-batch")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkProber1000Clusters handles probe messages for 1,000 spaces
// whose test clusters answer in 50 ms, ten batches of ten at a time (ten
// concurrent Lambda invocations), through the real store on the emulator.
// The fake clock moves one minute per sweep, so after the first sweep
// (unknown→active, written) the spaces are at steady state: it reports the
// DynamoDB calls per probe of the steady sweeps (writes are heartbeats,
// one per space per five sweeps) and the stored item's size. What probing
// costs is BenchmarkProbingCost's, on the production path.
func BenchmarkProber1000Clusters(b *testing.B) {
	const fleet = 1000
	env, cfg, cnt := countingEnv(b)
	table := env.Name(b, "SpacesTable")
	c := newClock()
	store := dynamostore.New(awsclient.DynamoDB(cfg, env.Endpoint), table, dynamostore.WithClock(c.Now))
	svc := &space.Service{Store: store, Now: c.Now, NewID: uuid.NewString}
	acct, err := svc.CreateAccount(b.Context(), "bench", space.NewAccountInput{Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		b.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1 // as a verification would
	if err := store.SaveAccount(b.Context(), acct); err != nil {
		b.Fatal(err)
	}
	ca, err := testcluster.NewCA()
	if err != nil {
		b.Fatal(err)
	}
	minter := &staticminter.Static{}
	var deliveries []probing.Delivery
	for i := range fleet {
		cl, err := testcluster.New(testcluster.WithCA(ca))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		cl.SetMode(testcluster.Slow(50 * time.Millisecond))
		s, _, err := svc.Register(b.Context(), "bench", space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
			CloudAccountID: acct.ID, Config: space.Config{"clusterName": fmt.Sprintf("c%d", i), "region": "us-east-1"}}, "")
		if err != nil {
			b.Fatal(err)
		}
		minter.Set(s.ID, cl.Credentials())
		deliveries = append(deliveries, probing.Delivery{MessageID: s.ID, Body: probing.Message{OrgID: "bench", ID: s.ID}.Encode(), ReceiveCount: 1})
	}
	checker := &kubeprobe.Prober{MaxTransports: 2 * fleet}
	b.Cleanup(checker.Close)
	p := probing.NewProber(probing.Prober{Store: store, Minter: minter, Checker: checker, Events: &events{}, Now: c.Now,
		Metrics: &metrics.Emitter{Log: discardLogger()}, Log: discardLogger()})
	var batchTimes []time.Duration
	var btMu sync.Mutex
	sweep := func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 10)
		for batch := range slices.Chunk(deliveries, 10) {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				start := time.Now()
				if failed := p.HandleBatch(context.Background(), batch); len(failed) > 0 {
					b.Errorf("failed: %v", failed)
				}
				btMu.Lock()
				batchTimes = append(batchTimes, time.Since(start))
				btMu.Unlock()
			})
		}
		wg.Wait()
		c.Advance(time.Minute)
	}
	sweep() // unknown → active
	cnt.reset()
	batchTimes = nil
	probes := 0
	for b.Loop() {
		sweep()
		probes += fleet
	}
	writes := cnt.get("UpdateItem") + cnt.get("TransactWriteItems")
	reads := cnt.get("GetItem")
	b.ReportMetric(float64(probes)/b.Elapsed().Seconds(), "probes/s")
	b.ReportMetric(float64(writes)/float64(probes), "ddb-writes/probe")
	b.ReportMetric(float64(reads)/float64(probes), "ddb-reads/probe")
	slices.Sort(batchTimes)
	p50 := batchTimes[len(batchTimes)/2]
	b.ReportMetric(float64(p50.Milliseconds()), "batch-p50-ms")
	b.ReportMetric(0, "ns/op")

	// Item size decides the write units of a heartbeat.
	item, err := awsclient.DynamoDB(env.Config, env.Endpoint).GetItem(b.Context(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "ORG#bench"}, "sk": &types.AttributeValueMemberS{Value: "SPACE#" + deliveries[0].MessageID}}})
	if err != nil {
		b.Fatal(err)
	}
	size := awscost.ItemBytes(item.Item)
	b.ReportMetric(float64(size), "space-item-bytes")
	b.Logf("space item %d bytes; batch p50 %s (what it costs: BenchmarkProbingCost)", size, p50)
}
