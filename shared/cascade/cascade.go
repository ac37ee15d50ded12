// Package cascade carries a space's deregistration through the platform. It
// runs on the spaces table's stream (functions/cascade; locally the stream
// poller of infra/local), filtered so that only deregistrations reach it,
// at least once per record:
//
//   - every environment bound to the space is gated "Space deregistered"
//     (only if still bound to that space and not gated: a re-bind that won
//     the race is left alone);
//   - every autoscaler policy on the space is detached (only if applied);
//   - the space's kubeauth grant is deleted if the deregistration's own
//     transaction has not (it has; this makes sure);
//   - one "Space Deregistered" event is published;
//   - an agent space's agent is woken (Agents, best effort): its next
//     renewal is refused and it stops, instead of at its next fallback
//     renewal (the presence channel, space.PresenceFallback);
//   - an agent space's MQTT connection is ended at once (Connections, IoT
//     Core's DeleteConnection, best effort), instead of at its next policy
//     refresh (space.PresenceRefresh), whose authorizer call refuses it;
//   - the marker CASCADE#<space> is written, only if absent.
//
// Idempotency: a record whose marker exists changes nothing and publishes
// nothing. The order is "publish, then mark": a crash after the writes and
// before the publish replays them (all conditional, so no-ops) and publishes;
// a crash between the publish and the mark publishes a second event on the
// replay. That duplicate is the accepted cost (consumers see at-least-once
// events, keyed by space_id); the opposite order could lose the event for
// good.
//
// Pending deployment revisions need nothing here: they are dead-lettered on
// their next claim attempt, when the claim finds the space deregistered.
// Running deployments are not touched.
package cascade

import (
	"cmp"
	"context"

	"github.com/aws/aws-lambda-go/events"

	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"spaces/shared/space"
)

// Store is what the cascade reads and writes.
type Store interface {
	Cascaded(ctx context.Context, org, spaceID string) (bool, error)
	BoundTo(ctx context.Context, spaceID string) ([]space.Bound, error)
	GateEnvironment(ctx context.Context, org, id, spaceID string, gate space.Gate) (bool, error)
	DetachPolicy(ctx context.Context, org, id, spaceID, reason string, at time.Time) (bool, error)
	RevokeGrant(ctx context.Context, org, spaceID string) (bool, error)
	MarkCascaded(ctx context.Context, org, spaceID string, at time.Time) (bool, error)
	// Deregistration reads a record of the table's stream: ok when it is a
	// space's deregistration.
	Deregistration(r events.DynamoDBEventRecord) (d space.Deregistered, ok bool)
}

// Publisher publishes the "Space Deregistered" event.
type Publisher interface {
	PublishDeregistered(ctx context.Context, d space.Deregistered) error
}

// DefaultWorkers is how many environments and policies are updated at once.
const DefaultWorkers = 16

// Cascade is the use case. Build it with New, which sets the defaults.
type Cascade struct {
	Store  Store
	Events Publisher
	Now    func() time.Time
	// Workers bounds the concurrent updates (default DefaultWorkers).
	Workers int
	Log     *slog.Logger
	// Agents wakes agent spaces' agents (nil: none are woken).
	Agents space.Waker
	// Connections ends agent spaces' MQTT connections (nil: none are
	// ended; each lives until its next policy refresh).
	Connections space.Disconnecter
}

// Result is what one cascade did.
type Result struct {
	// AlreadyDone: the marker existed; nothing was written or published.
	AlreadyDone  bool `json:"already_done"`
	Gated        int  `json:"gated"`
	Detached     int  `json:"detached"`
	GrantRevoked bool `json:"grant_revoked"`
	Published    bool `json:"published"`
	// Writes counts the write requests sent to the table (conditional ones
	// that found nothing to do included).
	Writes int `json:"writes"`
}

// Run cascades one deregistration.
func (c *Cascade) Run(ctx context.Context, d space.Deregistered) (Result, error) {
	var res Result
	done, err := c.Store.Cascaded(ctx, d.OrgID, d.SpaceID)
	if err != nil {
		return res, err
	}
	if done {
		res.AlreadyDone = true
		return res, nil
	}
	bound, err := c.Store.BoundTo(ctx, d.SpaceID)
	if err != nil {
		return res, err
	}
	now := c.Now().UTC()
	var gated, detached, writes atomic.Int64
	if err := c.each(ctx, bound, func(ctx context.Context, b space.Bound) error {
		// A link of another org cannot exist (space ids are unique and a
		// binding checks the space in its own org); skip it defensively.
		if b.OrgID != d.OrgID {
			return nil
		}
		writes.Add(1)
		switch b.Kind {
		case space.BoundEnvironment:
			ok, err := c.Store.GateEnvironment(ctx, d.OrgID, b.ID, d.SpaceID,
				space.Gate{Reason: space.GateSpaceDeregistered, Since: now, Space: d.Tombstone()})
			if ok {
				gated.Add(1)
			}
			return err
		case space.BoundPolicy:
			ok, err := c.Store.DetachPolicy(ctx, d.OrgID, b.ID, d.SpaceID, space.GateSpaceDeregistered, now)
			if ok {
				detached.Add(1)
			}
			return err
		}
		return nil
	}); err != nil {
		return res, err
	}
	res.Gated, res.Detached, res.Writes = int(gated.Load()), int(detached.Load()), int(writes.Load())
	if res.GrantRevoked, err = c.Store.RevokeGrant(ctx, d.OrgID, d.SpaceID); err != nil {
		return res, err
	}
	res.Writes++
	if err := c.Events.PublishDeregistered(ctx, d); err != nil {
		return res, fmt.Errorf("publish the deregistration: %w", err)
	}
	res.Published = true
	res.Writes++
	if d.Connectivity == space.ViaAgent && c.Agents != nil {
		if err := c.Agents.Wake(ctx, d.SpaceID); err != nil {
			c.Log.WarnContext(ctx, "cannot wake the deregistered space's agent; it stops at its next renewal", "error", err.Error())
		}
	}
	if d.Connectivity == space.ViaAgent && c.Connections != nil {
		if err := c.Connections.Disconnect(ctx, d.SpaceID); err != nil {
			c.Log.WarnContext(ctx, "cannot end the deregistered space's agent connection; it ends at its next policy refresh", "error", err.Error())
		}
	}
	if _, err := c.Store.MarkCascaded(ctx, d.OrgID, d.SpaceID, now); err != nil {
		return res, err
	}
	return res, nil
}

// each runs f on every item with at most Workers at once; the first error
// stops the rest and is returned.
func (c *Cascade) each(ctx context.Context, items []space.Bound, f func(context.Context, space.Bound) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workers := c.Workers
	work := make(chan space.Bound)
	var wg sync.WaitGroup
	for range min(workers, max(len(items), 1)) {
		wg.Go(func() {
			for b := range work {
				if err := f(ctx, b); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for _, b := range items {
		select {
		case work <- b:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && err != context.Canceled {
		return err
	}
	return ctx.Err()
}

// New returns c with every zero setting at its default.
func New(c Cascade) *Cascade {
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.Log = cmp.Or(c.Log, slog.Default())
	return &c
}
