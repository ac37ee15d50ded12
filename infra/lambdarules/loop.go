package lambdarules

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
)

// MaxChain is how many times one chain of requests may invoke a function:
// once a chain has invoked a function 16 times, Lambda stops the next
// invocation of it in that chain
// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-recursion.html).
const MaxChain = 16

// TraceHeader is an X-Ray trace header as Lambda uses it for loop
// detection: "Root=<trace id>;Lineage=<function>:<count>|...". Lambda adds
// to the lineage of the invocation's header the count of invocations of
// the function in the chain; a function sending with a supported SDK
// (every aws-sdk-go-v2 client adds the X-Amzn-Trace-Id header inside
// Lambda) carries it into the event it sends (for SQS, the message's
// AWSTraceHeader system attribute), and the next invocation the event
// causes counts on (https://docs.aws.amazon.com/lambda/latest/dg/invocation-recursion.html,
// "Understanding recursive loop detection"). The lineage's exact encoding
// is Lambda's own; here a function is the first 8 hex digits of the
// SHA-256 of its logical id.
type TraceHeader string

func fnHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:4])
}

func (t TraceHeader) fields() (root string, lineage map[string]int) {
	lineage = map[string]int{}
	for _, f := range strings.Split(string(t), ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		switch k {
		case "Root":
			root = v
		case "Lineage":
			for _, e := range strings.Split(v, "|") {
				h, n, _ := strings.Cut(e, ":")
				if c, err := strconv.Atoi(n); err == nil && h != "" {
					lineage[h] = c
				}
			}
		}
	}
	return root, lineage
}

// Count is how many times the chain has invoked function id.
func (t TraceHeader) Count(id string) int {
	_, l := t.fields()
	return l[fnHash(id)]
}

// Next is the header of an invocation of function id caused by an event
// that carried t ("" for an event from no chain: a new root).
func (t TraceHeader) Next(id string) TraceHeader {
	root, l := t.fields()
	if root == "" {
		root = newRoot()
	}
	l[fnHash(id)]++
	var entries []string
	for _, h := range slices.Sorted(maps.Keys(l)) {
		entries = append(entries, h+":"+strconv.Itoa(l[h]))
	}
	return TraceHeader("Root=" + root + ";Lineage=" + strings.Join(entries, "|"))
}

func newRoot() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return fmt.Sprintf("1-%08x-%s", time.Now().Unix(), hex.EncodeToString(b))
}

type traceKey struct{}

// WithTraceHeader is ctx within an invocation whose trace header is t.
func WithTraceHeader(ctx context.Context, t TraceHeader) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceHeaderFrom is the trace header of the invocation ctx is in ("").
func TraceHeaderFrom(ctx context.Context) TraceHeader {
	t, _ := ctx.Value(traceKey{}).(TraceHeader)
	return t
}

// LocalTraceAttribute is the message attribute that carries a message's
// AWSTraceHeader through the emulator, whose SQS keeps no system
// attributes; the local event source mapping hands it to the function in
// the record's attributes, where Lambda puts AWSTraceHeader.
const LocalTraceAttribute = "spaces-local.AWSTraceHeader"

// CarryTraceHeader is an SDK option (aws.Config.APIOptions) standing in
// for what the SDK and SQS do inside Lambda: a message sent within an
// invocation carries the invocation's trace header, lineage included.
func CarryTraceHeader(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("lambdarules.CarryTraceHeader",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (out middleware.InitializeOutput, metadata middleware.Metadata, err error) {
			t := TraceHeaderFrom(ctx)
			if t == "" {
				return next.HandleInitialize(ctx, in)
			}
			attr := sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(t))}
			with := func(m map[string]sqstypes.MessageAttributeValue) map[string]sqstypes.MessageAttributeValue {
				m = maps.Clone(m)
				if m == nil {
					m = map[string]sqstypes.MessageAttributeValue{}
				}
				m[LocalTraceAttribute] = attr
				return m
			}
			switch p := in.Parameters.(type) {
			case *sqs.SendMessageInput:
				c := *p
				c.MessageAttributes = with(c.MessageAttributes)
				in.Parameters = &c
			case *sqs.SendMessageBatchInput:
				c := *p
				c.Entries = slices.Clone(c.Entries)
				for i := range c.Entries {
					c.Entries[i].MessageAttributes = with(c.Entries[i].MessageAttributes)
				}
				in.Parameters = &c
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// SQSHandler is a function's handler of SQS batches.
type SQSHandler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// SQS runs one batch of an SQS event source mapping as an invocation of f.
// A record whose chain has invoked f MaxChain times already is not handed
// to f unless f's RecursiveLoop is Allow: Lambda stops that invocation and
// the message goes to the queue's dead-letter queue if it has one, else it
// is dropped (https://docs.aws.amazon.com/lambda/latest/dg/invocation-recursion.html).
// Those records are returned as stopped; the others are f's batch, whose
// invocation continues the longest chain among them. The batch runs under
// f's Timeout (Run): a timed-out batch fails whole, as any function error
// does, and its messages come back after the visibility timeout
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
func (f Function) SQS(ctx context.Context, ev events.SQSEvent, h SQSHandler) (resp events.SQSEventResponse, stopped []events.SQSMessage, err error) {
	var run []events.SQSMessage
	longest := TraceHeader("")
	for _, r := range ev.Records {
		t := TraceHeader(r.Attributes["AWSTraceHeader"])
		if t.Count(f.ID) >= MaxChain && f.RecursiveLoop != Allow {
			stopped = append(stopped, r)
			continue
		}
		if longest == "" || t.Count(f.ID) > longest.Count(f.ID) {
			longest = t
		}
		run = append(run, r)
	}
	if len(run) == 0 {
		return resp, stopped, nil
	}
	ev.Records = run
	resp, err = Run(ctx, f, longest.Next(f.ID), func(ctx context.Context) (events.SQSEventResponse, error) { return h(ctx, ev) })
	return resp, stopped, err
}
