package tracing

import (
	"context"
	"log/slog"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/trace"
)

// LogHandler adds to every record logged with a context what that context
// knows: the trace and span ids, the Lambda request id and the attributes
// the request's edge put there (WithLogAttrs, AddLogAttrs: the API
// Gateway request id, the caller's sub and org). It is the one place log
// lines learn who and what they belong to, so code below the edges only
// has to log with its context (InfoContext, LogAttrs).
func LogHandler(next slog.Handler) slog.Handler { return &logHandler{next: next} }

type logHandler struct{ next slog.Handler }

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
		if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
			r.AddAttrs(slog.String("lambda_request_id", lc.AwsRequestID))
		}
		if f, ok := ctx.Value(fieldsKey{}).(*fields); ok {
			r.AddAttrs(f.get()...)
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{next: h.next.WithAttrs(as)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{next: h.next.WithGroup(name)}
}

type fieldsKey struct{}

// fields are a request's log attributes; the edge that starts the request
// creates them and the layers below add to them (the caller is known only
// after authentication, yet the request's last line must name it).
type fields struct {
	mu    sync.Mutex
	attrs []slog.Attr
}

func (f *fields) get() []slog.Attr {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attrs
}

// WithLogAttrs starts a request's log attributes: every line logged with
// the returned context, or one derived from it, carries them and those
// added later with AddLogAttrs. They are slog.Attrs, not key/value pairs,
// for slog's reason (Logger.LogAttrs): no value is boxed, every request
// sets several.
func WithLogAttrs(ctx context.Context, attrs ...slog.Attr) context.Context {
	f := &fields{}
	if parent, ok := ctx.Value(fieldsKey{}).(*fields); ok {
		f.attrs = parent.get()
	}
	f.attrs = appendAttrs(f.attrs, attrs)
	return context.WithValue(ctx, fieldsKey{}, f)
}

// AddLogAttrs adds attributes to the request's log attributes (started by
// WithLogAttrs; without them it does nothing). An attribute already there
// under the same key is replaced.
func AddLogAttrs(ctx context.Context, attrs ...slog.Attr) {
	f, ok := ctx.Value(fieldsKey{}).(*fields)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attrs = appendAttrs(f.attrs, attrs)
}

// appendAttrs appends add to attrs in a new slice, since records already
// handed out may still read the old one; a key already present is
// replaced.
func appendAttrs(attrs, add []slog.Attr) []slog.Attr {
	out := make([]slog.Attr, len(attrs), len(attrs)+len(add))
	copy(out, attrs)
next:
	for _, a := range add {
		for i := range out {
			if out[i].Key == a.Key {
				out[i] = a
				continue next
			}
		}
		out = append(out, a)
	}
	return out
}
