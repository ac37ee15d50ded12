package dynamostore_test

import (
	"testing"

	"github.com/google/uuid"

	"spaces/shared/space"
)

// An account stored before accounts had a status reads as pending and
// needing re-verification, and still mints for its spaces; SaveAccount
// stores a verification result only over the version it read.
func TestLegacyAccountAndSaveAccount(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	legacy := space.CloudAccount{ID: uuid.NewString(), OrgID: f.org, Provider: space.AWS, Name: "old",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": "chosen"},
		CreatedAt:  now, Version: 1}
	if err := f.store.CreateAccount(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.GetAccount(ctx, f.org, legacy.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != space.AccountPending || got.StatusReason != space.ReasonReverificationRequired || got.Ready() || !got.CanMint() {
		t.Fatalf("legacy account reads %s/%s ready=%v canMint=%v", got.Status, got.StatusReason, got.Ready(), got.CanMint())
	}

	next := got
	next.Version++
	next.Status, next.StatusReason, next.StatusMessage = space.AccountFailed, space.ReasonAccessDenied, "no"
	if err := f.store.SaveAccount(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := f.store.SaveAccount(ctx, next); space.KindOf(err) != space.KindPreconditionFailed {
		t.Fatalf("saving over a changed version: %v", err)
	}
	got, err = f.store.GetAccount(ctx, f.org, legacy.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != space.AccountFailed || got.Version != 2 || got.CanMint() || got.StatusMessage != "no" {
		t.Fatalf("after save: %+v", got)
	}
}
