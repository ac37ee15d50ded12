package space

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The cluster-side work of an agent space. Spaces cannot call a
// private API server, so the work waits in the space's AGENT item until
// the agent's next lease renewal, whose answer carries it (the renewal's
// one conditional write returns the item it replaced: no extra request
// while there is nothing to do); the agent does it as its ServiceAccount
// and reports each result on an agent route authenticated like the lease.
//
//   - Namespaces: a list is wanted when none was reported yet, or a user
//     asked for the list since the last report; a create is recorded as
//     pending (202) and carried out on the next renewal, after which the
//     agent reports the whole list again.
//   - Revisions: a claim that would deploy to an agent space hands the
//     revision (its id and version) to the agent instead of minting; the
//     revision stays pending until the agent's report sets it deployed or
//     failed, conditional on the version handed, so a repeated report does
//     nothing twice.

// Bounds on the work and the reports, so that an item stays far below
// DynamoDB's 400 KB and an answer below Lambda's 6 MB.
const (
	// MaxPendingNamespaceCreates bounds the creates waiting for the agent.
	MaxPendingNamespaceCreates = 20
	// MaxReportedNamespaces bounds a namespaces report.
	MaxReportedNamespaces = 1000
	// MaxNamespacesReportBody bounds a namespaces report's JSON body, so
	// that the list stored from it fits a DynamoDB item (400 KB).
	MaxNamespacesReportBody = 256 << 10
	// MaxRevisionsPerLease bounds the revisions one lease answer carries;
	// the others follow on the next renewals.
	MaxRevisionsPerLease = 5
	// ReportInterval is how often a space's list may be rewritten
	// unasked: a report that changes the stored list, answers no create
	// and follows no user's ask is refused (429, ErrReportTooSoon) within
	// ReportInterval of the last list written. The agent reports only
	// when asked, so it never meets the limit; a leaked credential can
	// rewrite the list (up to ~260 write units in a transaction) once a
	// minute, not a hundred times a second. A report that changes nothing
	// rewrites no list whenever it comes (NamespacesReport.Hash).
	ReportInterval = time.Minute
)

// NamespaceCreate is a create waiting for the agent, as the lease answer
// carries it.
type NamespaceCreate struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// AgentRevision is a revision handed to the agent: what to apply, and the
// version its report must name.
type AgentRevision struct {
	ID        string           `json:"id"`
	Version   int64            `json:"version"`
	Namespace string           `json:"namespace"`
	Manifests []map[string]any `json:"manifests"`
}

// AgentWork is the work a lease answer carries.
type AgentWork struct {
	NamespacesWanted bool              `json:"namespaces_wanted"`
	NamespaceCreates []NamespaceCreate `json:"namespace_creates"`
	Revisions        []AgentRevision   `json:"revisions"`
}

// AgentPending is the work the AGENT item held when a renewal replaced it.
type AgentPending struct {
	Creates map[string]NamespaceCreate
	// ObservedAt is the last namespaces report; WantedAt the last time a
	// user asked for the list (nil: never).
	ObservedAt, WantedAt *time.Time
	// Handed are the revisions handed to the agent: id → version.
	Handed map[string]int64
}

// LeaseRenewal is what the store answers a renewal: the space's org, the
// renewal before this one (nil: the first), and the pending work.
type LeaseRenewal struct {
	OrgID   string
	Before  *time.Time
	Pending AgentPending
	// Presence is the lifecycle event stored then (presence.go), so that a
	// connected agent's fallback renewal is not taken for a lapse.
	Presence *Presence
}

// NamespaceList is a space's namespaces as the API answers them. For a
// direct space only Items (read from the cluster while the request
// waits); for an agent space the list its agent last reported, with when
// (ObservedAt, nil until the first report), the creates it has not carried
// out yet and those its last attempt could not.
type NamespaceList struct {
	Items      []Namespace       `json:"items"`
	ObservedAt *time.Time        `json:"observed_at,omitempty"`
	Pending    []NamespaceCreate `json:"pending,omitempty"`
	Failed     []FailedNamespace `json:"failed,omitempty"`
}

// FailedNamespace is a create the cluster refused.
type FailedNamespace struct {
	Name    string    `json:"name"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// NamespacesReport is the agent's report: the cluster's namespaces (the
// whole list, after any creates) and the outcome of each create it was
// handed ("" for created or already there).
type NamespacesReport struct {
	Items   []ReportedNamespace
	Creates []CreateOutcome
}

// ReportedNamespace is a namespace as the agent reports it; its creation
// time is checked by Validate (a bad one is a bad value, 422, not a bad
// type).
type ReportedNamespace struct {
	Name      string            `json:"name"`
	Phase     string            `json:"phase"`
	Labels    map[string]string `json:"labels"`
	CreatedAt string            `json:"created_at"`
}

// Namespaces is the report's list as stored (after Validate).
func (r NamespacesReport) Namespaces() []Namespace {
	out := make([]Namespace, 0, len(r.Items))
	for _, n := range r.Items {
		at, _ := time.Parse(time.RFC3339, n.CreatedAt)
		labels := n.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		out = append(out, Namespace{Name: n.Name, Phase: n.Phase, Labels: labels, CreatedAt: at.UTC()})
	}
	return out
}

// Hash names the report's list as it would be stored, whatever its order:
// an equal hash is an unchanged list, and storing it again is skipped.
func (r NamespacesReport) Hash() string {
	list := r.Namespaces()
	slices.SortFunc(list, func(x, y Namespace) int { return strings.Compare(x.Name, y.Name) })
	b, _ := json.Marshal(list) // plain values: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ErrReportTooSoon answers an unasked list change within ReportInterval of
// the last list stored; retry tells when the next is taken.
func ErrReportTooSoon(retry time.Duration) error {
	return &Error{Kind: KindTooManyRequests, Reason: "ReportTooSoon", RetryAfter: retry,
		Message: "the namespace list was stored less than " + ReportInterval.String() +
			" ago and this report changes it unasked; retry after Retry-After seconds"}
}

// CreateOutcome is one handed create's result.
type CreateOutcome struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// Validate reports every bad field at once.
func (r NamespacesReport) Validate() error {
	var fe fieldErrors
	if len(r.Items) > MaxReportedNamespaces {
		fe.add("items", "must hold at most %d namespaces", MaxReportedNamespaces)
	}
	seen := map[string]bool{}
	for i, n := range r.Items {
		at := "items[" + itoa(i) + "]"
		checkNamespaceName(&fe, at+".name", n.Name)
		if seen[n.Name] {
			fe.add(at+".name", "is repeated")
		}
		seen[n.Name] = true
		if len(n.Phase) > 32 || !printable(n.Phase) {
			fe.add(at+".phase", "must be at most 32 printable ASCII characters")
		}
		if _, err := time.Parse(time.RFC3339, n.CreatedAt); err != nil {
			fe.add(at+".created_at", "must be an RFC 3339 time")
		}
		var lf []FieldError
		CheckLabels(&lf, at+".labels", n.Labels)
		fe = append(fe, lf...)
	}
	if len(r.Creates) > MaxPendingNamespaceCreates {
		fe.add("creates", "must hold at most %d outcomes", MaxPendingNamespaceCreates)
	}
	for i, c := range r.Creates {
		at := "creates[" + itoa(i) + "]"
		checkNamespaceName(&fe, at+".name", c.Name)
		if len(c.Error) > 4096 {
			fe.add(at+".error", "must be at most 4096 bytes")
		} else {
			checkText(&fe, at+".error", c.Error, 4096)
		}
	}
	return fe.err("the namespaces report is not valid")
}

var namespaceName = MustPattern(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, 63)

func checkNamespaceName(fe *fieldErrors, field, name string) {
	if !namespaceName.MatchString(name) {
		fe.add(field, "must be a DNS-1123 label")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// RevisionReport is the agent's result of applying a handed revision: the
// version it was handed and the applier's error ("" when every manifest
// applied).
type RevisionReport struct {
	Version int64
	Error   string
}

// AgentWorkStore keeps the work waiting for agents and their reports.
// Every method that takes a credential hash is one conditional write whose
// condition is the authentication, as the lease's.
type AgentWorkStore interface {
	// RequestNamespace records a pending create for org's agent space:
	// KindConflict if one of that name is pending or in the agent's last
	// list (atomically: a report landing meanwhile is seen); KindNotFound
	// if the space has no agent item (deregistered). Bounding the pending
	// creates (MaxPendingNamespaceCreates) is the caller's.
	RequestNamespace(ctx context.Context, org, spaceID string, c NamespaceCreate) error
	// WantNamespaces records that a user asked for the list at now.
	WantNamespaces(ctx context.Context, org, spaceID string, now time.Time) error
	// ReportedNamespaces reads the last report and the pending creates.
	ReportedNamespaces(ctx context.Context, org, spaceID string) (NamespaceList, error)
	// ReportNamespaces stores a report, and drops the creates it answers.
	// A list equal to the stored one (Hash) moves only the time observed;
	// a changed list that answers no create, within ReportInterval of the
	// last list stored and with no user's ask since, is ErrReportTooSoon.
	ReportNamespaces(ctx context.Context, spaceID, credHash string, r NamespacesReport, now time.Time) error
	// HandRevision records r as the agent's to apply (idempotent).
	HandRevision(ctx context.Context, r Revision) error
	// ForgetHanded drops a handed revision that moved on (its version is
	// no longer the one handed), if it is still the one handed.
	ForgetHanded(ctx context.Context, spaceID, revID string, version int64) error
	// TakeHanded drops the handed revision revID of the credential's space
	// if it was handed at version, and answers its org; KindConflict if it
	// is not (already reported, or moved on).
	TakeHanded(ctx context.Context, spaceID, credHash, revID string, version int64, now time.Time) (org string, err error)
}

// leaseWork turns what the AGENT item held into the answer's work. A
// handed revision that moved on (stopped, retried, deregistered) is not
// carried and is dropped from the item (best effort: the next renewal
// tries again).
func (a *Agents) leaseWork(ctx context.Context, org, spaceID string, p AgentPending) AgentWork {
	w := AgentWork{NamespaceCreates: []NamespaceCreate{}, Revisions: []AgentRevision{}}
	for _, c := range p.Creates {
		w.NamespaceCreates = append(w.NamespaceCreates, c)
	}
	slices.SortFunc(w.NamespaceCreates, func(x, y NamespaceCreate) int { return strings.Compare(x.Name, y.Name) })
	w.NamespacesWanted = p.ObservedAt == nil || len(p.Creates) > 0 ||
		(p.WantedAt != nil && !p.WantedAt.Before(*p.ObservedAt))
	if a.Work == nil || a.Revisions == nil {
		return w
	}
	ids := make([]string, 0, len(p.Handed))
	for id := range p.Handed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if len(w.Revisions) == MaxRevisionsPerLease {
			break
		}
		version := p.Handed[id]
		r, err := a.Revisions.GetRevision(ctx, org, id)
		switch {
		case err == nil && r.State == RevisionPending && r.Version == version && r.SpaceID == spaceID:
			w.Revisions = append(w.Revisions, AgentRevision{ID: r.ID, Version: r.Version, Namespace: r.Namespace, Manifests: r.Manifests})
		case err == nil || KindOf(err) == KindNotFound:
			_ = a.Work.ForgetHanded(ctx, spaceID, id, version)
		}
	}
	return w
}

// ReportNamespaces checks the report, then stores it for the credential's
// own space only (another space's id is not found, as for the lease).
func (a *Agents) ReportNamespaces(ctx context.Context, raw, spaceID string, r NamespacesReport) error {
	t, err := a.agentFor(raw, spaceID)
	if err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	return a.Work.ReportNamespaces(ctx, t.SpaceID, t.Hash(), r, a.Now().UTC())
}

// ReportRevision records the agent's result of a revision handed to its
// space: deployed, or failed with the applier's message as the reason
// (FailureReason, as the claimer's). The handed entry is taken first (the
// authentication, and proof the revision was handed to this space at this
// version), then the revision written conditional on that version: a
// repeated report finds nothing to take (409) and writes nothing. A crash
// between the two leaves the revision pending; its queued message comes
// back and hands it again.
func (a *Agents) ReportRevision(ctx context.Context, raw, spaceID, revID string, r RevisionReport) error {
	t, err := a.agentFor(raw, spaceID)
	if err != nil {
		return err
	}
	var fe fieldErrors
	if !ValidID(revID) {
		fe.add("revision_id", "must be a revision id")
	}
	if r.Version < 1 {
		fe.add("version", "must be a revision version (1 or more)")
	}
	if len(r.Error) > 64<<10 {
		fe.add("error", "must be at most 65536 bytes")
	} else {
		checkText(&fe, "error", r.Error, 64<<10)
	}
	if err := fe.err("the revision report is not valid"); err != nil {
		return err
	}
	now := a.Now().UTC()
	org, err := a.Work.TakeHanded(ctx, t.SpaceID, t.Hash(), revID, r.Version, now)
	if err != nil {
		return err
	}
	state, reason := RevisionDeployed, ""
	if r.Error != "" {
		state, reason = RevisionFailed, FailureReason(r.Error)
	}
	_, err = a.Revisions.UpdateRevision(ctx, org, revID, Update[Revision]{At: now, Apply: func(rev Revision) (Revision, error) {
		if rev.Version != r.Version || rev.State != RevisionPending || rev.SpaceID != t.SpaceID {
			return rev, errNotAwaited
		}
		rev.State, rev.Reason = state, reason
		return rev, nil
	}})
	return err
}

// Authenticate checks that raw is a valid, unexpired credential of
// spaceID (one read, no write), so that a report's body is read only for
// its own agent; the report's write is still conditional on it.
func (a *Agents) Authenticate(ctx context.Context, raw, spaceID string) error {
	t, err := a.agentFor(raw, spaceID)
	if err != nil {
		return err
	}
	_, err = a.Store.CheckCredential(ctx, t.SpaceID, t.Hash(), a.Now().UTC())
	return err
}

// ErrNotRequested answers a namespaces report carrying the outcome of a
// create that is not pending (never requested, or answered already).
func ErrNotRequested(names []string) error {
	var fe fieldErrors
	for _, n := range names {
		fe.add("creates", "%s was not requested (or was answered already)", n)
	}
	return &Error{Kind: KindConflict, Reason: "NotRequested",
		Message: "the report answers a namespace create that is not pending", Fields: fe}
}

// errNotAwaited answers a report of a revision that is not waiting for it.
var errNotAwaited = &Error{Kind: KindConflict, Reason: "NotAwaited",
	Message: "the revision is not awaiting this report (already reported, or it moved on)"}

// ErrNotAwaited is errNotAwaited for the store.
func ErrNotAwaited() error { e := *errNotAwaited; return &e }

// agentFor parses the credential and checks it names spaceID.
func (a *Agents) agentFor(raw, spaceID string) (AgentToken, error) {
	t, err := ParseAgentCredential(raw)
	if err != nil {
		return AgentToken{}, err
	}
	if t.SpaceID != spaceID {
		return AgentToken{}, ErrNotFound("space")
	}
	if a.Work == nil {
		return AgentToken{}, Errorf(KindUnavailable, "agent work is not served here")
	}
	return t, nil
}
