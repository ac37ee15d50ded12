package dynamostore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// probeStep applies one outcome the way the prober does and saves it.
func probeStep(t *testing.T, f *fixture, s space.Space, o space.Outcome) (space.Space, *space.Transition) {
	t.Helper()
	res, err := f.store.UpdateSpace(t.Context(), s.OrgID, s.ID, space.Update[space.Space]{At: o.At, Read: &s,
		Apply: func(cur space.Space) (space.Space, error) { next, _ := space.ApplyProbe(cur, o); return next, nil }})
	if err != nil {
		t.Fatalf("UpdateSpace: %v", err)
	}
	if res.After.Version != s.Version+1 || !res.After.UpdatedAt.Equal(o.At.UTC()) {
		t.Fatalf("stored version %d at %v, want %d at %v", res.After.Version, res.After.UpdatedAt, s.Version+1, o.At)
	}
	return res.After, space.TransitionOf(res.Before, res.After)
}

func historyCount(t *testing.T, f *fixture, id string) int {
	t.Helper()
	out, err := f.db.Query(t.Context(), &dynamodb.QueryInput{
		TableName:                 aws.String(f.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "SPACE#" + id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

func TestSaveProbeKeepsHistory(t *testing.T) {
	f := newFixture(t)
	s := f.register(t, f.newSpace(1))
	at := now
	ok := func() space.Outcome { at = at.Add(time.Minute); return space.Outcome{At: at} }
	fail := func() space.Outcome {
		at = at.Add(12 * time.Second)
		return space.Outcome{At: at, Reason: space.ReasonTimeout, Message: "slow"}
	}

	// unknown→active, then 3 failures →inactive, then →active, twice over:
	// 5 transitions, and the failures below the threshold store no history.
	var want []space.Transition
	outcomes := []func() space.Outcome{ok, fail, fail, fail, ok, fail, fail, fail, ok}
	for _, o := range outcomes {
		var tr *space.Transition
		s, tr = probeStep(t, f, s, o())
		if tr != nil {
			want = append([]space.Transition{*tr}, want...)
		}
	}
	if len(want) != 5 || historyCount(t, f, s.ID) != 5 {
		t.Fatalf("%d transitions, %d history items; want 5", len(want), historyCount(t, f, s.ID))
	}
	if want[1].To != space.Inactive || want[1].Reason != space.ReasonTimeout || want[1].Message != "slow" {
		t.Errorf("inactive transition %+v", want[1])
	}

	// Newest first, two at a time.
	var got []space.Transition
	after := ""
	for pages := 0; ; pages++ {
		page, next, err := f.store.History(t.Context(), f.org, s.ID, space.Page{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next == "" {
			if pages != 2 {
				t.Errorf("%d pages, want 3", pages+1)
			}
			break
		}
		after = next
	}
	if len(got) != len(want) {
		t.Fatalf("history %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("history[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}

	// The item expires 30 days after the transition (the table's TTL).
	item := f.rawHist(t, s.ID, want[0])
	exp, _ := item["expires_at"].(*types.AttributeValueMemberN)
	if exp == nil || exp.Value != strconv.FormatInt(want[0].At.Add(30*24*time.Hour).Unix(), 10) {
		t.Errorf("expires_at %v", item["expires_at"])
	}

	// Another org reads nothing through a known id.
	if other, _, err := f.store.History(t.Context(), "another-org", s.ID, space.Page{Limit: 10}); err != nil || len(other) != 0 {
		t.Errorf("another org read %d items (%v)", len(other), err)
	}
	// Bad pages are refused.
	for _, p := range []space.Page{{Limit: 0}, {Limit: 1001}, {Limit: 5, After: "nonsense"}, {Limit: 5, After: "2026-01-01T00:00:00.000000000Z#sideways"}} {
		if _, _, err := f.store.History(t.Context(), f.org, s.ID, p); space.KindOf(err) != space.KindInvalid {
			t.Errorf("page %+v: %v, want KindInvalid", p, err)
		}
	}
}

func (f *fixture) rawHist(t *testing.T, id string, tr space.Transition) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "SPACE#" + id},
			"sk": &types.AttributeValueMemberS{Value: "HIST#" + dynamostore.HistoryKey(tr)},
		},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("history item: %v", err)
	}
	return out.Item
}

// A transition is stored only with its space: a stale version or a
// deregistered space writes neither; a lost race is read again and applied
// to what won it.
func TestUpdateSpaceIsAtomic(t *testing.T) {
	f := newFixture(t)
	s := f.register(t, f.newSpace(1))
	at := now.Add(time.Minute)
	toActive := func(cur space.Space) (space.Space, error) {
		next, _ := space.ApplyProbe(cur, space.Outcome{At: at})
		return next, nil
	}

	if _, err := f.store.UpdateSpace(t.Context(), f.org, s.ID, space.Update[space.Space]{IfVersion: 5, At: at, Apply: toActive}); space.KindOf(err) != space.KindPreconditionFailed {
		t.Errorf("If-Match of another version: %v", err)
	}
	// The caller read version 1 while the store already holds version 2:
	// the write fails, the space is read again and the change applied to
	// version 2.
	renamed, err := f.store.UpdateSpace(t.Context(), f.org, s.ID, space.Update[space.Space]{At: at,
		Apply: func(cur space.Space) (space.Space, error) { cur.Name = "renamed"; return cur, nil }})
	if err != nil || renamed.After.Version != 2 {
		t.Fatalf("rename: %+v %v", renamed, err)
	}
	applied := 0
	res, err := f.store.UpdateSpace(t.Context(), f.org, s.ID, space.Update[space.Space]{At: at, Read: &s,
		Apply: func(cur space.Space) (space.Space, error) { applied++; return toActive(cur) }})
	if err != nil || applied != 2 || res.Before.Version != 2 || res.After.Version != 3 || res.After.Name != "renamed" {
		t.Fatalf("after a lost race: applied %d times, %+v, %v", applied, res, err)
	}
	if n := historyCount(t, f, s.ID); n != 1 {
		t.Errorf("%d history items, want the one transition", n)
	}
	unchanged, err := f.store.UpdateSpace(t.Context(), f.org, s.ID, space.Update[space.Space]{At: at,
		Apply: func(cur space.Space) (space.Space, error) { return cur, space.ErrUnchanged }})
	if err != nil || unchanged.Written || unchanged.After.Version != 3 {
		t.Errorf("unchanged: %+v %v", unchanged, err)
	}

	if _, err := f.store.Deregister(t.Context(), f.org, s.ID, 0, now.Add(time.Second), "test"); err != nil {
		t.Fatal(err)
	}
	after := res.After
	if _, err := f.store.UpdateSpace(t.Context(), f.org, s.ID, space.Update[space.Space]{At: at.Add(time.Minute), Read: &after,
		Apply: func(cur space.Space) (space.Space, error) {
			next, _ := space.ApplyProbe(cur, space.Outcome{At: at.Add(time.Minute), Reason: space.ReasonTimeout})
			return next, nil
		}}); space.KindOf(err) != space.KindNotFound {
		t.Errorf("deregistered: %v", err)
	}
	if n := historyCount(t, f, s.ID); n != 1 {
		t.Errorf("%d history items after failed updates, want 1", n)
	}
}

func TestUnpublishedTransition(t *testing.T) {
	f := newFixture(t)
	s := f.register(t, f.newSpace(1))
	if tr, err := f.store.UnpublishedTransition(t.Context(), f.org, s.ID); err != nil || tr != nil {
		t.Fatalf("no history: %+v %v", tr, err)
	}
	_, tr := probeStep(t, f, s, space.Outcome{At: now.Add(time.Minute)})
	got, err := f.store.UnpublishedTransition(t.Context(), f.org, s.ID)
	if err != nil || got == nil || *got != *tr {
		t.Fatalf("unpublished %+v %v, want %+v", got, err, tr)
	}
	if err := f.store.MarkPublished(t.Context(), *tr); err != nil {
		t.Fatal(err)
	}
	if got, err := f.store.UnpublishedTransition(t.Context(), f.org, s.ID); err != nil || got != nil {
		t.Errorf("after MarkPublished: %+v %v", got, err)
	}
	missing := *tr
	missing.At = missing.At.Add(time.Hour)
	if err := f.store.MarkPublished(t.Context(), missing); space.KindOf(err) != space.KindNotFound {
		t.Errorf("marking an absent transition: %v", err)
	}
}
