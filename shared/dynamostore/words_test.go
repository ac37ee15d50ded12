package dynamostore_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/shared/space"
)

// wordEntries is every search entry of org as stored (sort keys, with
// "\x01" shown as "|").
func (f *fixture) wordEntries(t testing.TB, org string) []string {
	t.Helper()
	var out []string
	in := &dynamodb.QueryInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "WORD#" + org}}}
	for {
		page, err := f.db.Query(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			out = append(out, strings.ReplaceAll(item["sk"].(*types.AttributeValueMemberS).Value, "\x01", "|"))
		}
		if page.LastEvaluatedKey == nil {
			return out
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// wantEntries checks that org's entries are exactly those of the spaces'
// names' words.
func (f *fixture) wantEntries(t *testing.T, org string, live ...space.Space) {
	t.Helper()
	var want []string
	for _, sp := range live {
		for _, w := range space.NameWords(sp.Name) {
			want = append(want, w+"|"+space.FoldName(sp.Name)+"|"+sp.ID)
		}
	}
	slices.Sort(want)
	got := f.wordEntries(t, org)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("search entries %q, want %q", got, want)
	}
}

func (f *fixture) named(t testing.TB, n int, name string) space.Space {
	s := f.newSpace(n)
	s.Name = name
	return f.register(t, s)
}

func (f *fixture) rename(t testing.TB, id, name string, at time.Time) error {
	_, err := f.store.UpdateSpace(t.Context(), f.org, id, space.Update[space.Space]{At: at,
		Apply: func(s space.Space) (space.Space, error) { s.Name = name; return s, nil }})
	return err
}

// A word search finds a space by the prefix of any word of its name (not
// mid-word), once even when two words match, in the order of the word
// matched and then name, page by page with the position after each; a
// rename moves the entries, a deregistration removes them, and a rename
// that raced the deregistration cannot put one back. Another org's
// spaces are neither listed nor touched.
func TestWordSearch(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	sp := map[string]space.Space{}
	for i, name := range []string{"prod-payments-eu", "PaymentsAPI2", "payroll-payments", "dev-pay", "staging-eu", "compayny", ""} {
		sp[name] = f.named(t, i, name)
	}
	other := *f
	other.org = uuid.NewString()
	other.account = other.createAccount(t, other.org, space.AWS)
	theirs := other.named(t, 99, "prod-payments-us")

	search := func(f *fixture, text string, q space.Query) []string {
		q.Search = space.SearchWords(text)
		var all []string
		for _, limit := range []int{1, 2, 3, 100} {
			got := f.names(t, q, limit)
			if all != nil && !slices.Equal(got, all) {
				t.Errorf("search %q, limit %d: %q, but %q with limit 1", text, limit, got, all)
			}
			all = got
		}
		return all
	}
	for _, c := range []struct {
		text string
		want []string
	}{
		// "pay", then "payments" by name; payroll-payments once, at payments.
		{"pay", []string{"dev-pay", "PaymentsAPI2", "payroll-payments", "prod-payments-eu"}},
		{"PAY", []string{"dev-pay", "PaymentsAPI2", "payroll-payments", "prod-payments-eu"}},
		{"payr", []string{"payroll-payments"}},
		{"ments", nil}, // not mid-word
		{"ayny", nil},
		{"api", []string{"PaymentsAPI2"}},
		{"2", []string{"PaymentsAPI2"}},
		{"eu", []string{"prod-payments-eu", "staging-eu"}},
		{"prod pay", []string{"prod-payments-eu"}},
		{"eu-pay", []string{"prod-payments-eu"}},
		// Read under payments (fewer entries than p), paged by its position.
		{"payments p", []string{"PaymentsAPI2", "payroll-payments", "prod-payments-eu"}},
		{"prod-us", nil},
	} {
		if got := search(f, c.text, space.Query{}); !slices.Equal(got, c.want) {
			t.Errorf("search %q: %q, want %q", c.text, got, c.want)
		}
	}
	if got := search(f, "pay", space.Query{Keep: func(s space.Space) bool { return s.Name != "PaymentsAPI2" }}); !slices.Equal(got,
		[]string{"dev-pay", "payroll-payments", "prod-payments-eu"}) {
		t.Errorf("search with Keep: %q", got)
	}
	if got := search(f, "pay", space.Query{Provider: space.GCP}); got != nil {
		t.Errorf("search with another provider: %q", got)
	}
	if got := search(&other, "pay", space.Query{}); !slices.Equal(got, []string{"prod-payments-us"}) {
		t.Errorf("the other org's search: %q", got)
	}
	// A position from another search is refused.
	q := space.Query{Search: []string{"pay"}, Page: space.Page{Limit: 1}}
	_, next, err := f.store.ListSpaces(ctx, f.org, q)
	if err != nil || next == "" {
		t.Fatalf("first page: %q, %v", next, err)
	}
	q.Search, q.After = []string{"eu"}, next
	_, _, err = f.store.ListSpaces(ctx, f.org, q)
	wantKind(t, err, space.KindInvalid)

	live := []space.Space{sp["prod-payments-eu"], sp["PaymentsAPI2"], sp["payroll-payments"], sp["dev-pay"], sp["staging-eu"], sp["compayny"], sp[""]}
	f.wantEntries(t, f.org, live...)

	// A rename moves the entries: out of "pay", into "billing".
	if err := f.rename(t, sp["dev-pay"].ID, "dev-Billing", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := search(f, "pay", space.Query{}); slices.Contains(got, "dev-pay") || len(got) != 3 {
		t.Errorf("after the rename, pay: %q", got)
	}
	if got := search(f, "bill", space.Query{}); !slices.Equal(got, []string{"dev-Billing"}) {
		t.Errorf("after the rename, bill: %q", got)
	}
	// A rename that keeps a word keeps its entry's key only if the name
	// folds the same: "compayny" to "Compayny" changes nothing stored.
	if err := f.rename(t, sp["compayny"].ID, "Compayny", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	live[3].Name, live[5].Name = "dev-Billing", "Compayny"
	f.wantEntries(t, f.org, live...)

	// Deregistration removes the entries.
	gone := sp["staging-eu"]
	if _, err := f.store.Deregister(ctx, f.org, gone.ID, 0, now.Add(2*time.Second), "test"); err != nil {
		t.Fatal(err)
	}
	if got := search(f, "eu", space.Query{}); !slices.Equal(got, []string{"prod-payments-eu"}) {
		t.Errorf("after the deregistration, eu: %q", got)
	}
	// A rename that read the space before its deregistration, tried (or
	// retried) after it, fails and puts no entry back.
	stale := sp["prod-payments-eu"]
	if _, err := f.store.Deregister(ctx, f.org, stale.ID, 0, now.Add(3*time.Second), "test"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := f.store.UpdateSpace(ctx, f.org, stale.ID, space.Update[space.Space]{At: now.Add(4 * time.Second), Read: &stale,
			Apply: func(s space.Space) (space.Space, error) { s.Name = "prod-payments-zz"; return s, nil }})
		if err == nil {
			t.Fatal("a rename after the deregistration was written")
		}
	}
	if got := search(f, "zz", space.Query{}); got != nil {
		t.Errorf("the deregistered space is found by its stale rename: %q", got)
	}
	live = slices.DeleteFunc(live, func(s space.Space) bool { return s.ID == gone.ID || s.ID == stale.ID })
	f.wantEntries(t, f.org, live...)
	other.wantEntries(t, other.org, theirs)
}

// A registration that is refused writes no entry; a space registered
// with a name of many words has MaxNameWords entries.
func TestWordEntriesOfRegistration(t *testing.T) {
	f := newFixture(t)
	first := f.named(t, 1, "one-two")
	dup := f.newSpace(1) // the same cluster: its identity is claimed
	dup.Name = "three"
	if err := f.store.Register(t.Context(), dup, space.Idempotency{}); err == nil {
		t.Fatal("a second registration of the cluster was written")
	}
	long := f.named(t, 2, strings.Repeat("a-b-c-d-e-f-g-h-i-j-k-l-m-n-o-p-q-r-s-t-", 2))
	f.wantEntries(t, f.org, first, long)
	if n := len(space.NameWords(long.Name)); n != space.MaxNameWords {
		t.Errorf("%d words indexed, want %d", n, space.MaxNameWords)
	}
	// The longest rename moves every entry in one transaction.
	if err := f.rename(t, long.ID, strings.Repeat("u1v2w3x4y5z6-", 4), now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	long.Name = strings.Repeat("u1v2w3x4y5z6-", 4)
	f.wantEntries(t, f.org, first, long)
}

// Spaces stored before the search entries get them from the backfill, once.
func TestBackfillWordEntries(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	old := f.named(t, 1, "legacy-payments")
	gone := f.named(t, 2, "legacy-gone")
	recased := f.named(t, 3, "Legacy-Case")
	// As stored before the entries: no marker, no entry.
	for _, s := range []space.Space{old, gone, recased} {
		f.strip(t, f.org, "SPACE#"+s.ID, "word_entries")
		for _, w := range space.NameWords(s.Name) {
			if _, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "WORD#" + f.org},
				"sk": &types.AttributeValueMemberS{Value: w + "\x01" + space.FoldName(s.Name) + "\x01" + s.ID}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.store.Deregister(ctx, f.org, gone.ID, 0, now.Add(time.Second), "test"); err != nil {
		t.Fatal(err)
	}
	// A rename that moves no entry (the same words, folded alike) before
	// the backfill leaves the space to it.
	if err := f.rename(t, recased.ID, "legacy-case", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	recased.Name = "legacy-case"
	f.wantEntries(t, f.org)
	if rep := f.backfill(t, 2); rep.Words != 2 {
		t.Errorf("backfill gave %d spaces their entries, want 2", rep.Words)
	}
	f.wantEntries(t, f.org, old, recased)
	if got := f.names(t, space.Query{Search: []string{"pay"}}, 10); !slices.Equal(got, []string{"legacy-payments"}) {
		t.Errorf("after the backfill, pay: %q", got)
	}
	if rep := f.backfill(t, 1); rep.Words != 0 {
		t.Errorf("a second backfill gave %d spaces their entries", rep.Words)
	}
	f.wantEntries(t, f.org, old, recased)
}
