package dynamostore_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/shared/dynamostore"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

func (f *fixture) newJob(cluster string) provisioning.Job {
	return provisioning.Job{ID: uuid.NewString(), OrgID: f.org, Provider: space.AWS, CloudAccountID: f.account.ID,
		Config: space.Config{"clusterName": cluster, "region": "us-east-1"},
		Spec: space.ClusterSpec{KubernetesVersion: "1.31", NodePool: space.NodePool{MachineType: "m5.large", Min: 1, Max: 3, Desired: 2},
			Network: space.Network{SubnetIDs: []string{"subnet-0a1b2c3d", "subnet-4e5f6a7b"}}, Tags: map[string]string{"team": "platform"}},
		State: provisioning.Queued, Since: now, Steps: []provisioning.Step{{State: provisioning.Queued, At: now}},
		CreatedAt: now, UpdatedAt: now, Version: 1}
}

// TestJobWritesAreConditional: a job round-trips; its cluster is claimed
// among live jobs (409 naming the job) and refused when a space holds it
// (409 naming the space); a write from a stale version is refused and
// changes nothing; the claim is released exactly when the job succeeds or
// is canceled, not when it fails; an Idempotency-Key replays its job.
func TestJobWritesAreConditional(t *testing.T) {
	f := newFixture(t, dynamostore.WithClock(func() time.Time { return now }))
	ctx := t.Context()
	j := f.newJob("c1")
	if err := f.store.CreateJob(ctx, j, provisioning.Idempotency{Key: "k1", Hash: "h1", JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.GetJob(ctx, f.org, j.ID)
	if err != nil || !reflect.DeepEqual(got, j) {
		t.Fatalf("round trip:\n got %+v %v\nwant %+v", got, err, j)
	}
	if _, err := f.store.GetJob(ctx, "another-org", j.ID); space.KindOf(err) != space.KindNotFound {
		t.Errorf("another org's read: %v", err)
	}
	twin := f.newJob("c1")
	var se *space.Error
	if err := f.store.CreateJob(ctx, twin, provisioning.Idempotency{}); space.KindOf(err) != space.KindConflict ||
		!asError(err, &se) || se.ExistingJobID != j.ID {
		t.Errorf("a second live job for the cluster: %v", err)
	}
	var replay *provisioning.ReplayError
	if err := f.store.CreateJob(ctx, f.newJob("c9"), provisioning.Idempotency{Key: "k1", Hash: "h2"}); !asError(err, &replay) || replay.Record.JobID != j.ID {
		t.Errorf("a reused key: %v", err)
	}
	if rec, found, err := f.store.JobIdempotency(ctx, f.org, "k1"); err != nil || !found || rec.JobID != j.ID || rec.Hash != "h1" {
		t.Errorf("the key's record: %+v %v %v", rec, found, err)
	}
	sp := f.register(t, f.newSpace(7))
	held := f.newJob(sp.Config["clusterName"])
	if err := f.store.CreateJob(ctx, held, provisioning.Idempotency{}); !asError(err, &se) || se.Kind != space.KindConflict || se.ExistingID != sp.ID {
		t.Errorf("a job for a registered cluster: %v", err)
	}
	items := f.itemCount(t)

	// A stale write is refused and changes nothing.
	next, _ := provisioning.Next(j, provisioning.Outcome{}, now, provisioning.Policy{})
	if _, err := f.store.UpdateJob(ctx, f.org, j.ID, space.Update[provisioning.Job]{At: now, Read: &j, IfVersion: 1,
		Apply: func(provisioning.Job) (provisioning.Job, error) { return next, nil }}); err != nil {
		t.Fatal(err)
	}
	stale := j
	if _, err := f.store.UpdateJob(ctx, f.org, j.ID, space.Update[provisioning.Job]{At: now, Read: &stale, IfVersion: 1,
		Apply: func(x provisioning.Job) (provisioning.Job, error) { x.State = provisioning.Succeeded; return x, nil }}); space.KindOf(err) != space.KindPreconditionFailed {
		t.Errorf("a stale write: %v", err)
	}
	if got, _ := f.store.GetJob(ctx, f.org, j.ID); got.State != provisioning.Creating || got.Version != 2 {
		t.Errorf("after a stale write: %s at %d", got.State, got.Version)
	}

	// Failing keeps the claim; canceling releases it with the job's write.
	fail := func(x provisioning.Job) (provisioning.Job, error) {
		x, _ = provisioning.Next(x, provisioning.Outcome{Err: &space.Error{Kind: space.KindInvalid, Reason: space.ReasonCloudRefused, Message: "no"}}, now, provisioning.Policy{})
		return x, nil
	}
	if _, err := f.store.UpdateJob(ctx, f.org, j.ID, space.Update[provisioning.Job]{At: now, Apply: fail}); err != nil {
		t.Fatal(err)
	}
	if f.raw(t, f.org, "JOBCLAIM#"+j.Identity()) == nil {
		t.Error("a failed job released its claim")
	}
	res, err := f.store.UpdateJob(ctx, f.org, j.ID, space.Update[provisioning.Job]{At: now,
		Apply: func(x provisioning.Job) (provisioning.Job, error) { return provisioning.Cancel(x, now) }})
	if err != nil || res.After.State != provisioning.Canceled {
		t.Fatalf("cancel: %+v %v", res.After.State, err)
	}
	if f.raw(t, f.org, "JOBCLAIM#"+j.Identity()) != nil {
		t.Error("a canceled job kept its claim")
	}
	if n := f.itemCount(t); n != items-1 {
		t.Errorf("%d items after the cancel, want %d (the claim gone)", n, items-1)
	}
	if err := f.store.CreateJob(ctx, twin, provisioning.Idempotency{}); err != nil {
		t.Errorf("a job for the released cluster: %v", err)
	}
	page, after, err := f.store.ListJobs(ctx, f.org, space.Page{Limit: 1})
	if err != nil || len(page) != 1 || after == "" {
		t.Errorf("first page of jobs: %d %q %v", len(page), after, err)
	}
}

func asError[T error](err error, target *T) bool { return errors.As(err, target) }
