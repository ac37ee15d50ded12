package lambdarules

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"spaces/infra/testwait"
)

// holder is a handler that, for the paths or events told to hold, waits
// until released; it counts what it ran.
type holder struct {
	ran     atomic.Int64
	release chan struct{}
	held    chan struct{}
}

func newHolder() *holder {
	return &holder{release: make(chan struct{}), held: make(chan struct{}, 100)}
}

func (h *holder) hold() {
	h.ran.Add(1)
	h.held <- struct{}{}
	<-h.release
}

func (h *holder) url() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			h.hold()
		} else {
			h.ran.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// triggers are the invocations one function's triggers make, each
// answering whether it ran its handler and its error.
type triggers struct {
	t   *testing.T
	f   Function
	url http.Handler
}

func newTriggers(t *testing.T, f Function) *triggers {
	tr := &triggers{t: t, f: f}
	if f.URL != nil {
		var err error
		if tr.url, err = f.FunctionURL(newHolder().url()); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// authorizer invokes f synchronously, as IoT Core invokes its custom
// authorizer.
func (tr *triggers) authorizer() (bool, error) {
	var ran bool
	_, err := Handler(tr.f, func(context.Context, events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
		ran = true
		return events.IoTCoreCustomAuthorizerResponse{IsAuthenticated: true}, nil
	})(tr.t.Context(), events.IoTCoreCustomAuthorizerRequest{})
	return ran, err
}

// queue invokes f with an SQS batch, as its event source mapping does.
func (tr *triggers) queue() (bool, error) {
	var ran bool
	_, _, err := tr.f.SQS(tr.t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: "{}"}}},
		func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			ran = true
			return events.SQSEventResponse{}, nil
		})
	return ran, err
}

// get requests path on f's URL.
func (tr *triggers) get(path string) int {
	rec := httptest.NewRecorder()
	tr.url.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code
}

// TestReservedConcurrencyIsOnePoolPerFunction: one function's reserved
// executions serve all its triggers. With its URL holding them all (a
// flood), its synchronous invocation (an authorizer) and its queue's
// batches are throttled without running, and its URL answers 429; once
// they end, every trigger runs again. With its queue holding them, its
// URL answers 429 likewise. A function the template declares apart, with
// its own reservation, runs throughout. A throttled asynchronous event is
// retried without spending an attempt and runs once executions are free.
func TestReservedConcurrencyIsOnePoolPerFunction(t *testing.T) {
	fs, err := Read([]byte(`Resources:
  Shared:
    Type: AWS::Serverless::Function
    Properties:
      ReservedConcurrentExecutions: 2
      FunctionUrlConfig: {AuthType: NONE}
      EventInvokeConfig: {MaximumRetryAttempts: 0}
      Events:
        Work: {Type: SQS, Properties: {Queue: {"Fn::GetAtt": [WorkQueue, Arn]}}}
  Apart:
    Type: AWS::Serverless::Function
    Properties:
      ReservedConcurrentExecutions: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	shared, apart := fs.Get("Shared"), fs.Get("Apart")
	h := newHolder()
	url, err := shared.FunctionURL(h.url())
	if err != nil {
		t.Fatal(err)
	}
	tr := &triggers{t: t, f: shared, url: url}
	other := newTriggers(t, apart)

	var wg sync.WaitGroup
	for range shared.ReservedConcurrency {
		wg.Go(func() { tr.get("/hold") })
		<-h.held
	}
	if n := shared.InUse(); n != 2 {
		t.Fatalf("the URL holds %d executions, want both", n)
	}
	if ran, err := tr.authorizer(); ran || !IsThrottled(err) {
		t.Errorf("the authorizer with the URL holding every execution: ran %v, %v; want throttled", ran, err)
	}
	if ran, err := tr.queue(); ran || !IsThrottled(err) {
		t.Errorf("the queue's batch with the URL holding every execution: ran %v, %v; want throttled", ran, err)
	}
	before := h.ran.Load()
	if code := tr.get("/"); code != http.StatusTooManyRequests || h.ran.Load() != before {
		t.Errorf("one more URL request: %d, want 429 uninvoked", code)
	}
	if n := shared.Throttled(); n != 3 {
		t.Errorf("%d throttled invocations, want 3 (authorizer, queue, URL)", n)
	}
	for name, run := range map[string]func() (bool, error){"authorizer": other.authorizer, "queue": other.queue} {
		if ran, err := run(); !ran || err != nil {
			t.Errorf("the function apart, as %s: ran %v, %v; want it run: it shares no executions", name, ran, err)
		}
	}

	// An asynchronous event meanwhile: throttled, retried, not an attempt.
	async := &AsyncInvoker{Function: shared, Delays: []time.Duration{time.Millisecond}}
	var res AsyncResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		res = async.Invoke(t.Context(), json.RawMessage(`{}`), func(context.Context, json.RawMessage) error { return nil })
	}()
	testwait.Eventually(t, testwait.Timeout, "the asynchronous event throttled", func() bool { return shared.Throttled() > 3 })

	close(h.release)
	wg.Wait()
	<-done
	if res.Attempts != 1 || res.Err != nil || res.Condition != "" || async.Dropped() != 0 {
		t.Errorf("the asynchronous event throttled, then run: %+v, want handled on its one attempt (MaximumRetryAttempts 0)", res)
	}
	if ran, err := tr.authorizer(); !ran || err != nil {
		t.Errorf("the authorizer once the URL's requests ended: ran %v, %v", ran, err)
	}

	// The other way: the queue's batches holding every execution starve
	// the URL.
	hold, held := make(chan struct{}), make(chan struct{}, 2)
	for range shared.ReservedConcurrency {
		wg.Go(func() {
			_, _, _ = shared.SQS(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: "{}"}}},
				func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
					held <- struct{}{}
					<-hold
					return events.SQSEventResponse{}, nil
				})
		})
		<-held
	}
	if code := tr.get("/"); code != http.StatusTooManyRequests {
		t.Errorf("a URL request with the queue holding every execution: %d, want 429", code)
	}
	close(hold)
	wg.Wait()
	if code := tr.get("/"); code != http.StatusNoContent || shared.InUse() != 0 {
		t.Errorf("after the batches: %d with %d in use, want 204 and none", code, shared.InUse())
	}
}

// TestTemplateKeepsThePublicURLApart: in template.yaml, a flood holding
// every execution of AgentFunction (its public URL) throttles whatever
// else AgentFunction would serve, but IoT Core's authorizer and the
// presence queue are PresenceFunction's, whose executions it cannot take.
func TestTemplateKeepsThePublicURLApart(t *testing.T) {
	fs := template(t)
	agent, presence := fs.Get("AgentFunction"), fs.Get("PresenceFunction")
	if agent.URL == nil || agent.ReservedConcurrency < 1 || presence.ReservedConcurrency < 1 || presence.URL != nil {
		t.Fatalf("AgentFunction %+v, PresenceFunction %+v: want the URL on AgentFunction, both with reserved concurrency", agent, presence)
	}
	if _, ok := presence.Sources["AgentPresence"]; !ok {
		t.Fatalf("PresenceFunction's triggers %v, want the AgentPresence queue", presence.Sources)
	}
	h := newHolder()
	url, err := agent.FunctionURL(h.url())
	if err != nil {
		t.Fatal(err)
	}
	tr := &triggers{t: t, f: agent, url: url}
	var wg sync.WaitGroup
	defer func() { close(h.release); wg.Wait() }()
	for range agent.ReservedConcurrency {
		wg.Go(func() { tr.get("/hold") })
		<-h.held
	}
	if code := tr.get("/"); code != http.StatusTooManyRequests {
		t.Fatalf("the flooded URL answers %d, want 429", code)
	}
	if ran, err := tr.authorizer(); ran || !IsThrottled(err) {
		t.Errorf("an authorizer on AgentFunction would be throttled: ran %v, %v", ran, err)
	}
	pt := newTriggers(t, presence)
	for name, run := range map[string]func() (bool, error){"authorizer": pt.authorizer, "presence queue": pt.queue} {
		if ran, err := run(); !ran || err != nil {
			t.Errorf("PresenceFunction as the %s with AgentFunction's URL flooded: ran %v, %v; want it run", name, ran, err)
		}
	}
}
