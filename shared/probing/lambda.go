package probing

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// HandleSQS is the prober as an SQS-triggered Lambda with
// ReportBatchItemFailures: the messages it names are retried, the others
// deleted.
func (p *Prober) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	ds := make([]Delivery, len(ev.Records))
	for i, r := range ev.Records {
		n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
		ds[i] = Delivery{MessageID: r.MessageId, Body: r.Body, ReceiveCount: n, Attributes: r.MessageAttributes}
	}
	var resp events.SQSEventResponse
	for _, id := range p.HandleBatch(ctx, ds) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	return resp, nil
}

// ScheduleInput is what a schedule may pass the scheduler: the shards its
// invocations fan out (none: every shard).
type ScheduleInput struct {
	Shards *Shards `json:"shards"`
}

// HandleSchedule is the scheduler as a Lambda invoked by EventBridge
// Scheduler, asynchronously; the event may name a range of shards
// (ScheduleInput), and otherwise carries nothing the fan-out needs. An
// incomplete fan-out, or a range the index does not have, fails the
// invocation: Lambda does not run it again (the template's
// EventInvokeConfig: no retry, the next minute's tick replaces it), counts
// it in AsyncEventsDropped and sends its record to SchedulerDLQ.
func (s *Scheduler) HandleSchedule(ctx context.Context, raw json.RawMessage) (FanOut, error) {
	var in ScheduleInput
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &in); err != nil {
			return FanOut{}, fmt.Errorf("schedule input: %w", err)
		}
	}
	if in.Shards == nil {
		return s.Tick(ctx)
	}
	return s.TickShards(ctx, *in.Shards)
}
