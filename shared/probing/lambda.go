package probing

import (
	"context"
	"encoding/json"
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

// HandleSchedule is the scheduler as a Lambda invoked by EventBridge
// Scheduler; the event carries nothing the fan-out needs. An incomplete
// fan-out fails the invocation so that the schedule's retry policy runs it
// again (and its dead-letter queue keeps it if that fails too).
func (s *Scheduler) HandleSchedule(ctx context.Context, _ json.RawMessage) (FanOut, error) {
	return s.Tick(ctx)
}
