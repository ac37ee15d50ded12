package lambdarules

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"spaces"
	"spaces/infra/testclock"
)

func template(t *testing.T) Functions {
	t.Helper()
	fs, err := Read(spaces.Template)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestReadsTheTemplate: the rules are template.yaml's: each function's
// Timeout (its own, else the Globals'), the provisioner's RecursiveLoop
// and the scheduler's EventInvokeConfig; everything else Lambda's
// defaults.
func TestReadsTheTemplate(t *testing.T) {
	fs := template(t)
	want := map[string]Function{
		"ApiFunction":         {Timeout: 10 * time.Second, RecursiveLoop: Terminate, Async: Async{MaxRetries: 2, MaxEventAge: 6 * time.Hour}},
		"DiscoveryFunction":   {Timeout: 10 * time.Second, RecursiveLoop: Terminate, Async: Async{MaxRetries: 2, MaxEventAge: 6 * time.Hour}},
		"ProberFunction":      {Timeout: 30 * time.Second, RecursiveLoop: Terminate, Async: Async{MaxRetries: 2, MaxEventAge: 6 * time.Hour}},
		"ProvisionerFunction": {Timeout: 60 * time.Second, RecursiveLoop: Allow, Async: Async{MaxRetries: 2, MaxEventAge: 6 * time.Hour}},
		"SchedulerFunction":   {Timeout: 60 * time.Second, RecursiveLoop: Terminate, Async: Async{MaxRetries: 0, MaxEventAge: time.Minute, OnFailure: "SchedulerDLQ"}},
	}
	// The event source mappings (the Poller's settings).
	sources := map[string]map[string]SQSSource{
		"ProberFunction":      {"Probes": {Queue: "ProbeQueue", BatchSize: 1, Window: 2 * time.Second, MaximumConcurrency: 50}},
		"ProvisionerFunction": {"Steps": {Queue: "ProvisioningQueue", BatchSize: 10, MaximumConcurrency: 10}},
	}
	for id, w := range want {
		w.ID = id
		got := fs[id]
		if want, ok := sources[id]; ok && !reflect.DeepEqual(got.Sources, want) {
			t.Errorf("%s: SQS events %+v, want %+v", id, got.Sources, want)
		}
		got.Sources = nil
		got.ReservedConcurrency, got.executions = 0, nil // TestFunctionURLThrottle, TestReservedConcurrencyIsOnePoolPerFunction
		got.meter = nil                                  // TestUsageCountsBilledInvocations
		// The Globals' 256 MB, but the prober's own 128 (BENCHMARKS.md,
		// "The prober's memory size").
		if wantMB := map[string]int{"ProberFunction": 128}[id]; got.MemoryMB != cmp.Or(wantMB, 256) {
			t.Errorf("%s: MemorySize %d, want %d", id, got.MemoryMB, cmp.Or(wantMB, 256))
		}
		got.MemoryMB = 0
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %+v, want %+v", id, got, w)
		}
	}
	if _, err := Read([]byte("Resources:\n  F:\n    Type: AWS::Serverless::Function\n    Properties:\n      RecursiveLoop: Sometimes\n")); err == nil {
		t.Error("an unknown RecursiveLoop value was read")
	}
	// Only the agent's function has a function URL, public and buffered.
	for id, f := range fs {
		if want := id == "AgentFunction"; (f.URL != nil) != want || (want && f.URL.AuthType != "NONE") {
			t.Errorf("%s: function URL %+v", id, f.URL)
		}
	}
	if _, err := Read([]byte("Resources:\n  F:\n    Type: AWS::Serverless::Function\n    Properties:\n      FunctionUrlConfig: {AuthType: AWS_IAM}\n")); err == nil {
		t.Error("a function URL with AWS_IAM auth was read, though not modelled")
	}
}

// TestFunctionURL: a function URL has no routes (every path is the
// function's to answer), runs each request as an invocation under the
// function's Timeout and answers a timed-out one 502; a function without
// FunctionUrlConfig in the template has no URL to serve.
func TestFunctionURL(t *testing.T) {
	fs := template(t)
	if _, err := fs.Get("ApiFunction").FunctionURL(http.NotFoundHandler()); err == nil {
		t.Error("ApiFunction, which has no function URL in the template, was served on one")
	}
	f := fs.Get("AgentFunction")
	f.Timeout = 50 * time.Millisecond
	h, err := f.FunctionURL(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
		}
		w.Header().Set("X-Path", r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/agent/exchange", "/no/such/route"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("DELETE", path, nil))
		if rec.Code != http.StatusTeapot || rec.Header().Get("X-Path") != path {
			t.Errorf("DELETE %s: %d %v, want the function's own answer", path, rec.Code, rec.Header())
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/slow", nil))
	if rec.Code != http.StatusBadGateway || rec.Header().Get("X-Path") != "" {
		t.Errorf("timed out on the function URL: %d %v %s, want 502", rec.Code, rec.Header(), rec.Body)
	}
}

// TestTimeout: an invocation past its function's Timeout is answered
// with Lambda's "Task timed out" at the deadline, its context cancelled
// and its late answer discarded; one in time answers as it answered.
func TestTimeout(t *testing.T) {
	f := Function{ID: "F", Timeout: 50 * time.Millisecond}
	cancelled := make(chan bool, 1)
	v, err := Run(t.Context(), f, "", func(ctx context.Context) (string, error) {
		<-ctx.Done()
		cancelled <- errors.Is(ctx.Err(), context.DeadlineExceeded)
		return "late", nil
	})
	if !IsTimeout(err) || err.Error() != "Task timed out after 0.05 seconds" || v != "" {
		t.Fatalf("got %q, %v; want the timeout", v, err)
	}
	if !<-cancelled {
		t.Error("the handler's context was not cancelled at the deadline")
	}
	v, err = Run(t.Context(), f, "", func(ctx context.Context) (string, error) { return "in time", nil })
	if v != "in time" || err != nil {
		t.Errorf("got %q, %v", v, err)
	}

	// Behind the gateway, a timed-out function is the HTTP API's 500.
	slow := f.Gateway(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		w.WriteHeader(http.StatusTeapot)
	}))
	rec := httptest.NewRecorder()
	slow.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 500 || rec.Body.String() != `{"message":"Internal Server Error"}` {
		t.Errorf("timed out behind the gateway: %d %s", rec.Code, rec.Body)
	}
}

// chainOf is a record whose trace header says its chain has invoked id n
// times.
func chainOf(id string, n int) events.SQSMessage {
	t := TraceHeader("")
	for range n {
		t = t.Next(id)
	}
	return events.SQSMessage{MessageId: id + "-" + strconv.Itoa(n), Attributes: map[string]string{"AWSTraceHeader": string(t)}}
}

// TestRecursiveLoop: a chain counts each invocation of a function; the
// 17th invocation in a chain is stopped for a function whose template
// does not allow the loop (the prober), and runs for one that does (the
// provisioner, RecursiveLoop: Allow).
func TestRecursiveLoop(t *testing.T) {
	fs := template(t)
	for _, c := range []struct {
		fn      string
		chain   int
		stopped bool
	}{
		{"ProberFunction", 0, false},
		{"ProberFunction", MaxChain - 1, false},
		{"ProberFunction", MaxChain, true},
		{"ProvisionerFunction", MaxChain, false},
		{"ProvisionerFunction", 40, false},
	} {
		f := fs.Get(c.fn)
		var sent TraceHeader
		ran := 0
		_, stopped, err := f.SQS(t.Context(), events.SQSEvent{Records: []events.SQSMessage{chainOf(c.fn, c.chain)}},
			func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				ran = len(ev.Records)
				sent = TraceHeaderFrom(ctx)
				return events.SQSEventResponse{}, nil
			})
		if err != nil || (len(stopped) == 1) != c.stopped || (ran == 1) == c.stopped {
			t.Errorf("%s, chain of %d: stopped %d, ran %d, %v; want stopped %v", c.fn, c.chain, len(stopped), ran, err, c.stopped)
		}
		// What the invocation sends carries the chain one further.
		if !c.stopped && sent.Count(c.fn) != c.chain+1 {
			t.Errorf("%s, chain of %d: the invocation's header %q counts %d", c.fn, c.chain, sent, sent.Count(c.fn))
		}
	}
	// Each function counts its own invocations.
	h := TraceHeader("").Next("A").Next("B").Next("A")
	if h.Count("A") != 2 || h.Count("B") != 1 || h.Count("C") != 0 {
		t.Errorf("%q: counts %d %d %d", h, h.Count("A"), h.Count("B"), h.Count("C"))
	}
}

// TestAsync: the scheduler's failed tick is not retried and its record
// goes to its on-failure destination; an event older than its maximum
// age is not run; a function with Lambda's defaults is tried three times.
func TestAsync(t *testing.T) {
	fs := template(t)
	fail := func(n *int) func(context.Context, json.RawMessage) error {
		return func(context.Context, json.RawMessage) error { *n++; return errors.New("fan-out incomplete") }
	}
	var records [][]byte
	keep := func(_ context.Context, r []byte) error { records = append(records, r); return nil }

	calls := 0
	a := &AsyncInvoker{Function: fs.Get("SchedulerFunction"), Delays: []time.Duration{time.Millisecond}, OnFailure: keep}
	res := a.Invoke(t.Context(), json.RawMessage(`{"shards":{"first":0,"last":3}}`), fail(&calls))
	if res.Attempts != 1 || calls != 1 || res.Condition != RetriesExhausted || a.Dropped() != 1 || len(records) != 1 {
		t.Fatalf("failed tick: %+v after %d calls, %d dropped, %d records", res, calls, a.Dropped(), len(records))
	}
	var rec struct {
		RequestContext struct {
			Condition              string
			ApproximateInvokeCount int
		}
		RequestPayload  json.RawMessage
		ResponsePayload struct{ ErrorMessage string }
	}
	if err := json.Unmarshal(records[0], &rec); err != nil || rec.RequestContext.Condition != RetriesExhausted ||
		rec.RequestContext.ApproximateInvokeCount != 1 || string(rec.RequestPayload) != `{"shards":{"first":0,"last":3}}` ||
		rec.ResponsePayload.ErrorMessage != "fan-out incomplete" {
		t.Errorf("record %s (%v)", records[0], err)
	}

	// The tick waited past its maximum age (a clock that jumps a minute).
	clock := time.Now()
	calls = 0
	late := &AsyncInvoker{Function: fs.Get("SchedulerFunction"), OnFailure: keep,
		Now: func() time.Time { clock = clock.Add(61 * time.Second); return clock }}
	if res := late.Invoke(t.Context(), nil, fail(&calls)); res.Condition != EventAgeExceeded || calls != 0 || len(records) != 2 {
		t.Errorf("stale tick: %+v after %d calls, %d records", res, calls, len(records))
	}

	// Lambda's defaults: two retries, no destination.
	calls = 0
	d := &AsyncInvoker{Function: fs.Get("ProberFunction"), Delays: []time.Duration{time.Millisecond}, OnFailure: keep}
	if res := d.Invoke(t.Context(), nil, fail(&calls)); res.Attempts != 3 || calls != 3 || len(records) != 2 {
		t.Errorf("defaults: %+v after %d calls, %d records", res, calls, len(records))
	}
}

// TestFunctionURLThrottle: the agent function's URL takes 10 × its
// reserved concurrency requests a second and that many in flight;
// beyond either it answers 429 without invoking the function, and the
// next second takes requests again.
func TestFunctionURLThrottle(t *testing.T) {
	f := template(t).Get("AgentFunction")
	if f.ReservedConcurrency < 1 {
		t.Fatalf("AgentFunction reserves %d, want its template value", f.ReservedConcurrency)
	}
	clock := testclock.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	f.URL = &URL{AuthType: "NONE", Now: clock.Now}
	var invoked atomic.Int64
	hold, held := make(chan struct{}), make(chan struct{}, 100)
	h, err := f.FunctionURL(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		invoked.Add(1)
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			<-hold
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code
	}
	rate := URLRatePerConcurrency * f.ReservedConcurrency
	count := func(n int) map[int]int {
		codes := map[int]int{}
		for range n {
			codes[get("/")]++
		}
		return codes
	}
	if c := count(rate + 7); c[http.StatusNoContent] != rate || c[http.StatusTooManyRequests] != 7 || invoked.Load() != int64(rate) {
		t.Errorf("%d requests in one second: %v, %d invocations, want %d served and 7 answered 429 uninvoked", rate+7, c, invoked.Load(), rate)
	}
	clock.Advance(time.Second)
	if c := count(rate); c[http.StatusNoContent] != rate {
		t.Errorf("the next second: %v, want all %d served", c, rate)
	}
	// The reserved concurrency in flight: one more is throttled.
	clock.Advance(time.Second)
	var wg sync.WaitGroup
	for range f.ReservedConcurrency {
		wg.Add(1)
		go func() { defer wg.Done(); get("/hold") }()
		<-held
	}
	before := invoked.Load()
	if code := get("/"); code != http.StatusTooManyRequests || invoked.Load() != before {
		t.Errorf("with %d in flight: %d, want 429 and no invocation", f.ReservedConcurrency, code)
	}
	close(hold)
	wg.Wait()
	if code := get("/"); code != http.StatusNoContent {
		t.Errorf("once the held requests ended: %d, want 204", code)
	}
}
