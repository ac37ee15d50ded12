package space

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The agent's presence channel. Besides its HTTP lease, an
// agent holds an MQTT connection to AWS IoT Core, authenticated by a
// custom authorizer (Authorize) with its credential as the password. IoT
// Core's lifecycle events (connected, disconnected) reach PresenceFunction
// through a topic rule and a queue and are stored on the lease
// (RecordPresence). While connected the lease counts as fresh with no
// HTTP renewal; after a disconnect it ages from the moment the connection
// was last known alive. The agent renews over HTTP on each (re)connect,
// when woken on its wake topic, and every PresenceFallback; without a
// presence block in its credential answer it renews every lease interval.

const (
	// PresenceKeepAlive is the MQTT keep-alive the agent asks. IoT Core
	// disconnects a client after 1.5 × keep-alive without a control
	// packet (https://docs.aws.amazon.com/iot/latest/developerguide/mqtt.html).
	PresenceKeepAlive = 30 * time.Second
	// PresenceFallback is how often a connected agent still renews over
	// HTTP (the safety net for lost lifecycle events).
	PresenceFallback = 10 * time.Minute
	// presenceTrust bounds how long a connected presence stands in for
	// HTTP renewals: a lost disconnected event makes the space inactive
	// within 30 minutes, not never.
	presenceTrust = 3 * PresenceFallback
	// PresenceRefresh is how often IoT Core re-invokes the authorizer on
	// a live connection, so a revoked credential (reinstall,
	// deregistration) loses its connection within an hour, like a renewed
	// one's overlap (RenewOverlap).
	PresenceRefresh = time.Hour
)

// IoT Core's bounds on an authorizer's disconnectAfterInSeconds and
// refreshAfterInSeconds: 300 to 86,400 seconds. The response is described
// on https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth-lambda.html,
// whose sample answers 86400 and 300; the range is not quoted from the
// page's own wording (infra/iotcore keeps the same bounds).
const (
	minAuthorizedSeconds = 300
	maxAuthorizedSeconds = 86400
)

// ReasonKeepAliveTimeout is the lifecycle event's disconnectReason when
// IoT Core saw no packet for 1.5 × keep-alive: the connection was last
// alive that long before the event
// (https://docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html).
const ReasonKeepAliveTimeout = "MQTT_KEEP_ALIVE_TIMEOUT"

// AgentClientID is the MQTT client id of a space's agent: the stack's
// prefix and the space id, so the topic rule can keep to its own stack's
// clients (several stacks share an account's IoT Core).
func AgentClientID(prefix, spaceID string) string { return prefix + spaceID }

// SpaceOfClient is AgentClientID's inverse: the space of a client id of
// this stack, false for any other.
func SpaceOfClient(prefix, clientID string) (string, bool) {
	id, ok := strings.CutPrefix(clientID, prefix)
	if !ok || !ValidID(id) {
		return "", false
	}
	return id, true
}

// PrincipalOf is the principalId the authorizer gives a space's agent
// connection: the space id without dashes (IoT wants 1-128 alphanumerics,
// https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth-lambda.html).
func PrincipalOf(spaceID string) string { return strings.ReplaceAll(spaceID, "-", "") }

// PrincipalMatches reports whether a lifecycle event's principalIdentifier
// is the principal Authorize gives spaceID's connection: only such an event
// is about a connection the authorizer accepted for that space, whatever
// its client id says. The lifecycle page defines principalIdentifier as
// "the credential used to authenticate" and spells it out only for
// certificates and IAM
// (https://docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html);
// for a custom-authorizer connection it is taken to be the authorizer's
// principalId, as infra/iotcore publishes it, bare or after the account id
// ("<12 digits>/<principalId>", the shape IoT gives principals elsewhere):
// the page does not say which, and refusing the form AWS sends would drop
// every real event, while either form still names this space's principal.
func PrincipalMatches(spaceID, principalIdentifier string) bool {
	if spaceID == "" {
		return false
	}
	want := PrincipalOf(spaceID)
	if account, p, ok := strings.Cut(principalIdentifier, "/"); ok {
		return p == want && len(account) == 12 && strings.Trim(account, "0123456789") == ""
	}
	return principalIdentifier == want
}

// WakeTopic is the topic Spaces publishes on when work waits for the
// agent (the agent then renews its lease at once).
func WakeTopic(prefix, spaceID string) string {
	return "spaces/" + AgentClientID(prefix, spaceID) + "/wake"
}

// Presence is the last lifecycle event stored for an agent's connection.
// Version is IoT Core's versionNumber: it increases with each connection
// of a client id, a connection's disconnected event carries its connected
// event's number, and it starts again at 0 once the client id has been
// disconnected for about an hour (PresenceVersionReset).
type Presence struct {
	Connected bool
	At        time.Time
	Version   int64
	Reason    string // the disconnectReason, for a disconnect
}

// PresenceVersionReset: lifecycle events of one client id at least this
// far apart are ordered by their timestamps, nearer ones by versionNumber.
// "If a client is not connected for approximately one hour, the version
// number is reset to 0"
// (https://docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html),
// so events either side of a reset are an hour or more apart, and a lower
// version that much later is a new run of versions, not a stale event;
// without a reset, versions and timestamps agree at that distance. Nearer
// events are ordered by version alone: the timestamp is "an approximation
// of when the event occurred", and two events of one connection, or of a
// takeover, can carry the same millisecond or swap.
const PresenceVersionReset = 30 * time.Minute

// Newer reports whether p should replace than. Lifecycle events may
// arrive out of order and more than once (life-cycle-events.html). An
// event PresenceVersionReset or more after the stored one is newer and
// one that much before it is not, whatever their versions; otherwise a
// higher version wins, at the same version (one connection) its
// disconnect wins over its connect, and a duplicate is not newer.
func (p Presence) Newer(than *Presence) bool {
	switch {
	case than == nil:
		return true
	case !p.At.Before(than.At.Add(PresenceVersionReset)):
		return true
	case !than.At.Before(p.At.Add(PresenceVersionReset)):
		return false
	case p.Version != than.Version:
		return p.Version > than.Version
	}
	return !p.Connected && than.Connected
}

// lastAlive is when a disconnected connection was last known alive: IoT
// notices a keep-alive timeout 1.5 × keep-alive after the last packet.
func (p Presence) lastAlive() time.Time {
	if p.Reason == ReasonKeepAliveTimeout {
		return p.At.Add(-PresenceKeepAlive * 3 / 2)
	}
	return p.At
}

// Disconnecter ends a space's agent MQTT connection at once
// (shared/agentwake: IoT Core's DeleteConnection), so a deregistered
// space's connection does not live until the next policy refresh
// (PresenceRefresh).
type Disconnecter interface {
	Disconnect(ctx context.Context, spaceID string) error
}

// PresenceConfig is the stack's presence channel, told to agents in their
// credential answer. Endpoint "" turns it off: agents renew over HTTP.
type PresenceConfig struct {
	Endpoint     string // host:port of IoT Core's MQTT endpoint
	Authorizer   string // the custom authorizer's name
	ClientPrefix string // AgentClientID's prefix
	// TokenKeyName is the authorizer's TokenKeyName when its token
	// signing is on ("": off). Then each credential answer carries the
	// signature of its PresenceToken (Agents.Signer), the agent presents
	// both on every CONNECT, and IoT Core refuses a CONNECT whose
	// signature does not verify without invoking the authorizer
	// (https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth.html).
	TokenKeyName string
}

// PresenceEndpoint is the presence block of an agent's credential answer.
type PresenceEndpoint struct {
	Endpoint         string `json:"endpoint"`
	Authorizer       string `json:"authorizer"`
	ClientID         string `json:"client_id"`
	WakeTopic        string `json:"wake_topic"`
	KeepAliveSeconds int    `json:"keep_alive_seconds"`
	FallbackSeconds  int    `json:"fallback_seconds"`
	// TokenKeyName names the username's query parameter that carries the
	// credential's PresenceToken, beside its signature
	// (x-amz-customauthorizer-signature); absent when the authorizer
	// does not sign.
	TokenKeyName string `json:"token_key_name,omitempty"`
}

func (c PresenceConfig) endpoint(spaceID string) *PresenceEndpoint {
	if c.Endpoint == "" {
		return nil
	}
	return &PresenceEndpoint{Endpoint: c.Endpoint, Authorizer: c.Authorizer,
		ClientID: AgentClientID(c.ClientPrefix, spaceID), WakeTopic: WakeTopic(c.ClientPrefix, spaceID),
		KeepAliveSeconds: int(PresenceKeepAlive / time.Second), FallbackSeconds: int(PresenceFallback / time.Second),
		TokenKeyName: c.TokenKeyName}
}

// PresenceToken is the token an agent presents, signed, on each MQTT
// CONNECT when the authorizer signs: the SHA-256 of its credential, as
// stored (AgentToken.Hash), so the username carries no secret and a
// signature holds for one credential only (Authorize checks that the
// password is the token's credential).
func PresenceToken(credential string) string { return AgentToken{Raw: credential}.Hash() }

// TokenSigner signs a PresenceToken with the authorizer's private key
// (RSA PKCS #1 v1.5 over SHA-256, base64 with the standard alphabet: what
// IoT Core verifies against TokenSigningPublicKeys,
// https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth.html#custom-auth-token-signature).
type TokenSigner interface {
	SignToken(ctx context.Context, token string) (string, error)
}

// AuthorizeResult is what an accepted MQTT connection may do: connect as
// ClientID, subscribe to and receive WakeTopic; nothing else (it
// publishes nothing). PrincipalID is the space id without dashes (IoT
// wants 1-128 alphanumerics); the seconds are within IoT's 300-86,400.
type AuthorizeResult struct {
	SpaceID                string
	PrincipalID            string
	ClientID               string
	WakeTopic              string
	DisconnectAfterSeconds int
	RefreshAfterSeconds    int
}

// Authorize checks an MQTT connection's password: a valid, unexpired
// agent credential of the space whose client id is clientID. Any refusal
// is the one ErrAgentAuth (its cause for the log); the password is never
// in it. username carries the authorizer's name (IoT's custom-auth query
// form) and is not checked here. When the authorizer signs
// (Presence.TokenKeyName), IoT Core invokes it only for a token whose
// signature verified (signed, the request's signatureVerified), and that
// token must be the password's PresenceToken: a signature holds for the
// credential it was issued with, and for no other.
func (a *Agents) Authorize(ctx context.Context, clientID, username string, password []byte, token string, signed bool) (AuthorizeResult, error) {
	t, err := ParseAgentCredential(string(password))
	if err != nil {
		return AuthorizeResult{}, err
	}
	if a.Presence.TokenKeyName != "" && (!signed || subtle.ConstantTimeCompare([]byte(token), []byte(t.Hash())) != 1) {
		return AuthorizeResult{}, ErrAgentAuth(errors.New("the signed token is not the credential's"))
	}
	prefix := a.Presence.ClientPrefix
	if prefix == "" {
		return AuthorizeResult{}, ErrAgentAuth(errors.New("this stack has no presence channel (no client prefix)"))
	}
	if id, ok := SpaceOfClient(prefix, clientID); !ok || id != t.SpaceID {
		return AuthorizeResult{}, ErrAgentAuth(errors.New("the client id is not the credential's space's"))
	}
	now := a.Now().UTC()
	exp, err := a.Store.CheckCredential(ctx, t.SpaceID, t.Hash(), now)
	if err != nil {
		return AuthorizeResult{}, err
	}
	left := int(exp.Sub(now) / time.Second)
	if left < minAuthorizedSeconds {
		// IoT cannot be asked to disconnect sooner: refuse, and let the
		// agent reconnect with its renewed credential.
		return AuthorizeResult{}, ErrAgentAuth(errors.New("the credential expires within 300 s"))
	}
	left = min(left, maxAuthorizedSeconds)
	return AuthorizeResult{SpaceID: t.SpaceID, PrincipalID: PrincipalOf(t.SpaceID),
		ClientID: clientID, WakeTopic: WakeTopic(prefix, t.SpaceID),
		DisconnectAfterSeconds: left, RefreshAfterSeconds: min(left, int(PresenceRefresh/time.Second))}, nil
}

// PresenceRecorded is what the store answers RecordPresence: whether the
// event was stored (false: an older or duplicate one), the space's org,
// and the lease as it was before.
type PresenceRecorded struct {
	Stored bool
	OrgID  string
	Before Lease
}

// RecordPresence stores a lifecycle event on spaceID's lease if it is
// newer than the one stored. A connect that ends a lapse asks for the
// status to be re-evaluated at once (Recheck), as a lapsed HTTP renewal
// does. An unknown or deregistered space is KindNotFound: nothing to
// retry. A check that cannot be enqueued is an error, so the event is
// redelivered; the redelivery is a duplicate, stored and checked no more
// (the prober's next tick re-evaluates the lease anyway).
func (a *Agents) RecordPresence(ctx context.Context, p Presence, spaceID string) error {
	p.At = p.At.UTC()
	res, err := a.Store.RecordPresence(ctx, spaceID, p)
	if err != nil || !res.Stored || !p.Connected || a.Recheck == nil {
		return err
	}
	if a.Cadence.Outcome(res.Before, a.Now()).Reason == "" {
		return nil
	}
	if err := a.Recheck.ProbeRegistered(ctx, Space{ID: spaceID, OrgID: res.OrgID}); err != nil {
		return fmt.Errorf("the presence is stored, but its lease check cannot be enqueued: %w", err)
	}
	return nil
}
