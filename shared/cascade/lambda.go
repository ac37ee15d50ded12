package cascade

import (
	"context"
	"strings"
	"time"

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
		d, ok := Deregistration(r)
		if !ok {
			// Not a deregistration (the filter lets none through in AWS), or
			// one whose image cannot be read: nothing to retry it for.
			c.log().Debug("stream record skipped", "event_id", r.EventID, "event_name", r.EventName)
			continue
		}
		log := c.log().With("org_id", d.OrgID, "space_id", d.SpaceID, "event_id", r.EventID)
		res, err := c.Run(ctx, d)
		if err != nil {
			log.Error("cascade failed; the record will be retried", "error", err.Error(), "sequence_number", r.Change.SequenceNumber)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
			return resp, nil
		}
		log.Info("cascade", "already_done", res.AlreadyDone, "gated", res.Gated, "detached", res.Detached,
			"grant_revoked", res.GrantRevoked, "published", res.Published, "writes", res.Writes)
	}
	return resp, nil
}

// Deregistration reads a stream record: ok when it is a space item's MODIFY
// whose new image has deleted_at and whose old image has not.
func Deregistration(r events.DynamoDBEventRecord) (Deregistered, bool) {
	if r.EventName != string(events.DynamoDBOperationTypeModify) {
		return Deregistered{}, false
	}
	s := func(img map[string]events.DynamoDBAttributeValue, k string) (string, bool) {
		v, ok := img[k]
		if !ok || v.DataType() != events.DataTypeString {
			return "", false
		}
		return v.String(), true
	}
	if sk, _ := s(r.Change.Keys, "sk"); !strings.HasPrefix(sk, "SPACE#") {
		return Deregistered{}, false
	}
	if _, had := s(r.Change.OldImage, "deleted_at"); had {
		return Deregistered{}, false
	}
	at, has := s(r.Change.NewImage, "deleted_at")
	if !has {
		return Deregistered{}, false
	}
	d := Deregistered{}
	d.OrgID, _ = s(r.Change.NewImage, "org_id")
	d.SpaceID, _ = s(r.Change.NewImage, "id")
	d.Name, _ = s(r.Change.NewImage, "name")
	d.Provider, _ = s(r.Change.NewImage, "provider")
	d.CloudAccountID, _ = s(r.Change.NewImage, "cloud_account_id")
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil || d.OrgID == "" || d.SpaceID == "" {
		return Deregistered{}, false
	}
	d.DeletedAt = t
	return d, true
}
