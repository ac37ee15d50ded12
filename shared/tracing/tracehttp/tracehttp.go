// Package tracehttp holds shared/tracing's HTTP hooks (otelhttp), apart so
// that the functions that serve and send no HTTP (the scheduler, the
// cascade) do not link them.
package tracehttp

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"

	"spaces/shared/tracing"
)

// Handler wraps the API's handler in a server span per request, continuing
// a W3C traceparent the caller sent. The span is named by the route once
// the mux has matched it (tracing.NameSpan).
func Handler(t *tracing.Tracing, h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "http", otelhttp.WithTracerProvider(t.Provider()),
		otelhttp.WithPropagators(propagation.TraceContext{}))
}

// Transport wraps a client transport in a client span per request
// ("GET /version"), with the tracer of the request context's span. It
// sends no trace header: the servers are customers' clusters, which have
// no business with Spaces' trace ids.
func Transport(rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt, otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
}
