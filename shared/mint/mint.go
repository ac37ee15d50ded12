// Package mint is the credential minter behind kubecred.Minter: it checks
// the space's kubeauth grant, loads its cloud account, and hands the work to
// the provider's minter (eks, gke, aks), caching each credential until a
// minute before it expires and sharing one mint among concurrent callers.
// It also answers the registration check and the cluster picker, through
// the same provider clients.
package mint

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"spaces/shared/kubecred"
	"spaces/shared/mint/cloud"
	"spaces/shared/space"
)

const (
	// DefaultRefreshBefore renews a cached credential this long before it
	// expires, so a probe never sends a token about to die.
	DefaultRefreshBefore = time.Minute
	// DefaultTimeout bounds one mint, whoever waits for it.
	DefaultTimeout = 10 * time.Second
	// DefaultAccountsFor is how long a cloud account read for one mint
	// serves the mints of its other spaces. An account is shared by many
	// spaces and each space's credential expires (an EKS token every 14
	// minutes), so reading it for every mint was the prober's one steady
	// read of the table per space (BENCHMARKS.md, "Probing on the current
	// tree"); a change of the account (its trust failed, re-verified)
	// reaches the prober's mints within this much.
	DefaultAccountsFor = time.Minute
)

// Provider mints for one cloud.
type Provider interface {
	Mint(ctx context.Context, acct space.CloudAccount, s space.Space) (kubecred.Credentials, error)
	space.ClusterChecker
	space.ClusterLister
}

// Verifier is a Provider that can check a cloud account's trust
// (space.AccountVerifier).
type Verifier interface {
	VerifyAccount(ctx context.Context, acct space.CloudAccount) error
}

// Forgetter is a Provider that caches tokens or sessions of an account:
// Forget drops them, after a cluster refused a credential minted from them.
type Forgetter interface {
	Forget(acct space.CloudAccount)
}

// Grants tells whether credentials may be minted for a space
// (dynamostore.Store.HasGrant).
type Grants interface {
	HasGrant(ctx context.Context, org, spaceID string) (bool, error)
}

// Accounts loads cloud accounts (space.Store.GetAccount).
type Accounts interface {
	GetAccount(ctx context.Context, org, id string) (space.CloudAccount, error)
}

// Minter implements kubecred.Minter, space.ClusterChecker and
// space.ClusterLister. It is safe for concurrent use.
type Minter struct {
	Grants    Grants
	Accounts  Accounts
	Providers map[space.Provider]Provider
	// Trust is who Spaces is to the customers' clouds (the setup shown for
	// each account); the providers present the same identities.
	Trust space.TrustConfig
	// RefreshBefore and Timeout default to DefaultRefreshBefore and
	// DefaultTimeout; Now to time.Now.
	RefreshBefore time.Duration
	Timeout       time.Duration
	Now           func() time.Time
	// AccountsFor defaults to DefaultAccountsFor.
	AccountsFor time.Duration

	flights singleflight.Group
	mu      sync.Mutex
	cache   map[string]entry
	gen     map[string]uint64 // bumped by Invalidate: a mint begun before must not be cached
	accts   map[[2]string]readAccount
}

// readAccount is an account as read, and when.
type readAccount struct {
	acct space.CloudAccount
	at   time.Time
}

type entry struct {
	creds kubecred.Credentials
	acct  space.CloudAccount // what minted it, for Invalidate
	gen   uint64
}

var (
	_ kubecred.Minter       = (*Minter)(nil)
	_ space.ClusterChecker  = (*Minter)(nil)
	_ space.ClusterLister   = (*Minter)(nil)
	_ space.AccountVerifier = (*Minter)(nil)
)

func (m *Minter) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Minter) refreshBefore() time.Duration {
	if m.RefreshBefore > 0 {
		return m.RefreshBefore
	}
	return DefaultRefreshBefore
}

func (m *Minter) timeout() time.Duration {
	if m.Timeout > 0 {
		return m.Timeout
	}
	return DefaultTimeout
}

// Mint returns credentials for the space's cluster: the cached ones while
// they have more than RefreshBefore left, else freshly minted ones. The
// grant is checked on every call, so a deregistered space gets nothing, not
// even from the cache, and no cloud API is called for it.
func (m *Minter) Mint(ctx context.Context, s space.Space) (kubecred.Credentials, error) {
	return m.mintChecked(ctx, s, true)
}

// MintLive is Mint for a caller that has just read s strongly consistent
// and found it registered (the prober): the grant is created and deleted in
// the same transactions that register and deregister the space, so that
// read is the same liveness fact as the grant, and reading the grant again
// would only double the cost of every probe.
func (m *Minter) MintLive(ctx context.Context, s space.Space) (kubecred.Credentials, error) {
	return m.mintChecked(ctx, s, false)
}

func (m *Minter) mintChecked(ctx context.Context, s space.Space, checkGrant bool) (kubecred.Credentials, error) {
	if s.Synthetic {
		return kubecred.Credentials{}, cloud.Errorf(space.ReasonCredentialsUnavailable,
			"the space is synthetic: it is not a real cluster and has no credentials", nil)
	}
	if s.Deleted() {
		m.Invalidate(s.ID)
		return kubecred.Credentials{}, cloud.Errorf(space.ReasonCredentialsUnavailable,
			"the space has no kubeauth grant (it was deregistered)", nil)
	}
	if checkGrant {
		ok, err := m.Grants.HasGrant(ctx, s.OrgID, s.ID)
		if err != nil {
			return kubecred.Credentials{}, cloud.Errorf(space.ReasonCredentialsUnavailable, "the kubeauth grant could not be read", err)
		}
		if !ok {
			m.Invalidate(s.ID)
			return kubecred.Credentials{}, cloud.Errorf(space.ReasonCredentialsUnavailable,
				"the space has no kubeauth grant (it was deregistered)", nil)
		}
	}
	if c, ok := m.cached(s.ID); ok {
		return c, nil
	}
	m.mu.Lock()
	gen := m.gen[s.ID]
	m.mu.Unlock()
	// One mint per space at a time; it runs on its own deadline so that a
	// caller giving up does not fail the others waiting on it.
	ch := m.flights.DoChan(s.ID, func() (any, error) {
		if c, ok := m.cached(s.ID); ok {
			return c, nil
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.timeout())
		defer cancel()
		c, acct, err := m.mint(fctx, s)
		if err != nil {
			return nil, err
		}
		m.store(s.ID, c, acct, gen)
		return c, nil
	})
	select {
	case <-ctx.Done():
		return kubecred.Credentials{}, cloud.Unavailable("mint", ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return kubecred.Credentials{}, r.Err
		}
		return r.Val.(kubecred.Credentials), nil
	}
}

func (m *Minter) mint(ctx context.Context, s space.Space) (kubecred.Credentials, space.CloudAccount, error) {
	acct, p, err := m.account(ctx, s.OrgID, s.CloudAccountID, s.Provider)
	if err != nil {
		return kubecred.Credentials{}, acct, err
	}
	c, err := p.Mint(ctx, acct, s)
	if err != nil {
		return kubecred.Credentials{}, acct, classify(err)
	}
	if err := c.Validate(); err != nil {
		return kubecred.Credentials{}, acct, cloud.Errorf(space.ReasonCloudUnavailable, "the cloud returned unusable credentials", err)
	}
	return c, acct, nil
}

// account loads the account and its provider's minter.
func (m *Minter) account(ctx context.Context, org, id string, want space.Provider) (space.CloudAccount, Provider, error) {
	acct, err := m.readAccount(ctx, org, id)
	if err != nil {
		if space.KindOf(err) == space.KindNotFound {
			return space.CloudAccount{}, nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "the cloud account is gone", err)
		}
		return space.CloudAccount{}, nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "the cloud account could not be read", err)
	}
	if want != "" && acct.Provider != want {
		return space.CloudAccount{}, nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "the cloud account is for another provider", nil)
	}
	if !acct.CanMint() {
		return space.CloudAccount{}, nil, cloud.Errorf(space.ReasonCredentialsUnavailable,
			"the cloud account is "+string(acct.Status)+": its trust must be verified again (POST /cloud-accounts/"+acct.ID+"/verify)", nil)
	}
	p, ok := m.Providers[acct.Provider]
	if !ok {
		return space.CloudAccount{}, nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "no minter is configured for "+string(acct.Provider), nil)
	}
	return acct, p, nil
}

// readAccount reads the account, or reuses one read less than AccountsFor
// ago (DefaultAccountsFor).
func (m *Minter) readAccount(ctx context.Context, org, id string) (space.CloudAccount, error) {
	key, now := [2]string{org, id}, m.now()
	ttl := m.AccountsFor
	if ttl <= 0 {
		ttl = DefaultAccountsFor
	}
	m.mu.Lock()
	r, ok := m.accts[key]
	m.mu.Unlock()
	if ok && now.Sub(r.at) < ttl && !now.Before(r.at) {
		return r.acct, nil
	}
	acct, err := m.Accounts.GetAccount(ctx, org, id)
	if err != nil {
		return acct, err
	}
	m.mu.Lock()
	if m.accts == nil {
		m.accts = map[[2]string]readAccount{}
	}
	m.accts[key] = readAccount{acct: acct, at: now}
	m.mu.Unlock()
	return acct, nil
}

// classify keeps the providers' domain errors and turns anything else into
// CloudUnavailable.
func classify(err error) error {
	var de *space.Error
	if errors.As(err, &de) && de.Reason != "" {
		return de
	}
	return cloud.Unavailable("mint", err)
}

func (m *Minter) cached(id string) (kubecred.Credentials, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.cache[id]
	if !ok {
		return kubecred.Credentials{}, false
	}
	if e.creds.Expired(m.now().Add(m.refreshBefore())) {
		delete(m.cache, id)
		return kubecred.Credentials{}, false
	}
	return e.creds, true
}

// store caches c unless Invalidate ran since the mint began, or c has no
// known expiry (a credential is never cached without one).
func (m *Minter) store(id string, c kubecred.Credentials, acct space.CloudAccount, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen[id] != gen {
		return
	}
	if m.cache == nil {
		m.cache = map[string]entry{}
	}
	if c.ExpiresAt.IsZero() {
		// Never served from the cache; kept only so Invalidate can reach
		// the provider's caches.
		c.ExpiresAt = m.now()
	}
	m.cache[id] = entry{creds: c, acct: acct, gen: gen}
}

// Invalidate drops the cached credential of the space, and the provider's
// cached tokens or session it came from; the next Mint asks the cloud again.
func (m *Minter) Invalidate(spaceID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.cache[spaceID]; ok {
		if f, ok := m.Providers[e.acct.Provider].(Forgetter); ok {
			f.Forget(e.acct)
		}
	}
	delete(m.cache, spaceID)
	// A refused credential may come of a changed account: read it again.
	clear(m.accts)
	if m.gen == nil {
		m.gen = map[string]uint64{}
	}
	m.gen[spaceID]++
	m.flights.Forget(spaceID)
}

// CheckCluster asks the cloud whether the space's cluster exists in the
// account (registration), and answers where it runs and its version as the
// cloud's answer says them. A missing cluster is a 422 on config.clusterName
// with the cloud's message.
func (m *Minter) CheckCluster(ctx context.Context, acct space.CloudAccount, s space.Space) (space.ClusterFacts, error) {
	if !acct.Ready() {
		return space.ClusterFacts{}, acct.NotReady("cloud_account_id")
	}
	p, ok := m.Providers[acct.Provider]
	if !ok {
		return space.ClusterFacts{}, cloud.Errorf(space.ReasonCredentialsUnavailable, "no minter is configured for "+string(acct.Provider), nil)
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	facts, err := p.CheckCluster(ctx, acct, s)
	if err != nil {
		return space.ClusterFacts{}, cloud.NotFound(classify(err))
	}
	return facts, nil
}

// ListClusters lists the clusters the account can see.
func (m *Minter) ListClusters(ctx context.Context, acct space.CloudAccount, region string) ([]space.DiscoveredCluster, error) {
	if !acct.Ready() {
		return nil, acct.NotReady("")
	}
	p, ok := m.Providers[acct.Provider]
	if !ok {
		return nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "no minter is configured for "+string(acct.Provider), nil)
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	list, err := p.ListClusters(ctx, acct, region)
	if err != nil {
		return nil, classify(err)
	}
	return list, nil
}

// VerifyAccount asks the account's cloud whether it trusts the org's
// identity, and only it (space.AccountVerifier): the provider's own check,
// through the same sessions and tokens the prober uses.
func (m *Minter) VerifyAccount(ctx context.Context, acct space.CloudAccount) error {
	p, ok := m.Providers[acct.Provider].(Verifier)
	if !ok {
		return cloud.Errorf(space.ReasonCredentialsUnavailable, "no verifier is configured for "+string(acct.Provider), nil)
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	if err := p.VerifyAccount(ctx, acct); err != nil {
		return classify(err)
	}
	return nil
}

var _ space.ClusterCreator = (*Minter)(nil)

// StartCreate starts a cluster's creation in the account's cloud, as the
// account's identity (space.ClusterCreator), through its provider.
func (m *Minter) StartCreate(ctx context.Context, acct space.CloudAccount, cfg space.Config, spec space.ClusterSpec, token string) (space.CreateProgress, error) {
	c, err := m.creator(acct)
	if err != nil {
		return space.CreateProgress{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	p, err := c.StartCreate(ctx, acct, cfg, spec, token)
	if err != nil {
		return space.CreateProgress{}, classify(err)
	}
	return p, nil
}

// Advance polls a creation and starts its next stage (space.ClusterCreator).
func (m *Minter) Advance(ctx context.Context, acct space.CloudAccount, cfg space.Config, spec space.ClusterSpec, token string, op space.CloudOperation) (space.CreateProgress, error) {
	c, err := m.creator(acct)
	if err != nil {
		return space.CreateProgress{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	p, err := c.Advance(ctx, acct, cfg, spec, token, op)
	if err != nil {
		return space.CreateProgress{}, classify(err)
	}
	return p, nil
}

// creator is the account's provider as a creator; only ready accounts
// create, as only they register.
func (m *Minter) creator(acct space.CloudAccount) (space.ClusterCreator, error) {
	if !acct.Ready() {
		return nil, acct.NotReady("cloud_account_id")
	}
	c, ok := m.Providers[acct.Provider].(space.ClusterCreator)
	if !ok {
		return nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "no cluster creator is configured for "+string(acct.Provider), nil)
	}
	return c, nil
}
