package space

import (
	"context"
	"time"
)

// HistoryRetention is how long a status transition is kept.
const HistoryRetention = 30 * 24 * time.Hour

// Transition is one change of a space's status, kept in its history and
// published as an event.
type Transition struct {
	OrgID   string    `json:"org_id"`
	SpaceID string    `json:"space_id"`
	From    Status    `json:"from"`
	To      Status    `json:"to"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// TransitionOf is the transition from old to next, or nil when the status
// did not change.
func TransitionOf(old, next Space) *Transition {
	if old.Status == next.Status {
		return nil
	}
	at := next.UpdatedAt
	if next.Probe.LastTransitionAt != nil {
		at = *next.Probe.LastTransitionAt
	}
	return &Transition{
		OrgID: next.OrgID, SpaceID: next.ID, From: old.Status, To: next.Status,
		Reason: next.Probe.Reason, Message: next.Probe.Message, At: at.UTC(),
	}
}

// History pages through the status history of one of org's live spaces,
// newest first. Another org's space, or a deregistered one, is not found.
func (svc *Service) History(ctx context.Context, org, id string, page Page) ([]Transition, string, error) {
	if !ValidID(id) {
		return nil, "", ErrNotFound("space")
	}
	if _, err := svc.Store.GetSpace(ctx, org, id); err != nil {
		return nil, "", err
	}
	return svc.Store.History(ctx, org, id, page)
}
