package dynamostore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/google/uuid"

	"spaces"
	"spaces/infra/emulator"
	"spaces/infra/emulator/emulatortest"
	"spaces/infra/testclock"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/eventfilter"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// streamReader reads every record the table's stream holds after it was
// opened (LATEST on each shard), as Lambda delivers them.
type streamReader struct {
	ss        *dynamodbstreams.Client
	arn       string
	iterators []*string
}

func openStream(t *testing.T, env *emulatortest.Env) *streamReader {
	t.Helper()
	r := &streamReader{ss: emulator.Streams(env.Config, env.Endpoint), arn: env.Resources["SpacesTable"].StreamARN}
	sd, err := r.ss.DescribeStream(t.Context(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(r.arn)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range sd.StreamDescription.Shards {
		it, err := r.ss.GetShardIterator(t.Context(), &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.arn),
			ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeLatest})
		if err != nil {
			t.Fatal(err)
		}
		r.iterators = append(r.iterators, it.ShardIterator)
	}
	if len(r.iterators) == 0 {
		t.Fatal("the stream has no shard")
	}
	return r
}

func (r *streamReader) records(t *testing.T) []events.DynamoDBEventRecord {
	t.Helper()
	var out []events.DynamoDBEventRecord
	for i, it := range r.iterators {
		for it != nil {
			res, err := r.ss.GetRecords(t.Context(), &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range res.Records {
				out = append(out, emulator.LambdaRecord(rec, r.arn))
			}
			r.iterators[i] = res.NextShardIterator
			if len(res.Records) == 0 {
				break
			}
			it = res.NextShardIterator
		}
	}
	return out
}

// webhookPatterns are the filters template.yaml gives the stream consumer
// that keeps the trail (the webhooks function's).
func webhookPatterns(t *testing.T) []*eventfilter.Pattern {
	t.Helper()
	src, err := emulator.FunctionStreamSource(spaces.Template, "WebhooksFunction", "Changes")
	if err != nil {
		t.Fatal(err)
	}
	var out []*eventfilter.Pattern
	for _, p := range src.Patterns {
		c, err := eventfilter.Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func passes(t *testing.T, pats []*eventfilter.Pattern, r events.DynamoDBEventRecord) bool {
	t.Helper()
	for _, p := range pats {
		ok, err := p.MatchValue(r)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return true
		}
	}
	return false
}

func by(ctx context.Context, subject, request string) context.Context {
	return space.WithStamp(ctx, space.Stamp{Subject: subject, RequestID: request})
}

// activityWorld writes, on a table of its own, one of each change the
// trail records, by users (stamped contexts) and by Spaces itself, and
// returns the store, the org and the stream's records of it all.
type activityWorld struct {
	store   *dynamostore.Store
	org     string
	spaceID string
	records []events.DynamoDBEventRecord
	// quiet are records of writes of Spaces itself that make no entry.
	quiet []events.DynamoDBEventRecord
}

const secretMark = "SECRET-d41d8cd9"

func newActivityWorld(t *testing.T) *activityWorld {
	t.Helper()
	env := emulatortest.Start(t)
	db := awsclient.DynamoDB(env.Config, env.Endpoint)
	store := dynamostore.New(db, env.Name(t, "SpacesTable"))
	ctx := t.Context()
	org := uuid.NewString()
	// Entries expire ActivityRetention after their time: these are recent.
	base := time.Now().UTC().Add(-time.Hour)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	stream := openStream(t, env)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// 1 connected (alice), 2 registered (alice), 3 relabeled (bob).
	acct := space.CloudAccount{ID: uuid.NewString(), OrgID: org, Provider: space.AWS, Name: "prod",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/" + secretMark, "externalId": secretMark},
		Status:     space.AccountReady, CreatedAt: at(1), Version: 1}
	must(store.CreateAccount(by(ctx, "alice", "req-connect"), acct))
	sp := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: acct.ID, Name: "payments", Labels: map[string]string{"env": "prod"},
		Config: space.Config{"clusterName": "payments", "region": "us-east-1"}}, at(2))
	must(store.Register(by(ctx, "alice", "req-register"), sp, space.Idempotency{}))
	_, err := store.UpdateSpace(by(ctx, "bob", "req-relabel"), org, sp.ID, space.Update[space.Space]{At: at(3),
		Apply: func(s space.Space) (space.Space, error) {
			s.Labels = map[string]string{"env": "prod", "team": "pay"}
			return s, nil
		}})
	must(err)
	first := stream.records(t)
	// A write of Spaces itself (a probe's failure count): no entry, and
	// the request's stamp is gone from the item.
	_, err = store.UpdateSpace(ctx, org, sp.ID, space.Update[space.Space]{At: at(4),
		Apply: func(s space.Space) (space.Space, error) { s.Probe.ConsecutiveFailures++; return s, nil }})
	must(err)
	w := &activityWorld{store: store, org: org, spaceID: sp.ID}
	w.quiet = stream.records(t)
	if len(w.quiet) != 1 {
		t.Fatalf("%d records of the probe's write (after %d), want 1", len(w.quiet), len(first))
	}
	// 5 verified (alice): the verification fails.
	acct.Version, acct.Status, acct.StatusReason = 2, space.AccountFailed, "AccessDenied"
	must(store.SaveAccount(by(ctx, "alice", "req-verify"), acct))

	// 6 pushed (carol), stopped by Spaces, 7 retried (carol).
	rev := space.Revision{ID: uuid.NewString(), OrgID: org, EnvironmentID: uuid.NewString(), SpaceID: sp.ID, Namespace: "web",
		Manifests: []map[string]any{{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db"},
			"stringData": map[string]any{"password": secretMark}}},
		State: space.RevisionPending, CreatedAt: at(6), UpdatedAt: at(6), Version: 1}
	must(store.CreateRevision(by(ctx, "carol", "req-push"), rev))
	_, err = store.UpdateRevision(ctx, org, rev.ID, space.Update[space.Revision]{At: at(6).Add(time.Millisecond),
		Apply: func(r space.Revision) (space.Revision, error) { r.State = space.RevisionStopped; return r, nil }})
	must(err)
	_, err = store.UpdateRevision(by(ctx, "carol", "req-retry-rev"), org, rev.ID, space.Update[space.Revision]{At: at(7),
		Apply: func(r space.Revision) (space.Revision, error) { r.State = space.RevisionPending; return r, nil }})
	must(err)

	// 8 job created (alice), failed by Spaces, 9 retried, 10 canceled (alice).
	job := provisioning.Job{ID: uuid.NewString(), OrgID: org, Name: "batch", Provider: space.AWS, CloudAccountID: acct.ID,
		Config: space.Config{"clusterName": "batch", "region": "us-east-1", "token": secretMark},
		Spec:   space.ClusterSpec{KubernetesVersion: "1.31", NodePool: space.NodePool{MachineType: "m5.large", Min: 1, Max: 3, Desired: 2}},
		State:  provisioning.Queued, Since: at(8), Steps: []provisioning.Step{{State: provisioning.Queued, At: at(8)}},
		CreatedAt: at(8), UpdatedAt: at(8), Version: 1}
	must(store.CreateJob(by(ctx, "alice", "req-job"), job, provisioning.Idempotency{}))
	setState := func(c context.Context, s provisioning.State, when time.Time) {
		t.Helper()
		_, err := store.UpdateJob(c, org, job.ID, space.Update[provisioning.Job]{At: when,
			Apply: func(j provisioning.Job) (provisioning.Job, error) { j.State = s; return j, nil }})
		must(err)
	}
	setState(ctx, provisioning.Failed, at(8).Add(time.Millisecond))
	setState(by(ctx, "alice", "req-retry-job"), provisioning.Creating, at(9))
	setState(by(ctx, "alice", "req-cancel"), provisioning.Canceled, at(10))

	// 11 registered by Spaces (no request), 12 deregistered (dave).
	sys := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: acct.ID, Config: space.Config{"clusterName": "made-by-a-job", "region": "us-east-1"}}, at(11))
	must(store.Register(ctx, sys, space.Idempotency{}))
	_, err = store.Deregister(by(ctx, "dave", "req-dereg"), org, sp.ID, 0, at(12), "dave")
	must(err)
	w.records = append(first, stream.records(t)...)
	return w
}

// TestActivityFromTheStream: the real stream records of each change the
// trail records make exactly one entry each, with the user and request
// that made it (a change of Spaces itself: system, no request), nothing of
// a secret, a connection or a manifest; a record read again writes the same
// entry; every such record passes the template's stream filter, and a
// probe's write makes no entry (it passes the filter, which lets every
// space's MODIFY through for the inventory's events).
func TestActivityFromTheStream(t *testing.T) {
	w := newActivityWorld(t)
	ctx := t.Context()
	pats := webhookPatterns(t)
	for _, r := range w.quiet {
		if _, ok := w.store.ActivityOf(r); ok {
			t.Errorf("a probe's write made an entry: %s", r.EventName)
		}
	}
	n := 0
	for _, r := range w.records {
		a, ok := w.store.ActivityOf(r)
		if !ok {
			continue
		}
		n++
		if !passes(t, pats, r) {
			t.Errorf("%s (%s) makes an entry but the template's filter drops it", a.Kind, r.EventName)
		}
		// Delivered twice (a retried batch): the same entry.
		for range 2 {
			if err := w.store.RecordActivity(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, next, err := w.store.ListActivity(ctx, w.org, space.ActivityQuery{Page: space.Page{Limit: 100}})
	if err != nil || next != "" {
		t.Fatalf("ListActivity: %v, next %q", err, next)
	}
	type row struct{ kind, actorType, actor, request string }
	want := []row{ // latest recorded first: the stream's order, reversed
		{"space.deregistered", "user", "dave", "req-dereg"},
		{"space.registered", "system", "", ""},
		{"provisioning_job.canceled", "user", "alice", "req-cancel"},
		{"provisioning_job.retried", "user", "alice", "req-retry-job"},
		{"provisioning_job.created", "user", "alice", "req-job"},
		{"revision.retried", "user", "carol", "req-retry-rev"},
		{"revision.pushed", "user", "carol", "req-push"},
		// A failed verification stores no time: the change's, the latest
		// (an entry's time does not place it).
		{"cloud_account.verified", "user", "alice", "req-verify"},
		{"space.relabeled", "user", "bob", "req-relabel"},
		{"space.registered", "user", "alice", "req-register"},
		{"cloud_account.connected", "user", "alice", "req-connect"},
	}
	var rows []row
	for _, a := range got {
		rows = append(rows, row{string(a.Kind), a.ActorType, a.Actor, a.RequestID})
	}
	if !slices.Equal(rows, want) {
		t.Errorf("entries\n got %v\nwant %v", rows, want)
	}
	if n != len(want) {
		t.Errorf("%d records made entries, want %d", n, len(want))
	}
	body, _ := json.Marshal(got)
	for _, bad := range []string{secretMark, "roleArn", "externalId", "manifests", "stringData", "config"} {
		if strings.Contains(string(body), bad) {
			t.Errorf("an entry carries %q: %s", bad, body)
		}
	}
	for _, a := range got {
		if a.Kind == space.ActivityAccountVerified && a.Status != string(space.AccountFailed) {
			t.Errorf("the verification's outcome is %q", a.Status)
		}
		if a.Kind == space.ActivitySpaceRelabeled && a.Labels["team"] != "pay" {
			t.Errorf("the relabel's labels are %v", a.Labels)
		}
	}
}

// TestActivityPagesAndFilters: pages of any size walk the trail once,
// newest first; each filter narrows it, combined they all hold; another
// org's trail is never read; an entry past its retention is not listed.
func TestActivityPagesAndFilters(t *testing.T) {
	w := newActivityWorld(t)
	ctx := t.Context()
	for _, r := range w.records {
		if a, ok := w.store.ActivityOf(r); ok {
			if err := w.store.RecordActivity(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := func(q space.ActivityQuery) []space.Activity {
		t.Helper()
		var out []space.Activity
		for {
			page, next, err := w.store.ListActivity(ctx, w.org, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > q.Limit {
				t.Fatalf("a page of %d, limit %d", len(page), q.Limit)
			}
			out = append(out, page...)
			if next == "" {
				return out
			}
			q.After = next
		}
	}
	all := list(space.ActivityQuery{Page: space.Page{Limit: 100}})
	if len(all) != 11 {
		t.Fatalf("%d entries, want 11", len(all))
	}
	ids := func(as []space.Activity) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	for _, limit := range []int{1, 2, 5} {
		if got := ids(list(space.ActivityQuery{Page: space.Page{Limit: limit}})); !slices.Equal(got, ids(all)) {
			t.Errorf("pages of %d: %v, want %v", limit, got, ids(all))
		}
	}
	kinds := func(as []space.Activity) []space.ActivityKind {
		var out []space.ActivityKind
		for _, a := range as {
			out = append(out, a.Kind)
		}
		return out
	}
	cases := []struct {
		q    space.ActivityQuery
		want []space.ActivityKind
	}{
		{space.ActivityQuery{Actor: "bob"}, []space.ActivityKind{space.ActivitySpaceRelabeled}},
		{space.ActivityQuery{Actor: "carol"}, []space.ActivityKind{space.ActivityRevisionRetried, space.ActivityRevisionPushed}},
		{space.ActivityQuery{Kind: space.ActivitySpaceRegistered}, []space.ActivityKind{space.ActivitySpaceRegistered, space.ActivitySpaceRegistered}},
		{space.ActivityQuery{SpaceID: w.spaceID}, []space.ActivityKind{space.ActivitySpaceDeregistered, space.ActivityRevisionRetried,
			space.ActivityRevisionPushed, space.ActivitySpaceRelabeled, space.ActivitySpaceRegistered}},
		{space.ActivityQuery{SpaceID: w.spaceID, Actor: "carol", Kind: space.ActivityRevisionPushed}, []space.ActivityKind{space.ActivityRevisionPushed}},
		{space.ActivityQuery{Actor: "nobody"}, nil},
	}
	for _, c := range cases {
		for _, limit := range []int{1, 100} {
			c.q.Limit = limit
			if got := kinds(list(c.q)); !slices.Equal(got, c.want) {
				t.Errorf("%+v: %v, want %v", c.q, got, c.want)
			}
		}
	}
	// Another org's trail, and one past its retention.
	other := all[0]
	other.OrgID, other.ID = uuid.NewString(), "act_other"
	old := all[0]
	old.ID, old.At = "act_old", time.Now().Add(-space.ActivityRetention-time.Hour)
	for _, a := range []space.Activity{other, old} {
		if err := w.store.RecordActivity(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(list(space.ActivityQuery{Page: space.Page{Limit: 100}})); !slices.Equal(got, ids(all)) {
		t.Errorf("with another org's and an expired entry: %v, want %v", got, ids(all))
	}
	if got := list(space.ActivityQuery{Page: space.Page{Limit: 100}, Actor: "dave"}); len(got) != 1 {
		t.Errorf("dave's entries %v, want the deregistration only", kinds(got))
	}
	if _, _, err := w.store.ListActivity(ctx, w.org, space.ActivityQuery{Page: space.Page{Limit: 0}}); space.KindOf(err) != space.KindInvalid {
		t.Errorf("limit 0: %v", err)
	}
}

// TestActivityLateEntryShows: the trail is in the order entries were
// recorded, so an entry recorded late (its stream record delivered again
// an hour on), with a time older than entries a reader has already paged
// past, is on the first page read again, at the top: today's next page
// would never hold it, and neither would the first page had the trail
// kept time order. A walk from the top lists every entry once, in the
// order recorded, even when the clock steps back or two entries share a
// tick; recording an entry again (its record delivered once more) adds
// nothing.
func TestActivityLateEntryShows(t *testing.T) {
	env := emulatortest.Start(t)
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	clock := testclock.New(base)
	store := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(t, "SpacesTable"), dynamostore.WithClock(clock.Now))
	ctx := t.Context()
	org := uuid.NewString()
	entry := func(id string, at time.Time) space.Activity {
		return space.Activity{ID: "act_" + id, OrgID: org, Kind: space.ActivitySpaceRelabeled, At: at, ActorType: space.ActorUser,
			Actor: "alice", ResourceType: "space", ResourceID: uuid.NewString()}
	}
	record := func(a space.Activity) {
		t.Helper()
		if err := store.RecordActivity(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	page := func(after string) ([]string, string) {
		t.Helper()
		items, next, err := store.ListActivity(ctx, org, space.ActivityQuery{Page: space.Page{Limit: 2, After: after}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range items {
			ids = append(ids, a.ID)
		}
		return ids, next
	}
	walk := func() []string {
		t.Helper()
		var all []string
		for after, n := "", 0; ; n++ {
			ids, next := page(after)
			all = append(all, ids...)
			if next == "" || n > 10 {
				return all
			}
			after = next
		}
	}
	// Five entries recorded as they happen, a second apart.
	for i := range 5 {
		clock.Set(base.Add(time.Duration(i) * time.Second))
		record(entry(strconv.Itoa(i), clock.Now()))
	}
	first, next := page("")
	if want := []string{"act_4", "act_3"}; !slices.Equal(first, want) {
		t.Fatalf("first page %v, want %v", first, want)
	}
	second, next := page(next)
	if want := []string{"act_2", "act_1"}; !slices.Equal(second, want) {
		t.Fatalf("second page %v, want %v", second, want)
	}
	// Now the late one: made between act_3 and act_2, recorded an hour on.
	clock.Set(base.Add(time.Hour))
	late := entry("late", base.Add(2500*time.Millisecond))
	record(late)
	third, _ := page(next)
	again, _ := page("")
	if !slices.Contains(third, late.ID) && !slices.Contains(again, late.ID) {
		t.Fatalf("the late entry is neither on the next page (%v) nor on the first page read again (%v)", third, again)
	}
	if want := []string{"act_late", "act_4"}; !slices.Equal(again, want) {
		t.Errorf("the first page read again %v, want %v: the late entry on top", again, want)
	}
	if want := []string{"act_0"}; !slices.Equal(third, want) {
		t.Errorf("the third page %v, want %v", third, want)
	}
	// Delivered once more: nothing added. The clock steps back and two
	// entries share a tick: still above everything recorded before.
	record(late)
	clock.Set(base.Add(-time.Hour))
	record(entry("back", base))
	record(entry("same-tick", base))
	want := []string{"act_same-tick", "act_back", "act_late", "act_4", "act_3", "act_2", "act_1", "act_0"}
	if got := walk(); !slices.Equal(got, want) {
		t.Errorf("the walk from the top %v, want %v", got, want)
	}
	// The entry keeps its own time; only its place is the recording's.
	items, _, err := store.ListActivity(ctx, org, space.ActivityQuery{Page: space.Page{Limit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if got := items[2]; got.ID != late.ID || !got.At.Equal(late.At) {
		t.Errorf("the late entry listed as %s at %v, want %s at %v", got.ID, got.At, late.ID, late.At)
	}
}
