package space

import (
	"context"
	"time"
)

// Store persists spaces and cloud accounts. Implementations make every write
// conditional: a write that would act on a changed or deleted item fails with
// KindPreconditionFailed or KindNotFound instead of overwriting.
type Store interface {
	// CreateAccount stores a new account.
	CreateAccount(ctx context.Context, a CloudAccount) error
	// GetAccount returns a live account of org.
	GetAccount(ctx context.Context, org, id string) (CloudAccount, error)
	// ListAccounts returns org's accounts ordered by id, after the given id.
	ListAccounts(ctx context.Context, org string, page Page) ([]CloudAccount, string, error)
	// DeleteAccount removes an account; KindConflict while a registered space
	// uses it.
	DeleteAccount(ctx context.Context, org, id string) error

	// Register stores s, claims its identity within the org and counts it
	// against its cloud account, atomically. A claimed identity is
	// KindConflict with ExistingID set; a missing account, or one of another
	// provider, is KindInvalid on cloud_account_id. With a non-empty
	// idem.Key the registration is recorded under that key; a replay of the key
	// returns a *ReplayError carrying the first record.
	Register(ctx context.Context, s Space, idem Idempotency) error
	// GetSpace returns a live space of org.
	GetSpace(ctx context.Context, org, id string) (Space, error)
	// ListSpaces returns org's live spaces matching q, ordered by id or by
	// q.Sort, and the position to continue after when more may follow.
	ListSpaces(ctx context.Context, org string, q Query) ([]Space, string, error)
	// UpdateSpace changes a live space's mutable fields (name, status,
	// probe) the one way every versioned item changes (see Update), storing
	// the status transition the change makes, if any, in its history in the
	// same write. The identity, account, type and synthetic flag fixed at
	// registration are never rewritten.
	UpdateSpace(ctx context.Context, org, id string, u Update[Space]) (Updated[Space], error)
	// History reads a space's status history, newest first: at most
	// page.Limit transitions older than the one page.After names, and the
	// key to continue after when more may follow.
	History(ctx context.Context, org, id string, page Page) ([]Transition, string, error)
	// Deregister marks the space deleted at the given time and releases its
	// identity claim, account count and grant, atomically, if its version is
	// version (0: any), and returns it as deregistered; by is who asked
	// (kept for its tombstone). A deregistered space is not found
	// (ErrDeregistered) ever after.
	Deregister(ctx context.Context, org, id string, version int64, at time.Time, by string) (Space, error)
	// Counts returns org's registered spaces counted by status, provider
	// and account, kept exact by Register, UpdateSpace (on a status change
	// only) and Deregister in their own writes.
	Counts(ctx context.Context, org string) (Counts, error)
}

// Page is a bounded, ordered read: at most Limit items after the item whose
// id is After.
type Page struct {
	Limit int
	After string
}

// Query selects spaces. Empty fields match everything; Keep, when set, is
// applied to each candidate after the equality filters.
type Query struct {
	Page
	Provider       Provider
	SpaceType      string
	CloudAccountID string
	// NamePrefix, folded (FoldName), selects by name.
	NamePrefix string
	// Search, the words of a search (SearchWords), keeps the spaces whose
	// names have a word that each begins (MatchesWords); the page is then
	// in the search's order (the word matched, then name), not Sort's.
	Search []string
	// Sort orders the page; with any Sort but the zero one, or a Search,
	// After is the position of the last item returned (the store's,
	// opaque), not an id.
	Sort Sort
	// Selector, the listing's label selector, lets the store read a page
	// under one of its drivers (Selector.Drivers) rather than pass over
	// the spaces it does not match; Keep still checks it on each space.
	Selector Selector
	Keep     func(Space) bool
}

// Idempotency ties a registration to a client's Idempotency-Key: the same key
// with the same request (Hash) yields the first result again; with another
// request it is refused.
type Idempotency struct {
	Key  string
	Hash string
	// Space is the registered space as first answered.
	Space Space
}

// ReplayError is returned by Store.Register when the idempotency key was used
// before; Record is what was stored then.
type ReplayError struct{ Record Idempotency }

func (e *ReplayError) Error() string { return "idempotency key " + e.Record.Key + " was used before" }
