package lambdarules

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Gateway serves h as the HTTP API's Lambda proxy integration of f does:
// each request is one invocation under f's rules (Run), its response
// buffered as Lambda returns it whole. An invocation that times out is a
// function error, which the HTTP API answers 500
// {"message":"Internal Server Error"}
// (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-troubleshooting-lambda.html);
// the integration's own 30 s limit is above every function's Timeout here
// (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html).
func (f Function) Gateway(h http.Handler) http.Handler {
	return f.serveHTTP(h, http.StatusInternalServerError, `{"message":"Internal Server Error"}`)
}

// URL is a function's function URL, as its FunctionUrlConfig declares it.
type URL struct {
	// AuthType is NONE: the function authenticates its callers itself.
	AuthType string
	// Now is the throttle's clock (nil: time.Now); tests set it.
	Now func() time.Time
}

// URLRatePerConcurrency is Lambda's request rate for a function URL per
// unit of reserved concurrency: "your function's maximum request rate per
// second (RPS) is equivalent to 10 times the configured reserved
// concurrency"; beyond it, and beyond the reserved concurrency in flight,
// the URL answers 429
// (https://docs.aws.amazon.com/lambda/latest/dg/urls-configuration.html#urls-throttling).
const URLRatePerConcurrency = 10

// urlThrottle is a function URL's rate: requests started in each
// wall-clock second against URLRatePerConcurrency times the reserved
// concurrency. Lambda does not say how it meters the rate; a fixed
// one-second window is the simplest reading. The requests in flight are
// bounded by the function's executions, which its other triggers share
// (Run).
type urlThrottle struct {
	conc    int
	now     func() time.Time
	mu      sync.Mutex
	second  int64
	started int
}

// admit takes a request in, or answers false (429).
func (t *urlThrottle) admit() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.now().Unix(); s != t.second {
		t.second, t.started = s, 0
	}
	if t.started >= URLRatePerConcurrency*t.conc {
		return false
	}
	t.started++
	return true
}

// FunctionURL serves h as f's function URL does
// (https://docs.aws.amazon.com/lambda/latest/dg/urls-invocation.html):
// a function URL has no routes, so every method and path is one
// invocation of f (the function answers an unknown route itself), under
// f's rules (Run), buffered (InvokeMode BUFFERED). An invocation that
// fails or times out is answered 502, Lambda's answer when the function
// returns no valid response. With reserved concurrency, a request over
// the rate (urlThrottle), or finding every one of the function's reserved
// executions taken (by this URL or any other trigger of the function), is
// answered 429 and invokes nothing. It is
// an error for the template to give f no function URL: the local stack
// serves only what would be deployed.
func (f Function) FunctionURL(h http.Handler) (http.Handler, error) {
	if f.URL == nil {
		return nil, fmt.Errorf("lambdarules: template.yaml gives %s no FunctionUrlConfig", f.ID)
	}
	served := f.serveHTTP(h, http.StatusBadGateway, `{"Message":"Internal Server Error"}`)
	if f.ReservedConcurrency == 0 {
		return served, nil
	}
	t := &urlThrottle{conc: f.ReservedConcurrency, now: f.URL.Now}
	if t.now == nil {
		t.now = time.Now
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !t.admit() {
			rateExceeded(w)
			return
		}
		served.ServeHTTP(w, r)
	}), nil
}

// rateExceeded is a function URL's throttled answer.
func rateExceeded(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(`{"Message":"Rate Exceeded."}`))
}

// serveHTTP runs each request as one invocation of f; failed answers
// failStatus with failBody, as the front door in question does, and a
// throttled one on a function URL 429 (on the HTTP API, failStatus: the
// integration failed).
func (f Function) serveHTTP(h http.Handler, failStatus int, failBody string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, err := Run(r.Context(), f, TraceHeader("").Next(f.ID), func(ctx context.Context) (*httptest.ResponseRecorder, error) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r.WithContext(ctx))
			return rec, nil
		})
		if IsThrottled(err) && failStatus == http.StatusBadGateway {
			rateExceeded(w)
			return
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(failStatus)
			_, _ = w.Write([]byte(failBody))
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}
