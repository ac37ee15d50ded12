package cascade

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
)

// HandleStream is the cascade as a DynamoDB-stream Lambda with
// ReportBatchItemFailures. The event source's filter passes only
// deregistrations (see template.yaml); any other record is skipped here too,
// so the handler is right even unfiltered. Records are handled in order; at
// the first failure the handler stops and reports that record's sequence
// number, from which Lambda retries the rest of the batch (records of one
// shard stay in order).
func (c *Cascade) HandleStream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		d, ok := c.Store.Deregistration(r)
		if !ok {
			// Not a deregistration (the filter lets none through in AWS), or
			// one whose image cannot be read: nothing to retry it for.
			c.Log.DebugContext(ctx, "stream record skipped", "event_id", r.EventID, "event_name", r.EventName)
			continue
		}
		log := c.Log.With("org_id", d.OrgID, "space_id", d.SpaceID, "event_id", r.EventID)
		res, err := c.Run(ctx, d)
		if err != nil {
			log.ErrorContext(ctx, "cascade failed; the record will be retried", "error", err.Error(), "sequence_number", r.Change.SequenceNumber)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
			return resp, nil
		}
		log.InfoContext(ctx, "cascade", "already_done", res.AlreadyDone, "gated", res.Gated, "detached", res.Detached,
			"grant_revoked", res.GrantRevoked, "published", res.Published, "writes", res.Writes)
	}
	return resp, nil
}
