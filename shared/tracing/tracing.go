// Package tracing is Spaces' one place for traces and request-scoped log
// fields: the tracer provider and its exporter, chosen from the
// environment; the hooks at each edge (a Lambda invocation, an HTTP
// request served or sent (subpackage tracehttp), an AWS SDK call, an SQS
// message sent and received); and the slog handler that writes the trace
// id, the Lambda request id and the request's caller into every log line
// (log.go).
//
// Everything else finds the tracer through its context (the span of the
// invocation or request it serves), so no package below the edges holds a
// provider, and with none set up every hook is a no-op that still carries
// trace ids from message to message.
//
// In AWS the functions run with X-Ray active tracing: an invocation
// continues the trace Lambda started (its X-Ray trace header), so the
// trace_id of every log line is the X-Ray trace id of the invocation, and
// new trace ids are X-Ray compatible (their first 4 bytes are the time).
// With OTEL_TRACES_EXPORTER=xray (the template's setting) every span goes
// to the X-Ray daemon Lambda runs beside the function, so a probe shows in
// X-Ray from the scheduler's tick to the cluster's GET /version. Locally,
// OTEL_TRACES_EXPORTER=stdout writes every span as JSON to standard
// output or to the file SPACES_TRACES_FILE names.
package tracing

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope names Spaces' own spans.
const Scope = "spaces"

// Environment variables read by FromEnv.
const (
	// EnvExporter selects the exporter: "none" (the default), "xray" (the
	// X-Ray daemon at AWS_XRAY_DAEMON_ADDRESS) or "stdout".
	EnvExporter = "OTEL_TRACES_EXPORTER"
	// EnvFile sends the stdout exporter's spans to a file instead.
	EnvFile = "SPACES_TRACES_FILE"
)

// Tracing owns the tracer provider. A nil *Tracing traces nothing.
type Tracing struct {
	tp    *sdktrace.TracerProvider
	close func() error
}

// New returns a provider exporting every span, as one JSON object per line,
// to w as soon as it ends (nil w: spans are made and their ids propagated
// and logged, but exported nowhere).
func New(w io.Writer) (*Tracing, error) {
	if w == nil {
		return newProvider(nil), nil
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return newProvider(exp), nil
}

func newProvider(exp sdktrace.SpanExporter) *Tracing {
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithIDGenerator(xrayIDs{}),
		// An invocation's X-Ray header says whether X-Ray samples it.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	}
	if exp != nil {
		// Synchronous: a Lambda may be frozen the moment it returns, and
		// locally a test reads the spans of a request it just made.
		opts = append(opts, sdktrace.WithSyncer(exp))
	}
	return &Tracing{tp: sdktrace.NewTracerProvider(opts...), close: func() error { return nil }}
}

// FromEnv reads EnvExporter and EnvFile.
func FromEnv(lookup func(string) (string, bool)) (*Tracing, error) {
	exp, _ := lookup(EnvExporter)
	switch exp {
	case "", "none":
		return New(nil)
	case "xray":
		addr, _ := lookup("AWS_XRAY_DAEMON_ADDRESS")
		if addr == "" {
			// No daemon (sam local invoke, tracing turned off): the ids are
			// still logged; a function must not fail for want of traces.
			return New(nil)
		}
		x, err := newXRayExporter(addr)
		if err != nil {
			return nil, err
		}
		return newProvider(x), nil
	case "stdout":
	default:
		return nil, fmt.Errorf("%s=%q: want none, xray or stdout", EnvExporter, exp)
	}
	path, _ := lookup(EnvFile)
	if path == "" {
		return New(os.Stdout)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvFile, err)
	}
	t, err := New(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	t.close = f.Close
	return t, nil
}

// Provider is the tracer provider (a no-op one for a nil *Tracing).
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.tp
}

// Close ends the provider, exporting what is left.
func (t *Tracing) Close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	err := t.tp.Shutdown(ctx)
	if cerr := t.close(); err == nil {
		err = cerr
	}
	return err
}

// Handler wraps a Lambda handler (or what plays one locally: the
// scheduler's ticker, a queue poller) in a span named name, continuing the
// invocation's X-Ray trace when Lambda gives one.
func Handler[In, Out any](t *Tracing, name string, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	tracer := t.Provider().Tracer(Scope)
	return func(ctx context.Context, in In) (Out, error) {
		if sc, ok := lambdaParent(ctx); ok {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		out, err := h(ctx, in)
		end(span, err)
		return out, err
	}
}

// NameSpan renames the context's span (the request's, to its route).
func NameSpan(ctx context.Context, name string) {
	if name != "" {
		trace.SpanFromContext(ctx).SetName(name)
	}
}

// Start starts a span named name under the context's span, with that
// span's tracer, and returns the function that ends it with the error the
// work returned.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(error)) {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(Scope)
	ctx, span := tracer.Start(ctx, name, trace.WithAttributes(attrs...))
	return ctx, func(err error) { end(span, err) }
}

func end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// lambdaParent reads the X-Ray trace header aws-lambda-go puts in the
// invocation's context ("Root=1-5759e988-bd862e3fe1be46a994272793;
// Parent=53995c3f42cd8ad8;Sampled=1").
func lambdaParent(ctx context.Context) (trace.SpanContext, bool) {
	h, _ := ctx.Value("x-amzn-trace-id").(string)
	return parseXRay(h)
}

func parseXRay(h string) (trace.SpanContext, bool) {
	var cfg trace.SpanContextConfig
	for part := range strings.SplitSeq(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			parts := strings.Split(v, "-")
			if len(parts) != 3 || parts[0] != "1" {
				return trace.SpanContext{}, false
			}
			b, err := hex.DecodeString(parts[1] + parts[2])
			if err != nil || len(b) != 16 {
				return trace.SpanContext{}, false
			}
			copy(cfg.TraceID[:], b)
		case "Parent":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != 8 {
				return trace.SpanContext{}, false
			}
			copy(cfg.SpanID[:], b)
		case "Sampled":
			if v == "1" {
				cfg.TraceFlags = trace.FlagsSampled
			}
		}
	}
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// xrayIDs makes trace ids X-Ray accepts: the first 4 bytes are the epoch
// second, the other 12 random.
type xrayIDs struct{}

func (xrayIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	binary.BigEndian.PutUint32(tid[:4], uint32(time.Now().Unix()))
	binary.BigEndian.PutUint32(tid[4:8], rand.Uint32())
	binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	return tid, xrayIDs{}.NewSpanID(ctx, tid)
}

func (xrayIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	for sid == (trace.SpanID{}) {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
