package probing

import (
	"context"

	"spaces/shared/space"
)

// Enqueuer asks for a probe of a space just registered, so that it leaves
// unknown within seconds instead of at the next tick. It is the hook the
// registration path calls after the space is stored.
type Enqueuer struct{ Queue Queue }

// ProbeRegistered enqueues a registration probe of s, unless s is
// synthetic (synthetic spaces are never probed).
func (e Enqueuer) ProbeRegistered(ctx context.Context, s space.Space) error {
	if s.Synthetic || e.Queue == nil {
		return nil
	}
	return e.Queue.Enqueue(ctx, []Delayed{{Message: Message{OrgID: s.OrgID, ID: s.ID, Kind: KindRegistered}}})
}
