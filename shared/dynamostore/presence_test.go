package dynamostore_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// agentSpace registers an agent space and exchanges its bootstrap: the
// space and its credential.
func (f *fixture) agentSpace(t *testing.T) (space.Space, space.AgentToken) {
	t.Helper()
	s := f.newSpace(int(time.Now().UnixNano() % 1e9))
	s.Connectivity = space.ViaAgent
	f.register(t, s)
	b := space.NewBootstrapToken(s.ID)
	if err := f.store.PutBootstrap(t.Context(), s, b.Hash(), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	cred := space.NewAgentCredential(s.ID)
	if _, err := f.store.ExchangeBootstrap(t.Context(), s.ID, b.Hash(), cred.Hash(), "", now.Add(24*time.Hour), now); err != nil {
		t.Fatal(err)
	}
	return s, cred
}

func TestCheckCredential(t *testing.T) {
	f := newFixture(t)
	s, cred := f.agentSpace(t)
	exp, err := f.store.CheckCredential(t.Context(), s.ID, cred.Hash(), now)
	if err != nil || !exp.Equal(now.Add(24*time.Hour).Truncate(time.Second)) {
		t.Fatalf("CheckCredential = %v %v", exp, err)
	}
	// After a renewal the old one is the previous, valid for the overlap.
	next := space.NewAgentCredential(s.ID)
	if _, err := f.store.RenewCredential(t.Context(), s.ID, cred.Hash(), next.Hash(), now.Add(48*time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if exp, err := f.store.CheckCredential(t.Context(), s.ID, cred.Hash(), now); err != nil || !exp.Equal(now.Add(space.RenewOverlap).Truncate(time.Second)) {
		t.Fatalf("previous credential: %v %v", exp, err)
	}
	for name, c := range map[string]struct {
		id, hash string
		at       time.Time
	}{
		"previous after its overlap": {s.ID, cred.Hash(), now.Add(space.RenewOverlap + time.Second)},
		"current after its expiry":   {s.ID, next.Hash(), now.Add(48*time.Hour + time.Second)},
		"another secret":             {s.ID, space.NewAgentCredential(s.ID).Hash(), now},
		"no such space":              {f.newSpace(9).ID, next.Hash(), now},
	} {
		if _, err := f.store.CheckCredential(t.Context(), c.id, c.hash, c.at); space.KindOf(err) != space.KindUnauthenticated {
			t.Errorf("%s: %v, want unauthenticated", name, err)
		}
	}
}

func TestRecordPresence(t *testing.T) {
	f := newFixture(t)
	s, cred := f.agentSpace(t)
	at := func(d time.Duration) time.Time { return now.Add(d).UTC() }
	up := func(v int64, d time.Duration) space.Presence {
		return space.Presence{Connected: true, Version: v, At: at(d)}
	}
	down := func(v int64, d time.Duration, r string) space.Presence {
		return space.Presence{Version: v, At: at(d), Reason: r}
	}
	steps := []struct {
		p      space.Presence
		stored bool
		want   space.Presence // the stored one after the step
	}{
		{up(1, 0), true, up(1, 0)},
		{up(1, 0), false, up(1, 0)}, // replayed
		{down(1, time.Minute, "CONNECTION_LOST"), true, down(1, time.Minute, "CONNECTION_LOST")},
		{up(1, 0), false, down(1, time.Minute, "CONNECTION_LOST")}, // its connect, late
		{down(1, time.Minute, "CONNECTION_LOST"), false, down(1, time.Minute, "CONNECTION_LOST")},
		{up(3, 3*time.Minute), true, up(3, 3*time.Minute)},
		{down(2, 2*time.Minute, "DUPLICATE_CLIENTID"), false, up(3, 3*time.Minute)}, // an older connection's
		{up(4, 4*time.Minute), true, up(4, 4*time.Minute)},                          // no reason left over
	}
	for i, st := range steps {
		res, err := f.store.RecordPresence(t.Context(), s.ID, st.p)
		if err != nil || res.Stored != st.stored || res.OrgID != s.OrgID {
			t.Fatalf("step %d: %+v %v, want stored=%v", i, res, err, st.stored)
		}
		l, err := f.store.GetLease(t.Context(), s.ID)
		if err != nil || l.Presence == nil || *l.Presence != st.want {
			t.Fatalf("step %d: lease presence %+v %v, want %+v", i, l.Presence, err, st.want)
		}
		if i == 2 && (res.Before.Presence == nil || *res.Before.Presence != up(1, 0)) {
			t.Fatalf("step %d: before = %+v", i, res.Before.Presence)
		}
	}
	// A lease renewal keeps the presence, and answers it as the one before.
	r, err := f.store.RenewLease(t.Context(), s.ID, cred.Hash(), space.LeaseReport{AgentVersion: "v1",
		ServerVersion: space.ServerVersion{GitVersion: "v1.31.0", Platform: "linux/amd64"}}, at(5*time.Minute))
	if err != nil || r.Presence == nil || *r.Presence != up(4, 4*time.Minute) {
		t.Fatalf("RenewLease: %+v %v", r.Presence, err)
	}
	l, _ := f.store.GetLease(t.Context(), s.ID)
	if l.Presence == nil || l.RenewedAt == nil || !l.RenewedAt.Equal(at(5*time.Minute)) {
		t.Fatalf("after the renewal: %+v", l)
	}
	// The prober's minute read (eventually consistent) decodes the same
	// item the same way.
	if ev, err := f.store.GetLeaseEventually(t.Context(), s.ID); err != nil || !reflect.DeepEqual(ev, l) {
		t.Fatalf("GetLeaseEventually: %+v %v, want %+v", ev, err, l)
	}

	// An unknown space: not found, and no item is made.
	other := f.newSpace(8)
	if _, err := f.store.RecordPresence(t.Context(), other.ID, up(1, 0)); space.KindOf(err) != space.KindNotFound {
		t.Fatalf("unknown space: %v", err)
	}
	if l, err := f.store.GetLease(t.Context(), other.ID); err != nil || l.Presence != nil || l.RenewedAt != nil {
		t.Fatalf("an unknown space's presence made an item: %+v %v", l, err)
	}
	if l, err := f.store.GetLeaseEventually(t.Context(), other.ID); err != nil || l.Presence != nil || l.RenewedAt != nil {
		t.Fatalf("GetLeaseEventually of a space without an agent item: %+v %v", l, err)
	}
	// Deregistered: its item is gone and stays gone.
	got, err := f.store.GetSpace(t.Context(), s.OrgID, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Deregister(t.Context(), s.OrgID, s.ID, got.Version, at(6*time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.RecordPresence(t.Context(), s.ID, up(9, 7*time.Minute)); space.KindOf(err) != space.KindNotFound {
		t.Fatalf("deregistered space: %v", err)
	}
	if l, _ := f.store.GetLease(t.Context(), s.ID); l.Presence != nil {
		t.Fatalf("a deregistered space's presence came back: %+v", l.Presence)
	}
}

// TestRecordPresenceVersionReset: after an hour away IoT restarts the
// client id's versions at 0; the store takes the new run's events and
// keeps every late event of the old run out, as space.Presence.Newer says.
func TestRecordPresenceVersionReset(t *testing.T) {
	f := newFixture(t)
	s, _ := f.agentSpace(t)
	base := now.Truncate(time.Millisecond).UTC()
	ev := func(connected bool, v int64, d time.Duration) space.Presence {
		p := space.Presence{Connected: connected, Version: v, At: base.Add(d)}
		if !connected {
			p.Reason = "CONNECTION_LOST"
		}
		return p
	}
	const up, down = true, false
	steps := []struct {
		p      space.Presence
		stored bool
	}{
		{ev(up, 56, 0), true},
		{ev(down, 56, time.Minute), true},
		{ev(up, 57, 2*time.Minute), true},
		{ev(down, 57, 3*time.Minute), true},
		// Two hours away: the versions start again.
		{ev(up, 0, 2*time.Hour), true},
		{ev(down, 57, 3*time.Minute), false}, // the old run's disconnect, redelivered
		{ev(up, 57, 2*time.Minute), false},   // and its connect
		{ev(down, 0, 2*time.Hour+time.Minute), true},
		{ev(up, 1, 2*time.Hour+2*time.Minute), true},
		{ev(up, 0, 2*time.Hour), false}, // the new run's own late connect
		// 26 hours away, the disconnect lost: the reset's connect still wins.
		{ev(up, 0, 28*time.Hour), true},
		{ev(down, 1, 2*time.Hour+5*time.Minute), false}, // the lost disconnect, at last
	}
	var stored *space.Presence
	for i, st := range steps {
		if got := st.p.Newer(stored); got != st.stored {
			t.Fatalf("step %d: the domain says newer=%v, the table wants %v", i, got, st.stored)
		}
		res, err := f.store.RecordPresence(t.Context(), s.ID, st.p)
		if err != nil || res.Stored != st.stored {
			t.Fatalf("step %d (%+v): stored=%v %v, want %v", i, st.p, res.Stored, err, st.stored)
		}
		if st.stored {
			p := st.p
			stored = &p
		}
		if l, err := f.store.GetLease(t.Context(), s.ID); err != nil || l.Presence == nil || !l.Presence.At.Equal(stored.At) ||
			l.Presence.Version != stored.Version || l.Presence.Connected != stored.Connected {
			t.Fatalf("step %d: lease presence %+v %v, want %+v", i, l.Presence, err, stored)
		}
	}
}

// TestRecordPresenceRace: a connection's connect and disconnect, each
// delivered twice, all at once: the disconnect is what stays, whatever
// the order the writes land in.
func TestRecordPresenceRace(t *testing.T) {
	f := newFixture(t)
	s, _ := f.agentSpace(t)
	for round := range 5 {
		v := int64(round + 1)
		con := space.Presence{Connected: true, Version: v, At: now.Add(time.Duration(round) * time.Minute).UTC()}
		dis := space.Presence{Version: v, At: con.At.Add(30 * time.Second), Reason: "CLIENT_INITIATED_DISCONNECT"}
		var wg sync.WaitGroup
		var mu sync.Mutex
		stored := map[bool]int{}
		var errs []error
		for _, p := range []space.Presence{con, dis, dis, con} {
			wg.Go(func() {
				res, err := f.store.RecordPresence(t.Context(), s.ID, p)
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
				if res.Stored {
					stored[p.Connected]++
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if stored[false] != 1 || stored[true] > 1 {
			t.Fatalf("round %d: stored %v, want the disconnect once and the connect at most once", round, stored)
		}
		if l, _ := f.store.GetLease(t.Context(), s.ID); l.Presence == nil || *l.Presence != dis {
			t.Fatalf("round %d: stored %+v, want %+v", round, l.Presence, dis)
		}
	}
}

// TestStaleNamespacesReport: a report whose write lands after a newer one
// (its invocation timed out, its request still reached the table) changes
// nothing: not the list, not the creates it answers; a report from a
// credential that is not the space's is refused whatever its time.
func TestStaleNamespacesReport(t *testing.T) {
	f := newFixture(t)
	s, cred := f.agentSpace(t)
	ctx := t.Context()
	if err := f.store.RequestNamespace(ctx, s.OrgID, s.ID, space.NamespaceCreate{Name: "team-a", Labels: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	report := func(names ...string) space.NamespacesReport {
		var r space.NamespacesReport
		for _, n := range names {
			r.Items = append(r.Items, space.ReportedNamespace{Name: n, Phase: "Active", CreatedAt: now.Format(time.RFC3339)})
		}
		return r
	}
	newer := report("default", "team-a")
	newer.Creates = []space.CreateOutcome{{Name: "team-a"}}
	if err := f.store.ReportNamespaces(ctx, s.ID, cred.Hash(), newer, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The older report, taken before team-a was created, lands now.
	if err := f.store.ReportNamespaces(ctx, s.ID, cred.Hash(), report("default"), now.Add(time.Second)); err != nil {
		t.Fatalf("a superseded report: %v, want nothing done and no error", err)
	}
	got, err := f.store.ReportedNamespaces(ctx, s.OrgID, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 2 || got.Items[1].Name != "team-a" || len(got.Pending) != 0 || !got.ObservedAt.Equal(now.Add(2*time.Second)) {
		t.Errorf("after a late, older report: %+v, want the newer list (default, team-a), nothing pending", got)
	}
	// A newer report still replaces it (unasked: a ReportInterval later).
	if err := f.store.ReportNamespaces(ctx, s.ID, cred.Hash(), report("default"), now.Add(2*time.Second+space.ReportInterval)); err != nil {
		t.Fatal(err)
	}
	if got, err = f.store.ReportedNamespaces(ctx, s.OrgID, s.ID); err != nil || len(got.Items) != 1 {
		t.Errorf("after a newer report: %+v %v, want its one namespace", got, err)
	}
	other := space.NewAgentCredential(s.ID)
	if err := f.store.ReportNamespaces(ctx, s.ID, other.Hash(), report("x"), now.Add(time.Second)); space.KindOf(err) != space.KindUnauthenticated {
		t.Errorf("an older report with another credential: %v, want unauthenticated", err)
	}
}

// TestNamespaceCreateRacingTheReport: the agent's report that carries out
// a create of team-a (the list now holds it, nothing is pending) lands
// between a second create's read of the list and its write. The second
// create is refused as existing, not recorded as a new pending create
// (which the agent would carry out against a namespace that exists).
func TestNamespaceCreateRacingTheReport(t *testing.T) {
	f := newFixture(t)
	s, cred := f.agentSpace(t)
	ctx := t.Context()
	if err := f.store.RequestNamespace(ctx, s.OrgID, s.ID, space.NamespaceCreate{Name: "team-a", Labels: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	carried := space.NamespacesReport{Items: []space.ReportedNamespace{
		{Name: "default", Phase: "Active", CreatedAt: now.Format(time.RFC3339)},
		{Name: "team-a", Phase: "Active", CreatedAt: now.Format(time.RFC3339)}}}
	carried.Creates = []space.CreateOutcome{{Name: "team-a"}}
	reported := 0
	race := func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("race", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			switch in.Parameters.(type) {
			case *dynamodb.TransactWriteItemsInput, *dynamodb.UpdateItemInput: // the create's write, whatever its form
			default:
				return next.HandleInitialize(ctx, in)
			}
			if reported == 0 {
				reported++
				if err := f.store.ReportNamespaces(ctx, s.ID, cred.Hash(), carried, now.Add(time.Second)); err != nil {
					t.Error(err)
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
	racing := dynamostore.New(dynamodb.New(f.db.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, race) }), f.table)
	err := racing.RequestNamespace(ctx, s.OrgID, s.ID, space.NamespaceCreate{Name: "team-a", Labels: map[string]string{}})
	if reported != 1 {
		t.Fatalf("the report ran %d times, want once, between the read and the write", reported)
	}
	if e, ok := errors.AsType[*space.Error](err); !ok || e.Kind != space.KindConflict || !strings.Contains(e.Message, "already exists") {
		t.Fatalf("a create racing the report that carried it out: %v, want a conflict saying it exists", err)
	}
	got, err := f.store.ReportedNamespaces(ctx, s.OrgID, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pending) != 0 || len(got.Items) != 2 {
		t.Errorf("after the refused create: %+v, want the two reported namespaces and nothing pending", got)
	}
	// With nothing racing, a name neither reported nor pending is recorded.
	if err := f.store.RequestNamespace(ctx, s.OrgID, s.ID, space.NamespaceCreate{Name: "team-b", Labels: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
}
