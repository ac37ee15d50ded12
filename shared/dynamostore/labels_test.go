package dynamostore_test

import (
	"maps"
	"testing"
	"time"

	"spaces/shared/space"
)

// A space's labels are stored at registration and changed only by a write
// that changes them: set, replaced with a status transition (the
// transaction path), kept by a heartbeat, removed (no attribute left).
func TestLabelsAreStored(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	s := f.newSpace(1)
	s.Labels = space.Labels{"env": "prod", "example.com/team": "a"}
	s = f.register(t, s)
	update := func(at time.Duration, apply func(space.Space) space.Space) {
		t.Helper()
		if _, err := f.store.UpdateSpace(ctx, f.org, s.ID, space.Update[space.Space]{At: now.Add(at),
			Apply: func(s space.Space) (space.Space, error) { return apply(s), nil }}); err != nil {
			t.Fatal(err)
		}
	}
	for i, step := range []struct {
		name  string
		apply func(space.Space) space.Space
		want  space.Labels
	}{
		{"as registered", func(s space.Space) space.Space { return s }, space.Labels{"env": "prod", "example.com/team": "a"}},
		{"replaced", func(s space.Space) space.Space { s.Labels = space.Labels{"env": "dev"}; return s }, space.Labels{"env": "dev"}},
		{"heartbeat keeps them", func(s space.Space) space.Space { s.Probe.LatencyMS = 7; return s }, space.Labels{"env": "dev"}},
		{"with a transition", func(s space.Space) space.Space {
			s.Labels, s.Status = space.Labels{"env": "dev", "tier": ""}, space.Active
			return s
		}, space.Labels{"env": "dev", "tier": ""}},
		{"removed", func(s space.Space) space.Space { s.Labels = nil; return s }, nil},
	} {
		update(time.Duration(i+1)*time.Second, step.apply)
		got, err := f.store.GetSpace(ctx, f.org, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.Labels, step.want) {
			t.Errorf("%s: labels %v, want %v", step.name, got.Labels, step.want)
		}
		if step.want == nil && got.Labels != nil {
			t.Errorf("%s: labels %#v, want none stored", step.name, got.Labels)
		}
	}
}
