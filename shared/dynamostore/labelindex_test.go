package dynamostore_test

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// labelEntries is every label entry of org as stored (sort keys, with
// "\x01" shown as "|"), sorted.
func (f *fixture) labelEntries(t testing.TB, org string) []string {
	t.Helper()
	return f.partition(t, "LABEL#"+org)
}

// orderEntries is every label entry of org in problems-first order, as
// labelEntries.
func (f *fixture) orderEntries(t testing.TB, org string) []string {
	t.Helper()
	return f.partition(t, "LPROB#"+org)
}

// partition is the sort keys of partition pk, "\x01" shown as "|",
// sorted.
func (f *fixture) partition(t testing.TB, pk string) []string {
	t.Helper()
	var out []string
	in := &dynamodb.QueryInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}}}
	for {
		page, err := f.db.Query(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			out = append(out, strings.ReplaceAll(item["sk"].(*types.AttributeValueMemberS).Value, "\x01", "|"))
		}
		if page.LastEvaluatedKey == nil {
			slices.Sort(out)
			return out
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// problemPosition is sp's position in problems-first order as
// sort=problems documents it: inactive, unknown, active, then the
// latest change first, then the id ("|" for "\x01").
func problemPosition(sp space.Space) string {
	rank := map[space.Status]string{space.Inactive: "0", space.Unknown: "1", space.Active: "2"}[sp.Status]
	return fmt.Sprintf("%s|%019d|%s", rank, math.MaxInt64-sp.StatusSince().UnixNano(), sp.ID)
}

// wantLabelEntries checks that org's label entries are exactly those of
// the live spaces' labels, in id order and in problems-first order (a
// label's entry at the space's position, or one overflow entry for a
// space of more than 32 labels).
func (f *fixture) wantLabelEntries(t *testing.T, org string, live ...space.Space) {
	t.Helper()
	want, order := []string{}, []string{}
	for _, sp := range live {
		for k, v := range sp.Labels {
			want = append(want, k+"="+v+"|"+sp.ID)
			if len(sp.Labels) <= 32 {
				order = append(order, k+"="+v+"|"+problemPosition(sp))
			}
		}
		if len(sp.Labels) > 32 {
			order = append(order, "*|"+problemPosition(sp))
		}
	}
	slices.Sort(want)
	slices.Sort(order)
	if got := append([]string{}, f.labelEntries(t, org)...); !slices.Equal(got, want) {
		t.Errorf("label entries %q, want %q", got, want)
	}
	if got := append([]string{}, f.orderEntries(t, org)...); !slices.Equal(got, order) {
		t.Errorf("label entries in problems-first order %q, want %q", got, order)
	}
}

func (f *fixture) relabel(t testing.TB, id string, labels space.Labels, at time.Time) space.Space {
	t.Helper()
	res, err := f.store.UpdateSpace(t.Context(), f.org, id, space.Update[space.Space]{At: at,
		Apply: func(s space.Space) (space.Space, error) { s.Labels = labels; return s, nil }})
	if err != nil {
		t.Fatalf("relabel %s: %v", id, err)
	}
	return res.After
}

// A space's label entries follow its labels: put at registration, moved
// by a labels change (only the labels it changes), kept by a heartbeat
// and a transition, all deleted at deregistration.
func TestLabelEntriesFollowTheSpace(t *testing.T) {
	f := newFixture(t)
	s := f.newSpace(1)
	s.Labels = space.Labels{"env": "prod", "example.com/team": "a"}
	s = f.register(t, s)
	other := f.newSpace(2)
	other.Labels = space.Labels{"env": "prod"}
	other = f.register(t, other)
	f.wantLabelEntries(t, f.org, s, other)

	steps := []struct {
		name  string
		apply func(space.Space) space.Space
	}{
		{"a value changed", func(x space.Space) space.Space {
			x.Labels = space.Labels{"env": "dev", "example.com/team": "a"}
			return x
		}},
		{"a label added", func(x space.Space) space.Space {
			x.Labels = space.Labels{"env": "dev", "example.com/team": "a", "tier": ""}
			return x
		}},
		{"a heartbeat", func(x space.Space) space.Space { x.Probe.LatencyMS = 7; return x }},
		{"with a transition", func(x space.Space) space.Space {
			x.Labels, x.Status = space.Labels{"env": "dev", "tier": "web"}, space.Active
			return x
		}},
		{"every label removed", func(x space.Space) space.Space { x.Labels = nil; return x }},
		{"labels again", func(x space.Space) space.Space { x.Labels = space.Labels{"env": "prod"}; return x }},
	}
	for i, step := range steps {
		res, err := f.store.UpdateSpace(t.Context(), f.org, s.ID, space.Update[space.Space]{At: now.Add(time.Duration(i+1) * time.Second),
			Apply: func(x space.Space) (space.Space, error) { return step.apply(x), nil }})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		s = res.After
		t.Run(step.name, func(t *testing.T) { f.wantLabelEntries(t, f.org, s, other) })
	}
	if _, err := f.store.Deregister(t.Context(), f.org, s.ID, 0, now.Add(time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	f.wantLabelEntries(t, f.org, other)
}

// A labels change of every one of space.MaxLabels labels moves more
// entries than one transaction holds: the new ones are put first, and the
// entries end as the labels are.
func TestLargestLabelsChange(t *testing.T) {
	f := newFixture(t)
	many := func(prefix string) space.Labels {
		m := space.Labels{}
		for i := range space.MaxLabels {
			m[fmt.Sprintf("%s%02d", prefix, i)] = "v"
		}
		return m
	}
	s := f.newSpace(1)
	s.Name = strings.Repeat("a-", 15) + "z" // 16 words: the largest registration
	s.Labels = many("a")
	s = f.register(t, s)
	f.wantLabelEntries(t, f.org, s)
	s = f.relabel(t, s.ID, many("b"), now.Add(time.Second))
	f.wantLabelEntries(t, f.org, s)
	if got, err := f.store.GetSpace(t.Context(), f.org, s.ID); err != nil || !maps.Equal(got.Labels, many("b")) {
		t.Fatalf("labels after the change: %v, %v", got.Labels, err)
	}
	if _, err := f.store.Deregister(t.Context(), f.org, s.ID, 0, now.Add(time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	f.wantLabelEntries(t, f.org)
}

// The largest writes of a space with entries of each label in
// problems-first order (32 labels, a name of 16 words) fit their
// transactions: registered, renamed with every label changed (32 and 32
// entries moved beside 16 words), moved by a transition (32 entries),
// grown to 33 labels (one overflow entry) and back, and deregistered.
func TestLargestOrderedLabels(t *testing.T) {
	f := newFixture(t)
	many := func(prefix string, n int) space.Labels {
		m := space.Labels{}
		for i := range n {
			m[fmt.Sprintf("%s%02d", prefix, i)] = "v"
		}
		return m
	}
	s := f.newSpace(1)
	s.Name = strings.Repeat("a-", 15) + "z"
	s.Labels = many("a", 32)
	s = f.register(t, s)
	f.wantLabelEntries(t, f.org, s)
	steps := []struct {
		name  string
		apply func(space.Space) space.Space
	}{
		{"renamed, every label changed", func(x space.Space) space.Space {
			x.Name, x.Labels = strings.Repeat("b-", 15)+"y", many("b", 32)
			return x
		}},
		{"a transition", func(x space.Space) space.Space { x.Status = space.Active; return x }},
		{"33 labels", func(x space.Space) space.Space { x.Labels = many("c", 33); return x }},
		{"32 labels again", func(x space.Space) space.Space { x.Labels = many("d", 32); return x }},
	}
	for i, step := range steps {
		res, err := f.store.UpdateSpace(t.Context(), f.org, s.ID, space.Update[space.Space]{At: now.Add(time.Duration(i+1) * time.Second),
			Apply: func(x space.Space) (space.Space, error) { return step.apply(x), nil }})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		s = res.After
		t.Run(step.name, func(t *testing.T) { f.wantLabelEntries(t, f.org, s) })
	}
	if _, err := f.store.Deregister(t.Context(), f.org, s.ID, 0, now.Add(time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	f.wantLabelEntries(t, f.org)
}

// selectorFleet registers a mixed fleet in f's org: labels of several
// keys and values, some without labels, some of another provider.
func selectorFleet(t *testing.T, f *fixture) []space.Space {
	t.Helper()
	gcp := f.createAccount(t, f.org, space.GCP)
	var fleet []space.Space
	for i := range 40 {
		s := f.newSpace(i)
		s.Name = fmt.Sprintf("%s-%02d", []string{"pay", "bill", "ship"}[i%3], i)
		s.Labels = space.Labels{}
		if i%5 != 4 {
			s.Labels["env"] = []string{"prod", "staging", "dev"}[i%3]
		}
		if i%2 == 0 {
			s.Labels["team"] = []string{"a", "b", "c", "d"}[i%4]
		}
		if i%7 == 0 {
			s.Labels["example.com/frozen"] = ""
		}
		if i%4 == 1 {
			s.Labels["tier"] = []string{"db", "web"}[i%8/4]
		}
		if len(s.Labels) == 0 {
			s.Labels = nil
		}
		if i%6 == 5 {
			s.Provider, s.CloudAccountID = space.GCP, gcp.ID
			s.Config = space.Config{"projectId": "proj-123456", "location": "europe-west1", "clusterName": s.Name}
		}
		fleet = append(fleet, f.register(t, s))
	}
	return fleet
}

// A selector's listing in id order, read under one of its requirements,
// lists exactly the spaces the filter keeps, in id order, page after page:
// equalities, sets, exists, mixed with negative requirements and the
// other filters, and negative selectors (which filter the listing).
func TestSelectorListing(t *testing.T) {
	f := newFixture(t)
	fleet := selectorFleet(t, f)
	slices.SortFunc(fleet, func(a, b space.Space) int { return strings.Compare(a.ID, b.ID) })
	for _, c := range []struct {
		sel      string
		provider space.Provider
		prefix   string
	}{
		{sel: "env=prod"},
		{sel: "env==dev"},
		{sel: "team in (a,c)"},
		{sel: "team in (a,b,c,d,zz)"},
		{sel: "example.com/frozen"},
		{sel: "tier"},
		{sel: "env=prod,tier!=db"},
		{sel: "env in (prod,dev),team,!tier"},
		{sel: "env=prod,team=a"},
		{sel: "env,team in (b),example.com/frozen"},
		{sel: "env=none"},
		{sel: "nokey"},
		{sel: "env!=prod"},
		{sel: "!env,team notin (a)"},
		{sel: "env=prod", provider: space.GCP},
		{sel: "team", prefix: "pay"},
	} {
		t.Run(c.sel+"/"+string(c.provider)+c.prefix, func(t *testing.T) {
			sel, err := space.ParseSelector("label_selector", c.sel)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, s := range fleet {
				if sel.Matches(s.Labels) && (c.provider == "" || s.Provider == c.provider) && strings.HasPrefix(s.Name, c.prefix) {
					want = append(want, s.ID)
				}
			}
			for _, limit := range []int{1, 3, 100} {
				var got []string
				after := ""
				for range 50 {
					page, next, err := f.store.ListSpaces(t.Context(), f.org, space.Query{Page: space.Page{Limit: limit, After: after},
						Provider: c.provider, NamePrefix: c.prefix, Selector: sel,
						Keep: func(s space.Space) bool { return sel.Matches(s.Labels) }})
					if err != nil {
						t.Fatal(err)
					}
					if len(page) > limit {
						t.Fatalf("a page of %d, limit %d", len(page), limit)
					}
					for _, s := range page {
						got = append(got, s.ID)
					}
					if next == "" {
						break
					}
					after = next
				}
				if !slices.Equal(got, want) {
					t.Errorf("limit %d: listed %d spaces %v,\nwant %d %v", limit, len(got), got, len(want), want)
				}
			}
		})
	}
}

// In another order, a selector that takes few spaces reads them all and
// sorts them itself: page after page, the same spaces in the same order
// as the index filtered, each order and its reverse.
func TestSelectorListingSorted(t *testing.T) {
	f := newFixture(t)
	fleet := selectorFleet(t, f)
	// Statuses and transitions apart, so that the status orders differ.
	for i, s := range fleet {
		if i%3 == 0 {
			if err := f.setStatus(t, s.ID, []space.Status{space.Active, space.Inactive}[i%2], now.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := func(q space.Query, limit int) []string {
		t.Helper()
		var got []string
		for range 50 {
			q.Limit = limit
			page, next, err := f.store.ListSpaces(t.Context(), f.org, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page {
				got = append(got, s.ID)
			}
			if next == "" {
				return got
			}
			q.After = next
		}
		t.Fatal("no end after 50 pages")
		return nil
	}
	for _, sel := range []string{"env=prod", "team in (a,c)", "env=prod,tier!=db", "env in (prod,dev),team,!tier", "example.com/frozen", "env=none"} {
		for _, sort := range []space.Sort{space.SortName, space.SortRegisteredDesc, space.SortStatus, space.SortProblems, space.SortStatusSince} {
			for _, desc := range []bool{false, true} {
				so := sort
				if desc != so.Desc() {
					if desc {
						so = "-" + so
					} else {
						so = so.Base()
					}
				}
				if so == "-"+space.SortProblems {
					continue // no reverse
				}
				t.Run(sel+"/"+string(so), func(t *testing.T) {
					s, err := space.ParseSelector("label_selector", sel)
					if err != nil {
						t.Fatal(err)
					}
					keep := func(x space.Space) bool { return s.Matches(x.Labels) }
					want := list(space.Query{Sort: so, Keep: keep}, 100)
					for _, limit := range []int{1, 3} {
						if got := list(space.Query{Sort: so, Selector: s, Keep: keep}, limit); !slices.Equal(got, want) {
							t.Errorf("limit %d: listed %v,\nthe index filtered %v", limit, got, want)
						}
					}
				})
			}
		}
	}
}

// The index only chooses what is read: a space whose labels no longer
// match is not listed though an entry named it (the entries move in the
// labels change's transaction, so this is the space read being the
// truth), and a space deregistered is not listed.
func TestSelectorListingReadsTheSpaces(t *testing.T) {
	f := newFixture(t)
	a, b, c := f.newSpace(1), f.newSpace(2), f.newSpace(3)
	for _, s := range []*space.Space{&a, &b, &c} {
		s.Labels = space.Labels{"env": "prod"}
		*s = f.register(t, *s)
	}
	f.relabel(t, b.ID, space.Labels{"env": "dev"}, now.Add(time.Second))
	if _, err := f.store.Deregister(t.Context(), f.org, c.ID, 0, now.Add(time.Second), "test"); err != nil {
		t.Fatal(err)
	}
	sel, _ := space.ParseSelector("label_selector", "env=prod")
	page, _, err := f.store.ListSpaces(t.Context(), f.org, space.Query{Page: space.Page{Limit: 10}, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].ID != a.ID {
		t.Errorf("listed %v, want only %s", page, a.ID)
	}
}

// Spaces stored before the label entries get them from the backfill, once;
// a labels change before it gives an unmarked space every entry of its
// new labels (it has none to move), and a deregistered one gets none.
func TestBackfillLabelEntries(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	var old, gone, relabeled space.Space
	for i, s := range []*space.Space{&old, &gone, &relabeled} {
		*s = f.newSpace(i + 1)
		s.Labels = space.Labels{"env": "prod", "team": "a"}
		*s = f.register(t, *s)
		// As stored before the entries: no marker, no entry.
		f.strip(t, f.org, "SPACE#"+s.ID, "label_entries", "label_order")
		for k, v := range s.Labels {
			for pk, pos := range map[string]string{"LABEL#": s.ID, "LPROB#": strings.ReplaceAll(problemPosition(*s), "|", "\x01")} {
				if _, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: pk + f.org},
					"sk": &types.AttributeValueMemberS{Value: k + "=" + v + "\x01" + pos}}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	f.wantLabelEntries(t, f.org)
	if _, err := f.store.Deregister(ctx, f.org, gone.ID, 0, now.Add(time.Second), "test"); err != nil {
		t.Fatal(err)
	}
	relabeled = f.relabel(t, relabeled.ID, space.Labels{"env": "prod", "team": "b"}, now.Add(time.Second))
	f.wantLabelEntries(t, f.org, relabeled)
	// The labels change wrote its entries in problems-first order, and
	// the marker: the backfill gives them to the other one.
	if rep := f.backfill(t, 2); rep.Labels != 1 || rep.Ordered != 1 {
		t.Errorf("backfill gave %d spaces their label entries and %d those in problems-first order, want 1 and 1", rep.Labels, rep.Ordered)
	}
	f.wantLabelEntries(t, f.org, old, relabeled)
	sel, _ := space.ParseSelector("label_selector", "env=prod")
	for _, sort := range []space.Sort{"", space.SortProblems} {
		if page, _, err := f.store.ListSpaces(ctx, f.org, space.Query{Page: space.Page{Limit: 10}, Selector: sel, Sort: sort}); err != nil || len(page) != 2 {
			t.Errorf("after the backfill, env=prod (sort %q) lists %d spaces (%v), want 2", sort, len(page), err)
		}
	}
	if rep := f.backfill(t, 1); rep.Labels != 0 || rep.Ordered != 0 {
		t.Errorf("a second backfill gave %d spaces their label entries and %d those in problems-first order", rep.Labels, rep.Ordered)
	}
	f.wantLabelEntries(t, f.org, old, relabeled)
}

// Problems first, a selector is read under its entries in that order:
// page after page (limits 1, 3 and 100) it lists exactly what the
// problems index filtered lists, on a fleet with every status, spaces
// moved by transitions and relabelled since, one deregistered, spaces of
// more than 32 labels (read from the overflow entries) and an entry left
// at a position its space has left (as a lost race leaves it), which is
// passed over rather than listed twice.
func TestSelectorListingProblemsFirst(t *testing.T) {
	f := newFixture(t)
	fleet := selectorFleet(t, f)
	for i := range 3 {
		s := f.newSpace(100 + i)
		s.Labels = space.Labels{"env": []string{"prod", "dev", "prod"}[i], "team": "a"}
		for j := range 34 {
			s.Labels[fmt.Sprintf("extra-%02d", j)] = "x"
		}
		fleet = append(fleet, f.register(t, s))
	}
	for i, s := range fleet {
		switch i % 4 {
		case 0, 1:
			if err := f.setStatus(t, s.ID, []space.Status{space.Active, space.Inactive}[i%2], now.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if i%9 == 0 {
			if err := f.setStatus(t, s.ID, space.Active, now.Add(time.Duration(100+i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.relabel(t, fleet[2].ID, space.Labels{"env": "prod", "team": "c"}, now.Add(time.Hour))
	f.relabel(t, fleet[5].ID, nil, now.Add(time.Hour))
	if _, err := f.store.Deregister(t.Context(), f.org, fleet[10].ID, 0, now.Add(time.Hour), "test"); err != nil {
		t.Fatal(err)
	}
	// A stale entry: fleet[0]'s env label at a position it no longer has.
	stale, err := f.store.GetSpace(t.Context(), f.org, fleet[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "LPROB#" + f.org},
		"sk": &types.AttributeValueMemberS{Value: "env=" + stale.Labels["env"] + "\x010\x010000000000000000001\x01" + stale.ID},
	}}); err != nil {
		t.Fatal(err)
	}
	list := func(q space.Query, limit int) []string {
		t.Helper()
		var got []string
		for range 200 {
			q.Limit = limit
			page, next, err := f.store.ListSpaces(t.Context(), f.org, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit {
				t.Fatalf("a page of %d, limit %d", len(page), limit)
			}
			for _, s := range page {
				got = append(got, s.ID)
			}
			if next == "" {
				return got
			}
			q.After = next
		}
		t.Fatal("no end after 200 pages")
		return nil
	}
	for _, c := range []struct {
		sel      string
		provider space.Provider
		prefix   string
	}{
		{sel: "env=prod"},
		{sel: "team in (a,c)"},
		{sel: "env=prod,team=a"},
		{sel: "env=prod,tier!=db"},
		{sel: "example.com/frozen"},
		{sel: "extra-03"},
		{sel: "env in (prod,dev),team,!tier"},
		{sel: "env=none"},
		{sel: "env=prod", provider: space.GCP},
		{sel: "team", prefix: "pay"},
	} {
		t.Run(c.sel+"/"+string(c.provider)+c.prefix, func(t *testing.T) {
			sel, err := space.ParseSelector("label_selector", c.sel)
			if err != nil {
				t.Fatal(err)
			}
			keep := func(x space.Space) bool { return sel.Matches(x.Labels) }
			want := list(space.Query{Sort: space.SortProblems, Provider: c.provider, NamePrefix: c.prefix, Keep: keep}, 100)
			for _, limit := range []int{1, 3, 100} {
				got := list(space.Query{Sort: space.SortProblems, Provider: c.provider, NamePrefix: c.prefix, Selector: sel, Keep: keep}, limit)
				if !slices.Equal(got, want) {
					t.Errorf("limit %d: listed %d %v,\nthe index filtered %d %v", limit, len(got), got, len(want), want)
				}
			}
		})
	}
}

// Problems first, a selector's page costs its entries and spaces, not
// the spaces the problems index would pass over: in an org of 1,000
// spaces, a first page of 20 of `team=a` (one in 20) reads under 40
// read units (the emulator's counts, awscost), where filtering the
// problems index reads its way through about 400 spaces; and it lists
// the same spaces in the same order.
func TestSelectorProblemsFirstReadsAPage(t *testing.T) {
	f, meter := meteredFixture(t)
	org := seedSelectorOrg(t, f, 1_000)
	if t.Failed() {
		return
	}
	sel, err := space.ParseSelector("label_selector", "team=a")
	if err != nil {
		t.Fatal(err)
	}
	keep := func(s space.Space) bool { return sel.Matches(s.Labels) }
	list := func(q space.Query) ([]string, float64) {
		t.Helper()
		meter.Take()
		page, _, err := f.store.ListSpaces(t.Context(), org, q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range page {
			ids = append(ids, s.ID)
		}
		return ids, meter.Take().TotalRRU()
	}
	got, read := list(space.Query{Page: space.Page{Limit: 20}, Sort: space.SortProblems, Selector: sel, Keep: keep})
	want, filtered := list(space.Query{Page: space.Page{Limit: 20}, Sort: space.SortProblems, Keep: keep})
	if len(got) != 20 || !slices.Equal(got, want) {
		t.Errorf("listed %d %v,\nthe index filtered %d %v", len(got), got, len(want), want)
	}
	if read >= 40 || filtered < 200 {
		t.Errorf("a page read %.1f RRU under the entries (want under 40), %.1f filtering the index (want at least 200)", read, filtered)
	}
}
