package dynamostore_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/shared/space"
)

// selectorLabels are the labels of the benchmark's space i: env a third
// each, team one of 20 (a..t), tier a third each apart from env, and one
// space in 1,000 example.com/frozen.
func selectorLabels(i int) space.Labels {
	l := space.Labels{
		"env":  []string{"prod", "staging", "dev"}[i%3],
		"team": string(rune('a' + i%20)),
		"tier": []string{"db", "web", "cache"}[(i/3)%3],
	}
	if i%1000 == 0 {
		l["example.com/frozen"] = ""
	}
	return l
}

// seedSelectorOrg stores n spaces labelled by selectorLabels in a new org
// of f's table, with their label entries, in bulk (BatchWriteItem), as
// seedSearchOrg does: each space item is a registered space's item with
// another id and labels, each entry what Register writes (keys.go), which
// the listings' counts below check.
func seedSelectorOrg(b testing.TB, f *fixture, n int) string {
	org := uuid.NewString()
	acct := f.createAccount(b, org, space.AWS)
	tmpl := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Name: "template",
		Provider: space.AWS, SpaceType: space.TypeKubernetes, CloudAccountID: acct.ID,
		Config: space.Config{"clusterName": "template", "region": "us-east-1"}}, now)
	f.register(b, tmpl)
	raw := f.raw(b, org, "SPACE#"+tmpl.ID)
	for _, a := range []string{"name_lc", "name_key", "reg_key", "status_key", "since_key", "probe_shard", "pd"} {
		delete(raw, a)
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var batch []types.WriteRequest
			flush := func() {
				req := map[string][]types.WriteRequest{f.table: batch}
				for len(req) > 0 {
					out, err := f.db.BatchWriteItem(b.Context(), &dynamodb.BatchWriteItemInput{RequestItems: req})
					if err != nil {
						b.Error(err)
						return
					}
					req = out.UnprocessedItems
				}
				batch = batch[:0]
			}
			put := func(item map[string]types.AttributeValue) {
				batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
				if len(batch) == 25 {
					flush()
				}
			}
			for i := int(next.Add(1)); i <= n; i = int(next.Add(1)) {
				id := uuid.NewString()
				item := make(map[string]types.AttributeValue, len(raw)+1)
				for k, v := range raw {
					item[k] = v
				}
				labels := selectorLabels(i)
				lm := map[string]types.AttributeValue{}
				for k, v := range labels {
					lm[k] = s(v)
				}
				item["sk"], item["id"], item["name"] = s("SPACE#"+id), s(id), s(fmt.Sprintf("cluster-%06d", i))
				item["labels"] = &types.AttributeValueMemberM{Value: lm}
				sp := tmpl
				sp.ID = id
				pos := strings.ReplaceAll(problemPosition(sp), "|", "\x01")
				item["problem_key"] = s(pos)
				put(item)
				for k, v := range labels {
					put(map[string]types.AttributeValue{"pk": s("LABEL#" + org), "sk": s(k + "=" + v + "\x01" + id),
						"provider": s("aws"), "space_type": s(space.TypeKubernetes), "cloud_account_id": s(acct.ID)})
					put(map[string]types.AttributeValue{"pk": s("LPROB#" + org), "sk": s(k + "=" + v + "\x01" + pos),
						"provider": s("aws"), "space_type": s(space.TypeKubernetes), "cloud_account_id": s(acct.ID)})
				}
			}
			if len(batch) > 0 {
				flush()
			}
		})
	}
	wg.Wait()
	return org
}

// BenchmarkSelectorPage prices the first page of 20 of a label selector
// (GET /spaces?label_selector=…, id order) on the emulator's unit counts
// (awscost) in an org of 1,000 and one of 100,000 spaces: one equality
// (`env=prod`, a third), a set (`team in (a,b)`, one in 10), an equality
// with a negative requirement filtered on the spaces read
// (`env=prod,tier!=db`), two equalities whose entries are read together
// (`env=prod,team=a`, one in 60), and an exists of a rare key
// (`example.com/frozen`, one in 1,000: one space at 1,000), also problems
// first; problems first (sort=problems, the console's default order, read
// under the entries in that order) one in 20 (`team=a`) and two
// equalities (`env=prod,team=a`); and, as the listing was before the
// entries, the rare exists filtering the spaces of the id listing, and
// `team=a` problems first filtering the problems index (as a selector
// of more than 100 spaces was before the entries in that order). Under
// writes, the write units of a registration with four labels and with
// none, of a labels change of one value and of one label added, of a
// heartbeat (the same item's plain UpdateItem: what a labels change
// wrote before the entries), of a transition with four
// labels and with none (the former moves its entries in problems-first
// order), and of a deregistration with four labels and with none.
func BenchmarkSelectorPage(b *testing.B) {
	f, meter := meteredFixture(b)
	orgs := map[int]string{}
	for _, n := range []int{1_000, 100_000} {
		orgs[n] = seedSelectorOrg(b, f, n)
	}
	if b.Failed() {
		return
	}
	for _, c := range []struct {
		name, sel string
		want      map[int]int
		filter    bool // without the entries: the id listing, filtered
		sort      space.Sort
	}{
		{"env=prod", "env=prod", map[int]int{1_000: 20, 100_000: 20}, false, ""},
		{"team-in-a-b", "team in (a,b)", map[int]int{1_000: 20, 100_000: 20}, false, ""},
		{"env=prod,tier!=db", "env=prod,tier!=db", map[int]int{1_000: 20, 100_000: 20}, false, ""},
		{"env=prod,team=a", "env=prod,team=a", map[int]int{1_000: 16, 100_000: 20}, false, ""},
		{"frozen", "example.com/frozen", map[int]int{1_000: 1, 100_000: 20}, false, ""},
		{"frozen-filtered", "example.com/frozen", map[int]int{1_000: 1, 100_000: 20}, true, ""},
		{"frozen-by-problems", "example.com/frozen", map[int]int{1_000: 1, 100_000: 20}, false, space.SortProblems},
		{"team=a-by-problems", "team=a", map[int]int{1_000: 20, 100_000: 20}, false, space.SortProblems},
		{"team=a-by-problems-filtered", "team=a", map[int]int{1_000: 20, 100_000: 20}, true, space.SortProblems},
		{"env=prod,team=a-by-problems", "env=prod,team=a", map[int]int{1_000: 16, 100_000: 20}, false, space.SortProblems},
	} {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s-%d", c.name, n), func(b *testing.B) {
				sel, err := space.ParseSelector("label_selector", c.sel)
				if err != nil {
					b.Fatal(err)
				}
				q := space.Query{Page: space.Page{Limit: 20}, Selector: sel, Sort: c.sort, Keep: func(s space.Space) bool { return sel.Matches(s.Labels) }}
				if c.filter {
					q.Selector = space.Selector{}
				}
				meter.Take()
				for b.Loop() {
					page, _, err := f.store.ListSpaces(b.Context(), orgs[n], q)
					if err != nil {
						b.Fatal(err)
					}
					if len(page) != c.want[n] {
						b.Fatalf("%d spaces, want %d", len(page), c.want[n])
					}
				}
				report(b, meter.Take())
			})
		}
	}
	b.Run("writes", func(b *testing.B) {
		var reg4, reg0, value, added, beat, trans4, trans0, dereg4, dereg0 float64
		i := 0
		at := func(s int) time.Time { return now.Add(time.Duration(10*i+s) * time.Second) }
		for b.Loop() {
			i++
			meter.Take()
			s := f.newSpace(1_000_000 + 2*i)
			s.Name = fmt.Sprintf("labelled-%06d", i)
			s.Labels = selectorLabels(1)
			s.Labels["owner"] = "x"
			f.register(b, s)
			reg4 += meter.Take().TotalWRU()
			e := f.newSpace(1_000_001 + 2*i)
			e.Name = fmt.Sprintf("unlabelled-%06d", i)
			f.register(b, e)
			reg0 += meter.Take().TotalWRU()
			l := selectorLabels(1)
			l["owner"] = "y"
			f.relabel(b, s.ID, l, at(1))
			value += meter.Take().TotalWRU()
			l["region"] = "eu"
			f.relabel(b, s.ID, l, at(2))
			added += meter.Take().TotalWRU()
			if _, err := f.store.UpdateSpace(b.Context(), f.org, s.ID, space.Update[space.Space]{At: at(3),
				Apply: func(s space.Space) (space.Space, error) { s.Probe.LatencyMS = 9; return s, nil }}); err != nil {
				b.Fatal(err)
			}
			beat += meter.Take().TotalWRU()
			// Four labels again, so that the transitions and the
			// deregistrations differ only in them.
			l = selectorLabels(1)
			l["owner"] = "x"
			f.relabel(b, s.ID, l, at(4))
			meter.Take()
			if err := f.setStatus(b, s.ID, space.Active, at(5)); err != nil {
				b.Fatal(err)
			}
			trans4 += meter.Take().TotalWRU()
			if err := f.setStatus(b, e.ID, space.Active, at(5)); err != nil {
				b.Fatal(err)
			}
			trans0 += meter.Take().TotalWRU()
			if _, err := f.store.Deregister(b.Context(), f.org, s.ID, 0, at(6), "test"); err != nil {
				b.Fatal(err)
			}
			dereg4 += meter.Take().TotalWRU()
			if _, err := f.store.Deregister(b.Context(), f.org, e.ID, 0, at(6), "test"); err != nil {
				b.Fatal(err)
			}
			dereg0 += meter.Take().TotalWRU()
		}
		if got := append(f.labelEntries(b, f.org), f.orderEntries(b, f.org)...); len(got) != 0 {
			b.Fatalf("label entries left after the deregistrations: %q", got)
		}
		b.ReportMetric(reg4/float64(b.N), "register-4-labels-WRU")
		b.ReportMetric(reg0/float64(b.N), "register-no-labels-WRU")
		b.ReportMetric(value/float64(b.N), "relabel-1-value-WRU")
		b.ReportMetric(added/float64(b.N), "relabel-1-added-WRU")
		b.ReportMetric(beat/float64(b.N), "heartbeat-WRU")
		b.ReportMetric(trans4/float64(b.N), "transition-4-labels-WRU")
		b.ReportMetric(trans0/float64(b.N), "transition-no-labels-WRU")
		b.ReportMetric(dereg4/float64(b.N), "deregister-4-labels-WRU")
		b.ReportMetric(dereg0/float64(b.N), "deregister-no-labels-WRU")
	})
}
