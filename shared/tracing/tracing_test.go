package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"spaces/shared/tracing"
)

func logLine(t *testing.T, buf *bytes.Buffer) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	buf.Reset()
	return m
}

// Every line logged with a context gets what the context knows; a line
// without one gets nothing extra; attributes added below the edge reach
// lines logged with the edge's context, and a later value replaces an
// earlier one.
func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("fn", "api")
	tr, err := tracing.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := tracing.Handler(tr, "api", func(ctx context.Context, _ struct{}) (struct{}, error) {
		ctx = tracing.WithLogAttrs(ctx, slog.String("request_id", "r1"), slog.String("org_id", "unknown"))
		tracing.AddLogAttrs(ctx, slog.String("org_id", "acme"), slog.String("sub", "user-1"))
		log.InfoContext(ctx, "hello")
		sc := trace.SpanContextFromContext(ctx)
		l := logLine(t, &buf)
		want := map[string]any{"fn": "api", "request_id": "r1", "org_id": "acme", "sub": "user-1",
			"lambda_request_id": "aws-req-1", "trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()}
		for k, v := range want {
			if l[k] != v {
				t.Errorf("%s = %v, want %v (line %v)", k, l[k], v, l)
			}
		}
		return struct{}{}, nil
	})
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "aws-req-1"})
	if _, err := h(ctx, struct{}{}); err != nil {
		t.Fatal(err)
	}
	log.Info("plain")
	l := logLine(t, &buf)
	for _, k := range []string{"trace_id", "lambda_request_id", "request_id", "sub"} {
		if _, ok := l[k]; ok {
			t.Errorf("a line without context has %s: %v", k, l)
		}
	}
	// AddLogAttrs without WithLogAttrs changes nothing and does not panic.
	tracing.AddLogAttrs(t.Context(), slog.String("sub", "x"))
}

// An invocation continues the X-Ray trace Lambda passes (its trace id, its
// sampling decision); without one, a new trace id starts with the time,
// as X-Ray requires.
func TestHandlerContinuesLambdaTrace(t *testing.T) {
	tr, err := tracing.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got trace.SpanContext
	h := tracing.Handler(tr, "prober", func(ctx context.Context, _ int) (int, error) {
		got = trace.SpanContextFromContext(ctx)
		return 0, errors.New("failed")
	})
	//lint:ignore SA1029 aws-lambda-go's own key for the X-Ray header.
	ctx := context.WithValue(t.Context(), "x-amzn-trace-id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	if _, err := h(ctx, 0); err == nil || err.Error() != "failed" {
		t.Fatalf("the handler's error was not returned: %v", err)
	}
	if got.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || !got.IsSampled() {
		t.Errorf("span context %v, want the X-Ray root, sampled", got)
	}
	//lint:ignore SA1029 aws-lambda-go's own key for the X-Ray header.
	ctx = context.WithValue(t.Context(), "x-amzn-trace-id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0")
	_, _ = h(ctx, 0)
	if got.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || got.IsSampled() {
		t.Errorf("span context %v, want the X-Ray root, not sampled", got)
	}
	for _, bad := range []string{"", "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", "Root=1-zz;Parent=53995c3f42cd8ad8"} {
		before := time.Now().Unix()
		//lint:ignore SA1029 aws-lambda-go's own key for the X-Ray header.
		_, _ = h(context.WithValue(t.Context(), "x-amzn-trace-id", bad), 0)
		id := got.TraceID()
		secs := int64(id[0])<<24 | int64(id[1])<<16 | int64(id[2])<<8 | int64(id[3])
		if !got.IsValid() || got.TraceID().String() == "5759e988bd862e3fe1be46a994272793" || secs < before || secs > time.Now().Unix() {
			t.Errorf("header %q: span context %v, want a new X-Ray style trace", bad, got)
		}
	}
}

// A message carries its sender's trace: the receiver's span continues it
// and links the invocation that received it; a message without one is
// handled under the invocation.
func TestMessagesCarryTheTrace(t *testing.T) {
	var out bytes.Buffer
	tr, err := tracing.New(&out)
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]events.SQSMessageAttribute
	var sender trace.SpanContext
	send := tracing.Handler(tr, "scheduler", func(ctx context.Context, _ int) (int, error) {
		sender = trace.SpanContextFromContext(ctx)
		attrs = map[string]events.SQSMessageAttribute{}
		for k, v := range tracing.SQSAttributes(ctx) {
			attrs[k] = events.SQSMessageAttribute{DataType: *v.DataType, StringValue: v.StringValue}
		}
		return 0, nil
	})
	_, _ = send(t.Context(), 0)
	if attrs["traceparent"].StringValue == nil {
		t.Fatalf("no traceparent attribute: %v", attrs)
	}
	var got, fallback, invocation trace.SpanContext
	receive := tracing.Handler(tr, "prober", func(ctx context.Context, _ int) (int, error) {
		invocation = trace.SpanContextFromContext(ctx)
		mctx, end := tracing.Message(ctx, "probe", attrs)
		got = trace.SpanContextFromContext(mctx)
		end(nil)
		fctx, end := tracing.Message(ctx, "probe", nil)
		fallback = trace.SpanContextFromContext(fctx)
		end(nil)
		return 0, nil
	})
	_, _ = receive(t.Context(), 0)
	if got.TraceID() != sender.TraceID() || got.SpanID() == sender.SpanID() {
		t.Errorf("message span %v does not continue the sender's trace %v", got, sender)
	}
	if fallback.TraceID() != invocation.TraceID() {
		t.Errorf("a message without a trace is handled in trace %v, want the invocation's %v", fallback.TraceID(), invocation.TraceID())
	}
	if tracing.SQSAttributes(t.Context()) != nil {
		t.Error("a context without a span gave trace attributes")
	}
	// The exported message span names its link to the invocation.
	if !strings.Contains(out.String(), invocation.SpanID().String()) {
		t.Error("the invocation's span was not exported")
	}
}

// FromEnv accepts none, xray and stdout only.
func TestFromEnv(t *testing.T) {
	// xray without the daemon's address (sam local invoke) exports nowhere.
	for v, ok := range map[string]bool{"": true, "none": true, "stdout": true, "xray": true, "otlp": false} {
		_, err := tracing.FromEnv(func(k string) (string, bool) {
			if k == tracing.EnvExporter {
				return v, true
			}
			return "", false
		})
		if (err == nil) != ok {
			t.Errorf("%s=%q: error %v", tracing.EnvExporter, v, err)
		}
	}
}

// With the xray exporter every span reaches the X-Ray daemon as an
// independent subsegment: the invocation's under the segment Lambda
// opened, the others under their parents, in the X-Ray trace.
func TestXRayDaemon(t *testing.T) {
	daemon, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	env := map[string]string{tracing.EnvExporter: "xray", "AWS_XRAY_DAEMON_ADDRESS": "tcp:127.0.0.1:1 udp:" + daemon.LocalAddr().String()}
	tr, err := tracing.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(context.Background())
	var invocation, mint trace.SpanContext
	h := tracing.Handler(tr, "prober", func(ctx context.Context, _ int) (int, error) {
		invocation = trace.SpanContextFromContext(ctx)
		mctx, end := tracing.Start(ctx, "mint", attribute.String("provider", "gcp"))
		mint = trace.SpanContextFromContext(mctx)
		end(errors.New("denied"))
		return 0, nil
	})
	//lint:ignore SA1029 aws-lambda-go's own key for the X-Ray header.
	ctx := context.WithValue(t.Context(), "x-amzn-trace-id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	_, _ = h(ctx, 0)

	docs := map[string]map[string]any{}
	buf := make([]byte, 65536)
	for len(docs) < 2 {
		_ = daemon.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, _, err := daemon.ReadFrom(buf)
		if err != nil {
			t.Fatalf("after %d documents: %v", len(docs), err)
		}
		header, body, ok := strings.Cut(string(buf[:n]), "\n")
		if !ok || header != `{"format":"json","version":1}` {
			t.Fatalf("datagram %q lacks the daemon's header", buf[:n])
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		docs[doc["name"].(string)] = doc
	}
	inv, m := docs["prober"], docs["mint"]
	for name, d := range docs {
		if d["trace_id"] != "1-5759e988-bd862e3fe1be46a994272793" || d["type"] != "subsegment" || d["end_time"].(float64) < d["start_time"].(float64) {
			t.Errorf("%s: %v", name, d)
		}
	}
	if inv["id"] != invocation.SpanID().String() || inv["parent_id"] != "53995c3f42cd8ad8" {
		t.Errorf("invocation subsegment %v, want id %s under Lambda's segment", inv, invocation.SpanID())
	}
	if m["id"] != mint.SpanID().String() || m["parent_id"] != invocation.SpanID().String() || m["fault"] != true ||
		m["annotations"].(map[string]any)["provider"] != "gcp" {
		t.Errorf("mint subsegment %v", m)
	}
}
