package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"time"
)

type ctxKey struct{}

// reqState is per-request and shared by every layer, so attributes learned
// deep inside (org id, space id) reach the access-log line. The attributes
// are kept as a list and a logger is built from them only when something is
// logged besides the access line: slog's With formats them at once.
type reqState struct {
	id    string
	base  *slog.Logger
	attrs []slog.Attr
}

func state(ctx context.Context) *reqState {
	if s, ok := ctx.Value(ctxKey{}).(*reqState); ok {
		return s
	}
	return &reqState{base: slog.Default()}
}

func requestID(ctx context.Context) string { return state(ctx).id }

func logger(ctx context.Context) *slog.Logger {
	s := state(ctx)
	return slog.New(s.base.Handler().WithAttrs(s.attrs))
}

// addLogAttrs adds an attribute (org id, space id) to the request's logger.
func addLogAttrs(ctx context.Context, key, value string) {
	s := state(ctx)
	s.attrs = append(s.attrs, slog.String(key, value))
}

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:=-]{1,128}$`)

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
// sane, otherwise a new one), a logger carrying it, and one access-log line.
func observe(base *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !validRequestID.MatchString(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		// Every answer is JSON about one caller's items: never sniffed as
		// another type, never kept by a shared cache.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		st := &reqState{id: id, base: base, attrs: make([]slog.Attr, 1, 8)}
		st.attrs[0] = slog.String("request_id", id)
		rec := &statusRecorder{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, st))
		next.ServeHTTP(rec, r)
		base.LogAttrs(r.Context(), slog.LevelInfo, "request", append(st.attrs, slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("route", r.Pattern), slog.Int("status", rec.status), slog.Int64("duration_ms", time.Since(start).Milliseconds()))...)
	})
}
