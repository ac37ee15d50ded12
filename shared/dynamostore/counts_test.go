package dynamostore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"

	"spaces/shared/dynamostore"
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
			if m := s.MinorVersion(); m != "" {
				c.ByVersion[m]++
			} else {
				c.VersionUnknown++
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
		a.Synthetic.Total == b.Synthetic.Total && maps.Equal(a.Synthetic.ByStatus, b.Synthetic.ByStatus) &&
		maps.Equal(a.ByVersion, b.ByVersion) && a.VersionUnknown == b.VersionUnknown
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
	want.Total, want.ByStatus[space.Unknown], want.VersionUnknown = 5, 5, 5
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
	want.VersionUnknown = 4
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
	want.VersionUnknown = 3
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
	want.VersionUnknown = 2
	want.Synthetic.Total, want.Synthetic.ByStatus[space.Unknown], want.Synthetic.ByStatus[space.Inactive] = 1, 0, 1
	if c := f.counts(t, f.org); !sameCounts(c, want) {
		t.Fatalf("after a synthetic space's transition and another's deregistration: %+v, want %+v", c, want)
	}
	if c := f.tally(t, f.org); !sameCounts(c, want) {
		t.Fatalf("the listing tallies %+v, the counts say %+v", c, want)
	}
}

// Transitions and version changes racing deregistrations (the prober
// against DELETE) leave the counts equal to what a full listing tallies.
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
				// Every other write changes the minor as well.
				_, err := f.store.UpdateSpace(t.Context(), f.org, id, space.Update[space.Space]{At: at(),
					Apply: func(s space.Space) (space.Space, error) {
						s.Status = to
						if k%2 == 0 {
							s.Probe.ServerVersion = &space.ServerVersion{GitVersion: "v1." + strconv.Itoa(30+k) + ".2"}
						}
						return s, nil
					}})
				if err != nil && space.KindOf(err) != space.KindNotFound {
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

// recording is a store on f's table that records the name of each request
// it makes.
func (f *fixture) recording() (*dynamostore.Store, *[]string) {
	var ops []string
	rec := func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("record", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			ops = append(ops, strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", in.Parameters), "*dynamodb."), "Input"))
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
	return dynamostore.New(dynamodb.New(f.db.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, rec) }), f.table), &ops
}

// probeVersion stores a probe that saw gitVersion through store, as the
// prober does: with the space it read (Update.Read), status unchanged.
func (f *fixture) probeVersion(t testing.TB, store *dynamostore.Store, id, gitVersion string, at time.Time) space.Space {
	t.Helper()
	read, err := f.store.LiveSpace(t.Context(), f.org, id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.UpdateSpace(t.Context(), f.org, id, space.Update[space.Space]{At: at, Read: &read,
		Apply: func(s space.Space) (space.Space, error) {
			s.Probe.ServerVersion = &space.ServerVersion{GitVersion: gitVersion, Platform: "linux/amd64"}
			s.Probe.LastProbeAt = &at
			return s, nil
		}})
	if err != nil {
		t.Fatalf("probe %s with %s: %v", id, gitVersion, err)
	}
	return res.After
}

// The version distribution follows registration (the cloud's version),
// a probe that changes the minor (one transaction with the counter), a
// patch or an unchanged probe (one plain UpdateItem, no counter), a
// transition together with a new minor, and deregistration; a space
// stored before the version counters is counted unknown until a probe
// changes its version or the backfill counts it, once.
func TestCountsFollowVersions(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	var sp []space.Space
	for i, v := range []string{"1.30", "", "1.31", "1.29", "1.29"} {
		s := f.newSpace(i)
		s.KubernetesVersion = v // the cloud's answer at registration
		sp = append(sp, f.register(t, s))
	}
	want := space.NewCounts()
	want.Total, want.ByStatus[space.Unknown], want.ByProvider[space.AWS], want.ByAccount[f.account.ID] = 5, 5, 5, 5
	want.ByVersion = map[string]int64{"1.29": 2, "1.30": 1, "1.31": 1}
	want.VersionUnknown = 1
	uncounted := 0 // spaces with a version the counters do not know yet
	check := func(when string) {
		t.Helper()
		if c := f.counts(t, f.org); !sameCounts(c, want) {
			t.Fatalf("%s: counts %+v, want %+v", when, c, want)
		}
		if uncounted > 0 {
			return // the listing sees their versions
		}
		if c := f.tally(t, f.org); !sameCounts(c, want) {
			t.Fatalf("%s: the listing tallies %+v, want %+v", when, c, want)
		}
	}
	check("after 5 registrations")

	store, ops := f.recording()
	// A probe that answers the same minor as the cloud did: the stored
	// version changes (gitVersion), the counts do not, and the write is one
	// UpdateItem, as before the version counters.
	f.probeVersion(t, store, sp[0].ID, "v1.30.4-eks-2d5f260", now.Add(time.Second))
	if want := []string{"UpdateItem"}; !slices.Equal(*ops, want) {
		t.Errorf("a probe keeping the minor made %v, want %v", *ops, want)
	}
	check("after a probe of the same minor")
	// An unchanged probe and a patch upgrade: likewise.
	*ops = nil
	f.probeVersion(t, store, sp[0].ID, "v1.30.4-eks-2d5f260", now.Add(2*time.Second))
	f.probeVersion(t, store, sp[0].ID, "v1.30.5-eks-2d5f260", now.Add(3*time.Second))
	if want := []string{"UpdateItem", "UpdateItem"}; !slices.Equal(*ops, want) {
		t.Errorf("an unchanged probe and a patch made %v, want %v", *ops, want)
	}
	check("after an unchanged probe and a patch")

	// An upgrade moves the space in the same transaction as its write.
	*ops = nil
	f.probeVersion(t, store, sp[0].ID, "v1.31.0-eks-1", now.Add(4*time.Second))
	if want := []string{"TransactWriteItems"}; !slices.Equal(*ops, want) {
		t.Errorf("an upgrade made %v, want %v", *ops, want)
	}
	want.ByVersion["1.30"], want.ByVersion["1.31"] = 0, 2
	delete(want.ByVersion, "1.30")
	check("after an upgrade")
	if got := f.raw(t, f.org, "SPACE#"+sp[0].ID)["counted_minor"]; got == nil || got.(*types.AttributeValueMemberS).Value != "1.31" {
		t.Errorf("counted_minor %v, want 1.31", got)
	}

	// A space of unknown version gets one; a transition and an upgrade in
	// one write move both counters.
	f.probeVersion(t, store, sp[1].ID, "v1.32.1", now.Add(5*time.Second))
	want.ByVersion["1.32"], want.VersionUnknown = 1, 0
	check("after a first version")
	if _, err := f.store.UpdateSpace(ctx, f.org, sp[3].ID, space.Update[space.Space]{At: now.Add(6 * time.Second),
		Apply: func(s space.Space) (space.Space, error) {
			s.Status = space.Active
			s.Probe.ServerVersion = &space.ServerVersion{GitVersion: "v1.30.0"}
			return s, nil
		}}); err != nil {
		t.Fatal(err)
	}
	want.ByStatus[space.Unknown], want.ByStatus[space.Active] = 4, 1
	want.ByVersion["1.29"], want.ByVersion["1.30"] = 1, 1
	check("after a transition with an upgrade")

	// Deregistration uncounts the minor the space was counted under.
	if _, err := f.store.Deregister(ctx, f.org, sp[0].ID, 0, now.Add(time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	want.Total, want.ByStatus[space.Unknown], want.ByProvider[space.AWS], want.ByAccount[f.account.ID] = 4, 3, 4, 4
	want.ByVersion["1.31"] = 1
	check("after a deregistration")
	if got := f.raw(t, f.org, "SPACE#"+sp[0].ID)["counted_minor"]; got != nil {
		t.Errorf("a tombstone keeps counted_minor %v", got)
	}

	// Two spaces as stored before the version counters: no counted_minor
	// and on no minor counter. Counted unknown meanwhile.
	for _, s := range []space.Space{sp[2], sp[4]} {
		m := f.raw(t, f.org, "SPACE#"+s.ID)["counted_minor"].(*types.AttributeValueMemberS).Value
		f.strip(t, f.org, "SPACE#"+s.ID, "counted_minor")
		f.uncount(t, "minor_"+m)
		want.ByVersion[m]--
		if want.ByVersion[m] == 0 {
			delete(want.ByVersion, m)
		}
		want.VersionUnknown++
		uncounted++
	}
	check("with two spaces stored before the version counters")
	// The prober's write takes its read as counted under 1.31; the item
	// says otherwise, so it reads again and counts the upgrade only.
	*ops = nil
	f.probeVersion(t, store, sp[2].ID, "v1.33.0", now.Add(2*time.Minute))
	if len(*ops) < 2 || (*ops)[0] != "TransactWriteItems" || (*ops)[len(*ops)-1] != "TransactWriteItems" {
		t.Errorf("an uncounted space's upgrade made %v, want a transaction, a read and a transaction", *ops)
	}
	want.ByVersion["1.33"], want.VersionUnknown = 1, want.VersionUnknown-1
	check("after an uncounted space's upgrade")
	// The backfill counts the other; a second run counts nothing.
	if rep := f.backfill(t, 2); rep.Counted != 1 {
		t.Errorf("backfill counted %d, want 1", rep.Counted)
	}
	want.ByVersion["1.29"], want.VersionUnknown = 1, want.VersionUnknown-1
	uncounted = 0
	check("after the backfill")
	if rep := f.backfill(t, 2); rep.Counted != 0 {
		t.Errorf("a second backfill counted %d, want 0", rep.Counted)
	}
	check("after a second backfill")
}

// uncount subtracts 1 from the first of f.org's counter items that holds
// attr at 1 or more.
func (f *fixture) uncount(t *testing.T, attr string) {
	t.Helper()
	out, err := f.db.Query(t.Context(), &dynamodb.QueryInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :c)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "ORG#" + f.org}, ":c": &types.AttributeValueMemberS{Value: "COUNT#"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range out.Items {
		if n, ok := item[attr].(*types.AttributeValueMemberN); ok && n.Value != "0" {
			if _, err := f.db.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{TableName: aws.String(f.table),
				Key:                       map[string]types.AttributeValue{"pk": item["pk"], "sk": item["sk"]},
				UpdateExpression:          aws.String("ADD #a :m"),
				ExpressionAttributeNames:  map[string]string{"#a": attr},
				ExpressionAttributeValues: map[string]types.AttributeValue{":m": &types.AttributeValueMemberN{Value: "-1"}}}); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no counter holds %s", attr)
}
