package dynamostore_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/shared/space"
)

func TestGrantFollowsRegistration(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	s := f.register(t, f.newSpace(1))

	ok, err := f.store.HasGrant(ctx, f.org, s.ID)
	if err != nil || !ok {
		t.Fatalf("HasGrant after Register = %v, %v; want true", ok, err)
	}
	item := f.raw(t, f.org, "GRANT#"+s.ID)
	for k, want := range map[string]string{"space_id": s.ID, "provider": "aws", "cloud_account_id": f.account.ID,
		"created_at": "2025-11-30T12:00:00.123456789Z"} {
		if v, _ := item[k].(*types.AttributeValueMemberS); v == nil || v.Value != want {
			t.Errorf("grant %s = %v, want %q", k, item[k], want)
		}
	}
	// Another org never sees the grant.
	if ok, err := f.store.HasGrant(ctx, uuid.NewString(), s.ID); err != nil || ok {
		t.Errorf("HasGrant from another org = %v, %v; want false", ok, err)
	}

	if _, err := f.store.Deregister(ctx, f.org, s.ID, 0, now, "test"); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.store.HasGrant(ctx, f.org, s.ID); err != nil || ok {
		t.Fatalf("HasGrant after Deregister = %v, %v; want false", ok, err)
	}
	if item := f.raw(t, f.org, "GRANT#"+s.ID); item != nil {
		t.Fatalf("grant item still stored: %v", item)
	}
}

func TestRefusedRegistrationGrantsNothing(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	first := f.register(t, f.newSpace(1))
	before, counters := f.itemCount(t), f.counterItems(t)

	// Same identity: the claim fails, and with it the grant.
	dup := f.newSpace(1)
	wantKind(t, f.store.Register(ctx, dup, space.Idempotency{}), space.KindConflict)
	// Unknown account: the account update fails, and with it the grant.
	bad := f.newSpace(2)
	bad.CloudAccountID = uuid.NewString()
	wantKind(t, f.store.Register(ctx, bad, space.Idempotency{}), space.KindInvalid)
	// With an idempotency key the grant still comes last: a replay is
	// recognized and grants nothing new.
	keyed := f.newSpace(3)
	if err := f.store.Register(ctx, keyed, space.Idempotency{Key: "k1", Hash: "h", Space: keyed}); err != nil {
		t.Fatal(err)
	}
	replay := f.newSpace(3)
	var re *space.ReplayError
	if err := f.store.Register(ctx, replay, space.Idempotency{Key: "k1", Hash: "h"}); !errors.As(err, &re) {
		t.Fatalf("replay: %v", err)
	}

	for _, id := range []string{dup.ID, bad.ID, replay.ID} {
		if ok, err := f.store.HasGrant(ctx, f.org, id); err != nil || ok {
			t.Errorf("refused registration %s has a grant (%v, %v)", id, ok, err)
		}
	}
	for _, id := range []string{first.ID, keyed.ID} {
		if ok, err := f.store.HasGrant(ctx, f.org, id); err != nil || !ok {
			t.Errorf("registered space %s has no grant (%v, %v)", id, ok, err)
		}
	}
	// keyed added its space, claim, idempotency record, grant and its
	// name's search entries (and its shard's counter item, unless first's
	// shard is the same); the refused ones nothing.
	newCounters := f.counterItems(t) - counters
	want := before + 4 + int32(len(space.NameWords(keyed.Name))) + newCounters
	if got := f.itemCount(t); got != want || newCounters > 1 {
		t.Errorf("items: %d, want %d (%d new counter items)", got, want, newCounters)
	}
}

func TestClaimHolders(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	var ids []string
	want := map[string]string{}
	// More than one BatchGetItem's worth, half of them registered.
	for i := range 150 {
		s := f.newSpace(i)
		ids = append(ids, s.Identity())
		if i%2 == 0 {
			f.register(t, s)
			want[s.Identity()] = s.ID
		}
	}
	ids = append(ids, ids[0]) // duplicates are fine
	got, err := f.store.ClaimHolders(ctx, f.org, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d holders, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("holder of %s = %q, want %q", k, got[k], v)
		}
	}
	// Another org sees none of them.
	if got, err := f.store.ClaimHolders(ctx, uuid.NewString(), ids); err != nil || len(got) != 0 {
		t.Errorf("another org: %v, %v", got, err)
	}
	if got, err := f.store.ClaimHolders(ctx, f.org, nil); err != nil || len(got) != 0 {
		t.Errorf("no identities: %v, %v", got, err)
	}
}
