package emulator_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
)

// The emulator answers Query from a sorted index per partition
// (patches/dynamodb-query-*.patch). These tests hold its answers to a model
// computed from a Scan of the whole table (Scan is not patched): the same
// items in the same order, page by page, with the same Count, ScannedCount
// and LastEvaluatedKey, for the table and for two sparse GSIs (one with a
// string, one with a number sort key, with ties), forwards and backwards,
// with filters, projections and both read consistencies, while items are
// put, updated, deleted (the start key's own item included) and moved
// between partitions between pages, by every kind of write.

const queryTemplate = `
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions:
        - {AttributeName: pk, AttributeType: S}
        - {AttributeName: sk, AttributeType: S}
        - {AttributeName: shard, AttributeType: S}
        - {AttributeName: id, AttributeType: S}
        - {AttributeName: grp, AttributeType: S}
        - {AttributeName: rank, AttributeType: N}
      KeySchema:
        - {AttributeName: pk, KeyType: HASH}
        - {AttributeName: sk, KeyType: RANGE}
      GlobalSecondaryIndexes:
        - IndexName: probe
          KeySchema:
            - {AttributeName: shard, KeyType: HASH}
            - {AttributeName: id, KeyType: RANGE}
          Projection:
            ProjectionType: INCLUDE
            NonKeyAttributes: [org]
        - IndexName: ranked
          KeySchema:
            - {AttributeName: grp, KeyType: HASH}
            - {AttributeName: rank, KeyType: RANGE}
          Projection: {ProjectionType: ALL}
`

type queryEnv struct {
	t     *testing.T
	db    *dynamodb.Client
	table string
	rng   *rand.Rand
	n     int // items ever written, for fresh keys
}

func s(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
func num(v int) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(v)}
}

func str(item map[string]ddbtypes.AttributeValue, k string) (string, bool) {
	v, ok := item[k].(*ddbtypes.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

func number(item map[string]ddbtypes.AttributeValue, k string) (float64, bool) {
	v, ok := item[k].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(v.Value, 64)
	return f, err == nil
}

// item returns a random item: partitions p0-p2 of the table, shards 00-03 of
// the probe index (a quarter of the items not in it), groups g0-g1 of the
// ranked index with ranks 0-9 (ties; a third of the items not in it).
func (e *queryEnv) item() map[string]ddbtypes.AttributeValue {
	e.n++
	r := e.rng
	it := map[string]ddbtypes.AttributeValue{
		"pk":   s(fmt.Sprintf("p%d", r.IntN(3))),
		"sk":   s(fmt.Sprintf("%s#%05d", []string{"A", "CLAIM", "SPACE", "SPACE", "Z"}[r.IntN(5)], r.IntN(100000))),
		"org":  s(fmt.Sprintf("org-%d", r.IntN(5))),
		"size": num(r.IntN(100)),
	}
	if r.IntN(4) > 0 {
		it["shard"] = s(fmt.Sprintf("%02d", r.IntN(4)))
		it["id"] = s(fmt.Sprintf("id-%05d", r.IntN(100000)))
	}
	if r.IntN(3) > 0 {
		it["grp"] = s(fmt.Sprintf("g%d", r.IntN(2)))
		it["rank"] = num(r.IntN(10) - 3)
	}
	return it
}

func (e *queryEnv) scan() []map[string]ddbtypes.AttributeValue {
	e.t.Helper()
	var all []map[string]ddbtypes.AttributeValue
	in := &dynamodb.ScanInput{TableName: &e.table}
	for {
		out, err := e.db.Scan(e.t.Context(), in)
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(all, out.Items...)
		if out.LastEvaluatedKey == nil {
			return all
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func tableKey(it map[string]ddbtypes.AttributeValue) string {
	pk, _ := str(it, "pk")
	sk, _ := str(it, "sk")
	return pk + "\x00" + sk
}

// query is one Query to check: an index ("" the table), its key attributes,
// the partition, a sort key condition and a filter.
type query struct {
	index, hash, rng string
	part             string
	cond             string // key condition on #r, "" none
	vals             map[string]ddbtypes.AttributeValue
	match            func(it map[string]ddbtypes.AttributeValue) bool // the sort key condition
	filter           bool                                             // size < 50
	forward          bool
	limit            int32
	consistent       bool
	project          bool
}

// model lists the items q reads in the table as scanned, in order.
func (q query) model(all []map[string]ddbtypes.AttributeValue) []map[string]ddbtypes.AttributeValue {
	var in []map[string]ddbtypes.AttributeValue
	for _, it := range all {
		if h, ok := str(it, q.hash); !ok || h != q.part {
			continue
		}
		if _, ok := it[q.rng]; !ok {
			continue // a sparse index holds only items with both keys
		}
		if q.match != nil && !q.match(it) {
			continue
		}
		in = append(in, it)
	}
	slices.SortFunc(in, func(a, b map[string]ddbtypes.AttributeValue) int {
		if q.rng == "rank" {
			x, _ := number(a, "rank")
			y, _ := number(b, "rank")
			if c := cmp.Compare(x, y); c != 0 {
				return c
			}
		} else {
			x, _ := str(a, q.rng)
			y, _ := str(b, q.rng)
			if c := strings.Compare(x, y); c != 0 {
				return c
			}
		}
		return strings.Compare(tableKey(a), tableKey(b))
	})
	if !q.forward {
		slices.Reverse(in)
	}
	return in
}

// after is the position just past the start key in the model's order.
func (q query) after(order []map[string]ddbtypes.AttributeValue, start map[string]ddbtypes.AttributeValue) int {
	if start == nil {
		return 0
	}
	// Where the start key sorts, whether or not its item is still there.
	for i, it := range order {
		probe := q.model([]map[string]ddbtypes.AttributeValue{it, start})
		if len(probe) == 2 && tableKey(probe[0]) == tableKey(start) && tableKey(it) != tableKey(start) {
			return i
		}
	}
	return len(order)
}

func (e *queryEnv) run(q query, write func()) {
	t := e.t
	t.Helper()
	in := &dynamodb.QueryInput{
		TableName:                 &e.table,
		KeyConditionExpression:    aws.String("#h = :h"),
		ExpressionAttributeNames:  map[string]string{"#h": q.hash},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":h": s(q.part)},
		ScanIndexForward:          aws.Bool(q.forward),
		ConsistentRead:            aws.Bool(q.consistent),
	}
	if q.index != "" {
		in.IndexName = aws.String(q.index)
	}
	if q.limit > 0 {
		in.Limit = aws.Int32(q.limit)
	}
	if q.cond != "" {
		in.KeyConditionExpression = aws.String("#h = :h AND " + q.cond)
		in.ExpressionAttributeNames["#r"] = q.rng
		maps.Copy(in.ExpressionAttributeValues, q.vals)
	}
	if q.filter {
		in.FilterExpression = aws.String("#size < :fifty")
		in.ExpressionAttributeNames["#size"] = "size"
		in.ExpressionAttributeValues[":fifty"] = num(50)
	}
	if q.project {
		in.ProjectionExpression = aws.String("pk, sk, #size")
		in.ExpressionAttributeNames["#size"] = "size"
	}
	var start map[string]ddbtypes.AttributeValue
	var order []map[string]ddbtypes.AttributeValue
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%+v: no end after 1000 pages", q)
		}
		if pages == 0 || write != nil {
			order = q.model(e.scan())
		}
		rest := order[q.after(order, start):]
		evaluated := rest
		if q.limit > 0 && len(rest) > int(q.limit) {
			evaluated = rest[:q.limit]
		}
		var want []map[string]ddbtypes.AttributeValue
		for _, it := range evaluated {
			if size, has := number(it, "size"); !q.filter || has && size < 50 {
				want = append(want, it)
			}
		}
		in.ExclusiveStartKey = start
		out, err := e.db.Query(t.Context(), in)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		if int(out.ScannedCount) != len(evaluated) || int(out.Count) != len(want) || len(out.Items) != len(want) {
			t.Fatalf("%+v page %d: scanned %d, count %d, items %v; want %d, %v", q, pages, out.ScannedCount, out.Count, keysOf(out.Items), len(evaluated), keysOf(want))
		}
		for i, it := range out.Items {
			if tableKey(it) != tableKey(want[i]) {
				t.Fatalf("%+v page %d item %d: %s, want %s", q, pages, i, tableKey(it), tableKey(want[i]))
			}
			if q.project {
				if len(it) != 3 {
					t.Fatalf("%+v: projected item %v, want pk, sk and size", q, it)
				}
			} else if !reflect.DeepEqual(it, want[i]) {
				// Kumo returns a GSI's items whole, whatever its projection, and still does.
				t.Fatalf("%+v: item %v, want %v", q, it, want[i])
			}
		}
		more := len(rest) > len(evaluated)
		if (out.LastEvaluatedKey != nil) != more {
			t.Fatalf("%+v page %d: LastEvaluatedKey %v, want one: %v", q, pages, out.LastEvaluatedKey, more)
		}
		if !more {
			return
		}
		last := evaluated[len(evaluated)-1]
		if tableKey(out.LastEvaluatedKey) != tableKey(last) {
			t.Fatalf("%+v: LastEvaluatedKey %s, want %s", q, tableKey(out.LastEvaluatedKey), tableKey(last))
		}
		if q.index != "" {
			// As DynamoDB: an index's key holds the index's key attributes too.
			for _, k := range []string{q.hash, q.rng} {
				if fmt.Sprint(out.LastEvaluatedKey[k]) != fmt.Sprint(last[k]) {
					t.Fatalf("%+v: LastEvaluatedKey %v lacks %s of %v", q, out.LastEvaluatedKey, k, last)
				}
			}
		}
		start = out.LastEvaluatedKey
		if write != nil {
			write()
		}
	}
}

func newQueryEnv(t *testing.T, seed uint64) *queryEnv {
	env := emulatortest.StartWith(t, []byte(queryTemplate))
	return &queryEnv{
		t:     t,
		db:    awsclient.DynamoDB(env.Config, env.Endpoint),
		table: env.Name(t, "Table"),
		rng:   rand.New(rand.NewPCG(seed, 23)),
	}
}

func (e *queryEnv) put(n int) {
	for range n {
		if _, err := e.db.PutItem(e.t.Context(), &dynamodb.PutItemInput{TableName: &e.table, Item: e.item()}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// queries returns every query shape the tests check, at one setting of
// direction, limit, filter, consistency and projection.
func queries(forward bool, limit int32, filter, consistent, project bool) []query {
	var qs []query
	add := func(q query) {
		q.forward, q.limit, q.filter, q.consistent, q.project = forward, limit, filter, consistent, project
		qs = append(qs, q)
	}
	skIs := func(f func(string) bool) func(map[string]ddbtypes.AttributeValue) bool {
		return func(it map[string]ddbtypes.AttributeValue) bool { v, _ := str(it, "sk"); return f(v) }
	}
	for _, part := range []string{"p0", "p2"} {
		base := query{hash: "pk", rng: "sk", part: part}
		add(base)
		q := base
		q.cond, q.vals, q.match = "begins_with(#r, :p)", map[string]ddbtypes.AttributeValue{":p": s("SPACE#")}, skIs(func(v string) bool { return strings.HasPrefix(v, "SPACE#") })
		add(q)
		q.cond, q.vals, q.match = "#r BETWEEN :a AND :b", map[string]ddbtypes.AttributeValue{":a": s("CLAIM#5"), ":b": s("SPACE#5")}, skIs(func(v string) bool { return v >= "CLAIM#5" && v <= "SPACE#5" })
		add(q)
		q.cond, q.vals, q.match = "(#r > :a)", map[string]ddbtypes.AttributeValue{":a": s("SPACE#")}, skIs(func(v string) bool { return v > "SPACE#" })
		add(q)
		q.cond, q.vals, q.match = "#r <= :a", map[string]ddbtypes.AttributeValue{":a": s("CLAIM#9")}, skIs(func(v string) bool { return v <= "CLAIM#9" })
		add(q)
	}
	for _, shard := range []string{"00", "03"} {
		base := query{index: "probe", hash: "shard", rng: "id", part: shard}
		add(base)
		q := base
		q.cond, q.vals = "#r > :after", map[string]ddbtypes.AttributeValue{":after": s("id-3")}
		q.match = func(it map[string]ddbtypes.AttributeValue) bool { v, _ := str(it, "id"); return v > "id-3" }
		add(q)
	}
	for _, grp := range []string{"g0", "g1"} {
		base := query{index: "ranked", hash: "grp", rng: "rank", part: grp}
		add(base)
		q := base
		q.cond, q.vals = "#r >= :lo", map[string]ddbtypes.AttributeValue{":lo": num(0)}
		q.match = func(it map[string]ddbtypes.AttributeValue) bool { v, _ := number(it, "rank"); return v >= 0 }
		add(q)
		q.cond, q.vals = "#r < :hi", map[string]ddbtypes.AttributeValue{":hi": num(2)}
		q.match = func(it map[string]ddbtypes.AttributeValue) bool { v, _ := number(it, "rank"); return v < 2 }
		add(q)
		q.cond, q.vals = "#r = :eq", map[string]ddbtypes.AttributeValue{":eq": num(1)}
		q.match = func(it map[string]ddbtypes.AttributeValue) bool { v, _ := number(it, "rank"); return v == 1 }
		add(q)
	}
	return qs
}

func TestQueryPagesMatchTheTable(t *testing.T) {
	e := newQueryEnv(t, 1)
	e.put(150)
	for _, forward := range []bool{true, false} {
		for _, limit := range []int32{0, 2, 7, 50} {
			for _, filter := range []bool{false, true} {
				for _, q := range queries(forward, limit, filter, limit == 7, limit == 50 && !filter) {
					e.run(q, nil)
				}
			}
		}
	}
}

// Between pages, every kind of write: PutItem, UpdateItem moving an item
// between partitions of an index or out of it, DeleteItem (sometimes the
// start key's own item), TransactWriteItems and BatchWriteItem.
func TestQueryPagesWhileTheTableChanges(t *testing.T) {
	e := newQueryEnv(t, 2)
	e.put(90)
	ctx := t.Context()
	write := func() {
		all := e.scan()
		pick := func() map[string]ddbtypes.AttributeValue {
			it := all[e.rng.IntN(len(all))]
			return map[string]ddbtypes.AttributeValue{"pk": it["pk"], "sk": it["sk"]}
		}
		var err error
		switch e.rng.IntN(6) {
		case 0:
			_, err = e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: e.item()})
		case 1:
			_, err = e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &e.table, Key: pick(),
				UpdateExpression:          aws.String("SET #shard = :s, #id = :id, #rank = :r, #size = :z"),
				ExpressionAttributeNames:  map[string]string{"#shard": "shard", "#id": "id", "#rank": "rank", "#size": "size"},
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": s(fmt.Sprintf("%02d", e.rng.IntN(4))), ":id": s(fmt.Sprintf("id-%05d", e.rng.IntN(100000))), ":r": num(e.rng.IntN(10) - 3), ":z": num(e.rng.IntN(100))}})
		case 2:
			_, err = e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &e.table, Key: pick(),
				UpdateExpression: aws.String("REMOVE shard, grp")})
		case 3:
			_, err = e.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &e.table, Key: pick()})
		case 4:
			_, err = e.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: &e.table, Item: e.item()}},
				{Delete: &ddbtypes.Delete{TableName: &e.table, Key: pick()}},
				{Update: &ddbtypes.Update{TableName: &e.table, Key: pick(), UpdateExpression: aws.String("SET grp = :g, #rank = :r"),
					ExpressionAttributeNames:  map[string]string{"#rank": "rank"},
					ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":g": s("g1"), ":r": num(e.rng.IntN(10) - 3)}}},
			}})
		case 5:
			_, err = e.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{e.table: {
				{PutRequest: &ddbtypes.PutRequest{Item: e.item()}},
				{PutRequest: &ddbtypes.PutRequest{Item: e.item()}},
				{DeleteRequest: &ddbtypes.DeleteRequest{Key: pick()}},
			}}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, forward := range []bool{true, false} {
		for _, limit := range []int32{4, 11} {
			for _, q := range queries(forward, limit, limit == 11, false, false) {
				e.run(q, write)
			}
		}
	}
}

// The start key's own item deleted, or moved out of the index, between
// pages: the next page starts after where it was (as DynamoDB), not at the
// partition's start again.
func TestQueryContinuesAfterADeletedStartKey(t *testing.T) {
	e := newQueryEnv(t, 3)
	ctx := t.Context()
	for i := range 9 {
		it := map[string]ddbtypes.AttributeValue{"pk": s("p"), "sk": s(fmt.Sprintf("SPACE#%d", i)), "shard": s("07"), "id": s(fmt.Sprintf("id-%d", i))}
		if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	for _, index := range []string{"", "probe"} {
		in := &dynamodb.QueryInput{TableName: &e.table, Limit: aws.Int32(3),
			KeyConditionExpression:    aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": s("p")}}
		if index != "" {
			in.IndexName = aws.String(index)
			in.KeyConditionExpression = aws.String("shard = :p")
			in.ExpressionAttributeValues[":p"] = s("07")
		}
		first, err := e.db.Query(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		last := first.LastEvaluatedKey
		if index == "" {
			_, err = e.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &e.table, Key: last})
		} else {
			_, err = e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &e.table, UpdateExpression: aws.String("REMOVE shard"),
				Key: map[string]ddbtypes.AttributeValue{"pk": last["pk"], "sk": last["sk"]}})
		}
		if err != nil {
			t.Fatal(err)
		}
		in.ExclusiveStartKey = last
		next, err := e.db.Query(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range next.Items {
			v, _ := str(it, "sk")
			got = append(got, v)
		}
		// The table's first page was 0-2 (2 deleted); the index's, 0, 1
		// and 3 (3 then taken out of the index).
		want := []string{"SPACE#3", "SPACE#4", "SPACE#5"}
		if index != "" {
			want = []string{"SPACE#4", "SPACE#5", "SPACE#6"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("index %q: the page after a deleted start key holds %v, want %v", index, got, want)
		}
	}
}

func keysOf(items []map[string]ddbtypes.AttributeValue) []string {
	var ks []string
	for _, it := range items {
		ks = append(ks, tableKey(it))
	}
	return ks
}

// A partition's order is kept in blocks of at most 128 entries
// (patches/dynamodb-query-index.patch), built half full from the table at
// the first Query, split as writes fill them and dropped as they empty.
// Partitions of hundreds of items, indexed both ways (built from a full
// table, and kept up to date item by item from an empty one), page as the
// table does, and so they do once contiguous runs of each index's order
// are deleted, which empties whole blocks.
func TestQueryPagesOfLargePartitions(t *testing.T) {
	for _, built := range []string{"built from the table", "kept item by item"} {
		t.Run(built, func(t *testing.T) {
			e := newQueryEnv(t, 4)
			if built == "kept item by item" {
				// Each index built while the table is empty.
				for _, q := range queries(true, 1, false, false, false) {
					e.run(q, nil)
				}
			}
			var puts []ddbtypes.WriteRequest
			for range 1500 {
				puts = append(puts, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: e.item()}})
			}
			e.batch(puts)
			check := func() {
				for _, forward := range []bool{true, false} {
					for _, limit := range []int32{0, 97} {
						for _, q := range queries(forward, limit, limit == 97, false, false) {
							e.run(q, nil)
						}
					}
				}
			}
			check()
			// A run of each order: the table's CLAIM# entries, the probe
			// index's ids below id-06000 and id-50000 to id-90000, the
			// ranked index's ranks 0 to 4.
			var dels []ddbtypes.WriteRequest
			for _, it := range e.scan() {
				sk, _ := str(it, "sk")
				id, _ := str(it, "id")
				rank, hasRank := number(it, "rank")
				if strings.HasPrefix(sk, "CLAIM#") || id != "" && (id < "id-06000" || id >= "id-50000" && id < "id-90000") || hasRank && rank >= 0 && rank <= 4 {
					dels = append(dels, ddbtypes.WriteRequest{DeleteRequest: &ddbtypes.DeleteRequest{Key: map[string]ddbtypes.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}})
				}
			}
			if len(dels) < 750 {
				t.Fatalf("%d items deleted, want most of the 1500", len(dels))
			}
			e.batch(dels)
			check()
		})
	}
}

// batch writes reqs, 25 a request.
func (e *queryEnv) batch(reqs []ddbtypes.WriteRequest) {
	e.t.Helper()
	for len(reqs) > 0 {
		n := min(len(reqs), 25)
		out, err := e.db.BatchWriteItem(e.t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{e.table: reqs[:n]}})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(out.UnprocessedItems) > 0 {
			e.t.Fatalf("unprocessed: %v", out.UnprocessedItems)
		}
		reqs = reqs[n:]
	}
}
