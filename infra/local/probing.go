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

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	tick := tracing.Handler(cfg.Tracing, "scheduler", sched.HandleSchedule)
	wg.Go(func() { tickEvery(ctx, pc.Interval, tick, cfg.Log) })
	poller := &Poller{SQS: sqsc, QueueURL: queue.URL, QueueARN: queue.ARN, Handler: tracing.Handler(cfg.Tracing, "prober", prober.HandleSQS), Log: cfg.Log}
	wg.Go(func() { poller.Run(ctx) })
	st.stopProbing = func() {
		cancel()
		wg.Wait()
		checker.Close()
	}
	return nil
}

// tickEvery runs the scheduler at once and then every interval, as the
// minute schedule does in AWS (where schedules fire; kumo's do not).
func tickEvery(ctx context.Context, interval time.Duration, tick func(context.Context, json.RawMessage) (probing.FanOut, error), log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := tick(ctx, nil); err != nil && ctx.Err() == nil {
			log.Error("scheduler tick failed", "error", err)
		}
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
}

// Poller is Lambda's SQS event source mapping, locally: it long-polls a
// queue, hands each batch to Handler as an events.SQSEvent, deletes the
// messages the handler acknowledged and leaves the ones it reported failed
// (ReportBatchItemFailures) to come back after the visibility timeout,
// where the queue's redrive policy eventually moves them to its DLQ. A
// handler error, or a failure naming an unknown message, fails the whole
// batch, as in Lambda.
type Poller struct {
	SQS      SQSAPI
	QueueURL string
	QueueARN string
	Handler  func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
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
	resp, err := p.Handler(ctx, ev)
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
