package revisions

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"spaces/shared/tracing"
)

// HandleSQS is the claimer as an SQS-triggered Lambda with
// ReportBatchItemFailures: the messages to retry (later, or after an
// infrastructure failure) are reported as batch item failures.
func (c *Claimer) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, r := range ev.Records {
		// The claim continues the trace of the request that queued it.
		mctx, end := tracing.Message(ctx, "claim", r.MessageAttributes)
		ok := c.Claim(mctx, Delivery{MessageID: r.MessageId, ReceiptHandle: r.ReceiptHandle, Body: r.Body})
		end(nil)
		if !ok {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp, nil
}
