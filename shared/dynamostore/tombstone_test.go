package dynamostore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/shared/space"
)

// A deregistered space stays not found, by every read and write, but its
// not-found carries its tombstone (name, when, by whom) to its own org
// only; a second deregistration changes nothing, its tombstone included.
func TestTombstone(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	s := f.newSpace(1)
	s.Name = "prod-eu"
	f.register(t, s)
	at := now.Add(time.Hour)
	if _, err := f.store.Deregister(ctx, f.org, s.ID, 0, at, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	tombstoneOf := func(err error) *space.Tombstone {
		var de *space.Error
		if !errors.As(err, &de) || de.Kind != space.KindNotFound {
			t.Fatalf("%v, want not found", err)
		}
		return de.Tombstone
	}
	want := space.Tombstone{ID: s.ID, Name: "prod-eu", Provider: space.AWS, DeregisteredAt: at, DeregisteredBy: "alice@example.com"}
	_, err := f.store.GetSpace(ctx, f.org, s.ID)
	if ts := tombstoneOf(err); ts == nil || *ts != want {
		t.Errorf("tombstone %+v, want %+v", ts, want)
	}
	// Another org: a plain not found.
	if _, err := f.store.GetSpace(ctx, uuid.NewString(), s.ID); tombstoneOf(err) != nil {
		t.Errorf("another org sees the tombstone: %v", err)
	}
	// Nothing brings it back or rewrites who deregistered it.
	_, err = f.store.UpdateSpace(ctx, f.org, s.ID, space.Update[space.Space]{At: at.Add(time.Second),
		Apply: func(sp space.Space) (space.Space, error) { sp.Status = space.Active; return sp, nil }})
	tombstoneOf(err)
	_, err = f.store.Deregister(ctx, f.org, s.ID, 0, at.Add(time.Minute), "mallory")
	tombstoneOf(err)
	_, err = f.store.GetSpace(ctx, f.org, s.ID)
	if ts := tombstoneOf(err); ts == nil || *ts != want {
		t.Errorf("after a second deregistration: %+v, want %+v", ts, want)
	}
}
