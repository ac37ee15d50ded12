package probing_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/infra/staticminter"
	"spaces/infra/testclock"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/kubeprobe"
	"spaces/shared/metrics"
	"spaces/shared/probing"
	"spaces/shared/space"
)

// clock is a fake clock that only moves when told to.
type clock = testclock.Clock

// newClock starts at the present: history items expire 30 days after their
// time, and the emulator sweeps expired items every 30 s, so a clock in the
// past would lose them in the middle of a test.
func newClock() *clock { return testclock.New(time.Now().UTC().Truncate(time.Second)) }

// clockQueue is the probe queue as SQS would behave on the fake clock: a
// message becomes deliverable DelaySeconds after it was sent.
type clockQueue struct {
	clock *clock
	mu    sync.Mutex
	msgs  []queued
	seq   int
	sent  int
}

type queued struct {
	due time.Time
	seq int
	msg probing.Message
}

func (q *clockQueue) Enqueue(_ context.Context, msgs []probing.Delayed) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for _, m := range msgs {
		q.seq++
		q.sent++
		q.msgs = append(q.msgs, queued{due: now.Add(m.Delay), seq: q.seq, msg: m.Message})
	}
	return nil
}

// due removes and returns the messages deliverable now, oldest first.
func (q *clockQueue) due() []probing.Delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	var out []queued
	keep := q.msgs[:0]
	for _, m := range q.msgs {
		if !m.due.After(now) {
			out = append(out, m)
		} else {
			keep = append(keep, m)
		}
	}
	q.msgs = keep
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	ds := make([]probing.Delivery, len(out))
	for i, m := range out {
		ds[i] = probing.Delivery{MessageID: fmt.Sprint(m.seq), Body: m.msg.Encode(), ReceiveCount: 1}
	}
	return ds
}

// pending is how many spaces the queued messages name.
func (q *clockQueue) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, m := range q.msgs {
		n += len(m.msg.Each())
	}
	return n
}

// one is the result of a delivery of one space.
func one(rs []probing.Result, err error) (probing.Result, error) {
	if len(rs) != 1 {
		return probing.Result{}, fmt.Errorf("%d results, want one (%v)", len(rs), err)
	}
	return rs[0], err
}

// events records published transitions.
type events struct {
	mu  sync.Mutex
	got []space.Transition
}

func (e *events) PublishTransition(_ context.Context, tr space.Transition) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, tr)
	return nil
}

func (e *events) of(id string) []space.Transition {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []space.Transition
	for _, tr := range e.got {
		if tr.SpaceID == id {
			out = append(out, tr)
		}
	}
	return out
}

// harness is the probing pipeline on the emulator with a fake clock.
type harness struct {
	t         testing.TB
	clock     *clock
	store     *dynamostore.Store
	svc       *space.Service
	queue     *clockQueue
	minter    *staticminter.Static
	events    *events
	scheduler *probing.Scheduler
	prober    *probing.Prober
	account   space.CloudAccount
	org       string
	db        *dynamodb.Client
	table     string
	env       *emulatortest.Env
}

func newHarness(t testing.TB, probeTimeout time.Duration) *harness {
	env := emulatortest.Start(t)
	c := newClock()
	db := awsclient.DynamoDB(env.Config, env.Endpoint)
	table := env.Name(t, "SpacesTable")
	store := dynamostore.New(db, table, dynamostore.WithClock(c.Now))
	h := &harness{
		t: t, clock: c, store: store, db: db, table: table, env: env,
		svc:    &space.Service{Store: store, Now: c.Now, NewID: uuid.NewString, StaleAfter: space.DefaultStaleAfter},
		queue:  &clockQueue{clock: c},
		minter: &staticminter.Static{},
		events: &events{},
		org:    "org-" + uuid.NewString()[:8],
	}
	quiet := &metrics.Emitter{Log: discardLogger(), Now: c.Now}
	h.scheduler = probing.NewScheduler(probing.Scheduler{Targets: store, Queue: h.queue, Now: c.Now, Metrics: quiet, Log: discardLogger()})
	h.prober = probing.NewProber(probing.Prober{
		Store: store, Minter: h.minter, Checker: &kubeprobe.Prober{Timeout: probeTimeout, Now: c.Now},
		Events: h.events, Queue: h.queue, Now: c.Now, Timeout: probeTimeout,
		Metrics: quiet, Log: discardLogger(),
	})
	a, err := h.svc.CreateAccount(t.Context(), h.org, space.NewAccountInput{
		Provider: space.AWS, Name: "prod",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"},
	})
	if err != nil {
		t.Fatal(err)
	}
	a.Status, a.Version = space.AccountReady, a.Version+1 // as a verification would
	if err := h.store.SaveAccount(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	h.account = a
	return h
}

// register registers a space for a cluster named name.
func (h *harness) register(name string, synthetic bool) space.Space {
	h.t.Helper()
	s, _, err := h.svc.Register(context.Background(), h.org, space.RegisterInput{
		Provider: space.AWS, SpaceType: space.TypeKubernetes, CloudAccountID: h.account.ID,
		Config: space.Config{"clusterName": name, "region": "us-east-1"}, Synthetic: synthetic,
	}, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// run advances the fake clock second by second until end, ticking the
// scheduler every interval from the first call on and delivering the
// messages due at each second; after each second it calls each(now).
func (h *harness) run(nextTick *time.Time, end time.Time, each func(now time.Time)) {
	h.t.Helper()
	ctx := context.Background()
	for now := h.clock.Now(); !now.After(end); now = h.clock.Now() {
		if !now.Before(*nextTick) {
			if _, err := h.scheduler.Tick(ctx); err != nil {
				h.t.Fatal(err)
			}
			*nextTick = nextTick.Add(space.DefaultProbeInterval)
		}
		for ds := h.queue.due(); len(ds) > 0; ds = h.queue.due() {
			for chunk := range slices.Chunk(ds, 10) {
				if failed := h.prober.HandleBatch(ctx, chunk); len(failed) > 0 {
					h.t.Fatalf("batch items failed: %v", failed)
				}
			}
		}
		if each != nil {
			each(now)
		}
		h.clock.Advance(time.Second)
	}
}

func (h *harness) get(id string) space.Space {
	h.t.Helper()
	s, err := h.store.GetSpace(context.Background(), h.org, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) history(id string) []space.Transition {
	h.t.Helper()
	trs, _, err := h.svc.History(context.Background(), h.org, id, space.Page{Limit: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	return trs
}

// readRaw reads a space item as stored, deleted or not.
func readRaw(t testing.TB, h *harness, id string) space.Space {
	t.Helper()
	out, err := h.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(h.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "ORG#" + h.org},
			"sk": &types.AttributeValueMemberS{Value: "SPACE#" + id},
		},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("read space item %s: %v (found %t)", id, err, out != nil && out.Item != nil)
	}
	var s space.Space
	dec := attributevalue.NewDecoder(func(o *attributevalue.DecoderOptions) { o.TagKey = "json" })
	if err := dec.Decode(&types.AttributeValueMemberM{Value: out.Item}, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// historyItems counts the stored history items of a space.
func historyItems(t testing.TB, h *harness, id string) int {
	t.Helper()
	out, err := h.db.Query(context.Background(), &dynamodb.QueryInput{
		TableName:              aws.String(h.table),
		KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "SPACE#" + id},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
