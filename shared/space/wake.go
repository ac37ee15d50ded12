package space

import (
	"context"
	"log/slog"
	"time"
)

// Waker tells a space's agent that work waits for it (shared/agentwake:
// a message on the agent's wake topic).
type Waker interface {
	Wake(ctx context.Context, spaceID string) error
}

// WakingWork is an AgentWorkStore that wakes the space's agent after each
// piece of work it records (a namespace create, a list asked for, a
// revision handed), so that an agent on the presence channel, which
// renews only every PresenceFallback while connected, takes it at once.
// A wake that fails is logged and not retried: the work is stored, and
// the agent's next renewal (at the latest the fallback) carries it.
type WakingWork struct {
	AgentWorkStore
	Waker Waker
	Log   *slog.Logger
}

func (w WakingWork) RequestNamespace(ctx context.Context, org, spaceID string, c NamespaceCreate) error {
	return w.wake(ctx, spaceID, w.AgentWorkStore.RequestNamespace(ctx, org, spaceID, c))
}

func (w WakingWork) WantNamespaces(ctx context.Context, org, spaceID string, now time.Time) error {
	return w.wake(ctx, spaceID, w.AgentWorkStore.WantNamespaces(ctx, org, spaceID, now))
}

func (w WakingWork) HandRevision(ctx context.Context, r Revision) error {
	return w.wake(ctx, r.SpaceID, w.AgentWorkStore.HandRevision(ctx, r))
}

// wake wakes the agent after a stored piece of work (err nil).
func (w WakingWork) wake(ctx context.Context, spaceID string, err error) error {
	if err != nil {
		return err
	}
	if werr := w.Waker.Wake(ctx, spaceID); werr != nil && w.Log != nil {
		w.Log.WarnContext(ctx, "cannot wake the space's agent; it takes the work at its next renewal", "space_id", spaceID, "error", werr.Error())
	}
	return nil
}
