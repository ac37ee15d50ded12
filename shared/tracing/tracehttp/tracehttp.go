// Package tracehttp holds shared/tracing's HTTP hooks: a server span per
// request and a client span per request sent. They are written here
// rather than taken from otelhttp, whose server handler alone added
// 1.4 MB to the API's binary for semantic-convention tables and metrics
// Spaces does not use; the two spans need a few lines.
package tracehttp

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"spaces/shared/tracing"
)

// Handler wraps the API's handler in a server span per request, continuing
// a W3C traceparent the caller sent. The span is named by the route once
// the mux has matched it (tracing.NameSpan), by the method until then.
func Handler(t *tracing.Tracing, h http.Handler) http.Handler {
	tracer := t.Provider().Tracer(tracing.Scope)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r.WithContext(ctx))
		setStatus(span, rec.code)
	})
}

type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func setStatus(span trace.Span, code int) {
	if code == 0 {
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 500 {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
}

// Transport wraps a client transport in a client span per request
// ("GET /version") under the request context's span, with its tracer.
// The span ends when the answer's headers arrive (a probe's body is a few
// hundred bytes). It sends no trace header: the servers are customers'
// clusters, which have no business with Spaces' trace ids.
func Transport(rt http.RoundTripper) http.RoundTripper { return transport{next: rt} }

type transport struct{ next http.RoundTripper }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	tracer := trace.SpanFromContext(r.Context()).TracerProvider().Tracer(tracing.Scope)
	ctx, span := tracer.Start(r.Context(), r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("server.address", r.URL.Host)))
	defer span.End()
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return resp, err
	}
	setStatus(span, resp.StatusCode)
	return resp, nil
}
