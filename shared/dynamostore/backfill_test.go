package dynamostore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// strip removes attrs from an item, as it was before the writes that put
// them existed.
func (f *fixture) strip(t *testing.T, org, sk string, attrs ...string) {
	t.Helper()
	expr := "REMOVE "
	names := map[string]string{}
	for i, a := range attrs {
		if i > 0 {
			expr += ", "
		}
		ph := fmt.Sprintf("#a%c", 'a'+i)
		expr += ph
		names[ph] = a
	}
	if _, err := f.db.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{TableName: aws.String(f.table),
		Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "ORG#" + org}, "sk": &types.AttributeValueMemberS{Value: sk}},
		UpdateExpression: aws.String(expr), ExpressionAttributeNames: names}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) backfill(t *testing.T, segments int) dynamostore.BackfillReport {
	t.Helper()
	var rep dynamostore.BackfillReport
	for seg := range segments {
		r, err := f.store.Backfill(t.Context(), seg, segments)
		if err != nil {
			t.Fatalf("Backfill %d/%d: %v", seg, segments, err)
		}
		rep.Add(r)
	}
	return rep
}

// A table written before the listing indexes: its spaces and revisions
// lack their keys and are missing from those orders. The backfill puts
// them back, leaves a deregistered space's tombstone out, touches nothing
// a second time, and loses no concurrent write (the version decides).
func TestBackfillListingKeys(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	var ids []string
	for i, name := range []string{"b", "a", "c"} {
		s := f.newSpace(i)
		s.Name = name
		s.CreatedAt = now.Add(time.Duration(i) * time.Minute)
		f.register(t, s)
		ids = append(ids, s.ID)
	}
	gone := f.register(t, f.newSpace(9))
	if _, err := f.store.Deregister(ctx, f.org, gone.ID, 0, now.Add(time.Hour), "test"); err != nil {
		t.Fatal(err)
	}
	env := uuid.NewString()
	revs := f.pushRevisions(t, f.org, env, 3)
	// The newest revision stopped (its stopped_key is put by that write).
	if _, err := f.store.UpdateRevision(ctx, f.org, revs[2], space.Update[space.Revision]{At: now.Add(time.Minute),
		Apply: func(r space.Revision) (space.Revision, error) { r.State = space.RevisionStopped; return r, nil }}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		f.strip(t, f.org, "SPACE#"+id, "name_lc", "name_key", "reg_key", "status_key", "since_key", "problem_key")
	}
	for _, id := range revs {
		f.strip(t, f.org, "REV#"+id, "rev_key", "stopped_key")
	}
	listed := func() (byName, byReg, byStatus, envRevs, stopped []string) {
		byName = f.names(t, space.Query{Sort: space.SortName}, 2)
		byReg = f.names(t, space.Query{Sort: space.SortRegistered}, 2)
		byStatus = f.names(t, space.Query{Sort: space.SortStatus}, 2)
		envRevs = every(t, 2, func(p space.Page) ([]space.RevisionSummary, string, error) {
			return f.store.ListRevisions(ctx, f.org, env, p)
		})
		stopped = every(t, 2, func(p space.Page) ([]space.RevisionSummary, string, error) {
			return f.store.StoppedRevisions(ctx, f.org, p)
		})
		return
	}
	if since := f.names(t, space.Query{Sort: space.SortStatusSince}, 2); len(since) != 0 {
		t.Fatalf("before the backfill the stripped spaces are listed by status since: %v", since)
	}
	if problems := f.names(t, space.Query{Sort: space.SortProblems}, 2); len(problems) != 0 {
		t.Fatalf("before the backfill the stripped spaces are listed problems first: %v", problems)
	}
	if n, r, s, e, st := listed(); len(n)+len(r)+len(s)+len(e)+len(st) != 0 {
		t.Fatalf("before the backfill the stripped items are listed: %v %v %v %v %v", n, r, s, e, st)
	}

	// A write racing the backfill: the first space the backfill is about to
	// write moves to active after the scan read it. The backfill's write
	// loses (the version moved), reads it again and writes what is still
	// missing; the racing write stands.
	var raced string
	race := func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("race", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if u, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok && raced == "" {
				if sk := u.Key["sk"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(sk, "SPACE#") {
					raced = strings.TrimPrefix(sk, "SPACE#")
					if err := f.setStatus(t, raced, space.Active, now.Add(time.Second)); err != nil {
						t.Error(err)
					}
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
	racing := dynamostore.New(dynamodb.New(f.db.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, race) }), f.table)
	var rep dynamostore.BackfillReport
	for seg := range 3 {
		r, err := racing.Backfill(ctx, seg, 3)
		if err != nil {
			t.Fatal(err)
		}
		rep.Add(r)
	}
	if rep.Spaces != 3 || rep.Revisions != 3 || rep.Retried != 1 {
		t.Errorf("backfill: %+v, want 3 spaces, 3 revisions, 1 retried", rep)
	}
	n, r, s, e, st := listed()
	// Status order: the raced space (now active) first, then the others
	// (unknown) by name.
	names := map[string]string{ids[0]: "b", ids[1]: "a", ids[2]: "c"}
	wantStatus := []string{names[raced]}
	for _, x := range []string{"a", "b", "c"} {
		if x != names[raced] {
			wantStatus = append(wantStatus, x)
		}
	}
	if !slices.Equal(n, []string{"a", "b", "c"}) || !slices.Equal(r, []string{"b", "a", "c"}) || !slices.Equal(s, wantStatus) {
		t.Errorf("after the backfill, by name %v, registration %v, status %v (want %v)", n, r, s, wantStatus)
	}
	// None has changed status by a transition (the racing write sets the
	// status alone): by status since is by registration.
	if since := f.names(t, space.Query{Sort: space.SortStatusSince}, 2); !slices.Equal(since, []string{"b", "a", "c"}) {
		t.Errorf("after the backfill, by status since %v, want [b a c]", since)
	}
	// Problems first: the unknown ones, latest registration first, then
	// the raced one (active).
	var wantProblems []string
	for _, x := range []string{"c", "a", "b"} {
		if x != names[raced] {
			wantProblems = append(wantProblems, x)
		}
	}
	wantProblems = append(wantProblems, names[raced])
	if problems := f.names(t, space.Query{Sort: space.SortProblems}, 2); !slices.Equal(problems, wantProblems) {
		t.Errorf("after the backfill, problems first %v, want %v", problems, wantProblems)
	}
	if want := []string{revs[2], revs[1], revs[0]}; !slices.Equal(e, want) || !slices.Equal(st, []string{revs[2]}) {
		t.Errorf("after the backfill, the environment's %v (want %v), stopped %v (want %v)", e, want, st, revs[2:])
	}
	if got, err := f.store.GetSpace(ctx, f.org, raced); err != nil || got.Status != space.Active {
		t.Errorf("the racing write: %v %v, want active", got.Status, err)
	}
	if item := f.raw(t, f.org, "SPACE#"+gone.ID); item["reg_key"] != nil || item["name_key"] != nil || item["status_key"] != nil || item["since_key"] != nil || item["problem_key"] != nil {
		t.Errorf("the tombstone was given listing keys: %v", item)
	}
	if again := f.backfill(t, 1); again.Spaces+again.Revisions+again.Retried != 0 {
		t.Errorf("a second backfill wrote %+v", again)
	}
}

// A space stored before the probe digest: the probe index lists it by ids
// only (the prober would read it every minute). The backfill gives it its
// digest, as its writes would, and then has nothing left to do.
func TestBackfillProbeDigest(t *testing.T) {
	f := newFixture(t)
	s := f.register(t, f.newSpace(1))
	f.strip(t, f.org, "SPACE#"+s.ID, "pd")
	if tg, ok := shardTargets(t, f.store)[s.ID]; !ok || tg.Carried() || tg.OrgID != s.OrgID {
		t.Fatalf("without a digest: target %+v (listed %t), want ids only", tg, ok)
	}
	if rep := f.backfill(t, 2); rep.Spaces != 1 {
		t.Errorf("backfill: %+v, want 1 space", rep)
	}
	if tg := shardTargets(t, f.store)[s.ID]; !tg.Carried() || tg.Digest.String() != space.DigestOf(s).String() {
		t.Errorf("after the backfill: %+v, want the digest %s", tg, space.DigestOf(s))
	}
	if rep := f.backfill(t, 1); rep.Spaces != 0 {
		t.Errorf("a second backfill: %+v, want nothing done", rep)
	}
}
