package tracing

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithytracing "github.com/aws/smithy-go/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// SDK is the tracer provider for AWS SDK clients (their Options'
// TracerProvider; shared/awsclient sets it on every client): one client
// span per operation ("DynamoDB.TransactWriteItems",
// "SQS.SendMessageBatch") under the caller's span, through the SDK's own
// tracing hook (the contrib otelaws middleware is deprecated in its
// favour). Without a span in the caller's context it makes none.
func SDK() smithytracing.TracerProvider { return sdkTracer{} }

// sdkTracer adapts the SDK's tracing interface to OpenTelemetry. It keeps
// the operation spans only (the SDK also opens internal ones for
// serializing, signing, retrying...), and takes the tracer from the
// caller's span, like every other hook here.
type sdkTracer struct{}

func (sdkTracer) Tracer(string, ...smithytracing.TracerOption) smithytracing.Tracer {
	return sdkTracer{}
}

func (sdkTracer) StartSpan(ctx context.Context, name string, opts ...smithytracing.SpanOption) (context.Context, smithytracing.Span) {
	var o smithytracing.SpanOptions
	for _, f := range opts {
		f(&o)
	}
	if o.Kind != smithytracing.SpanKindClient {
		return ctx, sdkSpan{name: name, span: trace.SpanFromContext(ctx), inner: true}
	}
	var attrs []attribute.KeyValue
	for _, k := range []string{"rpc.system", "rpc.service", "rpc.method"} {
		if v, ok := o.Properties.Get(k).(string); ok {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(Scope)
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, sdkSpan{name: name, span: span}
}

type sdkSpan struct {
	name  string
	span  trace.Span
	inner bool // an internal step: reported as its operation, never ended here
}

func (s sdkSpan) Name() string { return s.name }

func (s sdkSpan) Context() smithytracing.SpanContext {
	sc := s.span.SpanContext()
	return smithytracing.SpanContext{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), IsRemote: sc.IsRemote()}
}

func (s sdkSpan) AddEvent(string, ...smithytracing.EventOption) {}

func (s sdkSpan) SetStatus(smithytracing.SpanStatus) {}

func (s sdkSpan) SetProperty(k, v any) {
	if s.inner {
		return
	}
	key, ok := k.(string)
	if !ok {
		return
	}
	switch v := v.(type) {
	case string:
		s.span.SetAttributes(attribute.String(key, v))
	case bool:
		s.span.SetAttributes(attribute.Bool(key, v))
	case int:
		s.span.SetAttributes(attribute.Int(key, v))
	default:
		s.span.SetAttributes(attribute.String(key, fmt.Sprint(v)))
	}
}

func (s sdkSpan) End() {
	if !s.inner {
		s.span.End()
	}
}

// SQSAttributes are the message attributes that carry the context's trace
// to whoever receives the message (W3C traceparent, as a String attribute).
func SQSAttributes(ctx context.Context) map[string]sqstypes.MessageAttributeValue {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	out := make(map[string]sqstypes.MessageAttributeValue, len(c))
	for k, v := range c {
		out[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return out
}

// Message starts the span of handling one received message, continuing
// the trace its sender put in its attributes (SQSAttributes), and linked
// to the span of the invocation that received it.
func Message(ctx context.Context, name string, attrs map[string]events.SQSMessageAttribute) (context.Context, func(error)) {
	c := propagation.MapCarrier{}
	for k, v := range attrs {
		if v.StringValue != nil {
			c[k] = *v.StringValue
		}
	}
	return continueTrace(ctx, name, c, trace.SpanKindConsumer)
}

// Carrier is the context's trace as W3C trace context fields
// (traceparent), for a payload another function handles (a synchronous
// Invoke's, whose trace header neither the emulator nor a function's own
// handler span carries to the work): nil without a span.
func Carrier(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// Continue starts the span of work a caller asked for with a payload that
// carried its trace (Carrier): the span continues the caller's trace and
// links the invocation that received the payload; without a carrier it is
// under the invocation's span.
func Continue(ctx context.Context, name string, carrier map[string]string) (context.Context, func(error)) {
	return continueTrace(ctx, name, propagation.MapCarrier(carrier), trace.SpanKindServer)
}

func continueTrace(ctx context.Context, name string, c propagation.MapCarrier, kind trace.SpanKind) (context.Context, func(error)) {
	invocation := trace.SpanFromContext(ctx)
	parent := propagation.TraceContext{}.Extract(ctx, c)
	if !trace.SpanContextFromContext(parent).IsValid() {
		return Start(ctx, name)
	}
	tracer := invocation.TracerProvider().Tracer(Scope)
	ctx, span := tracer.Start(parent, name, trace.WithSpanKind(kind),
		trace.WithLinks(trace.Link{SpanContext: invocation.SpanContext()}))
	return ctx, func(err error) { end(span, err) }
}
