package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"spaces/shared/space"
	"spaces/shared/tracing"
)

type ctxKey struct{}

// reqState is per-request and shared by every layer. The attributes
// learned deep inside (org id, caller, space id) are the request's log
// attributes (tracing.AddLogAttrs), so they reach the access-log line and
// every line logged with the request's context.
type reqState struct {
	id  string
	log *slog.Logger
	rec statusRecorder // the response, for the access line
}

func state(ctx context.Context) *reqState {
	if s, ok := ctx.Value(ctxKey{}).(*reqState); ok {
		return s
	}
	return &reqState{log: slog.Default()}
}

func requestID(ctx context.Context) string { return state(ctx).id }

// logger is the API's logger: log with the request's context
// (InfoContext, ...) so the line carries the request's attributes.
func logger(ctx context.Context) *slog.Logger { return state(ctx).log }

// addLogAttrs adds attributes (org id, space id) to the request's log
// attributes.
func addLogAttrs(ctx context.Context, attrs ...slog.Attr) { tracing.AddLogAttrs(ctx, attrs...) }

var validRequestID = space.MustPattern(`^[A-Za-z0-9._:=-]+$`, 128)

// statusRecorder remembers the status a handler wrote, for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// clientGone records a request the client abandoned (nginx's 499), so the
// access log never counts it as a server error.
func (s *statusRecorder) clientGone() {
	if s.status == 0 {
		s.status = statusClientClosed
	}
}

const statusClientClosed = 499

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// observe gives each request an id (the caller's X-Request-Id when it is
// sane, otherwise a new one), log attributes carrying it and, behind API
// Gateway, the gateway's request id, names the request's span by its
// route, and writes one access-log line.
func observe(base *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !validRequestID.MatchString(id) {
			var b [12]byte
			var h [24]byte
			_, _ = rand.Read(b[:])
			hex.Encode(h[:], b[:])
			id = string(h[:])
		}
		w.Header().Set("X-Request-Id", id)
		// Every answer is JSON about one caller's items: never sniffed as
		// another type, never kept by a shared cache.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		st := &reqState{id: id, log: base, rec: statusRecorder{ResponseWriter: w}}
		attrs, n := [2]slog.Attr{slog.String("request_id", id)}, 1
		if gw, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok && gw.RequestID != "" {
			attrs[1], n = slog.String("gateway_request_id", gw.RequestID), 2
		}
		ctx := tracing.WithLogAttrs(context.WithValue(r.Context(), ctxKey{}, st), attrs[:n]...)
		rec := &st.rec
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)
		tracing.NameSpan(ctx, r.Pattern)
		// Attrs, not key/value pairs: nothing to box on every request.
		base.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("route", r.Pattern), slog.Int("status", rec.status), slog.Int64("duration_ms", time.Since(start).Milliseconds()))
	})
}
