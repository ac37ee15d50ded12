package kubecred

import (
	"context"

	"spaces/shared/space"
)

// Minter mints short-lived credentials for a space's cluster from its cloud
// account. Failures are *space.Error values whose Reason is one of the
// domain's probe reasons (CredentialsUnavailable, ClusterNotFound,
// AccessDenied, CloudUnavailable), so they surface as probe outcomes and API
// problems alike.
type Minter interface {
	Mint(ctx context.Context, s space.Space) (Credentials, error)
	// Invalidate drops any cached credential for the space, after the
	// cluster refused it (401).
	Invalidate(spaceID string)
}
