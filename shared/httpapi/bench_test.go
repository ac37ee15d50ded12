package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/auth"
	"spaces/shared/awsclient"
	"spaces/shared/cursor"
	"spaces/shared/dynamostore"
	"spaces/shared/httpapi"
	"spaces/shared/space"
)

// timedStore measures the time spent in the store, so the benchmarks can
// report the handler's own overhead separately.
type timedStore struct {
	space.Store
	ns, allocs atomic.Int64
	counting   atomic.Bool // count allocations too (not while timing: see run)
}

// mark starts a measured store call; the returned func ends it. Allocations
// are read from the process-wide counter: the emulator serves the call in
// this window, so its allocations count as the store's.
func (s *timedStore) mark() func() {
	a := s.heapAllocs()
	t := time.Now()
	return func() {
		s.ns.Add(int64(time.Since(t)))
		s.allocs.Add(int64(s.heapAllocs() - a))
	}
}

// heapAllocs is the process's allocation count so far while counting, 0
// while timing.
func (s *timedStore) heapAllocs() uint64 {
	if !s.counting.Load() {
		return 0
	}
	return heapAllocs()
}

// heapAllocs is the process's allocation count so far, exact: ReadMemStats
// stops the world and flushes every P's cache, whereas runtime/metrics'
// count lags by whole spans, which landed in whichever window refilled
// one (the handler's count varied by ±20 from run to run). It allocates
// nothing.
func heapAllocs() uint64 {
	m := memStats.Get().(*runtime.MemStats)
	defer memStats.Put(m)
	runtime.ReadMemStats(m)
	return m.Mallocs
}

var memStats = sync.Pool{New: func() any { return new(runtime.MemStats) }}

func (s *timedStore) Register(ctx context.Context, sp space.Space, idem space.Idempotency) error {
	defer s.mark()()
	return s.Store.Register(ctx, sp, idem)
}

func (s *timedStore) GetSpace(ctx context.Context, org, id string) (space.Space, error) {
	defer s.mark()()
	return s.Store.GetSpace(ctx, org, id)
}

func (s *timedStore) ListSpaces(ctx context.Context, org string, q space.Query) ([]space.Space, string, error) {
	defer s.mark()()
	return s.Store.ListSpaces(ctx, org, q)
}

func (s *timedStore) GetAccount(ctx context.Context, org, id string) (space.CloudAccount, error) {
	defer s.mark()()
	return s.Store.GetAccount(ctx, org, id)
}

// fixedAuth stands in for token verification, which auth's own benchmarks
// measure, so these figures are the API's.
type fixedAuth struct{ p auth.Principal }

func (f fixedAuth) Authenticate(*http.Request) (auth.Principal, error) { return f.p, nil }

type bench struct {
	h       http.Handler
	store   *timedStore
	account string
	svc     *space.Service
	// harness counts the allocations of building each request (its body
	// included) and recorder, which are the benchmark's, not the handler's.
	harness atomic.Int64
}

func newBench(b *testing.B) *bench {
	env := emulatortest.Start(b)
	st := &timedStore{Store: dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(b, "SpacesTable"))}
	cur, err := cursor.New(cursor.KeyFromSecret("bench"))
	if err != nil {
		b.Fatal(err)
	}
	svc := space.NewService(st, space.DefaultStaleAfter)
	api := &httpapi.API{Spaces: svc, Auth: fixedAuth{auth.Principal{OrgID: "bench"}}, Cursors: cur, Log: slog.New(slog.DiscardHandler)}
	acct, err := svc.CreateAccount(context.Background(), "bench", space.NewAccountInput{Provider: space.AWS, Name: "bench",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/r"}})
	if err != nil {
		b.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1 // as a verification would
	if err := st.Store.(space.AccountSaver).SaveAccount(context.Background(), acct); err != nil {
		b.Fatal(err)
	}
	return &bench{h: api.Handler(), store: st, account: acct.ID, svc: svc}
}

func (bn *bench) serve(b *testing.B, method, path string, body []byte, want int) *httptest.ResponseRecorder {
	a := bn.store.heapAllocs()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	bn.harness.Add(int64(bn.store.heapAllocs() - a))
	bn.h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
	return rec
}

// allocRequests is how many requests the allocations are counted over.
const allocRequests = 20

// run times b.N requests, then counts the allocations of allocRequests
// more. The counts are exact (heapAllocs) but stop the world at every
// window's edges, which slowed the handler's share of the timed requests
// by about 40 µs; the counts do not vary between requests, so a few do.
func (bn *bench) run(b *testing.B, request func()) {
	b.ReportAllocs()
	bn.store.ns.Store(0)
	start := time.Now()
	for b.Loop() {
		request()
	}
	n := float64(b.N)
	total := float64(time.Since(start).Nanoseconds()) / n
	store := float64(bn.store.ns.Load()) / n
	b.ReportMetric(store, "store-ns/op")
	b.ReportMetric(total-store, "handler-ns/op")

	bn.store.allocs.Store(0)
	bn.harness.Store(0)
	bn.store.counting.Store(true)
	defer bn.store.counting.Store(false)
	a := heapAllocs()
	for range allocRequests {
		request()
	}
	totalAllocs := float64(heapAllocs()-a) / allocRequests
	storeAllocs := float64(bn.store.allocs.Load()) / allocRequests
	harness := float64(bn.harness.Load()) / allocRequests
	// Still counted as the handler's: allocations the SDK's transport and
	// the emulator's server goroutines make after a store call returned
	// (the counter is process-wide), a few per call.
	b.ReportMetric(totalAllocs-storeAllocs-harness, "handler-allocs/op")
	b.ReportMetric(harness, "harness-allocs/op")
}

func (bn *bench) seed(b *testing.B, n int) {
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				in := space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes, CloudAccountID: bn.account,
					Config: space.Config{"clusterName": fmt.Sprintf("seed-%06d", i), "region": "us-east-1"}}
				if _, _, err := bn.svc.Register(context.Background(), "bench", in, ""); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

func BenchmarkRegister(b *testing.B) {
	bn := newBench(b)
	i := 0
	bn.run(b, func() {
		a := bn.store.heapAllocs()
		body := fmt.Appendf(nil, `{"provider":"aws","space_type":"kubernetes","cloud_account_id":%q,"config":{"clusterName":"c-%d","region":"us-east-1"}}`, bn.account, i)
		bn.harness.Add(int64(bn.store.heapAllocs() - a))
		bn.serve(b, "POST", "/spaces", body, 201)
		i++
	})
}

func BenchmarkGet(b *testing.B) {
	bn := newBench(b)
	rec := bn.serve(b, "POST", "/spaces", fmt.Appendf(nil, `{"provider":"aws","space_type":"kubernetes","cloud_account_id":%q,"config":{"clusterName":"one","region":"us-east-1"}}`, bn.account), 201)
	path := rec.Header().Get("Location")
	bn.run(b, func() { bn.serve(b, "GET", path, nil, 200) })
}

// BenchmarkList100 lists a 100-item page of an org with 10,000 spaces.
func BenchmarkList100(b *testing.B) {
	bn := newBench(b)
	bn.seed(b, 10_000)
	bn.run(b, func() {
		rec := bn.serve(b, "GET", "/spaces?limit=100", nil, 200)
		_, _ = io.Copy(io.Discard, rec.Body)
	})
}
