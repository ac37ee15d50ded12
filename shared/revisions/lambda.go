package revisions

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
)

// HandleSQS is the claimer as an SQS-triggered Lambda with
// ReportBatchItemFailures: the messages to retry (later, or after an
// infrastructure failure) are reported as batch item failures.
func (c *Claimer) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, r := range ev.Records {
		if !c.Claim(ctx, Delivery{MessageID: r.MessageId, ReceiptHandle: r.ReceiptHandle, Body: r.Body}) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp, nil
}
