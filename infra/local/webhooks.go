package local

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces"
	"spaces/infra/emulator"
	"spaces/infra/lambdarules"
	"spaces/shared/awsclient"
	"spaces/shared/tracing"
	"spaces/shared/wiring"
)

// WebhooksConfig is the local stack's webhook deliveries; zero values
// take the defaults.
type WebhooksConfig struct {
	// Roots are the TLS roots receivers are trusted by (tests: their
	// loopback receiver's CA); nil: the system's.
	Roots *tls.Config
	// Interval is how often an idle stream is polled (default 200 ms).
	Interval time.Duration
	// Wait is the delivery queue's long-poll time (default 20 s).
	Wait time.Duration
	// Visibility, when set, replaces the delivery queue's visibility
	// timeout (the template's 180 s): how long a message received by a
	// stack that was then killed waits to be delivered again. Tests that
	// kill the stack shorten it.
	Visibility time.Duration
	// Disabled turns both pollers off.
	Disabled bool
}

const (
	webhooksFunction = "WebhooksFunction"
	webhooksChanges  = "Changes"
)

// startWebhooks runs WebhooksFunction's two event sources as Lambda does:
// the table's stream, filtered by the template's patterns, into the
// fan-out, and the delivery queue into the attempts. Endpoints may be on
// loopback here (the developer's machine), never deployed.
func (st *starting) startWebhooks(cfg *Config) (func(), error) {
	wc := cfg.Webhooks
	src, err := emulator.FunctionStreamSource(spaces.Template, webhooksFunction, webhooksChanges)
	if err != nil {
		return nil, err
	}
	table, ok := st.Resources[src.Table]
	queue, ok2 := st.Resources["WebhooksQueue"]
	if !ok || !ok2 || table.StreamARN == "" {
		return nil, fmt.Errorf("the template declares no WebhooksQueue, or %s has no stream", src.Table)
	}
	if wc.Disabled {
		return nil, nil
	}
	if wc.Visibility > 0 {
		if _, err := awsclient.SQS(st.AWS, st.EmulatorURL).SetQueueAttributes(st.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(queue.URL),
			Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(int(wc.Visibility / time.Second))}}); err != nil {
			return nil, err
		}
	}
	fanout, deliverer := wiring.Webhooks(st.aws, wiring.WebhooksSettings{Table: st.Table, Queue: queue.URL,
		SealerKey: st.Resources["WebhookSecretsKey"].Name, AllowLoopback: true, Roots: wc.Roots}, cfg.Log)
	fn := st.Functions.Get(webhooksFunction)
	stream := &StreamPoller{
		Streams: emulator.Streams(st.AWS, st.EmulatorURL), StreamARN: table.StreamARN, Source: src,
		Handler:  lambdarules.Handler(fn, tracing.Handler(cfg.Tracing, "webhooks", fanout.HandleStream)),
		Interval: wc.Interval, Log: cfg.Log, Checkpoint: st.streamCheckpoint(webhooksFunction, webhooksChanges),
	}
	if q, ok := st.Resources[src.OnFailure]; ok {
		stream.Failures, stream.FailureQueueURL = awsclient.SQS(st.AWS, st.EmulatorURL), q.URL
	}
	if err := stream.Start(lambdarules.WithFunction(context.Background(), webhooksFunction)); err != nil {
		return nil, err
	}
	// Lambda's pollers, as in AWS: five at least, more with a backlog up to
	// the template's MaximumConcurrency; a batch held by a slow receiver
	// holds one of them, not the queue.
	hooksFn := st.function(webhooksFunction)
	attempts := &lambdarules.Poller{SQS: awsclient.SQS(st.AWS, st.EmulatorURL), QueueURL: queue.URL, QueueARN: queue.ARN,
		Function: hooksFn, Source: hooksFn.Sources["Attempts"], Pollers: lambdarules.MinPollers, DLQURL: st.Resources["WebhooksDLQ"].URL,
		Handler: tracing.Handler(cfg.Tracing, "webhooks", deliverer.HandleSQS), Wait: wc.Wait, Log: cfg.Log}
	stopStream := inBackground(func(ctx context.Context) { stream.Run(lambdarules.WithFunction(ctx, webhooksFunction)) })
	stopAttempts := inBackground(attempts.Run)
	return func() { stopAttempts(); stopStream() }, nil
}
