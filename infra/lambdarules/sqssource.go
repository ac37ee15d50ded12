package lambdarules

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"spaces/infra/emulator"
)

// The SQS event source mapping's rules, as AWS documents them.
const (
	// MinPollers: "When messages are available, Lambda starts processing
	// five batches at a time with five concurrent invocations of your
	// function. ... When traffic is low, Lambda scales back the processing
	// to five concurrent batches, and can optimize to as few as 2 ... this
	// optimization is not available when you enable the maximum
	// concurrency setting"
	// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html).
	// The probe trigger sets MaximumConcurrency, so five always poll.
	MinPollers = 5
	// PollersAddedPerMinute: "If messages are still available, Lambda
	// increases the number of processes that are reading batches by up to
	// 300 more instances per minute", up to 1,000 (same page).
	PollersAddedPerMinute = 300
	MaxPollers            = 1000
	// MaxWait is SQS's longest long poll, which Lambda's pollers use
	// ("Lambda uses long polling to poll a queue", same page; "The maximum
	// long polling wait time is 20 seconds",
	// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/best-practices-setting-up-long-polling.html).
	MaxWait = 20 * time.Second
	// receiveMax and deleteMax: one ReceiveMessage returns at most 10
	// messages, one DeleteMessageBatch deletes at most 10
	// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ReceiveMessage.html,
	// .../API_DeleteMessageBatch.html).
	receiveMax = 10
	deleteMax  = 10
)

// SQSSource is a function's SQS event as the template declares it
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-parameters.html).
type SQSSource struct {
	// Queue is the logical id of the queue.
	Queue string
	// BatchSize is the most messages in one invocation (Lambda's default 10).
	BatchSize int
	// Window is MaximumBatchingWindowInSeconds: how long a poller gathers
	// a batch after its first message (default 0: each receive is a batch).
	Window time.Duration
	// MaximumConcurrency is ScalingConfig.MaximumConcurrency (0: none).
	MaximumConcurrency int
}

// SQSAPI is the part of the SQS client a Poller uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Poller is Lambda's SQS event source mapping, locally: pollers long-poll
// the queue (MaxWait, 10 messages a receive), each gathers a batch of up to
// Source.BatchSize messages for Source.Window after its first message,
// hands it to Handler as an events.SQSEvent, then deletes the messages the
// handler acknowledged with DeleteMessageBatch, 10 at a time, and leaves
// the ones it reported failed (ReportBatchItemFailures) to come back after
// the visibility timeout, where the queue's redrive policy eventually moves
// them to its DLQ. A handler error, or a failure naming an unknown message,
// fails the whole batch, as in Lambda
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
// Each batch is an invocation of Function under the template's rules (its
// Timeout, recursive loop detection).
//
// Run keeps Pollers pollers (MinPollers for the AWS model) and, while
// receives come back full (with every message they asked for: 10, or what
// the batch still had room for), adds one at most every 60/PollersAddedPerMinute
// seconds up to Source.MaximumConcurrency (else MaxPollers); a poller above
// the minimum stops after a batch that its window closed (no backlog).
// Every request goes through SQS, so an SDK middleware on it counts what
// the event source really costs, empty receives included.
type Poller struct {
	SQS      SQSAPI
	QueueURL string
	QueueARN string
	Handler  SQSHandler
	// Function is the consumer's rules (nil only in the poller's own
	// tests: the handler then runs bare).
	Function *Function
	// Source is the event's settings (zero: batches of up to 10, no
	// window).
	Source SQSSource
	// DLQURL is the queue's dead-letter queue, where a message stopped by
	// loop detection goes ("": it is dropped).
	DLQURL string
	// Pollers is how many pollers Run keeps at least (default 1).
	Pollers int
	// Wait is the long-poll time (default MaxWait).
	Wait time.Duration
	Log  *slog.Logger
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	ctx = p.withRole(ctx)
	minimum := max(1, p.Pollers)
	maximum := MaxPollers
	if p.Source.MaximumConcurrency > 0 {
		maximum = p.Source.MaximumConcurrency
	}
	maximum = max(minimum, maximum)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		running int
		added   time.Time
	)
	// grow is called after a full receive: messages are still available.
	var start func(extra bool)
	grow := func() {
		mu.Lock()
		defer mu.Unlock()
		if running >= maximum || time.Since(added) < time.Minute/PollersAddedPerMinute {
			return
		}
		running++
		added = time.Now()
		start(true)
	}
	start = func(extra bool) {
		wg.Go(func() {
			for ctx.Err() == nil {
				n, full, windowed, err := p.poll(ctx, grow)
				if err != nil && ctx.Err() == nil {
					p.log().Error("poll failed", "queue", p.QueueURL, "error", err)
					select { // do not spin on a broken queue
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
				if extra && (n == 0 || (windowed && !full)) {
					mu.Lock()
					if running > minimum {
						running--
						mu.Unlock()
						return
					}
					mu.Unlock()
				}
			}
		})
	}
	mu.Lock()
	running = minimum
	for range minimum {
		start(false)
	}
	mu.Unlock()
	wg.Wait()
}

// Poll is one poller's turn: it receives a batch (waiting up to Wait for
// its first message, then gathering for Source.Window), runs the handler
// and deletes what it acknowledged. It returns how many messages were
// deleted.
func (p *Poller) Poll(ctx context.Context) (int, error) {
	n, _, _, err := p.poll(p.withRole(ctx), nil)
	return n, err
}

// poll is Poll; full says the batch reached BatchSize, windowed that it
// was gathered for a window; grow is called after each receive that came
// back with every message it asked for.
func (p *Poller) poll(ctx context.Context, grow func()) (deleted int, full, windowed bool, err error) {
	size := p.Source.BatchSize
	if size <= 0 {
		size = 10 // Lambda's default for SQS
	}
	wait := p.Wait
	if wait <= 0 {
		wait = MaxWait
	}
	var msgs []sqstypes.Message
	var opened time.Time
	for len(msgs) < size {
		w := wait
		if len(msgs) > 0 {
			// Inside the window, a poll waits out what is left of it
			// (WaitTimeSeconds is whole seconds, so up to a second more;
			// AWS documents that at very low traffic its pollers may wait
			// up to 20 s whatever the window,
			// https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html).
			left := p.Source.Window - time.Since(opened)
			if left <= 0 {
				break
			}
			w = time.Duration(math.Ceil(left.Seconds())) * time.Second
		}
		out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(p.QueueURL),
			MaxNumberOfMessages:         int32(min(receiveMax, size-len(msgs))),
			WaitTimeSeconds:             int32(w / time.Second),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if len(msgs) == 0 {
				return 0, false, false, fmt.Errorf("receive: %w", err)
			}
			break // invoke what was gathered; their visibility timeout runs
		}
		if asked := min(receiveMax, size-len(msgs)); len(out.Messages) == asked && grow != nil {
			grow() // every message it asked for: more are likely waiting
		}
		if len(msgs) == 0 {
			if len(out.Messages) == 0 {
				return 0, false, false, nil
			}
			opened = time.Now()
		}
		msgs = append(msgs, out.Messages...)
		if p.Source.Window <= 0 {
			break
		}
		windowed = true
	}
	full = len(msgs) >= size
	n, err := p.handle(ctx, msgs)
	return n, full, windowed, err
}

// handle invokes the function with msgs and deletes what it acknowledged.
func (p *Poller) handle(ctx context.Context, msgs []sqstypes.Message) (int, error) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	handles := make(map[string]string, len(msgs))
	for i, m := range msgs {
		id := aws.ToString(m.MessageId)
		handles[id] = aws.ToString(m.ReceiptHandle)
		// The emulator keeps no AWSTraceHeader: it rides in a message
		// attribute (CarryTraceHeader), handed over where Lambda puts it.
		if t, ok := m.MessageAttributes[LocalTraceAttribute]; ok {
			delete(m.MessageAttributes, LocalTraceAttribute)
			if m.Attributes == nil {
				m.Attributes = map[string]string{}
			}
			m.Attributes["AWSTraceHeader"] = aws.ToString(t.StringValue)
		}
		ev.Records[i] = events.SQSMessage{
			MessageId:     id,
			ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body:          aws.ToString(m.Body),
			Md5OfBody:     aws.ToString(m.MD5OfBody),
			Attributes:    m.Attributes,
			// As Lambda passes them: the sender's trace rides here.
			MessageAttributes: messageAttributes(m.MessageAttributes),
			EventSource:       "aws:sqs",
			EventSourceARN:    p.QueueARN,
			AWSRegion:         emulator.Region,
		}
	}
	resp, err := p.invoke(ctx, ev)
	if err != nil {
		return 0, fmt.Errorf("handler failed the batch of %d: %w", len(ev.Records), err)
	}
	for _, f := range resp.BatchItemFailures {
		if _, ok := handles[f.ItemIdentifier]; !ok {
			return 0, fmt.Errorf("handler reported unknown message %q: the whole batch is retried", f.ItemIdentifier)
		}
		delete(handles, f.ItemIdentifier)
	}
	// The acknowledged ones, in the batch's order, 10 a request.
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for _, r := range ev.Records {
		if h, ok := handles[r.MessageId]; ok {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(r.MessageId), ReceiptHandle: aws.String(h)})
		}
	}
	deleted := 0
	for len(entries) > 0 {
		chunk := entries[:min(deleteMax, len(entries))]
		entries = entries[len(chunk):]
		del, err := p.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: chunk})
		if err != nil {
			return deleted, fmt.Errorf("delete: %w", err)
		}
		deleted += len(chunk) - len(del.Failed)
		if len(del.Failed) > 0 {
			// Not deleted: they come back and are handled again, which the
			// handlers tolerate.
			return deleted, fmt.Errorf("delete: %d of %d failed, first: %s", len(del.Failed), len(chunk), aws.ToString(del.Failed[0].Message))
		}
	}
	return deleted, nil
}

// invoke runs the batch as an invocation of the function; the messages
// loop detection stopped go to the DLQ (if any) and are deleted.
func (p *Poller) invoke(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if p.Function == nil {
		return p.Handler(ctx, ev)
	}
	resp, stopped, err := p.Function.SQS(ctx, ev, p.Handler)
	if err != nil {
		return resp, err // the stopped ones come back with the rest
	}
	for _, r := range stopped {
		p.log().Warn("recursive loop detected: the message is not handed to the function", "function", p.Function.ID,
			"message_id", r.MessageId, "chain", TraceHeader(r.Attributes["AWSTraceHeader"]).Count(p.Function.ID))
		if p.DLQURL == "" {
			continue
		}
		// Lambda's own move, not a request of the function's role: the
		// recursion page names no permission the role needs for it.
		if _, serr := p.SQS.SendMessage(WithFunction(ctx, ""), &sqs.SendMessageInput{QueueUrl: aws.String(p.DLQURL), MessageBody: aws.String(r.Body)}); serr != nil {
			// Not deleted either: it comes back and is stopped again.
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp, nil
}

func messageAttributes(in map[string]sqstypes.MessageAttributeValue) map[string]events.SQSMessageAttribute {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]events.SQSMessageAttribute, len(in))
	for k, v := range in {
		out[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	return out
}

// withRole is ctx for the mapping's own requests: Lambda reads and
// deletes the messages with the consumer's execution role
// (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html, "Execution
// role permissions").
func (p *Poller) withRole(ctx context.Context) context.Context {
	if p.Function == nil {
		return ctx
	}
	return WithFunction(ctx, p.Function.ID)
}

func (p *Poller) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}
