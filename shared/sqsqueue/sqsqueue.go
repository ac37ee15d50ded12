// Package sqsqueue sends messages to one SQS queue in batches: ten entries
// per SendMessageBatch call (SQS's maximum), a bounded number of calls in
// flight, and only the entries SQS reports as failed sent again. Nothing is
// dropped silently: what still fails after the retries is returned, entry
// by entry, in the error.
package sqsqueue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"spaces/shared/backoff"
	"spaces/shared/tracing"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const (
	// BatchSize is SQS's limit of entries per SendMessageBatch.
	BatchSize = 10
	// MaxDelay is SQS's limit for DelaySeconds.
	MaxDelay = 15 * time.Minute

	defaultConcurrency = 16
	defaultAttempts    = 4
	backoffBase        = 50 * time.Millisecond
)

// API is the part of the SQS client the queue uses.
type API interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Message is one message to send.
type Message struct {
	Body string
	// Delay postpones delivery (whole seconds, at most MaxDelay).
	Delay time.Duration
}

// Queue sends to one queue. It is safe for concurrent use.
type Queue struct {
	api API
	url string
	// Concurrency bounds the SendMessageBatch calls in flight (default 16).
	Concurrency int
	// Attempts bounds the sends of one entry (default 4).
	Attempts int

	calls atomic.Int64
}

// New returns a queue sending to url.
func New(api API, url string) *Queue { return &Queue{api: api, url: url} }

// Calls is how many SendMessageBatch calls the queue has made.
func (q *Queue) Calls() int64 { return q.calls.Load() }

// Postpone makes a received message visible again only after d (whole
// seconds, at most SQS's 12 hours).
func (q *Queue) Postpone(ctx context.Context, receiptHandle string, d time.Duration) error {
	_, err := q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(receiptHandle), VisibilityTimeout: int32(min(d, 12*time.Hour) / time.Second),
	})
	return err
}

// SendError lists the messages that could not be sent.
type SendError struct {
	// Failed maps the index of each unsent message (in the slice given to
	// Send) to why.
	Failed map[int]string
}

func (e *SendError) Error() string {
	idx := slices.Sorted(maps.Keys(e.Failed))
	var b strings.Builder
	fmt.Fprintf(&b, "sqs: %d message(s) not sent:", len(idx))
	for n, i := range idx {
		if n == 10 {
			fmt.Fprintf(&b, " … and %d more", len(idx)-n)
			break
		}
		fmt.Fprintf(&b, " [%d] %s;", i, e.Failed[i])
	}
	return b.String()
}

// Send sends every message. Invalid messages (empty body, delay out of
// range) are refused before anything is sent. Entries SQS reports as
// failed for a reason that may pass (throttling, server errors) and calls
// that fail outright are retried with backoff; the error is a *SendError
// naming every message that was not sent.
func (q *Queue) Send(ctx context.Context, msgs []Message) error {
	var bad []string
	for i, m := range msgs {
		if m.Body == "" {
			bad = append(bad, fmt.Sprintf("[%d] body is empty", i))
		}
		if m.Delay < 0 || m.Delay > MaxDelay {
			bad = append(bad, fmt.Sprintf("[%d] delay %s is not between 0 and %s", i, m.Delay, MaxDelay))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("sqs: nothing sent, invalid messages: %s", strings.Join(bad, "; "))
	}
	conc := q.Concurrency
	if conc <= 0 {
		conc = defaultConcurrency
	}
	var (
		mu     sync.Mutex
		failed = map[int]string{}
		wg     sync.WaitGroup
		sem    = make(chan struct{}, conc)
	)
	for start := 0; start < len(msgs); start += BatchSize {
		end := min(start+BatchSize, len(msgs))
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			mu.Lock()
			for i := start; i < len(msgs); i++ {
				failed[i] = "not sent: " + ctx.Err().Error()
			}
			mu.Unlock()
			wg.Wait()
			return &SendError{Failed: failed}
		}
		wg.Go(func() {
			defer func() { <-sem }()
			f := q.sendBatch(ctx, msgs, start, end)
			if len(f) > 0 {
				mu.Lock()
				for i, why := range f {
					failed[i] = why
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		return &SendError{Failed: failed}
	}
	return nil
}

// sendBatch sends msgs[start:end] (at most ten), retrying what failed, and
// returns the indexes still unsent with the last reason.
func (q *Queue) sendBatch(ctx context.Context, msgs []Message, start, end int) map[int]string {
	attempts := q.Attempts
	if attempts <= 0 {
		attempts = defaultAttempts
	}
	pending := make([]int, 0, end-start)
	for i := start; i < end; i++ {
		pending = append(pending, i)
	}
	why := map[int]string{}
	// Each message carries the sender's trace to its receiver.
	trace := tracing.SQSAttributes(ctx)
	for attempt := 1; len(pending) > 0; attempt++ {
		entries := make([]types.SendMessageBatchRequestEntry, len(pending))
		for k, i := range pending {
			entries[k] = types.SendMessageBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				MessageBody:       aws.String(msgs[i].Body),
				DelaySeconds:      int32(msgs[i].Delay / time.Second),
				MessageAttributes: trace,
			}
		}
		q.calls.Add(1)
		out, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		var retry []int
		if err != nil {
			for _, i := range pending {
				why[i] = err.Error()
			}
			retry = pending
		} else {
			for _, f := range out.Failed {
				i, convErr := strconv.Atoi(aws.ToString(f.Id))
				if convErr != nil || i < start || i >= end {
					continue // not an id we sent; SQS never does this
				}
				why[i] = aws.ToString(f.Code) + ": " + aws.ToString(f.Message)
				// A sender fault (a malformed entry) fails the same way
				// again; only the others are worth another try.
				if !f.SenderFault {
					retry = append(retry, i)
				}
			}
			failedNow := map[int]bool{}
			for _, f := range out.Failed {
				if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil {
					failedNow[i] = true
				}
			}
			for _, i := range pending {
				if !failedNow[i] {
					delete(why, i)
				}
			}
		}
		if len(retry) == 0 || attempt >= attempts || ctx.Err() != nil {
			break
		}
		pending = retry
		if err := backoff.Wait(ctx, backoffBase, attempt); err != nil {
			break
		}
	}
	return why
}
