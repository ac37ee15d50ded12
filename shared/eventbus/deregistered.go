package eventbus

import (
	"context"
	"time"

	"spaces/shared/space"
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
func (p *Publisher) PublishDeregistered(ctx context.Context, d space.Deregistered) error {
	at := d.DeletedAt.UTC()
	return p.put(ctx, SpaceDeregistered, at, DeregisteredDetail{OrgID: d.OrgID, SpaceID: d.SpaceID, Name: d.Name,
		Provider: string(d.Provider), CloudAccountID: d.CloudAccountID, DeregisteredAt: at})
}
