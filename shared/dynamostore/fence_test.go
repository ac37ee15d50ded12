package dynamostore_test

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/infra/testclock"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// shardTargets lists a shard's direct targets by id.
func shardTargets(t *testing.T, st *dynamostore.Store) map[string]space.ProbeTarget {
	t.Helper()
	out := map[string]space.ProbeTarget{}
	for shard := range st.ProbeShards() {
		page, _, err := st.ProbeTargets(t.Context(), shard, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range page {
			if tg.Shard != strconv.Itoa(shard/10)+strconv.Itoa(shard%10) {
				t.Errorf("target %s of shard %d says shard %q", tg.ID, shard, tg.Shard)
			}
			out[tg.ID] = tg
		}
	}
	return out
}

// TestProbeTargetsCarryTheSpace: the probe index carries the space's
// digest as stored (so the prober need not read the space), and follows
// every write of it: a probe's, and one that changes nothing the digest
// holds but the version (a rename); a deregistered space leaves it, and
// its tombstone keeps no digest.
func TestProbeTargetsCarryTheSpace(t *testing.T) {
	f := newFixture(t)
	s := f.register(t, f.newSpace(1))
	if tg, ok := shardTargets(t, f.store)[s.ID]; !ok || !tg.Carried() || !reflect.DeepEqual(*tg.Digest, space.DigestOf(s)) {
		t.Fatalf("after registration: target %+v (listed %t), want the digest of %+v", tg, ok, s)
	}
	s, _ = probeStep(t, f, s, space.Outcome{At: now.Add(time.Minute), Version: &space.ServerVersion{GitVersion: "v1.31.4", Platform: "linux/amd64"}})
	tg, ok := shardTargets(t, f.store)[s.ID]
	if !ok || !tg.Carried() {
		t.Fatalf("target %+v (listed %t): want one carrying its state", tg, ok)
	}
	if want := space.DigestOf(s); !reflect.DeepEqual(*tg.Digest, want) {
		t.Errorf("carried %s, stored %s", tg.Digest, want)
	}
	got := tg.Space()
	if got.OrgID != s.OrgID || got.ID != s.ID || got.Provider != s.Provider || got.CloudAccountID != s.CloudAccountID ||
		got.Config["clusterName"] != s.Config["clusterName"] || got.Status != space.Active || got.Version != s.Version ||
		got.Probe.LastProbeAt == nil || !got.Probe.LastProbeAt.Equal(s.Probe.LastProbeAt.Truncate(time.Second)) {
		t.Errorf("carried %+v, stored %+v", got, s)
	}
	// The prober's write after a change: the space read again and written
	// on its version; the index follows.
	res, err := f.store.UpdateSpace(t.Context(), s.OrgID, s.ID, space.Update[space.Space]{At: now.Add(2 * time.Minute),
		Apply: func(cur space.Space) (space.Space, error) {
			next, _ := space.ApplyProbe(cur, space.Outcome{At: now.Add(2 * time.Minute), Reason: space.ReasonTimeout})
			return next, nil
		}})
	if err != nil || !res.Written {
		t.Fatalf("write after a change: %+v, %v", res, err)
	}
	stored, err := f.store.LiveSpace(t.Context(), s.OrgID, s.ID)
	if err != nil || stored.Name != s.Name || stored.Probe.ConsecutiveFailures != 1 || stored.Version != s.Version+1 {
		t.Errorf("after the write: %+v, %v", stored, err)
	}
	if tg := shardTargets(t, f.store)[s.ID]; tg.Digest == nil || !reflect.DeepEqual(*tg.Digest, space.DigestOf(stored)) {
		t.Errorf("the index carries %v; want %s", tg.Digest, space.DigestOf(stored))
	}
	renamed, err := f.store.UpdateSpace(t.Context(), s.OrgID, s.ID, space.Update[space.Space]{At: now.Add(3 * time.Minute),
		Apply: func(cur space.Space) (space.Space, error) { cur.Name += "-renamed"; return cur, nil }})
	if err != nil || !renamed.Written {
		t.Fatalf("rename: %+v, %v", renamed, err)
	}
	if tg := shardTargets(t, f.store)[s.ID]; tg.Digest == nil || tg.Digest.Version != renamed.After.Version {
		t.Errorf("after a rename the index carries %v, want version %d", tg.Digest, renamed.After.Version)
	}
	if _, err := f.store.Deregister(t.Context(), f.org, s.ID, 0, now.Add(4*time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	if _, listed := shardTargets(t, f.store)[s.ID]; listed {
		t.Error("a deregistered space is still listed")
	}
	if raw := f.raw(t, f.org, "SPACE#"+s.ID); raw["pd"] != nil || raw["probe_shard"] != nil {
		t.Errorf("the tombstone keeps %v, %v", raw["pd"], raw["probe_shard"])
	}
}

// TestDeregistrationFence: Deregister's transaction puts the space in its
// shard's fence, which a strongly consistent read from any time up to its
// deregistration finds and one from after does not; the entry outlives
// FenceRetention (TTL), and a write of the deregistered space from a
// carried state fails (no resurrection).
func TestDeregistrationFence(t *testing.T) {
	f := newFixture(t)
	s := f.register(t, f.newSpace(1))
	other := f.register(t, f.newSpace(2))
	tg := shardTargets(t, f.store)[s.ID]
	at := now.Add(10 * time.Minute)
	if _, err := f.store.Deregister(t.Context(), f.org, s.ID, 0, at, "test"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		since time.Time
		want  bool
	}{{now, true}, {at, true}, {at.Add(time.Nanosecond), false}} {
		got, err := f.store.Fenced(t.Context(), tg.Shard, c.since)
		if err != nil {
			t.Fatal(err)
		}
		if got[s.ID] != c.want || got[other.ID] {
			t.Errorf("fence since %s: %v, want %s: %t and not the live space", c.since, got, s.ID, c.want)
		}
	}
	sk := at.UTC().Format("2006-01-02T15:04:05.000000000Z") + "#" + s.ID
	item := f.rawKey(t, "FENCE#"+tg.Shard, sk)
	exp, _ := item["expires_at"].(*types.AttributeValueMemberN)
	if exp == nil || exp.Value != strconv.FormatInt(at.Add(space.FenceRetention).Unix(), 10) {
		t.Errorf("fence entry %v: want expires_at = deleted_at + FenceRetention", item)
	}
	from := tg.Space()
	_, err := f.store.UpdateSpace(t.Context(), s.OrgID, s.ID, space.Update[space.Space]{At: at.Add(time.Second), Read: &from,
		Apply: func(cur space.Space) (space.Space, error) {
			next, _ := space.ApplyProbe(cur, space.Outcome{At: at.Add(time.Second)})
			return next, nil
		}})
	wantKind(t, err, space.KindNotFound)
	if raw := f.raw(t, f.org, "SPACE#"+s.ID); raw["deleted_at"] == nil || raw["probe_shard"] != nil {
		t.Errorf("the deregistered space was written: %v", raw)
	}
	// A synthetic space is never probed, so never fenced.
	syn := f.newSpace(3)
	syn.Synthetic = true
	syn = f.register(t, syn)
	if _, err := f.store.Deregister(t.Context(), f.org, syn.ID, 0, at, "test"); err != nil {
		t.Fatal(err)
	}
	for shard := range f.store.ProbeShards() {
		got, err := f.store.Fenced(t.Context(), strconv.Itoa(shard/10)+strconv.Itoa(shard%10), now)
		if err != nil {
			t.Fatal(err)
		}
		if got[syn.ID] {
			t.Error("a synthetic space was fenced")
		}
	}
}

// TestProbeBeats: a shard's beat only moves forward and answers the one
// it replaced; readers (GetSpace, ListSpaces) see a space's last probe
// raised to its shard's beat, the prober's and the writers' read
// (LiveSpace) sees it as stored, and a bad shard is refused.
func TestProbeBeats(t *testing.T) {
	clock := testclock.New(now)
	f := newFixture(t, dynamostore.WithClock(clock.Now))
	s := f.register(t, f.newSpace(1))
	s, _ = probeStep(t, f, s, space.Outcome{At: now.Add(time.Minute)})
	shard := shardTargets(t, f.store)[s.ID].Shard

	t1, t2 := now.Add(5*time.Minute), now.Add(6*time.Minute)
	for i, c := range []struct {
		tick, prev time.Time
	}{{t1, time.Time{}}, {t2, t1}, {t1, time.Time{}}, {t2, time.Time{}}} {
		prev, err := f.store.Beat(t.Context(), shard, c.tick)
		if err != nil || !prev.Equal(c.prev) {
			t.Errorf("beat %d at %s: replaced %s (%v), want %s", i, c.tick, prev, err, c.prev)
		}
	}
	wantKind(t, errOf(f.store.Beat(t.Context(), "16", t2)), space.KindInvalid)
	wantKind(t, errOf(f.store.Beat(t.Context(), "b", t2)), space.KindInvalid)

	clock.Advance(time.Minute) // past the store's cache of the beats
	got, err := f.store.GetSpace(t.Context(), f.org, s.ID)
	if err != nil || got.Probe.LastProbeAt == nil || !got.Probe.LastProbeAt.Equal(t2) {
		t.Errorf("GetSpace: last probe %v (%v), want the beat %s", got.Probe.LastProbeAt, err, t2)
	}
	list, _, err := f.store.ListSpaces(t.Context(), f.org, space.Query{Page: space.Page{Limit: 10}})
	if err != nil || len(list) != 1 || !list[0].Probe.LastProbeAt.Equal(t2) {
		t.Errorf("ListSpaces: %+v, %v; want the beat %s", list, err, t2)
	}
	raw, err := f.store.LiveSpace(t.Context(), f.org, s.ID)
	if err != nil || !raw.Probe.LastProbeAt.Equal(now.Add(time.Minute)) {
		t.Errorf("LiveSpace: last probe %v (%v), want the stored %s", raw.Probe.LastProbeAt, err, now.Add(time.Minute))
	}
	// A write does not store what readers are shown.
	res, err := f.store.UpdateSpace(t.Context(), f.org, s.ID, space.Update[space.Space]{At: now.Add(7 * time.Minute),
		Apply: func(cur space.Space) (space.Space, error) { cur.Name = "renamed"; return cur, nil }})
	if err != nil || !res.After.Probe.LastProbeAt.Equal(now.Add(time.Minute)) {
		t.Errorf("a rename stored last probe %v (%v), want the stored %s", res.After.Probe.LastProbeAt, err, now.Add(time.Minute))
	}
}

// rawKey reads an item by its whole key, as stored.
func (f *fixture) rawKey(t testing.TB, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}
