package space

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Every versioned item (space, environment, revision) changes one way:
// read it, apply the change, stamp it (version + 1, updated_at) and write it
// only if the stored version is still the one read. Stores implement that
// write; Run is the loop around it, so that the version bump, the stamp, the
// retry on a lost race and the "has changed" answer exist once.

// Update is one optimistic change of an item of type T.
type Update[T any] struct {
	// IfVersion, when not 0, is the version the caller saw (If-Match): any
	// other stored version is KindPreconditionFailed, never retried.
	IfVersion int64
	// At becomes the item's updated_at.
	At time.Time
	// Read is the item as the caller has just read it; nil reads it first.
	Read *T
	// Apply returns the changed item, ErrUnchanged to write nothing, or an
	// error to stop with. After a lost race it runs again on a fresh read.
	Apply func(T) (T, error)
}

// Updated is what an update did.
type Updated[T any] struct {
	// Before is the item the change was applied to, After what is stored
	// now (Before itself when nothing was written).
	Before, After T
	Written       bool
}

// ErrUnchanged, returned by Apply, ends an update without a write.
var ErrUnchanged = errors.New("nothing to write")

// UpdateAttempts bounds the reads of an update that keeps losing races.
const UpdateAttempts = 3

// Versioned gives Run access to an item's version and stamp.
type Versioned[T any] struct {
	What    string // "space", "environment", "revision": for messages
	Version func(*T) *int64
	Stamp   func(*T) *time.Time
}

// ErrChanged is the one answer to a write that found another version.
func ErrChanged(what string, stored, want int64) *Error {
	return Errorf(KindPreconditionFailed, "the %s has changed (version %d, expected %d)", what, stored, want)
}

// Run performs u: read (unless u.Read), check IfVersion, apply, stamp,
// write. write stores after if the stored version is still before's and
// returns KindPreconditionFailed when it is not; on that, without IfVersion,
// Run reads again and retries, up to UpdateAttempts reads.
func Run[T any](ctx context.Context, v Versioned[T], u Update[T], read func(context.Context) (T, error),
	write func(ctx context.Context, before, after T) error,
) (Updated[T], error) {
	for attempt := 1; ; attempt++ {
		var cur T
		if attempt == 1 && u.Read != nil {
			cur = *u.Read
		} else {
			var err error
			if cur, err = read(ctx); err != nil {
				return Updated[T]{}, err
			}
		}
		if stored := *v.Version(&cur); u.IfVersion != 0 && stored != u.IfVersion {
			return Updated[T]{}, ErrChanged(v.What, stored, u.IfVersion)
		}
		next, err := u.Apply(cur)
		if errors.Is(err, ErrUnchanged) {
			return Updated[T]{Before: cur, After: cur}, nil
		}
		if err != nil {
			return Updated[T]{}, err
		}
		*v.Version(&next) = *v.Version(&cur) + 1
		*v.Stamp(&next) = u.At.UTC()
		err = write(ctx, cur, next)
		if err == nil {
			return Updated[T]{Before: cur, After: next, Written: true}, nil
		}
		if KindOf(err) != KindPreconditionFailed || u.IfVersion != 0 {
			return Updated[T]{}, err
		}
		if attempt == UpdateAttempts {
			return Updated[T]{}, fmt.Errorf("%s kept changing during %d attempts: %w", v.What, attempt, err)
		}
	}
}

// Stamps of the domain's versioned items.
var (
	SpaceVersioned = Versioned[Space]{What: "space",
		Version: func(s *Space) *int64 { return &s.Version }, Stamp: func(s *Space) *time.Time { return &s.UpdatedAt }}
	EnvironmentVersioned = Versioned[Environment]{What: "environment",
		Version: func(e *Environment) *int64 { return &e.Version }, Stamp: func(e *Environment) *time.Time { return &e.UpdatedAt }}
	RevisionVersioned = Versioned[Revision]{What: "revision",
		Version: func(r *Revision) *int64 { return &r.Version }, Stamp: func(r *Revision) *time.Time { return &r.UpdatedAt }}
)
