package space

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Connectivity is how Spaces reaches a space's API server: directly from
// its functions (the prober's GET /version, client-go for namespaces and
// revisions), or through an agent inside the cluster that connects out,
// for clusters whose API server is private.
type Connectivity string

const (
	// Direct is the default: Spaces calls the API server.
	Direct Connectivity = "direct"
	// ViaAgent: the agent calls Spaces; its lease is the space's status.
	ViaAgent Connectivity = "agent"
)

// Connectivities lists every mode.
var Connectivities = []Connectivity{Direct, ViaAgent}

func (c Connectivity) Valid() bool { return slices.Contains(Connectivities, c) }

// Agent reasons, reported like the probe's.
const (
	// ReasonAgentNotConnected: no lease yet; the status stays unknown.
	ReasonAgentNotConnected = "AgentNotConnected"
	// ReasonAgentLeaseExpired: the agent missed one or more lease
	// renewals; FailureThreshold missed intervals make the space inactive.
	ReasonAgentLeaseExpired = "AgentLeaseExpired"
)

// Agent timing. The lease interval is what Spaces tells the agent; a
// renewal later than one interval plus LeaseGrace counts as one missed
// interval, and FailureThreshold missed intervals make the space inactive.
// With the prober's minute tick an agent that stops is seen inactive
// within 3 × 35 s + 5 s + 60 s = 170 s of its last renewal, inside the
// 180 s the agent mode promises; a blip of 20 s costs at most one missed
// interval.
const (
	LeaseInterval = 35 * time.Second
	LeaseGrace    = 5 * time.Second
	// BootstrapTTL bounds a bootstrap token's life: an hour at most.
	BootstrapTTL = time.Hour
	// AgentCredentialTTL is an agent credential's life; the agent renews
	// it at half-life, so a day of Spaces being unreachable is survived.
	AgentCredentialTTL = 24 * time.Hour
	// RenewOverlap is how long a renewed credential still works, so that
	// a renewal whose answer was lost can be retried.
	RenewOverlap = time.Hour
)

// Token kinds: the prefix tells which secret a caller presents, so that a
// credential is never tried as a bootstrap token or the other way round.
const (
	bootstrapPrefix  = "spb1."
	credentialPrefix = "spa1."
)

// AgentToken is a parsed bootstrap token or agent credential:
// <prefix><space id>.<secret>. The space id is not secret; it names the
// one item the secret's hash is compared with, so no index is needed.
type AgentToken struct {
	SpaceID string
	Raw     string
}

// Hash is what is stored: SHA-256 of the whole token. The secret is 256
// random bits, so a plain hash is enough (no password stretching).
func (t AgentToken) Hash() string {
	sum := sha256.Sum256([]byte(t.Raw))
	return hex.EncodeToString(sum[:])
}

// SameHash compares a stored hash with t's in constant time.
func (t AgentToken) SameHash(stored string) bool {
	return stored != "" && subtle.ConstantTimeCompare([]byte(stored), []byte(t.Hash())) == 1
}

// NewBootstrapToken and NewAgentCredential mint a fresh secret for spaceID.
func NewBootstrapToken(spaceID string) AgentToken  { return newToken(bootstrapPrefix, spaceID) }
func NewAgentCredential(spaceID string) AgentToken { return newToken(credentialPrefix, spaceID) }

func newToken(prefix, spaceID string) AgentToken {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return AgentToken{SpaceID: spaceID, Raw: prefix + spaceID + "." + base64.RawURLEncoding.EncodeToString(b)}
}

// ParseBootstrapToken and ParseAgentCredential read a presented token;
// anything malformed is KindUnauthenticated, with no detail of which part.
func ParseBootstrapToken(raw string) (AgentToken, error) { return parseToken(bootstrapPrefix, raw) }
func ParseAgentCredential(raw string) (AgentToken, error) {
	return parseToken(credentialPrefix, raw)
}

func parseToken(prefix, raw string) (AgentToken, error) {
	rest, ok := strings.CutPrefix(raw, prefix)
	if !ok || len(raw) > 200 {
		return AgentToken{}, errAgentAuth
	}
	id, secret, ok := strings.Cut(rest, ".")
	if !ok || !ValidID(id) || len(secret) != 43 {
		return AgentToken{}, errAgentAuth
	}
	if _, err := base64.RawURLEncoding.DecodeString(secret); err != nil {
		return AgentToken{}, errAgentAuth
	}
	return AgentToken{SpaceID: id, Raw: raw}, nil
}

// errAgentAuth is the one answer to any refused agent secret: callers
// cannot tell a wrong, expired, used or revoked one apart.
var errAgentAuth = &Error{Kind: KindUnauthenticated, Reason: "invalid_token",
	Message: "the agent token is not valid (malformed, expired, already used, or its space is deregistered)"}

// ErrAgentAuth returns the refusal, with an internal cause for the log.
func ErrAgentAuth(cause error) error {
	e := *errAgentAuth
	e.Err = cause
	return &e
}

// Bootstrap is what registering (or re-issuing) hands the installer once.
type Bootstrap struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// AgentCredential is what an exchange or a renewal answers the agent.
type AgentCredential struct {
	Credential string    `json:"credential"`
	ExpiresAt  time.Time `json:"expires_at"`
	SpaceID    string    `json:"space_id"`
	// LeaseIntervalSeconds is the cadence of lease renewals.
	LeaseIntervalSeconds int `json:"lease_interval_seconds"`
	// Presence is the stack's MQTT presence channel (presence.go); absent
	// when the stack has none, and the agent renews every interval.
	Presence *PresenceEndpoint `json:"presence,omitempty"`
	// TokenSignature is the signature of this credential's PresenceToken,
	// which the agent presents on each MQTT CONNECT; absent when the
	// authorizer does not sign.
	TokenSignature string `json:"token_signature,omitempty"`
}

// ClusterBinding names the cluster an agent runs in: its kube-system
// namespace's UID and the SHA-256 of its API server's CA certificate (DER,
// hex). The exchange stores it, and every later lease must carry the same
// (ErrClusterMismatch otherwise), so that a copied credential is refused
// from another cluster. A CA rotation needs a new bootstrap.
type ClusterBinding struct {
	KubeSystemUID string `json:"kube_system_uid"`
	CASHA256      string `json:"ca_sha256"`
}

// Key is the binding as stored ("" for none).
func (b *ClusterBinding) Key() string {
	if b == nil {
		return ""
	}
	return b.KubeSystemUID + "/" + b.CASHA256
}

var caSHA256 = MustPattern(`^[0-9a-f]{64}$`, 64)

func (b *ClusterBinding) check(fe *fieldErrors, at string) {
	if b == nil {
		return
	}
	if b.KubeSystemUID == "" || len(b.KubeSystemUID) > 64 || !printable(b.KubeSystemUID) || strings.Contains(b.KubeSystemUID, "/") {
		fe.add(at+".kube_system_uid", "must be the kube-system namespace's UID")
	}
	if !caSHA256.MatchString(b.CASHA256) {
		fe.add(at+".ca_sha256", "must be 64 lowercase hex digits (SHA-256)")
	}
}

// ErrClusterMismatch is the cause (never shown to the caller) of refusing
// a lease from a cluster other than the one the credential was issued in.
var ErrClusterMismatch = errors.New("the lease comes from a cluster other than the one its agent was installed in")

// LeaseReport is what the agent reports with each renewal.
type LeaseReport struct {
	AgentVersion  string
	ServerVersion ServerVersion
	// Cluster is the agent's cluster (nil: none sent, an older agent).
	Cluster *ClusterBinding
	// Nodes are the cluster's nodes, sent only when they changed since
	// the agent's last successful renewal (nil: unchanged, or unknown).
	Nodes *Nodes
}

// Validate reports every bad field at once.
func (r LeaseReport) Validate() error {
	var fe fieldErrors
	r.Cluster.check(&fe, "cluster")
	r.Nodes.check(&fe, "nodes")
	for _, f := range []struct{ name, v string }{
		{"agent_version", r.AgentVersion},
		{"server_version.gitVersion", r.ServerVersion.GitVersion},
		{"server_version.platform", r.ServerVersion.Platform},
	} {
		if f.v == "" {
			fe.add(f.name, "is required")
		} else if len(f.v) > maxAgentText || !printable(f.v) {
			fe.add(f.name, "must be at most %d printable ASCII characters", maxAgentText)
		}
	}
	return fe.err("the lease report is not valid")
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Lease is an agent space's last renewal as stored.
type Lease struct {
	RenewedAt     *time.Time
	AgentVersion  string
	ServerVersion *ServerVersion
	// Presence is the agent's MQTT connection's last lifecycle event (nil:
	// none stored; presence.go).
	Presence *Presence
}

// LeaseCadence is the lease interval in force, the one decision both
// sides of a lease read: the API tells the agent it, the prober judges
// renewals by it. The zero value is LeaseInterval, the deployed cadence;
// only the local stack sets another (its tests shorten it).
type LeaseCadence time.Duration

// Interval is the cadence as a duration.
func (c LeaseCadence) Interval() time.Duration {
	if c <= 0 {
		return LeaseInterval
	}
	return time.Duration(c)
}

// Outcome is what the lease says at now, as a probe outcome, so that
// agent spaces move through the same status machine (ApplyProbe,
// NeedsWrite) as probed ones: a fresh lease is a success carrying the
// server version the agent reported; a late one a failure whose Missed
// is the number of whole intervals missed; no lease yet is
// AgentNotConnected, which never makes a space inactive.
//
// The presence channel (presence.go) stands in for renewals: while the
// agent's MQTT connection is up the lease is fresh, provided its last
// HTTP renewal is younger than 3 × PresenceFallback (a lost disconnected
// event must not keep a space active for ever); after a disconnect the
// lease ages from the later of the connection's last-alive time and the
// last HTTP renewal.
func (c LeaseCadence) Outcome(l Lease, now time.Time) Outcome {
	now = now.UTC()
	if l.RenewedAt == nil {
		return Outcome{At: now, Reason: ReasonAgentNotConnected, Message: "the agent has not connected yet"}
	}
	since := *l.RenewedAt
	message := "no lease renewal since " + since.UTC().Format(time.RFC3339)
	if p := l.Presence; p != nil && p.Connected {
		if now.Sub(since) < presenceTrust {
			return Outcome{At: now, Version: l.ServerVersion}
		}
		message += " (connected, but silent over HTTP for longer than " + presenceTrust.String() + ")"
	} else if p != nil {
		if alive := p.lastAlive(); alive.After(since) {
			since = alive
			message = "the agent disconnected (" + p.Reason + ") at " + p.At.UTC().Format(time.RFC3339)
		}
	}
	interval := c.Interval()
	late := now.Sub(since) - LeaseGrace
	if late < interval {
		return Outcome{At: now, Version: l.ServerVersion}
	}
	return Outcome{At: now, Reason: ReasonAgentLeaseExpired, Missed: int(late / interval), Message: message}
}

// AgentStore keeps agent secrets (hashes only) and leases. Every method
// that takes a token acts only on the token's own space: the space id is
// read from the token, never from the request.
type AgentStore interface {
	// PutBootstrap records a new bootstrap hash for a live agent space of
	// org, replacing an unused one; the agent's current credential is kept.
	PutBootstrap(ctx context.Context, s Space, hash string, expires time.Time) error
	// ExchangeBootstrap consumes the bootstrap whose hash is given (once,
	// before it expires) and stores the credential hash; the answer is the
	// space's org. A used bootstrap is KindUnauthenticated with Reason
	// "reused".
	// binding is the ClusterBinding's Key the later leases must carry
	// ("": none).
	ExchangeBootstrap(ctx context.Context, spaceID, bootstrapHash, credHash, binding string, credExpires, now time.Time) (org string, err error)
	// RenewCredential replaces the credential whose hash is given (while
	// unexpired) by a new one; the old one stays valid for RenewOverlap, so
	// a renewal whose answer is lost does not lock the agent out.
	RenewCredential(ctx context.Context, spaceID, oldHash, newHash string, newExpires, now time.Time) (org string, err error)
	// RenewLease stores a lease renewal if credHash is a valid credential
	// of the space, and returns the renewal before it (nil: the first) and
	// the work pending for the agent, from the item the write replaced.
	RenewLease(ctx context.Context, spaceID, credHash string, r LeaseReport, now time.Time) (LeaseRenewal, error)
	// GetLease reads the space's lease (a zero Lease when none).
	GetLease(ctx context.Context, spaceID string) (Lease, error)
	// CheckCredential answers when the credential whose hash is given
	// expires, if it is a valid credential of the space (presence.go's
	// Authorize): one read, no write.
	CheckCredential(ctx context.Context, spaceID, credHash string, now time.Time) (time.Time, error)
	// RecordPresence stores a lifecycle event on the space's lease if it
	// is newer (Presence.Newer) than the one stored: one conditional write.
	// A space without an agent item (unknown, deregistered) is KindNotFound.
	RecordPresence(ctx context.Context, spaceID string, p Presence) (PresenceRecorded, error)
}

// Agents is the agent's use cases: bootstrap, exchange, renewal, lease.
type Agents struct {
	Store  AgentStore
	Spaces Store
	Now    func() time.Time
	// Cadence is the lease interval told to agents (zero: LeaseInterval).
	Cadence LeaseCadence
	// Work keeps the cluster-side work and its reports (agentwork.go);
	// Revisions reads the revisions handed to agents. Nil: no work served.
	Work      AgentWorkStore
	Revisions interface {
		GetRevision(ctx context.Context, org, id string) (Revision, error)
		UpdateRevision(ctx context.Context, org, id string, u Update[Revision]) (Updated[Revision], error)
	}
	// Presence is the stack's MQTT presence channel (presence.go); its
	// zero value is none.
	Presence PresenceConfig
	// Recheck is asked to re-evaluate a space's status when a connect
	// ends a lapse (RecordPresence). Nil: the next tick does.
	Recheck interface {
		ProbeRegistered(ctx context.Context, s Space) error
	}
	// Connections ends a space's MQTT connection when its credentials are
	// revoked (EndRevoked). Nil: it ends at IoT Core's next authorizer
	// refresh, which refuses the revoked credential (PresenceRefresh).
	Connections Disconnecter
	// Signer signs each credential's PresenceToken when the authorizer
	// signs (Presence.TokenKeyName); it must be set then.
	Signer TokenSigner
}

// signature is the signature of cred's PresenceToken for its answer
// ("" when the authorizer does not sign). It is made after the credential
// is stored, once the presented secret is proven: a KMS signature is the
// dearest step of a request, and an anonymous caller with a well-formed
// forged secret must not spend one (TestForgedSecretsSpendNoSignature).
func (a *Agents) signature(ctx context.Context, cred AgentToken) (string, error) {
	if a.Presence.Endpoint == "" || a.Presence.TokenKeyName == "" {
		return "", nil
	}
	if a.Signer == nil {
		return "", errors.New("the authorizer signs tokens but no signer is configured")
	}
	sig, err := a.Signer.SignToken(ctx, PresenceToken(cred.Raw))
	if err != nil {
		return "", fmt.Errorf("sign the credential's presence token: %w", err)
	}
	return sig, nil
}

// EndRevoked ends the MQTT connection of the space a superseded credential
// names, whose credentials were all revoked (ErrCredentialReused): the
// copy, or the agent, may hold it, and neither may keep it until IoT
// Core's next refresh. raw is the presented credential; a malformed one
// names no space and nothing is done.
func (a *Agents) EndRevoked(ctx context.Context, raw string) error {
	t, err := ParseAgentCredential(raw)
	if err != nil || a.Connections == nil {
		return nil
	}
	return a.Connections.Disconnect(ctx, t.SpaceID)
}

// IssueBootstrap hands out a new one-time bootstrap for one of org's live
// agent spaces. Only its hash is stored.
func (a *Agents) IssueBootstrap(ctx context.Context, s Space) (Bootstrap, error) {
	if s.Connectivity != ViaAgent {
		return Bootstrap{}, &Error{Kind: KindConflict, Message: "the space is reached directly; only agent spaces take a bootstrap"}
	}
	t := NewBootstrapToken(s.ID)
	exp := a.Now().UTC().Add(BootstrapTTL).Truncate(time.Second)
	if err := a.Store.PutBootstrap(ctx, s, t.Hash(), exp); err != nil {
		return Bootstrap{}, err
	}
	return Bootstrap{Token: t.Raw, ExpiresAt: exp}, nil
}

// Reissue is IssueBootstrap for a space named by id.
func (a *Agents) Reissue(ctx context.Context, org, id string) (Bootstrap, error) {
	if !ValidID(id) {
		return Bootstrap{}, ErrNotFound("space")
	}
	s, err := a.Spaces.GetSpace(ctx, org, id)
	if err != nil {
		return Bootstrap{}, err
	}
	return a.IssueBootstrap(ctx, s)
}

// Exchange trades a bootstrap token for the agent's first credential.
func (a *Agents) Exchange(ctx context.Context, raw string) (AgentCredential, error) {
	return a.ExchangeBound(ctx, raw, nil)
}

// ExchangeBound is Exchange binding the credential to the agent's cluster
// (nil: unbound).
func (a *Agents) ExchangeBound(ctx context.Context, raw string, b *ClusterBinding) (AgentCredential, error) {
	t, err := ParseBootstrapToken(raw)
	if err != nil {
		return AgentCredential{}, err
	}
	var fe fieldErrors
	b.check(&fe, "cluster")
	if err := fe.err("the exchange is not valid"); err != nil {
		return AgentCredential{}, err
	}
	now := a.Now().UTC()
	cred := NewAgentCredential(t.SpaceID)
	exp := now.Add(AgentCredentialTTL).Truncate(time.Second)
	if _, err := a.Store.ExchangeBootstrap(ctx, t.SpaceID, t.Hash(), cred.Hash(), b.Key(), exp, now); err != nil {
		return AgentCredential{}, err
	}
	// Signed only once the bootstrap is proven (a forged one costs no
	// signature). The bootstrap is spent now, so a failed signature
	// answers the credential unsigned, which the agent renews for a
	// signed one before it connects.
	sig, _ := a.signature(ctx, cred)
	return a.answer(cred, exp, sig), nil
}

// Renew trades a valid credential for a fresh one.
func (a *Agents) Renew(ctx context.Context, raw string) (AgentCredential, error) {
	t, err := ParseAgentCredential(raw)
	if err != nil {
		return AgentCredential{}, err
	}
	now := a.Now().UTC()
	cred := NewAgentCredential(t.SpaceID)
	exp := now.Add(AgentCredentialTTL).Truncate(time.Second)
	if _, err := a.Store.RenewCredential(ctx, t.SpaceID, t.Hash(), cred.Hash(), exp, now); err != nil {
		return AgentCredential{}, err
	}
	// Signed only once the credential is proven (a forged one costs no
	// signature). A failed signature is a renewal whose answer was lost:
	// the agent retries with the credential it presented, still valid
	// while the new one is unused (RenewCredential).
	sig, err := a.signature(ctx, cred)
	if err != nil {
		return AgentCredential{}, err
	}
	return a.answer(cred, exp, sig), nil
}

func (a *Agents) answer(cred AgentToken, exp time.Time, sig string) AgentCredential {
	return AgentCredential{Credential: cred.Raw, ExpiresAt: exp, SpaceID: cred.SpaceID,
		LeaseIntervalSeconds: int(a.Cadence.Interval() / time.Second), Presence: a.Presence.endpoint(cred.SpaceID),
		TokenSignature: sig}
}

// Renewed is a stored lease renewal: the space's org and whether the lease
// had lapsed (or never started), in which case the status is worth
// re-evaluating at once rather than at the next tick.
type Renewed struct {
	OrgID  string
	Lapsed bool
	// Work is the cluster-side work for the agent (agentwork.go).
	Work AgentWork
	// Presence is the channel the agent is to hold (nil: none): in every
	// lease answer, since an agent restarted on a stored credential asks
	// for no credential answer.
	Presence *PresenceEndpoint
}

// RenewLease checks the report, then stores the renewal for the
// credential's own space only. spaceID is the space the request names; a
// credential of another space is refused as not found, exactly like a
// space that does not exist.
func (a *Agents) RenewLease(ctx context.Context, raw, spaceID string, r LeaseReport) (Renewed, error) {
	t, err := ParseAgentCredential(raw)
	if err != nil {
		return Renewed{}, err
	}
	if t.SpaceID != spaceID {
		return Renewed{}, ErrNotFound("space")
	}
	if err := r.Validate(); err != nil {
		return Renewed{}, err
	}
	now := a.Now().UTC()
	res, err := a.Store.RenewLease(ctx, t.SpaceID, t.Hash(), r, now)
	if err != nil {
		return Renewed{}, err
	}
	lapsed := res.Before == nil || a.Cadence.Outcome(Lease{RenewedAt: res.Before, Presence: res.Presence}, now).Reason != ""
	if err := a.storeNodes(ctx, res.OrgID, t.SpaceID, r.Nodes, now); err != nil {
		return Renewed{}, err
	}
	return Renewed{OrgID: res.OrgID, Lapsed: lapsed, Work: a.leaseWork(ctx, res.OrgID, t.SpaceID, res.Pending),
		Presence: a.Presence.endpoint(t.SpaceID)}, nil
}

// storeNodes stores the nodes a renewal reported on the space, only when
// they differ from the stored ones (WithNodes): one read and, for a
// change, one conditional write (Run), after the renewal's write
// authenticated the agent. A renewal without nodes reads nothing. A
// failure fails the renewal (stored already, and harmless to repeat), so
// the agent, which keeps what it last sent only after a 200, sends them
// again.
func (a *Agents) storeNodes(ctx context.Context, org, id string, n *Nodes, now time.Time) error {
	if n == nil || a.Spaces == nil {
		return nil
	}
	_, err := a.Spaces.UpdateSpace(ctx, org, id, Update[Space]{At: now, Apply: func(cur Space) (Space, error) {
		next, changed := cur.WithNodes(n)
		if !changed {
			return cur, ErrUnchanged
		}
		return next, nil
	}})
	if KindOf(err) == KindNotFound {
		// Deregistered since the renewal: its next call is refused.
		return nil
	}
	return err
}

// ErrBootstrapReused is the cause (never shown to the caller) of refusing
// a bootstrap token that was already exchanged: worth a warning, since
// someone holds a copy of it.
var ErrBootstrapReused = errors.New("a bootstrap token of this space was presented again after its use")

// ErrCredentialReused is the cause (never shown to the caller) of refusing
// a superseded agent credential: the previous one after the current was
// used, or the one before it. Only a copy can present it (the agent moves
// to each new credential and never back), so the space's credentials are
// all revoked: the copy and the agent alike, until the agent is
// reinstalled with a new bootstrap (refresh-token reuse detection, RFC
// 6819 5.2.2.3; OAuth 2.0 Security BCP, RFC 9700 2.2.2).
var ErrCredentialReused = errors.New("a superseded agent credential was presented; every credential of the space is revoked")
