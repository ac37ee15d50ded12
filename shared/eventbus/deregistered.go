package eventbus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// SpaceDeregistered is the detail-type of the event the cascade publishes
// once per deregistered space.
const SpaceDeregistered = "Space Deregistered"

// DeregisteredDetail is the detail of a "Space Deregistered" event.
type DeregisteredDetail struct {
	OrgID          string    `json:"org_id"`
	SpaceID        string    `json:"space_id"`
	Name           string    `json:"name"`
	Provider       string    `json:"provider"`
	CloudAccountID string    `json:"cloud_account_id"`
	DeregisteredAt time.Time `json:"deregistered_at"`
}

// PublishDeregistered publishes one "Space Deregistered" event.
func (p *Publisher) PublishDeregistered(ctx context.Context, d DeregisteredDetail) error {
	detail, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("eventbridge: encode detail: %w", err)
	}
	out, err := p.api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{{
		EventBusName: aws.String(p.bus),
		Source:       aws.String(Source),
		DetailType:   aws.String(SpaceDeregistered),
		Detail:       aws.String(string(detail)),
		Resources:    []string{},
		Time:         aws.Time(d.DeregisteredAt.UTC()),
	}}})
	if err != nil {
		return fmt.Errorf("eventbridge PutEvents: %w", err)
	}
	if out.FailedEntryCount > 0 {
		e := out.Entries[0]
		return fmt.Errorf("eventbridge PutEvents rejected the event: %s: %s", aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
	}
	return nil
}
