package cascade_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/cascade"
	"spaces/shared/dynamostore"
	"spaces/shared/space"
)

// publisher counts events and fails while failing is set.
type publisher struct {
	mu      sync.Mutex
	failing bool
	got     []space.Deregistered
}

func (p *publisher) PublishDeregistered(_ context.Context, d space.Deregistered) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failing {
		return errors.New("the bus is down")
	}
	p.got = append(p.got, d)
	return nil
}

func (p *publisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

type world struct {
	store    *dynamostore.Store
	svc      *space.Service
	bindings *space.Bindings
	acct     string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	env := emulatortest.Start(t)
	store := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Resources["SpacesTable"].Name)
	svc := space.NewService(store, space.DefaultStaleAfter)
	a, err := svc.CreateAccount(t.Context(), "acme", space.NewAccountInput{Provider: space.AWS, Name: "prod",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		t.Fatal(err)
	}
	a.Status, a.Version = space.AccountReady, a.Version+1 // as a verification would
	if err := store.SaveAccount(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	return &world{store: store, svc: svc, bindings: &space.Bindings{Spaces: svc, Store: store}, acct: a.ID}
}

// space registers a space with envs environments and policies policies,
// then deregisters it; it returns the space and what is bound to it.
func (w *world) deregistered(t testing.TB, cluster string, envs, policies int) (space.Space, []string, []string) {
	t.Helper()
	ctx := context.Background()
	s, _, err := w.svc.Register(ctx, "acme", space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: w.acct, Config: space.Config{"clusterName": cluster, "region": "eu-west-1"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	var envIDs, policyIDs []string
	for i := range envs {
		e, err := w.bindings.CreateEnvironment(ctx, "acme", space.NewEnvironmentInput{Name: fmt.Sprintf("env-%d", i), SpaceID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		envIDs = append(envIDs, e.ID)
	}
	for i := range policies {
		lo, hi := 1, 3
		p, err := w.bindings.CreatePolicy(ctx, "acme", space.NewPolicyInput{SpaceID: s.ID, MinReplicas: &lo, MaxReplicas: &hi,
			Target: space.PolicyTarget{Namespace: "web", Kind: "Deployment", Name: fmt.Sprintf("api-%d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		policyIDs = append(policyIDs, p.ID)
	}
	if err := w.svc.Deregister(ctx, "acme", s.ID, 0, "test"); err != nil {
		t.Fatal(err)
	}
	return s, envIDs, policyIDs
}

// record is the stream record of s's deregistration, as Lambda delivers it.
func record(s space.Space, seq string) events.DynamoDBEventRecord {
	str := events.NewStringAttribute
	img := map[string]events.DynamoDBAttributeValue{
		"pk": str("ORG#" + s.OrgID), "sk": str("SPACE#" + s.ID), "id": str(s.ID), "org_id": str(s.OrgID),
		"name": str(s.Name), "provider": str(string(s.Provider)), "cloud_account_id": str(s.CloudAccountID),
	}
	newImg := map[string]events.DynamoDBAttributeValue{"deleted_at": str(time.Now().UTC().Format(time.RFC3339Nano)), "deleted_by": str("test")}
	for k, v := range img {
		newImg[k] = v
	}
	return events.DynamoDBEventRecord{EventID: "ev-" + seq, EventName: "MODIFY", EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{Keys: map[string]events.DynamoDBAttributeValue{"pk": img["pk"], "sk": img["sk"]},
			OldImage: img, NewImage: newImg, SequenceNumber: seq, StreamViewType: "NEW_AND_OLD_IMAGES"}}
}

// TestPublishThenMark: a failed publish reports the record (and stops the
// batch there) with the writes done and no marker; the retry publishes once
// and marks; a replay changes nothing and publishes nothing.
func TestPublishThenMark(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	a, envs, policies := w.deregistered(t, "alpha", 2, 1)
	b, _, _ := w.deregistered(t, "beta", 1, 0)
	pub := &publisher{failing: true}
	c := cascade.New(cascade.Cascade{Store: w.store, Events: pub, Log: slog.New(slog.DiscardHandler)})
	batch := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{record(a, "100"), record(b, "101")}}

	resp, err := c.HandleStream(ctx, batch)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "100" {
		t.Fatalf("response %+v %v, want the first record failed", resp, err)
	}
	for _, id := range envs {
		e, _ := w.store.GetEnvironment(ctx, "acme", id)
		if e.Gate == nil || e.Gate.Reason != space.GateSpaceDeregistered {
			t.Errorf("environment %s not gated before the publish: %+v", id, e)
			continue
		}
		// The gate carries the space's tombstone, from the stream record.
		if ts := e.Gate.Space; ts == nil || ts.ID != a.ID || ts.Name != a.Name || ts.Provider != space.AWS || ts.DeregisteredBy != "test" ||
			ts.DeregisteredAt.IsZero() {
			t.Errorf("environment %s gated without the space's tombstone: %+v", id, ts)
		}
	}
	for _, sp := range []space.Space{a, b} {
		if done, _ := w.store.Cascaded(ctx, "acme", sp.ID); done {
			t.Errorf("space %s marked done though nothing was published", sp.Name)
		}
	}

	pub.mu.Lock()
	pub.failing = false
	pub.mu.Unlock()
	if resp, err := c.HandleStream(ctx, batch); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry: %+v %v", resp, err)
	}
	if pub.count() != 2 {
		t.Fatalf("%d events, want one per space", pub.count())
	}
	for _, id := range policies {
		if p, _ := w.store.GetPolicy(ctx, "acme", id); p.State != space.PolicyDetached || p.StateReason != space.GateSpaceDeregistered {
			t.Errorf("policy %+v", p)
		}
	}
	for range 2 {
		res, err := c.Run(ctx, space.Deregistered{OrgID: "acme", SpaceID: a.ID})
		if err != nil || !res.AlreadyDone || res.Writes != 0 {
			t.Errorf("replay: %+v %v", res, err)
		}
	}
	if pub.count() != 2 {
		t.Errorf("%d events after the replays", pub.count())
	}
}

// TestGateOnlyIfStillBound: an environment re-bound before the cascade runs
// is left alone (the gate is conditional on the binding).
func TestGateOnlyIfStillBound(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	survivor, _, err := w.svc.Register(ctx, "acme", space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: w.acct, Config: space.Config{"clusterName": "survivor", "region": "eu-west-1"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	s, envs, _ := w.deregistered(t, "moving", 2, 0)
	// Moved before the cascade: the store refuses binding to s now, but the
	// environment was bound before the deregistration and is moved away.
	moved, err := w.store.RebindEnvironment(ctx, "acme", envs[0], survivor.ID, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.RebindEnvironment(ctx, "acme", envs[1], s.ID, 0, time.Now()); space.KindOf(err) != space.KindInvalid {
		t.Errorf("re-bind to the deregistered space: %v", err)
	}
	c := cascade.New(cascade.Cascade{Store: w.store, Events: &publisher{}})
	res, err := c.Run(ctx, space.Deregistered{OrgID: "acme", SpaceID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	if res.Gated != 1 || res.GrantRevoked {
		t.Errorf("result %+v, want 1 gated and the grant already gone", res)
	}
	if e, _ := w.store.GetEnvironment(ctx, "acme", envs[0]); e.Gate != nil || e.Version != moved.Version {
		t.Errorf("the moved environment was touched: %+v", e)
	}
}

// waker records the spaces whose agents were woken, and fails while
// failing is set.
type waker struct {
	mu      sync.Mutex
	failing bool
	woken   []string
}

func (w *waker) Wake(_ context.Context, spaceID string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failing {
		return errors.New("IoT Core is down")
	}
	w.woken = append(w.woken, spaceID)
	return nil
}

// disconnecter records the spaces whose agents' connections were ended,
// and fails while failing is set.
type disconnecter struct {
	mu      sync.Mutex
	failing bool
	ended   []string
}

func (d *disconnecter) Disconnect(_ context.Context, spaceID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failing {
		return errors.New("IoT Core is down")
	}
	d.ended = append(d.ended, spaceID)
	return nil
}

// TestAgentIsWoken: an agent space's deregistration wakes its agent (so
// that its next renewal is refused now) and ends its MQTT connection; a
// direct space's touches nobody; a wake or disconnect that fails does not
// fail the cascade, which still marks itself.
func TestAgentIsWoken(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	agentSpace, _, _ := w.deregistered(t, "agent-cluster", 0, 0)
	direct, _, _ := w.deregistered(t, "direct-cluster", 0, 0)
	wk, dc := &waker{}, &disconnecter{}
	c := cascade.New(cascade.Cascade{Store: w.store, Events: &publisher{}, Agents: wk, Connections: dc})
	if _, err := c.Run(ctx, space.Deregistered{OrgID: "acme", SpaceID: agentSpace.ID, Connectivity: space.ViaAgent}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, space.Deregistered{OrgID: "acme", SpaceID: direct.ID, Connectivity: space.Direct}); err != nil {
		t.Fatal(err)
	}
	if len(wk.woken) != 1 || wk.woken[0] != agentSpace.ID {
		t.Errorf("woken %v, want only %s", wk.woken, agentSpace.ID)
	}
	if len(dc.ended) != 1 || dc.ended[0] != agentSpace.ID {
		t.Errorf("connections ended %v, want only %s's", dc.ended, agentSpace.ID)
	}
	failing, _, _ := w.deregistered(t, "agent-unwoken", 0, 0)
	wk.failing, dc.failing = true, true
	if _, err := c.Run(ctx, space.Deregistered{OrgID: "acme", SpaceID: failing.ID, Connectivity: space.ViaAgent}); err != nil {
		t.Fatalf("a failed wake and disconnect failed the cascade: %v", err)
	}
	if done, err := w.store.Cascaded(ctx, "acme", failing.ID); err != nil || !done {
		t.Errorf("cascade not marked after a failed wake and disconnect: %v %v", done, err)
	}
}

// BenchmarkCascade1000: the cascade of one space with 1,000 environments and
// 1,000 autoscaler policies (setup excluded), one worker and the default.
func BenchmarkCascade1000(b *testing.B) {
	w := newWorld(b)
	ctx := context.Background()
	for _, workers := range []int{1, cascade.DefaultWorkers} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var writes int
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				s, _, _ := w.deregistered(b, fmt.Sprintf("big-%d-%d", workers, i), 1000, 1000)
				c := cascade.New(cascade.Cascade{Store: w.store, Events: &publisher{}, Workers: workers})
				b.StartTimer()
				res, err := c.Run(ctx, space.Deregistered{OrgID: "acme", SpaceID: s.ID})
				if err != nil || res.Gated != 1000 || res.Detached != 1000 {
					b.Fatalf("%+v %v", res, err)
				}
				writes = res.Writes
			}
			b.ReportMetric(float64(writes), "writes/op")
		})
	}
}

// TestSampleEvents runs events/cascade through the handler on the emulator:
// the deregistration cascades (nothing is bound to the sample space, so it
// publishes and marks), the status change is skipped.
func TestSampleEvents(t *testing.T) {
	w := newWorld(t)
	pub := &publisher{}
	c := cascade.New(cascade.Cascade{Store: w.store, Events: pub, Log: slog.New(slog.DiscardHandler)})
	for _, f := range []struct {
		file   string
		events int
	}{{"status-change.json", 0}, {"deregistration.json", 1}, {"deregistration.json", 1}} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "events", "cascade", f.file))
		if err != nil {
			t.Fatal(err)
		}
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		resp, err := c.HandleStream(t.Context(), ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s: %+v %v", f.file, resp, err)
		}
		if pub.count() != f.events {
			t.Errorf("after %s: %d events, want %d", f.file, pub.count(), f.events)
		}
	}
	if done, err := w.store.Cascaded(t.Context(), "acme", "3f1c2a9e-6b1d-4c4e-9a57-0d2f7e8b9c10"); err != nil || !done {
		t.Errorf("marker: %v %v", done, err)
	}
}

// TestBindingRacingDeregistration: environments created while the space is
// being deregistered either fail (422 space_id) or commit before the
// deregistration, and then the cascade gates them: none is left bound and
// ungated.
func TestBindingRacingDeregistration(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	s, _, err := w.svc.Register(ctx, "acme", space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: w.acct, Config: space.Config{"clusterName": "racing", "region": "eu-west-1"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for i := range 3 { // bound before anything races
		if _, err := w.bindings.CreateEnvironment(ctx, "acme", space.NewEnvironmentInput{Name: fmt.Sprintf("early-%d", i), SpaceID: s.ID}); err != nil {
			t.Fatal(err)
		}
		created++
	}
	for i := range 24 {
		wg.Go(func() {
			_, err := w.bindings.CreateEnvironment(ctx, "acme", space.NewEnvironmentInput{Name: fmt.Sprintf("race-%d", i), SpaceID: s.ID})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case space.KindOf(err) == space.KindInvalid:
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		})
		if i == 12 {
			wg.Go(func() {
				if err := w.svc.Deregister(ctx, "acme", s.ID, 0, "test"); err != nil {
					t.Errorf("deregister: %v", err)
				}
			})
		}
	}
	wg.Wait()
	res, err := (cascade.New(cascade.Cascade{Store: w.store, Events: &publisher{}})).Run(ctx, space.Deregistered{OrgID: "acme", SpaceID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	envs, _, err := w.store.ListEnvironments(ctx, "acme", space.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(envs) != created || res.Gated != created || created+refused != 27 {
		t.Errorf("created %d, refused %d, stored %d, gated %d", created, refused, len(envs), res.Gated)
	}
	for _, e := range envs {
		if e.Gate == nil {
			t.Errorf("environment %s bound to the deregistered space without a gate", e.Name)
		}
	}
	t.Logf("created %d, refused %d", created, refused)
}
