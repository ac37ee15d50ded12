package provisioning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"spaces/shared/space"
)

// Message is the body of a provisioning queue message: which job, and the
// job version the delivery acts on. A delivery whose version is older than
// the job's is a duplicate (another delivery or a retry moved the job) and
// is dropped, so duplicates never multiply into parallel poll chains.
type Message struct {
	OrgID   string `json:"org_id"`
	JobID   string `json:"job_id"`
	Version int64  `json:"version"`
}

// Encode is the message's JSON body.
func (m Message) Encode() string {
	b, _ := json.Marshal(m) // strings and a number cannot fail
	return string(b)
}

// Store keeps jobs. Every write is conditional.
type Store interface {
	// CreateJob stores a new job, claims its cluster identity among the
	// org's live jobs (KindConflict naming the job holding it) provided no
	// space holds it (KindConflict with ExistingID), and records idem when
	// its Key is set (*ReplayError when the key was used).
	CreateJob(ctx context.Context, j Job, idem Idempotency) error
	GetJob(ctx context.Context, org, id string) (Job, error)
	ListJobs(ctx context.Context, org string, page space.Page) ([]Job, string, error)
	// UpdateJob changes a job (see space.Update); a job leaving the live
	// states for succeeded or canceled releases its identity claim in the
	// same write.
	UpdateJob(ctx context.Context, org, id string, u space.Update[Job]) (space.Updated[Job], error)
	// JobIdempotency reads the unexpired record of an Idempotency-Key.
	JobIdempotency(ctx context.Context, org, key string) (Idempotency, bool, error)
}

// Idempotency ties a job to a client's Idempotency-Key.
type Idempotency struct {
	Key   string `json:"key"`
	Hash  string `json:"hash"`
	JobID string `json:"job_id"`
}

// ReplayError is CreateJob's answer to a key used before.
type ReplayError struct{ Record Idempotency }

func (e *ReplayError) Error() string { return "idempotency key " + e.Record.Key + " was used before" }

// Accounts reads cloud accounts (space.Store does).
type Accounts interface {
	GetAccount(ctx context.Context, org, id string) (space.CloudAccount, error)
}

// Queue sends a job's next delivery.
type Queue interface {
	Enqueue(ctx context.Context, m Message, delay time.Duration) error
}

// Jobs is the API's side of provisioning: create, read, cancel, retry.
type Jobs struct {
	Store    Store
	Accounts Accounts
	Queue    Queue
	Now      func() time.Time
	NewID    func() string
}

// NewJobs returns Jobs on the real clock with random UUIDs.
func NewJobs(store Store, accounts Accounts, q Queue) *Jobs {
	return &Jobs{Store: store, Accounts: accounts, Queue: q, Now: time.Now, NewID: uuid.NewString}
}

// ErrNotFound is the answer for an absent job or another org's.
func ErrNotFound() *space.Error { return space.ErrNotFound(JobNoun) }

// JobNoun is what a job is called in not-found answers.
const JobNoun = "provisioning job"

// Create validates in, checks the cloud account, and stores a queued job
// that the provisioner takes from there. Nothing is stored, queued or asked
// of a cloud for a bad input. The first delivery is sent before the job is
// stored: a crash in between leaves a message that finds no job (dropped),
// never a job that no message drives.
func (js *Jobs) Create(ctx context.Context, org string, in Input, idemKey string) (Job, bool, error) {
	if err := in.Validate(); err != nil {
		return Job{}, false, err
	}
	acct, err := js.Accounts.GetAccount(ctx, org, in.CloudAccountID)
	if space.KindOf(err) == space.KindNotFound || (err == nil && acct.Provider != in.Provider) {
		return Job{}, false, &space.Error{Kind: space.KindInvalid, Message: "the provisioning job is not valid", Fields: []space.FieldError{{
			Field: "cloud_account_id", Reason: "no " + string(in.Provider) + " cloud account with this id in the org"}}}
	}
	if err != nil {
		return Job{}, false, err
	}
	// The same rule as registration: only a verified account is used.
	if !acct.Ready() {
		return Job{}, false, acct.NotReady("cloud_account_id")
	}
	hash := requestHash(in)
	if idemKey != "" {
		if j, replayed, err := js.replay(ctx, org, Idempotency{Key: idemKey, Hash: hash}, nil); replayed || err != nil {
			return j, replayed, err
		}
	}
	now := js.Now().UTC()
	cfg := make(space.Config, len(in.Config))
	for k, v := range in.Config {
		cfg[k] = v
	}
	j := Job{ID: js.NewID(), OrgID: org, Name: in.Name, Provider: in.Provider, CloudAccountID: in.CloudAccountID,
		Config: cfg, Spec: in.Spec, State: Queued, Since: now, Steps: []Step{{State: Queued, At: now}},
		CreatedAt: now, UpdatedAt: now, Version: 1}
	if err := js.Queue.Enqueue(ctx, Message{OrgID: org, JobID: j.ID, Version: j.Version}, 0); err != nil {
		return Job{}, false, err
	}
	err = js.Store.CreateJob(ctx, j, Idempotency{Key: idemKey, Hash: hash, JobID: j.ID})
	var replay *ReplayError
	if errors.As(err, &replay) {
		// A concurrent twin of this request won the key.
		return js.replay(ctx, org, Idempotency{Key: idemKey, Hash: hash}, &replay.Record)
	}
	if err != nil {
		return Job{}, false, err
	}
	return j, false, nil
}

// replay answers a request whose Idempotency-Key names a job: that job as
// it is now, if the request is the same.
func (js *Jobs) replay(ctx context.Context, org string, want Idempotency, rec *Idempotency) (Job, bool, error) {
	if rec == nil {
		r, found, err := js.Store.JobIdempotency(ctx, org, want.Key)
		if err != nil || !found {
			return Job{}, false, err
		}
		rec = &r
	}
	if rec.Hash != want.Hash {
		return Job{}, false, &space.Error{Kind: space.KindInvalid, Message: "the Idempotency-Key was already used for a different request",
			Fields: []space.FieldError{{Field: "Idempotency-Key", Reason: "was used with another request body"}}}
	}
	j, err := js.Store.GetJob(ctx, org, rec.JobID)
	return j, err == nil, err
}

func requestHash(in Input) string {
	b, _ := json.Marshal(in) // strings, maps, slices and ints cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Get returns one of org's jobs.
func (js *Jobs) Get(ctx context.Context, org, id string) (Job, error) {
	if !space.ValidID(id) {
		return Job{}, ErrNotFound()
	}
	return js.Store.GetJob(ctx, org, id)
}

// List pages through org's jobs in id order.
func (js *Jobs) List(ctx context.Context, org string, page space.Page) ([]Job, string, error) {
	return js.Store.ListJobs(ctx, org, page)
}

// Cancel stops a job that has not succeeded (see Cancel).
func (js *Jobs) Cancel(ctx context.Context, org, id string) (Job, error) {
	if !space.ValidID(id) {
		return Job{}, ErrNotFound()
	}
	res, err := js.Store.UpdateJob(ctx, org, id, space.Update[Job]{At: js.Now(),
		Apply: func(j Job) (Job, error) { return Cancel(j, js.Now()) }})
	return res.After, err
}

// Retry sends a failed job back to its failed step and queues it. As at
// creation, the delivery is sent first, for the version the write makes.
func (js *Jobs) Retry(ctx context.Context, org, id string) (Job, error) {
	j, err := js.Get(ctx, org, id)
	if err != nil {
		return Job{}, err
	}
	next, err := Retry(j, js.Now())
	if err != nil {
		return Job{}, err
	}
	if err := js.Queue.Enqueue(ctx, Message{OrgID: org, JobID: id, Version: j.Version + 1}, 0); err != nil {
		return Job{}, err
	}
	res, err := js.Store.UpdateJob(ctx, org, id, space.Update[Job]{At: js.Now(), Read: &j, IfVersion: j.Version,
		Apply: func(Job) (Job, error) { return next, nil }})
	if space.KindOf(err) == space.KindPreconditionFailed {
		return Job{}, space.Errorf(space.KindConflict, "the provisioning job changed meanwhile; read it and retry again if it is still failed")
	}
	return res.After, err
}
