package provisioning

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"spaces/shared/space"
)

// memStore keeps jobs in memory with the store's versioned writes.
type memStore struct {
	mu   sync.Mutex
	jobs map[string]Job
	// failWrites makes the next writes fail as an unreachable table.
	failWrites int
}

func (m *memStore) CreateJob(_ context.Context, j Job, _ Idempotency) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.jobs == nil {
		m.jobs = map[string]Job{}
	}
	m.jobs[j.ID] = j
	return nil
}

func (m *memStore) GetJob(_ context.Context, _, id string) (Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		return Job{}, ErrNotFound()
	}
	return j, nil
}

func (m *memStore) ListJobs(context.Context, string, space.Page) ([]Job, string, error) {
	return nil, "", nil
}

func (m *memStore) JobIdempotency(context.Context, string, string) (Idempotency, bool, error) {
	return Idempotency{}, false, nil
}

func (m *memStore) UpdateJob(ctx context.Context, org, id string, u space.Update[Job]) (space.Updated[Job], error) {
	return space.Run(ctx, JobVersioned, u, func(ctx context.Context) (Job, error) { return m.GetJob(ctx, org, id) },
		func(_ context.Context, before, after Job) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.failWrites > 0 {
				m.failWrites--
				return &space.Error{Kind: space.KindUnavailable, Message: "the registry store is unavailable"}
			}
			if m.jobs[id].Version != before.Version {
				return space.ErrChanged("provisioning job", m.jobs[id].Version, before.Version)
			}
			m.jobs[id] = after
			return nil
		})
}

type recorder struct {
	mu        sync.Mutex
	sent      []Message
	postponed int
	published []Job
	regs      map[string]string // idempotency key → space id
	registers int
	probes    int
}

func (r *recorder) Enqueue(_ context.Context, m Message, _ time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, m)
	return nil
}

func (r *recorder) Postpone(context.Context, string, time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.postponed++
	return nil
}

func (r *recorder) PublishJob(_ context.Context, j Job) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.published = append(r.published, j)
	return nil
}

// Register registers once per key, replaying after, as the store does.
func (r *recorder) Register(_ context.Context, _ string, _ space.RegisterInput, key string) (space.Space, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registers++
	if r.regs == nil {
		r.regs = map[string]string{}
	}
	if id, ok := r.regs[key]; ok {
		return space.Space{ID: id}, true, nil
	}
	r.regs[key] = "5d1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f"
	return space.Space{ID: r.regs[key]}, false, nil
}

func (r *recorder) ProbeRegistered(context.Context, space.Space) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probes++
	return nil
}

type readyAccounts struct{}

func (readyAccounts) GetAccount(_ context.Context, org, id string) (space.CloudAccount, error) {
	return space.CloudAccount{ID: id, OrgID: org, Provider: space.AWS, Status: space.AccountReady}, nil
}

// oneCluster is a cloud whose creation is ready at the first poll; it
// counts calls and the tokens it saw.
type oneCluster struct {
	mu            sync.Mutex
	starts, polls int
	tokens        map[string]bool
}

func (c *oneCluster) StartCreate(_ context.Context, _ space.CloudAccount, _ space.Config, _ space.ClusterSpec, token string) (space.CreateProgress, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts++
	if c.tokens == nil {
		c.tokens = map[string]bool{}
	}
	c.tokens[token] = true
	return space.CreateProgress{Operation: space.CloudOperation{Stage: "cluster", ID: "c1"}, Status: "CREATING"}, nil
}

func (c *oneCluster) Advance(context.Context, space.CloudAccount, space.Config, space.ClusterSpec, string, space.CloudOperation) (space.CreateProgress, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.polls++
	return space.CreateProgress{Operation: space.CloudOperation{Stage: "nodegroup", ID: "c1"}, Status: "ACTIVE", Done: true}, nil
}

func newTestProvisioner(store *memStore, rec *recorder, cloud *oneCluster) *Provisioner {
	return NewProvisioner(Provisioner{Store: store, Accounts: readyAccounts{}, Creator: cloud, Spaces: rec, Probes: rec,
		Events: rec, Queue: rec, Redeliver: rec, Policy: Policy{PollInterval: time.Second}, MaxReceives: 5,
		Now: func() time.Time { return t0 }, Log: slog.New(slog.DiscardHandler)})
}

func delivery(j Job, version int64, receives int) Delivery {
	return Delivery{MessageID: "m", ReceiptHandle: "h", Body: Message{OrgID: j.OrgID, JobID: j.ID, Version: version}.Encode(), ReceiveCount: receives}
}

// TestEveryStepDeliveredTwice: each step's message is delivered twice,
// the second time after the first was handled and once more at the same
// time as it; the cloud creates once, the space is registered once (the
// replay of its key), each version sends exactly one next message, and the
// end is announced.
func TestEveryStepDeliveredTwice(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		store, rec, cloud := &memStore{}, &recorder{}, &oneCluster{}
		j := newJob()
		_ = store.CreateJob(t.Context(), j, Idempotency{})
		p := newTestProvisioner(store, rec, cloud)
		for version := int64(1); ; version++ {
			d := delivery(j, version, 1)
			if concurrent {
				var wg sync.WaitGroup
				for range 2 {
					wg.Go(func() {
						if !p.Step(t.Context(), d) {
							t.Errorf("version %d: a concurrent delivery was not acknowledged", version)
						}
					})
				}
				wg.Wait()
			} else if first := p.Step(t.Context(), d); !first || !p.Step(t.Context(), d) {
				t.Fatalf("version %d: a delivery was not acknowledged", version)
			}
			cur, _ := store.GetJob(t.Context(), j.OrgID, j.ID)
			if cur.State.Terminal() {
				if cur.State != Succeeded || cur.SpaceID == "" {
					t.Fatalf("concurrent=%v: job ended %s %+v", concurrent, cur.State, cur.Failure)
				}
				break
			}
			if cur.Version != version+1 {
				t.Fatalf("concurrent=%v: version %d after delivering %d", concurrent, cur.Version, version)
			}
		}
		if len(cloud.tokens) != 1 || !cloud.tokens[j.ID] {
			t.Errorf("concurrent=%v: the cloud saw tokens %v; want the job id only", concurrent, cloud.tokens)
		}
		if len(rec.regs) != 1 {
			t.Errorf("concurrent=%v: %d spaces registered", concurrent, len(rec.regs))
		}
		// One next message per step that has one: queued, creating,
		// waiting-ready; a duplicate that lost its write sent one too, at
		// most once per version.
		seen := map[int64]int{}
		for _, m := range rec.sent {
			seen[m.Version]++
		}
		for v := int64(2); v <= 4; v++ {
			if seen[v] < 1 || (!concurrent && seen[v] != 1) {
				t.Errorf("concurrent=%v: %d messages for version %d", concurrent, seen[v], v)
			}
		}
		if len(rec.published) < 1 || rec.published[0].State != Succeeded {
			t.Errorf("concurrent=%v: published %v", concurrent, rec.published)
		}
		if !concurrent && (cloud.starts != 1 || cloud.polls != 1 || rec.registers != 1 || rec.probes != 1) {
			t.Errorf("sequential duplicates reached the cloud %d+%d times, registered %d, probed %d; want once each",
				cloud.starts, cloud.polls, rec.registers, rec.probes)
		}
	}
}

// TestPoisonFailsTheJob: the last receive SQS makes before the
// dead-letter queue fails the job (retryable) and announces it, instead of
// leaving it stuck; a failure to save is reported back for redelivery.
func TestPoisonFailsTheJob(t *testing.T) {
	store, rec, cloud := &memStore{}, &recorder{}, &oneCluster{}
	j := newJob()
	j.State, j.Version = WaitingReady, 3
	j.Operation = &space.CloudOperation{Stage: "cluster", ID: "c1"}
	_ = store.CreateJob(t.Context(), j, Idempotency{})
	p := newTestProvisioner(store, rec, cloud)
	store.failWrites = 1
	if p.Step(t.Context(), delivery(j, 3, 4)) {
		t.Fatal("a delivery whose write failed was acknowledged")
	}
	if !p.Step(t.Context(), delivery(j, 3, 5)) {
		t.Fatal("the last delivery was not acknowledged")
	}
	got, _ := store.GetJob(t.Context(), j.OrgID, j.ID)
	if got.State != Failed || got.Failure.Reason != ReasonStepKeptFailing || !got.Failure.Retryable || got.Failure.Step != WaitingReady {
		t.Errorf("job after the last receive: %s %+v", got.State, got.Failure)
	}
	if n := len(rec.published); n < 1 || rec.published[n-1].State != Failed {
		t.Errorf("published %v", rec.published)
	}
	if cloud.polls != 1 {
		t.Errorf("the cloud was polled %d times; want once (the 4th receive), not on the poisoned one", cloud.polls)
	}
}

// TestDeliveriesOutOfOrder: a delivery for a version not yet written (it
// ran ahead of its write) is postponed, then dropped once the write can no
// longer be coming; one for an absent job likewise; a malformed body is
// dropped at once.
func TestDeliveriesOutOfOrder(t *testing.T) {
	store, rec, cloud := &memStore{}, &recorder{}, &oneCluster{}
	j := newJob()
	p := newTestProvisioner(store, rec, cloud)
	if p.Step(t.Context(), delivery(j, 1, 1)) || rec.postponed != 1 {
		t.Fatal("a delivery for an absent job was not postponed")
	}
	if !p.Step(t.Context(), delivery(j, 1, NotFoundReceives)) {
		t.Fatal("a delivery for a job never stored was not dropped")
	}
	_ = store.CreateJob(t.Context(), j, Idempotency{})
	if p.Step(t.Context(), delivery(j, 2, 1)) || rec.postponed != 2 {
		t.Fatal("a delivery ahead of its write was not postponed")
	}
	if !p.Step(t.Context(), delivery(j, 2, NotFoundReceives)) {
		t.Fatal("a delivery for a version never written was not dropped")
	}
	if !p.Step(t.Context(), Delivery{Body: "{not json"}) || !p.Step(t.Context(), Delivery{Body: `{"org_id":"a","job_id":"x","version":1}`}) {
		t.Fatal("malformed messages were not dropped")
	}
	if got, _ := store.GetJob(t.Context(), j.OrgID, j.ID); got.Version != 1 || cloud.starts != 0 || len(rec.sent) != 0 {
		t.Errorf("out-of-order deliveries changed the job (version %d), called the cloud %d times or sent %d", got.Version, cloud.starts, len(rec.sent))
	}
}

// TestRetryMessageAheadOfItsWrite: a retry sends its message before the
// write that takes the job out of failed; the message arriving first is
// postponed, not dropped as if the job were over, and runs the step once
// the write has landed.
func TestRetryMessageAheadOfItsWrite(t *testing.T) {
	store, rec, cloud := &memStore{}, &recorder{}, &oneCluster{}
	j := newJob()
	j, _ = Next(j, Outcome{}, t0, Policy{})
	j.Version = 2
	j, _ = Next(j, refusedOut, t0, Policy{})
	j.Version = 3
	_ = store.CreateJob(t.Context(), j, Idempotency{})
	p := newTestProvisioner(store, rec, cloud)
	if p.Step(t.Context(), delivery(j, 4, 1)) || rec.postponed != 1 {
		t.Fatal("the retry's message was not postponed while the job still read failed")
	}
	jobs := &Jobs{Store: store, Queue: rec, Now: func() time.Time { return t0 }}
	if _, err := jobs.Retry(t.Context(), j.OrgID, j.ID); err != nil {
		t.Fatal(err)
	}
	if !p.Step(t.Context(), delivery(j, 4, 2)) || cloud.starts != 1 {
		t.Fatalf("the retried step did not run: %d creates", cloud.starts)
	}
	if got, _ := store.GetJob(t.Context(), j.OrgID, j.ID); got.State != WaitingReady || got.Version != 5 {
		t.Errorf("job after the retried step: %s at %d", got.State, got.Version)
	}
	// A message for a failed job at its own version (a late one) is over.
	if !p.Step(t.Context(), delivery(j, 3, 1)) {
		t.Error("a stale message was not dropped")
	}
}
