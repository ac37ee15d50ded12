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

// searchTeams are the first words of the benchmark's names: a search for
// "pay" matches one space in 20.
var searchTeams = []string{"payments", "billing", "checkout", "search", "ledger", "identity", "catalog", "orders",
	"shipping", "inventory", "pricing", "reviews", "profile", "gateway", "metrics", "logging", "alerts", "mailer",
	"reports", "archive"}

// seedSearchOrg stores n spaces in a new org of f's table, named
// <team>-<env>-<nnnnnn>, with their search entries, in bulk
// (BatchWriteItem): registering 100,000 spaces one transaction at a time
// takes too long on a small machine. Each space item is a registered
// space's item with another id and name, left out of the listing indexes
// (the search reads none); each entry is what Register writes (keys.go),
// which the searches' counts below check.
func seedSearchOrg(b *testing.B, f *fixture, n int) string {
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
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				id := uuid.NewString()
				name := fmt.Sprintf("%s-%s-%06d", searchTeams[i%20], []string{"prod", "staging", "dev"}[i%3], i)
				item := make(map[string]types.AttributeValue, len(raw))
				for k, v := range raw {
					item[k] = v
				}
				item["sk"], item["id"], item["name"] = s("SPACE#"+id), s(id), s(name)
				put(item)
				for _, w := range space.NameWords(name) {
					put(map[string]types.AttributeValue{"pk": s("WORD#" + org), "sk": s(w + "\x01" + strings.ToLower(name) + "\x01" + id),
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

// BenchmarkWordSearch prices a page of a word search (GET /spaces?
// name_contains=…, limit 20) on the emulator's unit counts (awscost) in an
// org of 1,000 and one of 100,000 spaces: a common prefix ("pay", one
// space in 20), a rare one ("00001", ten spaces at either size) and one
// of three words that only one space matches at either size, read under
// its common longest word ("billing-dev-0000"); and,
// under writes, the write units of a registration with a three-word name
// and with none (its entries are the difference), of a rename that moves
// all three words, and of a heartbeat (the same item written without a
// transaction: what a rename cost before the entries).
func BenchmarkWordSearch(b *testing.B) {
	f, meter := meteredFixture(b)
	orgs := map[int]string{}
	for _, n := range []int{1_000, 100_000} {
		orgs[n] = seedSearchOrg(b, f, n)
	}
	if b.Failed() {
		return
	}
	for _, c := range []struct {
		name, text string
		want       int
	}{
		{"pay", "pay", 20},
		{"00001", "00001", 10},
		// Three words: read under "billing" (one space in 20), one match.
		{"billing-dev-0000", "billing-dev-0000", 1},
	} {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s-%d", c.name, n), func(b *testing.B) {
				q := space.Query{Search: space.SearchWords(c.text), Page: space.Page{Limit: 20}}
				meter.Take()
				for b.Loop() {
					page, _, err := f.store.ListSpaces(b.Context(), orgs[n], q)
					if err != nil {
						b.Fatal(err)
					}
					if len(page) != c.want {
						b.Fatalf("%d spaces, want %d", len(page), c.want)
					}
				}
				report(b, meter.Take())
			})
		}
	}
	b.Run("writes", func(b *testing.B) {
		var reg3, reg0, rename, beat float64
		i := 0
		for b.Loop() {
			i++
			meter.Take()
			s := f.newSpace(1_000_000 + 2*i)
			s.Name = fmt.Sprintf("payments-prod-%06d", i)
			f.register(b, s)
			reg3 += meter.Take().TotalWRU()
			e := f.newSpace(1_000_001 + 2*i)
			e.Name = ""
			f.register(b, e)
			reg0 += meter.Take().TotalWRU()
			if err := f.rename(b, s.ID, fmt.Sprintf("billing-dev-%06d", i), now.Add(time.Second)); err != nil {
				b.Fatal(err)
			}
			rename += meter.Take().TotalWRU()
			if _, err := f.store.UpdateSpace(b.Context(), f.org, s.ID, space.Update[space.Space]{At: now.Add(2 * time.Second),
				Apply: func(s space.Space) (space.Space, error) { s.Probe.LatencyMS = 9; return s, nil }}); err != nil {
				b.Fatal(err)
			}
			beat += meter.Take().TotalWRU()
		}
		b.ReportMetric(reg3/float64(b.N), "register-3-words-WRU")
		b.ReportMetric(reg0/float64(b.N), "register-no-words-WRU")
		b.ReportMetric(rename/float64(b.N), "rename-3-words-WRU")
		b.ReportMetric(beat/float64(b.N), "heartbeat-WRU")
	})
}
