package space

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"time"

	"github.com/google/uuid"
)

// Service is the registry's use cases, independent of transport and storage.
type Service struct {
	Store Store
	Now   func() time.Time
	NewID func() string
	// StaleAfter is how old a stored probe may be before the status is
	// reported as unknown (ProbeStale). Zero disables the check.
	StaleAfter time.Duration
	// Clusters checks that a cluster exists in its cloud account before it is
	// registered; nil skips the check.
	Clusters ClusterChecker
	// Verifier checks a cloud account's trust (nil: no cloud is reachable,
	// accounts stay pending); Trust is what the customer is told to trust.
	Verifier AccountVerifier
	Trust    TrustConfig
}

// Register validates in and registers the cluster for org. With an
// idempotency key, a retry of the same request returns the first answer
// (replayed=true) and a different request under the same key is refused.
func (svc *Service) Register(ctx context.Context, org string, in RegisterInput, idemKey string) (s Space, replayed bool, err error) {
	if err := in.Validate(); err != nil {
		return Space{}, false, err
	}
	hash := requestHash(in)
	s = NewSpace(svc.NewID(), org, in, svc.Now().UTC())
	facts, err := CheckRegistration(ctx, svc.Store, svc.Clusters, s)
	if err != nil {
		return Space{}, false, err
	}
	s.Location, s.KubernetesVersion = facts.Location, facts.KubernetesVersion
	// The replay answers exactly what the first request answered.
	if err := svc.Store.Register(ctx, s, Idempotency{Key: idemKey, Hash: hash, Space: svc.observe(s)}); err != nil {
		var replay *ReplayError // only on this path: errors.As moves it to the heap
		if !errors.As(err, &replay) {
			return Space{}, false, err
		}
		if replay.Record.Hash != hash {
			return Space{}, false, &Error{Kind: KindInvalid, Message: "the Idempotency-Key was already used for a different request",
				Fields: []FieldError{{Field: "Idempotency-Key", Reason: "was used with another request body"}}}
		}
		// A replay must not hand out a space that is gone: the client would
		// act on a 201 whose space answers 404.
		if _, err := svc.Store.GetSpace(ctx, org, replay.Record.Space.ID); KindOf(err) == KindNotFound {
			return Space{}, false, &Error{Kind: KindConflict, Reason: GateSpaceDeregistered,
				Message: "the space registered under this Idempotency-Key has been deregistered; register again with a new key",
				Fields:  []FieldError{{Field: "Idempotency-Key", Reason: "names a registration whose space was deregistered"}}}
		} else if err != nil {
			return Space{}, false, err
		}
		return replay.Record.Space, true, nil
	}
	return svc.observe(s), false, nil
}

// requestHash fingerprints a registration request for idempotency checks.
func requestHash(in RegisterInput) string {
	b, _ := json.Marshal(in) // a struct of strings, a map and a bool cannot fail
	sum := sha256.Sum256(b)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// Get returns one of org's live spaces as observed now.
func (svc *Service) Get(ctx context.Context, org, id string) (Space, error) {
	if !ValidID(id) {
		return Space{}, ErrNotFound("space")
	}
	s, err := svc.Store.GetSpace(ctx, org, id)
	if err != nil {
		return Space{}, err
	}
	return svc.observe(s), nil
}

// ListFilter narrows a listing; zero values match everything.
type ListFilter struct {
	Provider       Provider
	Status         Status
	SpaceType      string
	CloudAccountID string
	Picker         Picker
	// NamePrefix searches names, ignoring case; Search searches them by
	// word prefix (SearchWords, in its own order, without Sort); Sort
	// orders the listing (id order when empty).
	NamePrefix string
	Search     string
	Sort       Sort
	// Selector keeps the spaces whose labels it matches.
	Selector Selector
	// Synthetic, when set, keeps only the synthetic spaces (true) or only
	// the others (false).
	Synthetic *bool
	// Version keeps the spaces whose current version (CurrentVersion) is
	// of this "major.minor" (ValidMinor).
	Version string
	// SupportEndsWithinDays and CertificateExpiresWithinDays, when set,
	// keep the spaces for which Space.SupportEndsWithin and
	// Space.CertificateExpiresWithin hold at the time of the listing.
	SupportEndsWithinDays        *int
	CertificateExpiresWithinDays *int
}

// ValidMinor reports whether v is a "major.minor" version such as "1.31",
// what the version filter takes.
func ValidMinor(v string) bool { return minorRE.MatchString(v) }

// List pages through org's live spaces matching f, as observed now, so that
// status filters and pickers see stale statuses as unknown.
func (svc *Service) List(ctx context.Context, org string, f ListFilter, page Page) ([]Space, string, error) {
	now := svc.Now()
	keep := func(s Space) bool {
		o := s.Observed(now, svc.StaleAfter)
		if f.Status != "" && o.Status != f.Status {
			return false
		}
		if f.Synthetic != nil && s.Synthetic != *f.Synthetic {
			return false
		}
		// Here rather than as a DynamoDB FilterExpression: a Query costs
		// the same read units with or without one ("a Query consumes the
		// same amount of read capacity, regardless of whether a filter
		// expression is present",
		// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.FilterExpression.html).
		if !f.Selector.Matches(s.Labels) {
			return false
		}
		if f.Version != "" && s.MinorVersion() != f.Version {
			return false
		}
		if f.SupportEndsWithinDays != nil && !s.SupportEndsWithin(now, *f.SupportEndsWithinDays) {
			return false
		}
		if f.CertificateExpiresWithinDays != nil && !s.CertificateExpiresWithin(now, *f.CertificateExpiresWithinDays) {
			return false
		}
		return f.Picker == "" || f.Picker.Allows(o)
	}
	items, next, err := svc.Store.ListSpaces(ctx, org, Query{
		Page: page, Provider: f.Provider, SpaceType: f.SpaceType, CloudAccountID: f.CloudAccountID, Keep: keep,
		NamePrefix: FoldName(f.NamePrefix), Search: SearchWords(f.Search), Sort: f.Sort, Selector: f.Selector,
	})
	for i := range items {
		items[i] = items[i].Observed(now, svc.StaleAfter)
	}
	return items, next, err
}

// SetStatus applies a status reported by an internal caller, if the space is
// still at version (optimistic concurrency; 0 means any version).
func (svc *Service) SetStatus(ctx context.Context, org, id string, version int64, status Status, reason string) (Space, error) {
	var fe fieldErrors
	if !status.Valid() {
		fe.add("status", "must be one of active, inactive, unknown")
	}
	checkText(&fe, "reason", reason, 256)
	if err := fe.err("the status update is not valid"); err != nil {
		return Space{}, err
	}
	if !ValidID(id) {
		return Space{}, ErrNotFound("space")
	}
	now := svc.Now().UTC()
	res, err := svc.Store.UpdateSpace(ctx, org, id, Update[Space]{IfVersion: version, At: now,
		Apply: func(s Space) (Space, error) { next, _ := ApplyManual(s, status, reason, now); return next, nil }})
	if err != nil {
		return Space{}, err
	}
	return svc.observe(res.After), nil
}

// SetLabels replaces a space's labels, if it is still at version (0: any),
// as one versioned change; the same labels again write nothing.
func (svc *Service) SetLabels(ctx context.Context, org, id string, version int64, labels Labels) (Space, error) {
	if err := ValidateLabels(labels); err != nil {
		return Space{}, err
	}
	if !ValidID(id) {
		return Space{}, ErrNotFound("space")
	}
	res, err := svc.Store.UpdateSpace(ctx, org, id, Update[Space]{IfVersion: version, At: svc.Now().UTC(),
		Apply: func(s Space) (Space, error) {
			if maps.Equal(s.Labels, labels) {
				return s, ErrUnchanged
			}
			s.Labels = cloneLabels(labels)
			return s, nil
		}})
	if err != nil {
		return Space{}, err
	}
	return svc.observe(res.After), nil
}

// Deregister soft-deletes one of org's spaces; version 0 means any version;
// by (the caller's subject) is kept on its tombstone.
func (svc *Service) Deregister(ctx context.Context, org, id string, version int64, by string) error {
	if !ValidID(id) {
		return ErrNotFound("space")
	}
	_, err := svc.Store.Deregister(ctx, org, id, version, svc.Now().UTC(), by)
	return err
}

func (svc *Service) observe(s Space) Space { return s.Observed(svc.Now(), svc.StaleAfter) }

// NewService returns a Service on the real clock with random UUIDs.
func NewService(store Store, staleAfter time.Duration) *Service {
	return &Service{Store: store, Now: time.Now, NewID: uuid.NewString, StaleAfter: staleAfter}
}
