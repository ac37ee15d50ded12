package dynamostore_test

import (
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/shared/space"
)

// counts reads f.org's counts.
func (f *fixture) counts(t testing.TB, org string) space.Counts {
	t.Helper()
	c, err := f.store.Counts(t.Context(), org)
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	return c
}

// tally counts org's live spaces by listing them all: what Counts must
// equal.
func (f *fixture) tally(t testing.TB, org string) space.Counts {
	t.Helper()
	c := space.NewCounts()
	after := ""
	for {
		page, next, err := f.store.ListSpaces(t.Context(), org, space.Query{Page: space.Page{Limit: 1000, After: after}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page {
			c.Total++
			c.ByStatus[s.Status]++
			c.ByProvider[s.Provider]++
			c.ByAccount[s.CloudAccountID]++
			if s.Synthetic {
				c.Synthetic.Total++
				c.Synthetic.ByStatus[s.Status]++
			}
		}
		if next == "" {
			return c
		}
		after = next
	}
}

func sameCounts(a, b space.Counts) bool {
	return a.Total == b.Total && maps.Equal(a.ByStatus, b.ByStatus) &&
		maps.Equal(a.ByProvider, b.ByProvider) && maps.Equal(a.ByAccount, b.ByAccount) &&
		a.Synthetic.Total == b.Synthetic.Total && maps.Equal(a.Synthetic.ByStatus, b.Synthetic.ByStatus)
}

// counterItems counts f.org's fleet counter items (COUNT#<shard>).
func (f *fixture) counterItems(t testing.TB) int32 {
	t.Helper()
	out, err := f.db.Query(t.Context(), &dynamodb.QueryInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true), Select: types.SelectCount,
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :c)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "ORG#" + f.org}, ":c": &types.AttributeValueMemberS{Value: "COUNT#"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Count
}

// setStatus changes s's status through UpdateSpace, as the prober does.
func (f *fixture) setStatus(t testing.TB, id string, to space.Status, at time.Time) error {
	t.Helper()
	_, err := f.store.UpdateSpace(t.Context(), f.org, id, space.Update[space.Space]{At: at,
		Apply: func(s space.Space) (space.Space, error) { s.Status = to; return s, nil }})
	return err
}

func TestCountsFollowEveryChange(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	gcp := f.createAccount(t, f.org, space.GCP)
	if c := f.counts(t, f.org); !sameCounts(c, space.NewCounts()) {
		t.Fatalf("an empty org counts %+v", c)
	}

	var aws []space.Space
	for i := range 3 {
		aws = append(aws, f.register(t, f.newSpace(i)))
	}
	for i := range 2 {
		f.register(t, space.NewSpace(uuid.NewString(), f.org, space.RegisterInput{
			Provider: space.GCP, SpaceType: space.TypeKubernetes, CloudAccountID: gcp.ID,
			Config: space.Config{"clusterName": "gke-" + strconv.Itoa(i), "region": "us-central1", "projectId": "acme-prod"},
		}, now))
	}
	want := space.NewCounts()
	want.Total, want.ByStatus[space.Unknown] = 5, 5
	want.ByProvider[space.AWS], want.ByProvider[space.GCP] = 3, 2
	want.ByAccount[f.account.ID], want.ByAccount[gcp.ID] = 3, 2
	if c := f.counts(t, f.org); !sameCounts(c, want) {
		t.Fatalf("after 5 registrations: %+v, want %+v", c, want)
	}

	// Two transitions move two spaces; a heartbeat (no status change)
	// moves nothing.
	for i, s := range aws[:2] {
		if err := f.setStatus(t, s.ID, space.Active, now.Add(time.Duration(i+1)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.store.UpdateSpace(ctx, f.org, aws[0].ID, space.Update[space.Space]{At: now.Add(time.Minute),
		Apply: func(s space.Space) (space.Space, error) { s.Probe.LatencyMS = 7; return s, nil }}); err != nil {
		t.Fatal(err)
	}
	want.ByStatus[space.Unknown], want.ByStatus[space.Active] = 3, 2
	if c := f.counts(t, f.org); !sameCounts(c, want) {
		t.Fatalf("after 2 transitions and a heartbeat: %+v, want %+v", c, want)
	}

	// A deregistration uncounts the space in the status it had.
	if _, err := f.store.Deregister(ctx, f.org, aws[0].ID, 0, now.Add(2*time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	want.Total, want.ByStatus[space.Active], want.ByProvider[space.AWS], want.ByAccount[f.account.ID] = 4, 1, 2, 2
	if c := f.counts(t, f.org); !sameCounts(c, want) {
		t.Fatalf("after a deregistration: %+v, want %+v", c, want)
	}

	// Refused writes count nothing: a second registration of a cluster, a
	// second deregistration, a stale If-Match, a transition of a
	// deregistered space.
	dup := f.newSpace(1)
	wantKind(t, f.store.Register(ctx, dup, space.Idempotency{}), space.KindConflict)
	wantKind(t, errOf(f.store.Deregister(ctx, f.org, aws[0].ID, 0, now.Add(3*time.Minute), "test")), space.KindNotFound)
	wantKind(t, errOf(f.store.Deregister(ctx, f.org, aws[1].ID, 1, now.Add(3*time.Minute), "test")), space.KindPreconditionFailed)
	wantKind(t, f.setStatus(t, aws[0].ID, space.Inactive, now.Add(4*time.Minute)), space.KindNotFound)
	if c := f.counts(t, f.org); !sameCounts(c, want) {
		t.Fatalf("after refused writes: %+v, want %+v", c, want)
	}
	if c := f.tally(t, f.org); !sameCounts(c, want) {
		t.Fatalf("the listing tallies %+v, the counts say %+v", c, want)
	}

	// Another org sees none of it.
	if c := f.counts(t, uuid.NewString()); !sameCounts(c, space.NewCounts()) {
		t.Errorf("another org counts %+v", c)
	}
}

// The synthetic spaces are counted apart as well, by status, through
// their registration, a transition and a deregistration.
func TestCountsSyntheticApart(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	var synth []space.Space
	for i := range 3 {
		sp := f.newSpace(i)
		sp.Synthetic = i > 0
		sp = f.register(t, sp)
		if sp.Synthetic {
			synth = append(synth, sp)
		}
	}
	want := space.NewCounts()
	want.Total, want.ByStatus[space.Unknown], want.ByProvider[space.AWS], want.ByAccount[f.account.ID] = 3, 3, 3, 3
	want.Synthetic.Total, want.Synthetic.ByStatus[space.Unknown] = 2, 2
	if c := f.counts(t, f.org); !sameCounts(c, want) {
		t.Fatalf("after 3 registrations, 2 synthetic: %+v, want %+v", c, want)
	}
	if err := f.setStatus(t, synth[0].ID, space.Inactive, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Deregister(ctx, f.org, synth[1].ID, 0, now.Add(time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	want.Total, want.ByStatus[space.Unknown], want.ByStatus[space.Inactive], want.ByProvider[space.AWS], want.ByAccount[f.account.ID] = 2, 1, 1, 2, 2
	want.Synthetic.Total, want.Synthetic.ByStatus[space.Unknown], want.Synthetic.ByStatus[space.Inactive] = 1, 0, 1
	if c := f.counts(t, f.org); !sameCounts(c, want) {
		t.Fatalf("after a synthetic space's transition and another's deregistration: %+v, want %+v", c, want)
	}
	if c := f.tally(t, f.org); !sameCounts(c, want) {
		t.Fatalf("the listing tallies %+v, the counts say %+v", c, want)
	}
}

// Transitions racing deregistrations (the prober against DELETE) leave the
// counts equal to what a full listing tallies.
func TestCountsExactUnderRaces(t *testing.T) {
	f := newFixture(t)
	const n = 24
	var ids []string
	for i := range n {
		ids = append(ids, f.register(t, f.newSpace(i)).ID)
	}
	var tick atomic.Int64
	at := func() time.Time { return now.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			for k := range 4 {
				to := space.Active
				if k%2 == 1 {
					to = space.Inactive
				}
				if err := f.setStatus(t, id, to, at()); err != nil && space.KindOf(err) != space.KindNotFound {
					t.Errorf("transition %s: %v", id, err)
				}
			}
		})
		if i%2 == 0 {
			wg.Go(func() {
				if _, err := f.store.Deregister(t.Context(), f.org, id, 0, at(), "test"); err != nil {
					t.Errorf("deregister %s: %v", id, err)
				}
			})
		}
	}
	wg.Wait()
	got, want := f.counts(t, f.org), f.tally(t, f.org)
	if !sameCounts(got, want) || want.Total != n/2 {
		t.Errorf("counts %+v, the listing tallies %+v (want %d spaces)", got, want, n/2)
	}
}
