// Package staticminter provides kubecred.Minter implementations for tests
// and the local stack, until the real per-cloud minters are wired in:
// Static hands out fixed credentials (a test cluster's) per space, and
// Unconfigured fails every mint with CredentialsUnavailable.
package staticminter

import (
	"context"
	"sync"

	"spaces/shared/kubecred"
	"spaces/shared/space"
)

// Static mints the credentials registered for a space, from its own map
// or from Lookup. It counts mints and invalidations, which tests read. It is
// safe for concurrent use.
type Static struct {
	// Lookup, when set, is asked for spaces with no registered credentials
	// (for example by cluster name); ok=false is CredentialsUnavailable.
	Lookup func(s space.Space) (kubecred.Credentials, bool)

	mu          sync.Mutex
	creds       map[string]kubecred.Credentials
	fresh       map[string]kubecred.Credentials
	mints       map[string]int
	invalidated map[string]int
}

// Set registers the credentials minted for space id.
func (m *Static) Set(id string, c kubecred.Credentials) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.creds == nil {
		m.creds = map[string]kubecred.Credentials{}
	}
	m.creds[id] = c
}

// SetAfterInvalidate registers the credentials minted for space id once
// Invalidate has been called for it: a token rotation.
func (m *Static) SetAfterInvalidate(id string, c kubecred.Credentials) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fresh == nil {
		m.fresh = map[string]kubecred.Credentials{}
	}
	m.fresh[id] = c
}

// Mint returns the space's credentials.
func (m *Static) Mint(_ context.Context, s space.Space) (kubecred.Credentials, error) {
	m.mu.Lock()
	if m.mints == nil {
		m.mints = map[string]int{}
	}
	m.mints[s.ID]++
	c, ok := m.creds[s.ID]
	if f, rotated := m.fresh[s.ID]; rotated && m.invalidated[s.ID] > 0 {
		c, ok = f, true
	}
	lookup := m.Lookup
	m.mu.Unlock()
	if !ok && lookup != nil {
		c, ok = lookup(s)
	}
	if !ok {
		return kubecred.Credentials{}, &space.Error{Kind: space.KindUnavailable, Reason: space.ReasonCredentialsUnavailable,
			Message: "no credentials configured for space " + s.ID}
	}
	return c, nil
}

// Invalidate counts the invalidation and switches to the credentials set
// with SetAfterInvalidate, if any.
func (m *Static) Invalidate(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.invalidated == nil {
		m.invalidated = map[string]int{}
	}
	m.invalidated[id]++
}

// Mints is how many times credentials were minted for space id.
func (m *Static) Mints(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mints[id]
}

// Invalidations is how many times space id's credentials were invalidated.
func (m *Static) Invalidations(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.invalidated[id]
}

// Unconfigured fails every mint: the local stack has no cloud to mint from.
type Unconfigured struct{}

// Mint fails with CredentialsUnavailable.
func (Unconfigured) Mint(_ context.Context, s space.Space) (kubecred.Credentials, error) {
	return kubecred.Credentials{}, &space.Error{Kind: space.KindUnavailable, Reason: space.ReasonCredentialsUnavailable,
		Message: "no minter configured for " + string(s.Provider) + " locally"}
}

// Invalidate does nothing.
func (Unconfigured) Invalidate(string) {}

var (
	_ kubecred.Minter = (*Static)(nil)
	_ kubecred.Minter = Unconfigured{}
)
