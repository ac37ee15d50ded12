package dynamostore_test

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

func TestRegisterSameIdentityConcurrently(t *testing.T) {
	f := newFixture(t)
	const n = 50
	errs := make([]error, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		s := f.newSpace(1) // same cluster, a new id each time
		ids[i] = s.ID
		wg.Go(func() {
			<-start
			errs[i] = f.store.Register(t.Context(), s, space.Idempotency{})
		})
	}
	close(start)
	wg.Wait()

	winner := ""
	for i, err := range errs {
		if err == nil {
			if winner != "" {
				t.Fatalf("two registrations of one cluster succeeded: %s and %s", winner, ids[i])
			}
			winner = ids[i]
		}
	}
	if winner == "" {
		t.Fatalf("no registration succeeded: %v", errs[0])
	}
	for _, err := range errs {
		if err == nil {
			continue
		}
		e := wantKind(t, err, space.KindConflict)
		if e.ExistingID != winner || e.Message != "this cluster is already registered in the org as space "+winner {
			t.Errorf("conflict %q names %s, winner %s", e.Message, e.ExistingID, winner)
		}
	}
	if got := f.spaceCount(t, f.account.ID); got != "1" {
		t.Errorf("space_count %s, want 1", got)
	}
	// Only the winner's space exists.
	for _, id := range ids {
		if _, err := f.store.GetSpace(t.Context(), f.org, id); (err == nil) != (id == winner) {
			t.Errorf("GetSpace %s: %v", id, err)
		}
	}
}

func TestDeregisterRacingSaves(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	s := f.register(t, f.newSpace(1))

	const writers = 20
	var wg sync.WaitGroup
	var saved, refused atomic.Int64
	unexpected := make(chan error, writers*10)
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			<-start
			for {
				cur, err := f.store.GetSpace(ctx, f.org, s.ID)
				if space.KindOf(err) == space.KindNotFound {
					return
				}
				if err != nil {
					unexpected <- err
					return
				}
				at := now.Add(time.Duration(i) * time.Second)
				_, err = f.store.UpdateSpace(ctx, f.org, s.ID, space.Update[space.Space]{IfVersion: cur.Version, At: at, Read: &cur,
					Apply: func(cur space.Space) (space.Space, error) {
						next, _ := space.ApplyProbe(cur, space.Outcome{At: at})
						return next, nil
					}})
				switch space.KindOf(err) {
				case space.KindPreconditionFailed:
					refused.Add(1)
				case space.KindNotFound:
					return
				default:
					if err != nil {
						unexpected <- err
						return
					}
					saved.Add(1)
				}
			}
		})
	}
	close(start)
	// Let the writers get going, then deregister in the middle of them.
	for saved.Load() < writers {
		time.Sleep(time.Millisecond)
	}
	deleted, err := f.store.Deregister(ctx, f.org, s.ID, 0, now.Add(time.Hour), "test")
	if err != nil {
		t.Fatalf("Deregister: %v", err)
	}
	wg.Wait()
	close(unexpected)
	for err := range unexpected {
		t.Errorf("writer: %v", err)
	}
	t.Logf("%d saves, %d refused for a stale version", saved.Load(), refused.Load())

	if deleted.DeletedAt == nil {
		t.Errorf("Deregister returned a live space: %#v", deleted)
	}
	wantKind(t, errOf(f.store.GetSpace(ctx, f.org, s.ID)), space.KindNotFound)
	item := f.raw(t, f.org, "SPACE#"+s.ID)
	if item["deleted_at"] == nil || item["probe_shard"] != nil {
		t.Errorf("stored space %v", item)
	}
	if claim := f.raw(t, f.org, "CLAIM#"+s.Identity()); claim != nil {
		t.Errorf("claim left: %v", claim)
	}
	if n := f.spaceCount(t, f.account.ID); n != "0" {
		t.Errorf("space_count %s, want 0", n)
	}
	// The cluster can be registered again, as a new space.
	again := f.newSpace(1)
	if err := f.store.Register(ctx, again, space.Idempotency{}); err != nil {
		t.Fatalf("re-register: %v", err)
	}
	if again.ID == s.ID {
		t.Fatal("same id")
	}
	if _, err := f.store.GetSpace(ctx, f.org, again.ID); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterWithAnUnusableAccount(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	otherOrg := uuid.NewString()
	foreign := f.createAccount(t, otherOrg, space.AWS)
	gcp := f.createAccount(t, f.org, space.GCP)

	cases := map[string]struct {
		account  string
		provider space.Provider
	}{
		"missing account":          {uuid.NewString(), space.AWS},
		"another org's account":    {foreign.ID, space.AWS},
		"another provider account": {gcp.ID, space.AWS},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			before := f.itemCount(t)
			s := f.newSpace(1)
			s.CloudAccountID = c.account
			e := wantKind(t, f.store.Register(ctx, s, space.Idempotency{Key: "k-" + name, Hash: "h"}), space.KindInvalid)
			if len(e.Fields) != 1 || e.Fields[0].Field != "cloud_account_id" ||
				e.Fields[0].Reason != "no aws cloud account with this id in the org" {
				t.Errorf("fields %+v", e.Fields)
			}
			if after := f.itemCount(t); after != before {
				t.Errorf("items %d before, %d after", before, after)
			}
		})
	}
	if n := f.spaceCount(t, gcp.ID); n != "0" {
		t.Errorf("gcp space_count %s", n)
	}
}

func TestIdempotency(t *testing.T) {
	clock := now
	var mu sync.Mutex
	f := newFixture(t, dynamostore.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }))
	ctx := t.Context()

	first := f.newSpace(1)
	rec := space.Idempotency{Key: "key-1", Hash: "hash-1", Space: first}
	if err := f.store.Register(ctx, first, rec); err != nil {
		t.Fatal(err)
	}
	// The retry comes with a new id (the service mints one per call).
	retry := f.newSpace(1)
	err := f.store.Register(ctx, retry, space.Idempotency{Key: "key-1", Hash: "hash-1", Space: retry})
	var replay *space.ReplayError
	if !errors.As(err, &replay) {
		t.Fatalf("replay: %v", err)
	}
	if !reflect.DeepEqual(replay.Record, rec) {
		t.Errorf("record:\n got %#v\nwant %#v", replay.Record, rec)
	}
	// Another request under the same key gets the first record too (the
	// service compares the hash); nothing is written.
	before := f.itemCount(t)
	other := f.newSpace(2)
	if err := f.store.Register(ctx, other, space.Idempotency{Key: "key-1", Hash: "hash-2", Space: other}); !errors.As(err, &replay) || replay.Record.Hash != "hash-1" {
		t.Fatalf("other request under the key: %v", err)
	}
	if after := f.itemCount(t); after != before {
		t.Errorf("items %d before, %d after", before, after)
	}
	wantKind(t, errOf(f.store.GetSpace(ctx, f.org, other.ID)), space.KindNotFound)

	// The key is per org.
	otherOrg := newFixture(t)
	s := otherOrg.newSpace(1)
	if err := otherOrg.store.Register(ctx, s, space.Idempotency{Key: "key-1", Hash: "hash-1", Space: s}); err != nil {
		t.Errorf("same key in another org: %v", err)
	}

	// After 24 hours the key is free again even before TTL removes it.
	mu.Lock()
	clock = clock.Add(dynamostore.IdempotencyTTL + time.Minute)
	mu.Unlock()
	if err := f.store.Register(ctx, other, space.Idempotency{Key: "key-1", Hash: "hash-2", Space: other}); err != nil {
		t.Fatalf("expired key: %v", err)
	}

	// An over-long key is refused before anything is written.
	before = f.itemCount(t)
	long := f.newSpace(3)
	e := wantKind(t, f.store.Register(ctx, long, space.Idempotency{Key: strings.Repeat("k", 256), Space: long}), space.KindInvalid)
	if e.Fields[0].Field != "Idempotency-Key" {
		t.Errorf("fields %+v", e.Fields)
	}
	if after := f.itemCount(t); after != before {
		t.Errorf("items %d before, %d after", before, after)
	}
}

func TestIdempotencyConcurrent(t *testing.T) {
	f := newFixture(t)
	const n = 20
	spaces := make([]space.Space, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		spaces[i] = f.newSpace(1)
		wg.Go(func() {
			<-start
			errs[i] = f.store.Register(t.Context(), spaces[i], space.Idempotency{Key: "same", Hash: "h", Space: spaces[i]})
		})
	}
	close(start)
	wg.Wait()

	var winner *space.Space
	for i, err := range errs {
		if err == nil {
			if winner != nil {
				t.Fatalf("two registrations under one key: %s and %s", winner.ID, spaces[i].ID)
			}
			winner = &spaces[i]
		}
	}
	if winner == nil {
		t.Fatalf("none succeeded: %v", errs[0])
	}
	for _, err := range errs {
		var replay *space.ReplayError
		if err != nil && (!errors.As(err, &replay) || !reflect.DeepEqual(replay.Record.Space, *winner)) {
			t.Errorf("loser got %v", err)
		}
	}
	list, _, err := f.store.ListSpaces(t.Context(), f.org, space.Query{Page: space.Page{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != winner.ID {
		t.Errorf("stored spaces %v", list)
	}
}
