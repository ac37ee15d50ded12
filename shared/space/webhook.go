package space

import (
	"crypto/rand"
	"encoding/base64"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Webhook endpoints: an org's own HTTPS receivers, to which Spaces delivers
// typed events signed per Standard Webhooks v1. The rules here are pure:
// what a valid endpoint is, which addresses it may never reach (the same
// rule at creation and at every connection, AddressRefusal), which events
// it wants, and how its signing secrets rotate.

// EventType names one kind of event an endpoint may subscribe to.
type EventType string

// The event types; EventTypes lists them all.
const (
	EventSpaceRegistered           EventType = "space.registered"
	EventSpaceStatusChanged        EventType = "space.status_changed"
	EventSpaceDeregistered         EventType = "space.deregistered"
	EventRevisionDeployed          EventType = "revision.deployed"
	EventRevisionFailed            EventType = "revision.failed"
	EventRevisionStopped           EventType = "revision.stopped"
	EventJobSucceeded              EventType = "provisioning_job.succeeded"
	EventJobFailed                 EventType = "provisioning_job.failed"
	EventAccountVerificationFailed EventType = "cloud_account.verification_failed"
	// The inventory's events (notices.go).
	EventSpaceVersionChanged EventType = "space.version_changed"
	EventSupportEnding       EventType = "space.support_ending"
	EventCertificateExpiring EventType = "space.certificate_expiring"
	// EventWebhookTest is sent only on request, to the one endpoint asked.
	EventWebhookTest EventType = "webhook.test"
)

const (
	maxWebhookURLLen         = 2048
	maxWebhookDescriptionLen = 500
	// WebhookSecretPrefix starts every signing secret, as Standard
	// Webhooks writes them.
	WebhookSecretPrefix = "whsec_"
	webhookSecretBytes  = 32
	// WebhookRotationOverlap is how long a replaced secret keeps signing.
	WebhookRotationOverlap = 24 * time.Hour
	maxWebhookSecrets      = 2
	webhookEventTypesField = "event_types"
)

// EventTypes are the types an endpoint may subscribe to. webhook.test is
// not among them: it is sent only on request, to the one endpoint asked.
var EventTypes = []EventType{
	EventSpaceRegistered, EventSpaceStatusChanged, EventSpaceDeregistered,
	EventRevisionDeployed, EventRevisionFailed, EventRevisionStopped,
	EventJobSucceeded, EventJobFailed, EventAccountVerificationFailed,
	EventSpaceVersionChanged, EventSupportEnding, EventCertificateExpiring,
}

// Valid reports whether t is a subscribable event type.
func (t EventType) Valid() bool { return slices.Contains(EventTypes, t) }

// WebhookState is whether an endpoint receives deliveries.
type WebhookState string

// Endpoint states: enabled endpoints receive; paused ones were paused by
// their org and resume on request; disabled ones were stopped by Spaces
// (the receiver answered 410 Gone, or kept failing) and resume on request.
const (
	WebhookEnabled  WebhookState = "enabled"
	WebhookPaused   WebhookState = "paused"
	WebhookDisabled WebhookState = "disabled"
)

// WebhookEndpoint is one receiver of an org's events. Its signing secrets
// are never part of its body: they are shown once (at creation and at each
// rotation) and stored encrypted beside it.
type WebhookEndpoint struct {
	ID          string      `json:"id"`
	OrgID       string      `json:"org_id"`
	URL         string      `json:"url"`
	Description string      `json:"description,omitempty"`
	EventTypes  []EventType `json:"event_types"`
	// LabelSelector, when set, narrows the events about a space (and a
	// revision's, about its space) to spaces whose labels match; events
	// about no space (a cloud account's) are not narrowed.
	LabelSelector string       `json:"label_selector,omitempty"`
	State         WebhookState `json:"state"`
	// StateReason says why a disabled endpoint was disabled, and
	// DisabledAt since when.
	StateReason string     `json:"state_reason,omitempty"`
	DisabledAt  *time.Time `json:"disabled_at,omitempty"`
	// FailingSince is when the attempts to it began failing (the first
	// failed attempt after a delivered one, or after it was enabled);
	// nil while they succeed. Five days of it disables the endpoint.
	FailingSince *time.Time `json:"failing_since,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	Version      int64      `json:"version"`
	// Secrets sign deliveries, newest first; stored encrypted, never
	// answered.
	Secrets []WebhookSecret `json:"-" dynamodbav:"-"`
}

// WebhookSecret is one signing secret ("whsec_" and the base64 of 32
// random bytes, as Standard Webhooks writes them). A replaced secret keeps
// signing until ExpiresAt, so receivers can switch over.
type WebhookSecret struct {
	Value     string     `json:"value"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// WebhookInput is what a caller sets on an endpoint. On update, a nil
// field is left as it is.
type WebhookInput struct {
	URL           *string
	Description   *string
	EventTypes    []EventType
	LabelSelector *string
}

// WebhookRules are the deployment's settings the validation depends on.
type WebhookRules struct {
	// AllowLoopback lets an endpoint be a loopback address over http or
	// https: only the local stack sets it, so a receiver on the developer's
	// machine can be reached. Never set in a deployment.
	AllowLoopback bool
}

// NewWebhookSecret returns a fresh signing secret.
func NewWebhookSecret() string {
	b := make([]byte, webhookSecretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand's documented contract)
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Apply checks in against the endpoint e (the zero endpoint on creation,
// when URL and EventTypes are required) and returns the changed endpoint,
// or a KindInvalid error naming every bad field (KindMalformed for a
// selector that does not parse).
func (r WebhookRules) Apply(e WebhookEndpoint, in WebhookInput, creating bool) (WebhookEndpoint, error) {
	var fe fieldErrors
	if in.URL != nil || creating {
		u := ""
		if in.URL != nil {
			u = *in.URL
		}
		if reason := r.CheckURL(u); reason != "" {
			fe.add("url", "%s", reason)
		}
		e.URL = u
	}
	if in.Description != nil {
		checkText(&fe, "description", *in.Description, maxWebhookDescriptionLen)
		e.Description = *in.Description
	}
	if in.EventTypes != nil || creating {
		if len(in.EventTypes) == 0 {
			fe.add(webhookEventTypesField, "must name at least one event type")
		}
		seen := map[EventType]bool{}
		for i, t := range in.EventTypes {
			switch {
			case !t.Valid():
				fe.add(webhookEventTypesField+"."+itoa(i), "must be one of %s", joinTypes())
			case seen[t]:
				fe.add(webhookEventTypesField+"."+itoa(i), "is named twice")
			}
			seen[t] = true
		}
		e.EventTypes = slices.Clone(in.EventTypes)
	}
	if in.LabelSelector != nil {
		if *in.LabelSelector != "" {
			if _, err := ParseSelector("label_selector", *in.LabelSelector); err != nil {
				if de, ok := err.(*Error); ok {
					fe = append(fe, de.Fields...)
				}
			}
		}
		e.LabelSelector = *in.LabelSelector
	}
	if err := fe.err("the webhook endpoint is not valid"); err != nil {
		return WebhookEndpoint{}, err
	}
	return e, nil
}

func joinTypes() string {
	s := make([]string, len(EventTypes))
	for i, t := range EventTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// CheckURL returns why u cannot be an endpoint's URL, or "". What a
// hostname resolves to is checked by the caller, with AddressRefusal, at
// creation and again at every connection.
func (r WebhookRules) CheckURL(u string) string {
	if u == "" {
		return "is required"
	}
	if len(u) > maxWebhookURLLen || !utf8.ValidString(u) {
		return "must be at most 2048 bytes of valid UTF-8"
	}
	p, err := url.Parse(u)
	if err != nil || !p.IsAbs() || p.Opaque != "" {
		return "must be an absolute https URL"
	}
	if p.User != nil {
		return "must not carry credentials (user:password@): they would travel with every delivery"
	}
	if p.Fragment != "" || strings.Contains(u, "#") {
		return "must not have a fragment"
	}
	host := p.Hostname()
	if host == "" {
		return "must name a host"
	}
	loopback := isLoopbackHost(host)
	switch p.Scheme {
	case "https":
	case "http":
		if !(loopback && r.AllowLoopback) {
			return "must use https"
		}
	default:
		return "must be an absolute https URL"
	}
	if port := p.Port(); port != "" {
		if n, ok := parsePort(port); !ok || n == 0 {
			return "must have a port between 1 and 65535"
		}
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if reason := AddressRefusal(a, r.AllowLoopback); reason != "" {
			return "must not be " + reason
		}
		return ""
	}
	if loopback && !r.AllowLoopback {
		return "must not be a loopback address"
	}
	if !strings.Contains(host, ".") && !loopback {
		return "must be a fully qualified host name"
	}
	return ""
}

func parsePort(s string) (int, bool) {
	if len(s) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 65535
}

// isLoopbackHost: "localhost" and its subdomains resolve to loopback by
// RFC 6761, whatever a resolver says.
func isLoopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

// Address ranges no endpoint may reach, beyond what netip classifies:
// the cloud metadata services' addresses, the shared address space of
// carrier-grade NAT, IPv4 "this network", benchmarking and reserved
// space, and the IPv6 translation prefixes that embed an IPv4 address.
var refusedPrefixes = []struct {
	p      netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (this-network) address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved (IETF protocol) address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a reserved (benchmarking) address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "an IPv4-translation address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "an IPv4-translation address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
}

// AddressRefusal says why a receiver may not be at a (an IP a hostname
// resolved to, or a literal one), or "" when it may: loopback (unless
// allowLoopback), private, link-local (which holds the cloud metadata
// service, 169.254.169.254), multicast, unspecified, broadcast and the
// special-purpose ranges above. An IPv4-mapped IPv6 address is judged as
// its IPv4 address.
func AddressRefusal(a netip.Addr, allowLoopback bool) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "an invalid address"
	case a.IsLoopback():
		if allowLoopback {
			return ""
		}
		return "a loopback address"
	case a.IsUnspecified():
		return "an unspecified address"
	case a == netip.MustParseAddr("169.254.169.254"), a == netip.MustParseAddr("169.254.170.2"):
		return "a cloud metadata address"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsPrivate():
		return "a private address"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a == netip.MustParseAddr("255.255.255.255"):
		return "a broadcast address"
	}
	for _, r := range refusedPrefixes {
		if r.p.Contains(a) {
			return r.reason
		}
	}
	return ""
}

// Wants reports whether e is to receive an event of type t about a space
// with the given labels (about is false for an event about no space).
// Only an enabled endpoint wants anything; a test event is sent
// regardless, on request.
func (e WebhookEndpoint) Wants(t EventType, about bool, labels map[string]string) bool {
	if e.State != WebhookEnabled || !slices.Contains(e.EventTypes, t) {
		return false
	}
	if !about || e.LabelSelector == "" {
		return true
	}
	sel, err := ParseSelector("label_selector", e.LabelSelector)
	return err == nil && sel.Matches(labels)
}

// SigningSecrets are the secrets that sign a delivery made at now: the
// current one and any replaced one whose overlap has not ended.
func (e WebhookEndpoint) SigningSecrets(now time.Time) []string {
	var out []string
	for _, s := range e.Secrets {
		if s.ExpiresAt == nil || now.Before(*s.ExpiresAt) {
			out = append(out, s.Value)
		}
	}
	return out
}

// Rotate puts secret first; the current one keeps signing for overlap
// (WebhookRotationOverlap by default), and older ones, whose overlap
// a second rotation ends, are dropped: at most two secrets sign at once.
func (e WebhookEndpoint) Rotate(secret string, now time.Time, overlap time.Duration) WebhookEndpoint {
	until := now.Add(overlap).UTC()
	next := []WebhookSecret{{Value: secret}}
	for _, s := range e.Secrets {
		if len(next) == maxWebhookSecrets {
			break
		}
		if s.ExpiresAt != nil && !now.Before(*s.ExpiresAt) {
			continue
		}
		if s.ExpiresAt == nil || s.ExpiresAt.After(until) {
			s.ExpiresAt = &until
		}
		next = append(next, s)
	}
	e.Secrets = next
	return e
}

// SetState moves e to state with reason at now: ErrUnchanged when it is
// already there (an idempotent pause answers the endpoint unchanged).
// Disabling records when; resuming clears the reason, the time and the
// failing run, so a resumed endpoint has five days again.
func (e WebhookEndpoint) SetState(state WebhookState, reason string, now time.Time) (WebhookEndpoint, error) {
	if e.State == state {
		return e, ErrUnchanged
	}
	e.State = state
	e.StateReason = reason
	e.DisabledAt = nil
	switch state {
	case WebhookEnabled:
		e.StateReason, e.FailingSince = "", nil
	case WebhookDisabled:
		at := now.UTC()
		e.DisabledAt = &at
	}
	return e, nil
}

// WebhookFailingLimit is how long every attempt to an endpoint may fail
// before it is disabled (ReasonFailedTooLong).
const WebhookFailingLimit = 5 * 24 * time.Hour

// AfterAttempt is e once an attempt made at at was judged v: a delivery
// ends its failing run; a failure starts one, or, when the run has lasted
// WebhookFailingLimit, disables e. ErrUnchanged when nothing changes (most
// attempts: the endpoint is written only when its run starts or ends).
// 410 Gone is not judged here: it disables at once (Disable).
func (e WebhookEndpoint) AfterAttempt(v DeliveryVerdict, at time.Time) (WebhookEndpoint, error) {
	if e.State != WebhookEnabled {
		return e, ErrUnchanged
	}
	switch {
	case v == Delivered && e.FailingSince != nil:
		e.FailingSince = nil
		return e, nil
	case v == RetryLater || v == Rejected:
		if e.FailingSince == nil {
			since := at.UTC()
			e.FailingSince = &since
			return e, nil
		}
		if at.Sub(*e.FailingSince) >= WebhookFailingLimit {
			return e.SetState(WebhookDisabled, ReasonFailedTooLong, at)
		}
	}
	return e, ErrUnchanged
}

// Reasons Spaces disables an endpoint.
const (
	ReasonReceiverGone  = "ReceiverGone"  // the receiver answered 410 Gone
	ReasonFailedTooLong = "FailedTooLong" // every delivery failed for five days
)

// WebhookVersioned is an endpoint's stamp for Run.
var WebhookVersioned = Versioned[WebhookEndpoint]{What: "webhook endpoint",
	Version: func(e *WebhookEndpoint) *int64 { return &e.Version }, Stamp: func(e *WebhookEndpoint) *time.Time { return &e.UpdatedAt }}

// WebhookSchedule is when a delivery is attempted, after the event, per
// Standard Webhooks: at once, then after each of these waits (cumulative:
// about 76 hours in all before it is given up).
var WebhookSchedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// webhookJitter is the spread of a retry's wait: ±10 %.
const webhookJitter = 0.1

// WebhookRetry is the wait before the next attempt after attempts failed
// ones, or false when the schedule is spent. jitter in [-1, 1] spreads the
// wait by up to ±10 % (so that an endpoint back up is not hit by every
// retry at once); a receiver's Retry-After longer than the wait is
// honoured, up to the schedule's longest wait.
func WebhookRetry(attempts int, retryAfter time.Duration, jitter float64) (time.Duration, bool) {
	if attempts < 1 || attempts >= len(WebhookSchedule) {
		return 0, false
	}
	d := WebhookSchedule[attempts]
	d += time.Duration(float64(d) * webhookJitter * max(-1, min(1, jitter)))
	longest := WebhookSchedule[len(WebhookSchedule)-1]
	if retryAfter > d {
		d = min(retryAfter, longest)
	}
	return d, true
}

// DeliveryVerdict is what one attempt's answer means.
type DeliveryVerdict string

// Verdicts.
const (
	Delivered DeliveryVerdict = "delivered" // 2xx
	// RetryLater: 5xx, 429, 408, a timeout or a connection that failed.
	RetryLater DeliveryVerdict = "retry"
	// Rejected: any other answer (a 4xx, a redirect, which is never
	// followed): retrying would get the same.
	Rejected DeliveryVerdict = "rejected"
	// Gone: 410, the receiver asks never to be called again; the endpoint
	// is disabled.
	Gone DeliveryVerdict = "gone"
)

// ClassifyDelivery judges an answer's status (0: no answer, a timeout or a
// connection error).
func ClassifyDelivery(status int) DeliveryVerdict {
	switch {
	case status >= 200 && status < 300:
		return Delivered
	case status == 0, status >= 500, status == 429, status == 408:
		return RetryLater
	case status == 410:
		return Gone
	default:
		return Rejected
	}
}

// WebhookEvent is one event to deliver, as the table's stream tells it
// (dynamostore decodes the records): ID is the webhook-id every endpoint
// and every retry of it sees, derived from the stream record, so that a
// record read twice makes the same id and receivers drop the duplicate.
type WebhookEvent struct {
	ID    string
	OrgID string
	Type  EventType
	At    time.Time
	// SpaceID is the space the event is about ("": none); Labels are its
	// labels when the record carries them (HasLabels), else the fan-out
	// reads the space.
	SpaceID   string
	Labels    map[string]string
	HasLabels bool
	// Data is the event's data object (the webhooks: section of
	// openapi.yaml): never a credential or a manifest.
	Data any
}

// SpaceEventData is the data of space.registered and space.deregistered.
type SpaceEventData struct {
	SpaceID        string     `json:"space_id"`
	Name           string     `json:"name,omitempty"`
	Provider       Provider   `json:"provider"`
	CloudAccountID string     `json:"cloud_account_id"`
	Connectivity   string     `json:"connectivity,omitempty"`
	Labels         Labels     `json:"labels,omitempty"`
	Status         Status     `json:"status,omitempty"`
	DeregisteredAt *time.Time `json:"deregistered_at,omitempty"`
	DeregisteredBy string     `json:"deregistered_by,omitempty"`
}

// StatusChangedData is the data of space.status_changed: the transition
// and the probe's detail.
type StatusChangedData struct {
	SpaceID string    `json:"space_id"`
	From    Status    `json:"from"`
	To      Status    `json:"to"`
	Reason  string    `json:"reason,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	At      time.Time `json:"at"`
}

// DeliveryAttempt is one attempt in an endpoint's delivery log.
type DeliveryAttempt struct {
	OrgID      string    `json:"org_id"`
	EndpointID string    `json:"endpoint_id"`
	WebhookID  string    `json:"webhook_id"`
	Type       EventType `json:"type"`
	// Attempt counts from 1 for the first.
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	// Status is the receiver's status code, 0 when it did not answer.
	Status    int             `json:"status"`
	LatencyMS int64           `json:"latency_ms"`
	Verdict   DeliveryVerdict `json:"verdict"`
	// Error is a short excerpt of what went wrong.
	Error string `json:"error,omitempty"`
	// NextAt is when the next attempt is due, when there is one.
	NextAt *time.Time `json:"next_at,omitempty"`
}

// DeliveryLogTTL is how long an attempt stays in the log.
const DeliveryLogTTL = 30 * 24 * time.Hour

// RevisionEventData is the data of revision.deployed, revision.failed and
// revision.stopped: the revision's summary, never its manifests.
type RevisionEventData struct {
	RevisionID    string        `json:"revision_id"`
	EnvironmentID string        `json:"environment_id"`
	SpaceID       string        `json:"space_id"`
	Namespace     string        `json:"namespace"`
	State         RevisionState `json:"state"`
	Reason        string        `json:"reason,omitempty"`
	Attempts      int           `json:"attempts"`
	At            time.Time     `json:"at"`
}

// RevisionEvent is the event of a revision's stored change from before to
// after, or false when the change is none (the state did not change, or
// changed to one no event names).
func RevisionEvent(before, after RevisionSummary) (EventType, RevisionEventData, bool) {
	t, ok := map[RevisionState]EventType{RevisionDeployed: EventRevisionDeployed,
		RevisionFailed: EventRevisionFailed, RevisionStopped: EventRevisionStopped}[after.State]
	if !ok || before.State == after.State || after.ID == "" || after.OrgID == "" {
		return "", RevisionEventData{}, false
	}
	return t, RevisionEventData{RevisionID: after.ID, EnvironmentID: after.EnvironmentID, SpaceID: after.SpaceID,
		Namespace: after.Namespace, State: after.State, Reason: after.Reason, Attempts: after.Attempts, At: after.UpdatedAt.UTC()}, true
}

// JobEventData is the data of provisioning_job.succeeded and
// provisioning_job.failed: what the job is and how it ended, never its
// cluster's configuration or credentials.
type JobEventData struct {
	JobID          string          `json:"job_id"`
	Name           string          `json:"name,omitempty"`
	Provider       Provider        `json:"provider"`
	CloudAccountID string          `json:"cloud_account_id"`
	State          string          `json:"state"`
	SpaceID        string          `json:"space_id,omitempty"`
	Failure        *JobFailureData `json:"failure,omitempty"`
	At             time.Time       `json:"at"`
}

// JobFailureData is why a job failed: the step, a machine-readable reason,
// the message and whether a retry can succeed.
type JobFailureData struct {
	Step      string `json:"step"`
	Reason    string `json:"reason"`
	Message   string `json:"message,omitempty"`
	Retryable bool   `json:"retryable"`
}

// AccountEventData is the data of cloud_account.verification_failed: the
// account and the cloud's answer, never its connection.
type AccountEventData struct {
	CloudAccountID string        `json:"cloud_account_id"`
	Provider       Provider      `json:"provider"`
	Name           string        `json:"name"`
	Status         AccountStatus `json:"status"`
	Reason         string        `json:"reason,omitempty"`
	Message        string        `json:"message,omitempty"`
	At             time.Time     `json:"at"`
}

// AccountVerificationFailed reports whether a cloud account's stored change
// from before to after is a verification that failed: a new version (each
// verification stores one; the space count's updates do not) whose status
// is failed.
func AccountVerificationFailed(before, after CloudAccount) bool {
	return after.Status == AccountFailed && after.Version != before.Version && after.ID != "" && after.OrgID != ""
}
