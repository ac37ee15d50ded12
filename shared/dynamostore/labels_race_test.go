package dynamostore

import (
	"testing"
	"time"

	"spaces/shared/space"
)

// A deregistration that read the space before a labels change committed
// deletes the old labels' entries only if the labels are still the ones
// read (the marker, a digest of them): its write fails instead (and
// Deregister reads again), so the new labels' entries never outlive the
// space.
func TestDeregistrationRacingARelabel(t *testing.T) {
	s, sp, at := raceFixture(t, "c1", space.Labels{"env": "prod", "example.com/team": "a"})
	ctx, org := t.Context(), sp.OrgID
	entries := func() []string { return partitionSKs(t, s, labelsPK(org)) }

	read, counted, err := s.liveSpaceCounted(ctx, org, sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSpace(ctx, org, sp.ID, space.Update[space.Space]{At: at.Add(time.Second),
		Apply: func(x space.Space) (space.Space, error) {
			x.Labels = space.Labels{"env": "dev", "example.com/team": "a", "tier": "web"}
			return x, nil
		}}); err != nil {
		t.Fatal(err)
	}
	gone := read
	when := at.Add(2 * time.Second)
	gone.DeletedAt, gone.DeletedBy = &when, "test"
	err = s.writeDeregistration(ctx, read, gone, counted, false)
	if space.KindOf(err) != space.KindPreconditionFailed {
		t.Fatalf("the deregistration on the labels read before a relabel: %v, want a lost race", err)
	}
	if got := entries(); len(got) != 3 {
		t.Errorf("entries %q after the refused deregistration, want the new labels' 3", got)
	}
	// Deregister itself reads again and deletes the new labels' entries.
	if _, err := s.Deregister(ctx, org, sp.ID, 0, when, "test"); err != nil {
		t.Fatal(err)
	}
	if got := entries(); len(got) != 0 {
		t.Errorf("entries %q after the deregistration", got)
	}
}

// A deregistration that read the space before a transition there and
// back (the same status, another position problems first) deletes its
// label entries in problems-first order only if the position is still
// the one read (problem_key): its write fails instead (and Deregister
// reads again), so the entries at the new position never outlive the
// space.
func TestDeregistrationRacingATransitionThereAndBack(t *testing.T) {
	s, sp, at := raceFixture(t, "c1", space.Labels{"env": "prod", "example.com/team": "a"})
	ctx, org := t.Context(), sp.OrgID
	entries := func() []string { return partitionSKs(t, s, labelOrderPK(org)) }

	read, counted, err := s.liveSpaceCounted(ctx, org, sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, to := range []space.Status{space.Active, read.Status} {
		if _, err := s.UpdateSpace(ctx, org, sp.ID, space.Update[space.Space]{At: at.Add(time.Duration(i+1) * time.Second),
			Apply: func(x space.Space) (space.Space, error) {
				x.Status = to
				x.Probe.LastTransitionAt = new(at.Add(time.Duration(i+1) * time.Second))
				return x, nil
			}}); err != nil {
			t.Fatal(err)
		}
	}
	moved, err := s.GetSpace(ctx, org, sp.ID)
	if err != nil || moved.Status != read.Status || problemKey(moved) == problemKey(read) {
		t.Fatalf("after the transitions: %s at %q (%v), want %s at another position than %q", moved.Status, problemKey(moved), err, read.Status, problemKey(read))
	}
	gone := read
	when := at.Add(3 * time.Second)
	gone.DeletedAt, gone.DeletedBy = &when, "test"
	err = s.writeDeregistration(ctx, read, gone, counted, false)
	if space.KindOf(err) != space.KindPreconditionFailed {
		t.Fatalf("the deregistration at the position read before the transitions: %v, want a lost race", err)
	}
	if got := entries(); len(got) != 2 {
		t.Errorf("entries %q after the refused deregistration, want the 2 at the new position", got)
	}
	if _, err := s.Deregister(ctx, org, sp.ID, 0, when, "test"); err != nil {
		t.Fatal(err)
	}
	if got := entries(); len(got) != 0 {
		t.Errorf("entries %q after the deregistration", got)
	}
}
