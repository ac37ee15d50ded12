package lambdarules

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"spaces/infra/emulator"
)

// Conditions of an asynchronous event's failure, as its invocation record
// names them.
const (
	RetriesExhausted = "RetriesExhausted"
	EventAgeExceeded = "EventAgeExceeded"
)

// DefaultAsyncDelays are Lambda's waits between the attempts of an
// asynchronous event: "one minute between the first two attempts, and two
// minutes between the second and third"
// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html).
var DefaultAsyncDelays = []time.Duration{time.Minute, 2 * time.Minute}

// AsyncInvoker runs asynchronous invocations of one function, as Lambda
// runs the events EventBridge Scheduler hands it (Scheduler invokes a
// Lambda target with InvocationType Event:
// https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-targets-templated.html).
// A failed event is tried again up to the function's MaxRetries; an event
// older than its MaxEventAge is not run any more; an event that is given
// up is counted (Lambda's AsyncEventsDropped metric) and its invocation
// record sent to the on-failure destination, if the function has one
// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html).
type AsyncInvoker struct {
	Function Function
	// Delays are the waits before the second and third attempts (default
	// DefaultAsyncDelays; tests shorten them).
	Delays []time.Duration
	// OnFailure sends an invocation record to the destination queue named
	// by Function.Async.OnFailure (nil: records are not kept).
	OnFailure func(ctx context.Context, record []byte) error
	Now       func() time.Time

	dropped atomic.Int64
}

// Dropped is how many events were given up (AsyncEventsDropped).
func (a *AsyncInvoker) Dropped() int64 { return a.dropped.Load() }

// AsyncResult is what became of one event.
type AsyncResult struct {
	Attempts int
	// Condition is "" for an event the function handled, else why it was
	// dropped.
	Condition string
	Err       error
}

// Invoke queues event (now) and runs it until it succeeds or is dropped;
// it returns when that is decided (callers that must not wait run it in a
// goroutine, as Lambda's internal queue answers the caller at once).
func (a *AsyncInvoker) Invoke(ctx context.Context, event json.RawMessage, h func(context.Context, json.RawMessage) error) AsyncResult {
	now := a.Now
	if now == nil {
		now = time.Now
	}
	delays := a.Delays
	if delays == nil {
		delays = DefaultAsyncDelays
	}
	f := a.Function
	queued := now()
	var res AsyncResult
	for {
		if now().Sub(queued) > f.Async.MaxEventAge {
			res.Condition = EventAgeExceeded
			break
		}
		_, err := Run(ctx, f, TraceHeader("").Next(f.ID), func(ctx context.Context) (struct{}, error) { return struct{}{}, h(ctx, event) })
		res.Err = err
		if IsThrottled(err) && ctx.Err() == nil {
			// "For throttling errors (429) and system errors (500-series),
			// Lambda returns the event to the queue and attempts to run the
			// function again for up to 6 hours": not an attempt, no retry
			// spent; only the event's age ends it
			// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html).
			select {
			case <-ctx.Done():
				return res
			case <-time.After(delays[0]):
			}
			continue
		}
		res.Attempts++
		if err == nil || ctx.Err() != nil {
			return res
		}
		if res.Attempts > f.Async.MaxRetries {
			res.Condition = RetriesExhausted
			break
		}
		wait := delays[min(res.Attempts-1, len(delays)-1)]
		select {
		case <-ctx.Done():
			return res
		case <-time.After(wait):
		}
	}
	a.dropped.Add(1)
	if a.OnFailure != nil && f.Async.OnFailure != "" {
		msg := ""
		if res.Err != nil {
			msg = res.Err.Error()
		}
		record, _ := json.Marshal(map[string]any{
			"version":   "1.0",
			"timestamp": now().UTC().Format(time.RFC3339Nano),
			"requestContext": map[string]any{
				"requestId":              uuid.NewString(),
				"functionArn":            "arn:aws:lambda:" + emulator.Region + ":" + emulator.AccountID + ":function:" + f.ID + ":$LATEST",
				"condition":              res.Condition,
				"approximateInvokeCount": res.Attempts,
			},
			"requestPayload":  json.RawMessage(orNull(event)),
			"responseContext": map[string]any{"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
			"responsePayload": map[string]string{"errorMessage": msg},
		})
		// Lambda sends the record with the function's execution role
		// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html).
		if err := a.OnFailure(WithFunction(ctx, f.ID), record); err != nil {
			res.Err = err
		}
	}
	return res
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
