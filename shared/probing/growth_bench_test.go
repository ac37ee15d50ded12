package probing_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

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

// growthRow is what one fleet size measured.
type growthRow struct {
	n                           int
	seed                        time.Duration
	heapMB                      float64 // process heap in use after seeding (emulator included)
	shardTime                   time.Duration
	shardPages, shardSQS        int
	shardAllocMB                float64
	tickTime                    time.Duration
	tickPages, tickSQS          int
	tickAllocMB, tickPeakMB     float64
	indexOnly                   time.Duration
	msPerPage                   float64
	probesPerSec, readsPerProbe float64
	writesPerProbe              float64
	listFirst, listDeep         time.Duration
	orgSize                     int
}

// BenchmarkGrowth measures every per-minute and per-request path at 10⁴,
// 10⁵ and, with GROWTH_SIZES=10000,100000,1000000, 10⁶ spaces in one run,
// and prints each figure with its ratio per 10× growth:
//   - the scheduler's fan-out: one shard alone (time, index pages,
//     SendMessageBatch calls, bytes allocated) and one tick of all 16
//     shards in parallel (the same, plus the heap's peak over its level
//     before the tick), and the index alone (messages counted, not sent);
//   - one index page's time as the emulator answers it;
//   - the prober: 1,000 of the fleet's spaces probed against a test cluster
//     answering in 50 ms, batches of 10, 10 at a time; probes/s and
//     DynamoDB reads and writes per probe over two sweeps after a warm-up;
//   - the store's ListSpaces (what GET /spaces calls): the first page of
//     100 and a deep page (the last of the org) for an org of
//     min(fleet, 100,000) spaces, the rest of the fleet in orgs of 1,000.
//
// The fleet is cloned with BatchWriteItem from one space registered through
// the store (its item and its claim), so every item is what the store
// writes. The emulator runs in the process: memory and allocation figures
// are the process's (scheduler and emulator together).
func BenchmarkGrowth(b *testing.B) {
	// 10⁶ only when asked (GROWTH_SIZES=10000,100000,1000000): it takes
	// 20 minutes and 8 GB on a 2-core machine, too much for make bench.
	sizes := []int{10_000, 100_000}
	if s := os.Getenv("GROWTH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	var rows []growthRow
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				r := growth(b, n)
				rows = append(rows, r)
				// Each size as soon as measured: a long run keeps what it got.
				fmt.Printf("growth %d: %+v\n", n, r)
			}
		})
	}
	if len(rows) == 0 {
		return
	}
	var sb strings.Builder
	ratio := func(i int, f func(growthRow) float64) string {
		if i == 0 || f(rows[i-1]) <= 0 {
			return ""
		}
		return fmt.Sprintf(" (×%.2f)", f(rows[i])/f(rows[i-1]))
	}
	line := func(name string, f func(growthRow) float64, format string) {
		fmt.Fprintf(&sb, "| %s |", name)
		for i, r := range rows {
			if f(r) < 0 {
				sb.WriteString(" not sent |")
				continue
			}
			fmt.Fprintf(&sb, " "+format+"%s |", f(r), ratio(i, f))
		}
		sb.WriteString("\n")
	}
	sb.WriteString("| spaces |")
	for _, r := range rows {
		fmt.Fprintf(&sb, " %d |", r.n)
	}
	sb.WriteString("\n|---|" + strings.Repeat("---|", len(rows)) + "\n")
	sec := func(d func(growthRow) time.Duration) func(growthRow) float64 {
		return func(r growthRow) float64 { return d(r).Seconds() }
	}
	line("seeding (s)", sec(func(r growthRow) time.Duration { return r.seed }), "%.1f")
	line("process heap after seeding (MB)", func(r growthRow) float64 { return r.heapMB }, "%.0f")
	line("one shard: time (s)", sec(func(r growthRow) time.Duration { return r.shardTime }), "%.2f")
	line("one shard: index pages", func(r growthRow) float64 { return float64(r.shardPages) }, "%.0f")
	line("one shard: SendMessageBatch calls", func(r growthRow) float64 { return float64(r.shardSQS) }, "%.0f")
	line("one shard: allocated (MB)", func(r growthRow) float64 { return r.shardAllocMB }, "%.1f")
	line("16 shards: time (s)", sec(func(r growthRow) time.Duration { return r.tickTime }), "%.2f")
	line("16 shards: index pages", func(r growthRow) float64 { return float64(r.tickPages) }, "%.0f")
	line("16 shards: SendMessageBatch calls", func(r growthRow) float64 { return float64(r.tickSQS) }, "%.0f")
	line("16 shards: allocated (MB)", func(r growthRow) float64 { return r.tickAllocMB }, "%.1f")
	line("16 shards: heap peak over before (MB)", func(r growthRow) float64 { return r.tickPeakMB }, "%.1f")
	line("16 shards, index only: time (s)", sec(func(r growthRow) time.Duration { return r.indexOnly }), "%.2f")
	line("ms per index page (1,000 entries)", func(r growthRow) float64 { return r.msPerPage }, "%.2f")
	line("prober: probes/s", func(r growthRow) float64 { return r.probesPerSec }, "%.0f")
	line("prober: reads per probe", func(r growthRow) float64 { return r.readsPerProbe }, "%.3f")
	line("prober: writes per probe", func(r growthRow) float64 { return r.writesPerProbe }, "%.3f")
	line("org size listed", func(r growthRow) float64 { return float64(r.orgSize) }, "%.0f")
	line("ListSpaces first page of 100 (ms)", func(r growthRow) float64 { return float64(r.listFirst.Microseconds()) / 1e3 }, "%.2f")
	line("ListSpaces last page of the org (ms)", func(r growthRow) float64 { return float64(r.listDeep.Microseconds()) / 1e3 }, "%.2f")
	b.Logf("growth (ratio to the size before in brackets):\n%s", sb.String())
	fmt.Print(sb.String())
}

// storeShard is the store's probe shard of an id (dynamostore.probeShard:
// FNV-32a modulo 16).
func storeShard(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("%02d", h.Sum32()%16)
}

func heapInUse() float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

func totalAlloc() float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.TotalAlloc) / (1 << 20)
}

func growth(b *testing.B, n int) growthRow {
	row := growthRow{n: n, orgSize: min(n, 100_000)}
	env, cfg, cnt := countingEnv(b)
	ctx := context.Background()
	table := env.Name(b, "SpacesTable")
	raw := awsclient.DynamoDB(env.Config, env.Endpoint)
	c := newClock()
	store := dynamostore.New(awsclient.DynamoDB(cfg, env.Endpoint), table, dynamostore.WithClock(c.Now))
	svc := &space.Service{Store: store, Now: c.Now, NewID: uuid.NewString}

	// The prototype: one space registered by the store, in org "big".
	acct, err := svc.CreateAccount(ctx, "big", space.NewAccountInput{Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		b.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1
	if err := store.SaveAccount(ctx, acct); err != nil {
		b.Fatal(err)
	}
	proto, _, err := svc.Register(ctx, "big", space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: acct.ID, Config: space.Config{"clusterName": "proto", "region": "us-east-1"}}, "")
	if err != nil {
		b.Fatal(err)
	}
	part, err := raw.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "ORG#big"}}})
	if err != nil {
		b.Fatal(err)
	}
	var spaceItem, claimItem map[string]types.AttributeValue
	for _, it := range part.Items {
		sk := it["sk"].(*types.AttributeValueMemberS).Value
		switch {
		case sk == "SPACE#"+proto.ID:
			spaceItem = it
		case strings.HasPrefix(sk, "CLAIM#"):
			claimItem = it
		}
	}
	if spaceItem == nil || claimItem == nil {
		b.Fatalf("the registered space's items: %v", part.Items)
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

	// The fleet: n-1 clones (the prototype is the n-th), the first
	// min(n, 100,000) in org "big", the others in orgs of 1,000.
	// Above 200,000 (memory: the whole run stays in one process), the
	// spaces outside the big org hold only what the probe index and the
	// partition need, and have no claim.
	slim := n > 200_000
	start := time.Now()
	var bigIDs []string
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	const per = 12 // spaces per BatchWriteItem: a space and its claim each
	for range 16 {
		wg.Go(func() {
			for {
				first := int(next.Add(per)) - per
				if first >= n-1 {
					return
				}
				var reqs []types.WriteRequest
				var mine []string
				for i := first; i < min(first+per, n-1); i++ {
					id := uuid.NewString()
					org := "big"
					if i+1 >= row.orgSize {
						org = fmt.Sprintf("o%d", i/1000)
					} else {
						mine = append(mine, id)
					}
					if slim && org != "big" {
						reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
							"pk": s("ORG#" + org), "sk": s("SPACE#" + id), "id": s(id), "org_id": s(org), "probe_shard": s(storeShard(id)),
						}}})
						continue
					}
					sp := maps.Clone(spaceItem)
					sp["pk"], sp["sk"], sp["id"], sp["org_id"] = s("ORG#"+org), s("SPACE#"+id), s(id), s(org)
					sp["name"], sp["probe_shard"] = s("s-"+id[:13]), s(storeShard(id))
					cl := maps.Clone(claimItem)
					cl["pk"], cl["sk"], cl["space_id"] = s("ORG#"+org), s("CLAIM#clone/"+id), s(id)
					reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: sp}}, types.WriteRequest{PutRequest: &types.PutRequest{Item: cl}})
				}
				for len(reqs) > 0 {
					out, err := raw.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
					if err != nil {
						b.Error(err)
						return
					}
					reqs = out.UnprocessedItems[table]
				}
				mu.Lock()
				bigIDs = append(bigIDs, mine...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	bigIDs = append(bigIDs, proto.ID)
	slices.Sort(bigIDs)
	row.seed = time.Since(start)
	runtime.GC()
	row.heapMB = heapInUse()

	// Fan-out.
	queueURL := env.Resources["ProbeQueue"].URL
	sqsClient := awsclient.SQS(cfg, env.Endpoint)
	q := sqsqueue.New(sqsClient, queueURL)
	sched := probing.NewScheduler(probing.Scheduler{Targets: store, Queue: parts.ProbeQueue{Q: q}, Metrics: &metrics.Emitter{Log: discardLogger()}, Log: discardLogger()})
	purge := func() {
		if _, err := awsclient.SQS(env.Config, env.Endpoint).PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(queueURL)}); err != nil {
			b.Fatal(err)
		}
	}
	cnt.reset()
	a0 := totalAlloc()
	out, err := sched.TickShards(ctx, probing.Shards{First: 0, Last: 0})
	if err != nil {
		b.Fatal(err)
	}
	row.shardTime, row.shardPages, row.shardSQS = out.Duration, out.Pages, cnt.get("SendMessageBatch")
	row.shardAllocMB = totalAlloc() - a0
	purge()

	// Above 200,000, the 16 shards' tick is read and counted, not sent
	// (100,000 SendMessageBatch calls at the emulator's SQS rate would take
	// most of a 15-minute budget); one shard above is sent.
	if slim {
		row.tickTime, row.tickSQS, row.tickAllocMB, row.tickPeakMB = -1, -1, -1, -1
	} else {
		sendTick(b, &row, sched, n, purge, cnt)
	}

	sched.Queue = &countQueue{}
	cnt.reset()
	out, err = sched.Tick(ctx)
	if err != nil || out.Spaces != n {
		b.Fatalf("index only: %d of %d, %v", out.Spaces, n, err)
	}
	row.indexOnly = out.Duration
	row.tickPages = out.Pages
	row.msPerPage = float64(cnt.mean("Query").Microseconds()) / 1e3
	prober(b, &row, store, c, bigIDs, cnt)
	return row
}

func sendTick(b *testing.B, row *growthRow, sched *probing.Scheduler, n int, purge func(), cnt *counter) {
	ctx := context.Background()
	runtime.GC()
	before := heapInUse()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if h := uint64(heapInUse()); h > peak.Load() {
					peak.Store(h)
				}
			}
		}
	}()
	cnt.reset()
	a0 := totalAlloc()
	out, err := sched.Tick(ctx)
	close(done)
	if err != nil {
		b.Fatal(err)
	}
	if out.Spaces != n {
		b.Fatalf("fanned out %d of %d", out.Spaces, n)
	}
	row.tickTime, row.tickSQS = out.Duration, cnt.get("SendMessageBatch")
	row.tickAllocMB = totalAlloc() - a0
	row.tickPeakMB = max(0, float64(peak.Load())-before)
	purge()
}

func prober(b *testing.B, row *growthRow, store *dynamostore.Store, c *clock, bigIDs []string, cnt *counter) {
	ctx := context.Background()
	// The prober, on 1,000 of the big org's spaces.
	ca, err := testcluster.NewCA()
	if err != nil {
		b.Fatal(err)
	}
	cl, err := testcluster.New(testcluster.WithCA(ca))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	cl.SetMode(testcluster.Slow(50 * time.Millisecond))
	minter := &staticminter.Static{}
	var deliveries []probing.Delivery
	for _, id := range bigIDs[:min(1000, len(bigIDs))] {
		minter.Set(id, cl.Credentials())
		deliveries = append(deliveries, probing.Delivery{MessageID: id, Body: probing.Message{OrgID: "big", ID: id}.Encode(), ReceiveCount: 1})
	}
	checker := &kubeprobe.Prober{MaxTransports: 64}
	defer checker.Close()
	p := probing.NewProber(probing.Prober{Store: store, Minter: minter, Checker: checker, Events: &events{}, Now: c.Now,
		Metrics: &metrics.Emitter{Log: discardLogger()}, Log: discardLogger()})
	sweep := func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 10)
		for batch := range slices.Chunk(deliveries, 10) {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if failed := p.HandleBatch(ctx, batch); len(failed) > 0 {
					b.Errorf("failed: %v", failed)
				}
			})
		}
		wg.Wait()
		c.Advance(time.Minute)
	}
	sweep() // unknown → active
	cnt.reset()
	t0 := time.Now()
	const sweeps = 2
	for range sweeps {
		sweep()
	}
	probes := float64(sweeps * len(deliveries))
	row.probesPerSec = probes / time.Since(t0).Seconds()
	row.readsPerProbe = float64(cnt.get("GetItem")) / probes
	row.writesPerProbe = float64(cnt.get("UpdateItem")+cnt.get("TransactWriteItems")) / probes

	// ListSpaces: the first page and the last page of the big org.
	const reps = 20
	list := func(after string) time.Duration {
		t0 := time.Now()
		for range reps {
			page, _, err := store.ListSpaces(ctx, "big", space.Query{Page: space.Page{Limit: 100, After: after}})
			if err != nil {
				b.Fatal(err)
			}
			if len(page) == 0 {
				b.Fatalf("an empty page after %q", after)
			}
		}
		return time.Since(t0) / reps
	}
	row.listFirst = list("")
	row.listDeep = list(bigIDs[len(bigIDs)-101])
	b.ReportMetric(0, "ns/op")
}
