package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"spaces/infra/staticminter"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"spaces/infra/emulator"
	"spaces/infra/lambdarules"
	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/kubecred"
	"spaces/shared/kubeprobe"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/tracing"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// ProbingConfig is the local stack's probing; zero values take the
// defaults.
type ProbingConfig struct {
	// Interval is how often the scheduler ticks (default: the environment's
	// SPACES_PROBE_INTERVAL, else one minute).
	Interval time.Duration
	// Minter mints cluster credentials for probes (default: Config.Minter).
	Minter kubecred.Minter
	// Disabled turns the scheduler and the poller off.
	Disabled bool
	// AsyncDelays are the waits between a failed tick's attempts (default
	// Lambda's, lambdarules.DefaultAsyncDelays; tests shorten them).
	AsyncDelays []time.Duration
}

// startProbing ticks the scheduler and polls the probe queue into the
// prober, the way EventBridge Scheduler and Lambda's SQS source do in AWS.
func (st *Stack) startProbing(cfg Config) error {
	pc := cfg.Probing
	if pc.Disabled {
		return nil
	}
	if pc.Interval == 0 {
		env := config.Env{Lookup: os.LookupEnv}
		pc.Interval = env.Duration("SPACES_PROBE_INTERVAL", space.DefaultProbeInterval)
		if err := env.Err(); err != nil {
			return err
		}
	}
	switch {
	case pc.Minter != nil:
	case cfg.Minter != nil:
		pc.Minter = cfg.Minter
	default:
		pc.Minter = staticminter.Unconfigured{}
	}
	queue, ok := st.Resources["ProbeQueue"]
	if !ok {
		return errors.New("the template declares no ProbeQueue")
	}
	settings := wiring.ProberSettings{
		Common:     parts.Common{Table: st.Table, StaleAfter: cfg.StaleAfter},
		ProbeQueue: queue.URL, EventBus: st.Resources["EventBus"].Name,
		Heartbeat: space.DefaultHeartbeat, Interval: pc.Interval,
	}
	checker := &kubeprobe.Prober{Timeout: probing.DefaultTimeout}
	sched := wiring.Scheduler(st.aws, wiring.SchedulerSettings{Table: st.Table, ProbeQueue: queue.URL, Interval: pc.Interval}, cfg.Log)
	prober := wiring.Prober(st.aws, settings, pc.Minter, checker, cfg.Log)
	sqsc := awsclient.SQS(st.AWS, st.EmulatorURL)
	st.ProbeQueue = probing.Enqueuer{Queue: parts.ProbeQueue{Q: st.aws.Queue(queue.URL)}}

	handle := tracing.Handler(cfg.Tracing, "scheduler", sched.HandleSchedule)
	// EventBridge Scheduler invokes the scheduler asynchronously: Lambda's
	// retries, event age and on-failure destination apply, as the
	// function's EventInvokeConfig sets them.
	fn := st.Functions.Get("SchedulerFunction")
	async := &lambdarules.AsyncInvoker{Function: fn, Delays: pc.AsyncDelays}
	if fn.Async.OnFailure != "" {
		dest, ok := st.Resources[fn.Async.OnFailure]
		if !ok {
			return fmt.Errorf("the scheduler's on-failure destination %s is not a queue the template declares", fn.Async.OnFailure)
		}
		async.OnFailure = func(ctx context.Context, record []byte) error {
			_, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dest.URL), MessageBody: aws.String(string(record))})
			return err
		}
	}
	st.tick = func(ctx context.Context, input json.RawMessage) lambdarules.AsyncResult {
		res := async.Invoke(ctx, input, func(ctx context.Context, in json.RawMessage) error {
			_, err := handle(ctx, in)
			return err
		})
		if res.Condition != "" && ctx.Err() == nil {
			cfg.Log.Error("scheduler tick dropped", "condition", res.Condition, "attempts", res.Attempts, "error", res.Err)
		}
		return res
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { tickEvery(ctx, pc.Interval, st.tick, &wg) })
	poller := &Poller{SQS: sqsc, QueueURL: queue.URL, QueueARN: queue.ARN, Function: st.function("ProberFunction"), DLQURL: st.Resources["ProbeDLQ"].URL, Handler: tracing.Handler(cfg.Tracing, "prober", prober.HandleSQS), Log: cfg.Log}
	wg.Go(func() { poller.Run(ctx) })
	st.stopProbing = func() {
		cancel()
		wg.Wait()
		checker.Close()
	}
	return nil
}

// tickEvery hands the scheduler an event at once and then every interval,
// as the minute schedule does in AWS (where schedules fire; kumo's do
// not). Each event is an asynchronous invocation: the ticker does not wait
// for it.
func tickEvery(ctx context.Context, interval time.Duration, tick func(context.Context, json.RawMessage) lambdarules.AsyncResult, wg *sync.WaitGroup) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		wg.Go(func() { tick(ctx, nil) })
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SQSAPI is the part of the SQS client a Poller uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Poller is Lambda's SQS event source mapping, locally: it long-polls a
// queue, hands each batch to Handler as an events.SQSEvent, deletes the
// messages the handler acknowledged and leaves the ones it reported failed
// (ReportBatchItemFailures) to come back after the visibility timeout,
// where the queue's redrive policy eventually moves them to its DLQ. A
// handler error, or a failure naming an unknown message, fails the whole
// batch, as in Lambda. Each batch is an invocation of Function under the
// template's rules (lambdarules: its Timeout, recursive loop detection).
type Poller struct {
	SQS      SQSAPI
	QueueURL string
	QueueARN string
	Handler  func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	// Function is the consumer's rules (nil only in the poller's own
	// tests: the handler then runs bare).
	Function *lambdarules.Function
	// DLQURL is the queue's dead-letter queue, where a message stopped by
	// loop detection goes ("": it is dropped).
	DLQURL string
	// BatchSize is at most 10 (default 10).
	BatchSize int
	// Wait is the long-poll time (default 20 s, the maximum).
	Wait time.Duration
	Log  *slog.Logger
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if _, err := p.Poll(ctx); err != nil && ctx.Err() == nil {
			p.log().Error("poll failed", "queue", p.QueueURL, "error", err)
			select { // do not spin on a broken queue
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// Poll receives one batch (waiting up to Wait for it), runs the handler and
// deletes what it acknowledged. It returns how many messages were deleted.
func (p *Poller) Poll(ctx context.Context) (int, error) {
	size := p.BatchSize
	if size <= 0 || size > 10 {
		size = 10
	}
	wait := p.Wait
	if wait <= 0 {
		wait = 20 * time.Second
	}
	out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         int32(size),
		WaitTimeSeconds:             int32(wait / time.Second),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return 0, fmt.Errorf("receive: %w", err)
	}
	if len(out.Messages) == 0 {
		return 0, nil
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(out.Messages))}
	handles := make(map[string]string, len(out.Messages))
	for i, m := range out.Messages {
		id := aws.ToString(m.MessageId)
		handles[id] = aws.ToString(m.ReceiptHandle)
		// The emulator keeps no AWSTraceHeader: it rides in a message
		// attribute (lambdarules.CarryTraceHeader), handed over where
		// Lambda puts it.
		if t, ok := m.MessageAttributes[lambdarules.LocalTraceAttribute]; ok {
			delete(m.MessageAttributes, lambdarules.LocalTraceAttribute)
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
	if len(handles) == 0 {
		return 0, nil
	}
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for id, h := range handles {
		entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(id), ReceiptHandle: aws.String(h)})
	}
	del, err := p.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: entries})
	if err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	if len(del.Failed) > 0 {
		// Not deleted: they come back and are handled again, which the
		// handlers tolerate.
		return len(entries) - len(del.Failed), fmt.Errorf("delete: %d of %d failed, first: %s", len(del.Failed), len(entries), aws.ToString(del.Failed[0].Message))
	}
	return len(entries), nil
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
			"message_id", r.MessageId, "chain", lambdarules.TraceHeader(r.Attributes["AWSTraceHeader"]).Count(p.Function.ID))
		if p.DLQURL == "" {
			continue
		}
		if _, serr := p.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p.DLQURL), MessageBody: aws.String(r.Body)}); serr != nil {
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

func (p *Poller) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}
