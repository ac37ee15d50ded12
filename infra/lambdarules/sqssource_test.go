package lambdarules

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
)

// The poller hands a batch over as Lambda would, deletes what the handler
// acknowledged and leaves what it reported failed, or the whole batch when
// the handler fails.
func TestPollerDeletesOnlyAcknowledged(t *testing.T) {
	env := emulatortest.Start(t)
	c := awsclient.SQS(env.Config, env.Endpoint)
	q := env.Resources["ProbeQueue"]
	send := func(bodies ...string) {
		for _, b := range bodies {
			if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(b)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var seen events.SQSEvent
	handler := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		seen = ev
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			if r.Body == "fail" {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	}
	p := &Poller{SQS: c, QueueURL: q.URL, QueueARN: q.ARN, Handler: handler, Wait: time.Second, Log: slog.New(slog.DiscardHandler)}
	send("ok-1", "fail", "ok-2")
	n, err := p.Poll(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("poll: %d deleted, %v", n, err)
	}
	r := seen.Records[0]
	if len(seen.Records) != 3 || r.EventSource != "aws:sqs" || r.EventSourceARN != q.ARN || r.Attributes["ApproximateReceiveCount"] != "1" || r.ReceiptHandle == "" {
		t.Errorf("event %+v", seen)
	}
	if vis, inflight := emulatortest.QueueDepth(t, c, q.URL); vis != "0" || inflight != "1" {
		t.Errorf("after poll: %s visible, %s in flight; want the failed one in flight", vis, inflight)
	}

	// A handler error or an unknown id leaves the whole batch.
	env2 := emulatortest.Start(t)
	q2 := env2.Resources["ProbeQueue"]
	for _, h := range []func(context.Context, events.SQSEvent) (events.SQSEventResponse, error){
		func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, errors.New("boom")
		},
		func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "nope"}}}, nil
		},
	} {
		q = q2
		send("a", "b")
		p := &Poller{SQS: c, QueueURL: q2.URL, QueueARN: q2.ARN, Handler: h, Wait: time.Second}
		if n, err := p.Poll(t.Context()); err == nil || n != 0 {
			t.Errorf("failing batch: %d deleted, %v", n, err)
		}
	}
	if vis, inflight := emulatortest.QueueDepth(t, c, q2.URL); vis != "0" || inflight != "4" {
		t.Errorf("%s visible, %s in flight; want all 4 left for redelivery", vis, inflight)
	}
}

// counted is an SQS client that counts the requests a Poller sends, and
// how many messages each receive returned.
type counted struct {
	*sqs.Client
	mu       sync.Mutex
	receives []int // messages per ReceiveMessage
	deletes  []int // entries per DeleteMessageBatch
}

func (c *counted) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := c.Client.ReceiveMessage(ctx, in, opts...)
	if err == nil {
		c.mu.Lock()
		c.receives = append(c.receives, len(out.Messages))
		c.mu.Unlock()
	}
	return out, err
}

func (c *counted) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	c.mu.Lock()
	c.deletes = append(c.deletes, len(in.Entries))
	c.mu.Unlock()
	return c.Client.DeleteMessageBatch(ctx, in, opts...)
}

func (c *counted) take() (receives, deletes []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	receives, deletes = c.receives, c.deletes
	c.receives, c.deletes = nil, nil
	return receives, deletes
}

func sendN(t *testing.T, c *sqs.Client, url string, n int) {
	t.Helper()
	for i := 0; i < n; i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j := i; j < min(n, i+10); j++ {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(string(rune('a' + j - i))), MessageBody: aws.String("m")})
		}
		if _, err := c.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
			t.Fatal(err)
		}
	}
}

// A poller gathers a batch as Lambda's does: receives of at most 10 until
// BatchSize messages or the end of the window after the first, one
// invocation, and DeleteMessageBatch of 10 entries at most; with no
// window, one receive is the batch.
func TestPollerGathersBatchesAsLambda(t *testing.T) {
	env := emulatortest.Start(t)
	c := &counted{Client: awsclient.SQS(env.Config, env.Endpoint)}
	q := env.Resources["ProbeQueue"]
	var batches []int
	ack := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		batches = append(batches, len(ev.Records))
		return events.SQSEventResponse{}, nil
	}
	p := &Poller{SQS: c, QueueURL: q.URL, QueueARN: q.ARN, Handler: ack, Wait: time.Second,
		Source: SQSSource{BatchSize: 25, Window: time.Second}}
	check := func(what string, wantBatch int, wantReceives, wantDeletes []int) {
		t.Helper()
		batches = nil
		n, err := p.Poll(t.Context())
		receives, deletes := c.take()
		if err != nil || n != wantBatch || len(batches) != 1 || batches[0] != wantBatch {
			t.Fatalf("%s: %d deleted, batches %v, %v; want one batch of %d", what, n, batches, err, wantBatch)
		}
		if !slicesEqual(receives, wantReceives) || !slicesEqual(deletes, wantDeletes) {
			t.Errorf("%s: receives returned %v, deletes of %v; want %v and %v", what, receives, deletes, wantReceives, wantDeletes)
		}
	}
	// 30 waiting: the batch closes full, at 25 (the last receive asks for 5).
	sendN(t, c.Client, q.URL, 30)
	check("full", 25, []int{10, 10, 5}, []int{10, 10, 5})
	// 5 left: the window runs out on an empty receive.
	check("window", 5, []int{5, 0}, []int{5})
	// No window: the first receive is the batch.
	p.Source = SQSSource{BatchSize: 25}
	sendN(t, c.Client, q.URL, 12)
	check("no window", 10, []int{10}, []int{10})
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Run keeps MinPollers long-polling an idle queue: each waits its whole
// poll and asks again, so an idle event source still sends receives
// (the fixed part of what it costs), all of them empty.
func TestPollersLongPollAnIdleQueue(t *testing.T) {
	env := emulatortest.Start(t)
	c := &counted{Client: awsclient.SQS(env.Config, env.Endpoint)}
	q := env.Resources["ProbeQueue"]
	p := &Poller{SQS: c, QueueURL: q.URL, QueueARN: q.ARN, Wait: time.Second, Pollers: MinPollers,
		Handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			t.Error("a batch from an empty queue")
			return events.SQSEventResponse{}, nil
		}}
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	p.Run(ctx)
	receives, deletes := c.take()
	// Each of the 5 pollers: polls of 1 s at 0 and 1 s, a third cut off.
	if len(receives) != 2*MinPollers || len(deletes) != 0 {
		t.Errorf("%d receives, %d deletes in 2.5 s of 1-second polls; want %d receives, none deleted", len(receives), len(deletes), 2*MinPollers)
	}
	for _, n := range receives {
		if n != 0 {
			t.Errorf("a receive of an idle queue returned %d messages", n)
		}
	}
}

// While messages are waiting, Run adds pollers, also for a batch smaller
// than a receive's 10 (the probe trigger's 5): a receive that came back
// with every message it asked for means more are likely waiting.
func TestPollersGrowWithSmallBatches(t *testing.T) {
	env := emulatortest.Start(t)
	c := awsclient.SQS(env.Config, env.Endpoint)
	q := env.Resources["ProbeQueue"]
	sendN(t, c, q.URL, 60)
	var (
		mu            sync.Mutex
		running, most int
		handled       int
	)
	p := &Poller{SQS: c, QueueURL: q.URL, QueueARN: q.ARN, Wait: time.Second, Pollers: 1,
		Source: SQSSource{BatchSize: 5, MaximumConcurrency: 4},
		Handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(300 * time.Millisecond)
			mu.Lock()
			running--
			handled++
			mu.Unlock()
			return events.SQSEventResponse{}, nil
		}}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	p.Run(ctx)
	if most < 2 || most > 4 {
		t.Errorf("at most %d batches at once with 60 messages waiting; want the pollers to grow from 1, up to MaximumConcurrency 4", most)
	}
	if handled == 0 {
		t.Error("nothing handled")
	}
}
