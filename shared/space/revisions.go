package space

import (
	"context"
	"strconv"
	"time"
)

// Deployment revisions: a push of manifests to an environment, queued and
// claimed asynchronously (shared/revisions). The claim decides from the
// space the revision was pushed to: an active space gets the manifests
// (server-side apply); an inactive or unknown one is retried with backoff up
// to MaxClaimAttempts, then the revision stops and can be retried once the
// space is active again; a deregistered one dead-letters the revision at
// that claim attempt.

// RevisionState is where a revision is in its life.
type RevisionState string

const (
	RevisionPending      RevisionState = "pending"
	RevisionDeployed     RevisionState = "deployed"
	RevisionFailed       RevisionState = "failed"
	RevisionStopped      RevisionState = "stopped"
	RevisionDeadLettered RevisionState = "dead-lettered"
)

// MaxClaimAttempts is how many claims find the space not active before the
// revision stops.
const MaxClaimAttempts = 3

// ReasonSpaceInactive is the reason of a revision stopped by an inactive or
// unknown space.
const ReasonSpaceInactive = "Space inactive"

// ReasonNamespaceReserved is the reason of a push refused because its
// environment names a namespace Spaces never touches (ReservedNamespace).
const ReasonNamespaceReserved = "NamespaceReserved"

// MaxManifests bounds the manifests of one revision.
const MaxManifests = 50

// Revision is one push of manifests to an environment.
type Revision struct {
	ID            string           `json:"id"`
	OrgID         string           `json:"org_id"`
	EnvironmentID string           `json:"environment_id"`
	SpaceID       string           `json:"space_id"`
	Namespace     string           `json:"namespace"`
	Manifests     []map[string]any `json:"manifests"`
	State         RevisionState    `json:"state"`
	// Reason says why the revision is failed, stopped or dead-lettered (for
	// failed: the cluster's message).
	Reason    string    `json:"reason,omitempty"`
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
}

// RevisionSummary is a revision without its manifests: what a listing
// answers (a page of full revisions could pass Lambda's 6 MB response;
// GET /revisions/{id} has the manifests).
type RevisionSummary struct {
	ID            string        `json:"id"`
	OrgID         string        `json:"org_id"`
	EnvironmentID string        `json:"environment_id"`
	SpaceID       string        `json:"space_id"`
	Namespace     string        `json:"namespace"`
	State         RevisionState `json:"state"`
	Reason        string        `json:"reason,omitempty"`
	Attempts      int           `json:"attempts"`
	CreatedAt     time.Time     `json:"created_at"`
	UpdatedAt     time.Time     `json:"updated_at"`
	Version       int64         `json:"version"`
}

// Summary is r without its manifests.
func (r Revision) Summary() RevisionSummary {
	return RevisionSummary{ID: r.ID, OrgID: r.OrgID, EnvironmentID: r.EnvironmentID, SpaceID: r.SpaceID, Namespace: r.Namespace,
		State: r.State, Reason: r.Reason, Attempts: r.Attempts, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version}
}

// ClaimDecision is what a claim does with a pending revision.
type ClaimDecision int

const (
	ClaimDeploy ClaimDecision = iota
	ClaimRetry
	ClaimStop
	ClaimDeadLetter
)

// DecideClaim applies the rules above to the space as observed now (found
// is false when the space item does not exist). attempts counts the claims
// before this one that found the space not active.
func DecideClaim(s Space, found bool, attempts int) (ClaimDecision, string) {
	switch {
	case !found || s.Deleted():
		return ClaimDeadLetter, GateSpaceDeregistered
	case s.Status == Active:
		return ClaimDeploy, ""
	case attempts+1 >= MaxClaimAttempts:
		return ClaimStop, ReasonSpaceInactive
	default:
		return ClaimRetry, ReasonSpaceInactive
	}
}

// RevisionStore keeps revisions.
type RevisionStore interface {
	CreateRevision(ctx context.Context, r Revision) error
	GetRevision(ctx context.Context, org, id string) (Revision, error)
	// UpdateRevision changes a revision (see Update).
	UpdateRevision(ctx context.Context, org, id string, u Update[Revision]) (Updated[Revision], error)
	// ListRevisions pages through the environment's revisions, newest
	// first; page.After is what the previous page returned to continue
	// after ("" when complete).
	ListRevisions(ctx context.Context, org, envID string, page Page) ([]RevisionSummary, string, error)
	// StoppedRevisions pages through org's stopped revisions, the most
	// recently stopped first.
	StoppedRevisions(ctx context.Context, org string, page Page) ([]RevisionSummary, string, error)
}

// RevisionQueue hands a revision to the claimer.
type RevisionQueue interface {
	EnqueueRevision(ctx context.Context, org, id string) error
}

// Revisions is the use case of pushing and retrying revisions.
type Revisions struct {
	Bindings *Bindings
	Store    RevisionStore
	Queue    RevisionQueue
}

// Push validates the manifests, stores a pending revision of the
// environment and enqueues it. A gated environment takes no revision (409).
func (rv *Revisions) Push(ctx context.Context, org, envID string, manifests []map[string]any) (Revision, error) {
	if !ValidID(envID) {
		return Revision{}, ErrNotFound("environment")
	}
	if err := CheckManifests(manifests); err != nil {
		return Revision{}, err
	}
	e, err := rv.Bindings.GetEnvironment(ctx, org, envID)
	if err != nil {
		return Revision{}, err
	}
	if e.Gate != nil {
		return Revision{}, &Error{Kind: KindConflict, Reason: e.Gate.Reason,
			Message: "the environment is gated (" + e.Gate.Reason + "): bind it to a registered space first"}
	}
	// An environment stored before the rule may name a reserved namespace.
	if why := ReservedNamespace(e.Namespace); why != "" {
		return Revision{}, &Error{Kind: KindConflict, Reason: ReasonNamespaceReserved,
			Message: "the environment's namespace " + e.Namespace + " " + why + "; create an environment in a namespace of its own"}
	}
	if err := checkManifestNamespaces(e.Namespace, manifests); err != nil {
		return Revision{}, err
	}
	now := rv.Bindings.Spaces.Now().UTC()
	r := Revision{ID: rv.Bindings.Spaces.NewID(), OrgID: org, EnvironmentID: e.ID, SpaceID: e.SpaceID, Namespace: e.Namespace,
		Manifests: manifests, State: RevisionPending, CreatedAt: now, UpdatedAt: now, Version: 1}
	if err := rv.Store.CreateRevision(ctx, r); err != nil {
		return Revision{}, err
	}
	return r, rv.Queue.EnqueueRevision(ctx, org, r.ID)
}

// CheckManifests reports every problem of a revision's manifests: count,
// the fields the applier needs, kinds outside a namespace, and DynamoDB's
// limits (manifest.go).
func CheckManifests(manifests []map[string]any) error {
	var fe fieldErrors
	switch {
	case len(manifests) == 0:
		fe.add("manifests", "must hold 1 to %d Kubernetes objects", MaxManifests)
	case len(manifests) > MaxManifests:
		fe.add("manifests", "must hold at most %d Kubernetes objects", MaxManifests)
	}
	size := ManifestsSize(nil)
	for i, m := range manifests {
		size += 1 + checkManifest(&fe, i, m)
	}
	if size > MaxManifestsSize {
		fe.add("manifests", "take %d bytes as a DynamoDB attribute; at most %d fit in a revision", size, MaxManifestsSize)
	}
	return fe.err("the revision is not valid")
}

// checkManifest checks one manifest and returns its size in DynamoDB
// terms (manifest.go).
func checkManifest(fe *fieldErrors, i int, m map[string]any) int {
	at := func(f string) string { return "manifests[" + strconv.Itoa(i) + "]." + f }
	str := func(v any) string { s, _ := v.(string); return s }
	if str(m["apiVersion"]) == "" {
		fe.add(at("apiVersion"), "is required")
	}
	switch kind := str(m["kind"]); {
	case kind == "":
		fe.add(at("kind"), "is required")
	case ClusterScoped(kind):
		fe.add(at("kind"), "is cluster-scoped; a revision may only hold objects in its environment's namespace")
	}
	meta, _ := m["metadata"].(map[string]any)
	if !dnsSubdomain.MatchString(str(meta["name"])) {
		fe.add(at("metadata.name"), "is required: a DNS subdomain")
	}
	if ns := str(meta["namespace"]); meta["namespace"] != nil && ns == "" {
		fe.add(at("metadata.namespace"), "must be a string")
	}
	return checkManifestValues(fe, "manifests["+strconv.Itoa(i)+"]", m)
}

// checkManifestNamespaces refuses a manifest that names a namespace other
// than its environment's: a revision never escapes its namespace (the
// applier refuses it again, and a cluster-scoped kind, before any call).
func checkManifestNamespaces(namespace string, manifests []map[string]any) error {
	var fe fieldErrors
	for i, m := range manifests {
		meta, _ := m["metadata"].(map[string]any)
		if ns, _ := meta["namespace"].(string); ns != "" && ns != namespace {
			fe.add("manifests["+strconv.Itoa(i)+"].metadata.namespace",
				"is %q; a revision may only hold objects in its environment's namespace %q (leave it out)", ns, namespace)
		}
	}
	return fe.err("the revision is not valid")
}

// Get returns one revision of org.
func (rv *Revisions) Get(ctx context.Context, org, id string) (Revision, error) {
	if !ValidID(id) {
		return Revision{}, ErrNotFound("revision")
	}
	return rv.Store.GetRevision(ctx, org, id)
}

// List pages through one environment's revisions, newest first. Another
// org's environment is not found.
func (rv *Revisions) List(ctx context.Context, org, envID string, page Page) ([]RevisionSummary, string, error) {
	if !ValidID(envID) {
		return nil, "", ErrNotFound("environment")
	}
	if _, err := rv.Bindings.GetEnvironment(ctx, org, envID); err != nil {
		return nil, "", err
	}
	return rv.Store.ListRevisions(ctx, org, envID, page)
}

// Stopped pages through org's stopped revisions (stopped on a space that
// stayed inactive: the ones a person may re-enqueue), most recently
// stopped first.
func (rv *Revisions) Stopped(ctx context.Context, org string, page Page) ([]RevisionSummary, string, error) {
	return rv.Store.StoppedRevisions(ctx, org, page)
}

// Retry re-enqueues a stopped revision once its space is active again;
// anything else is 409.
func (rv *Revisions) Retry(ctx context.Context, org, id string) (Revision, error) {
	r, err := rv.Get(ctx, org, id)
	if err != nil {
		return Revision{}, err
	}
	if r.State != RevisionStopped {
		return Revision{}, Errorf(KindConflict, "only a stopped revision can be retried; this one is %s", r.State)
	}
	s, err := rv.Bindings.Spaces.Get(ctx, org, r.SpaceID)
	if KindOf(err) == KindNotFound {
		return Revision{}, Errorf(KindConflict, "the revision's space is deregistered")
	}
	if err != nil {
		return Revision{}, err
	}
	if s.Status != Active {
		return Revision{}, Errorf(KindConflict, "the revision's space is %s; retry once it is active", s.Status)
	}
	res, err := rv.Store.UpdateRevision(ctx, org, id, Update[Revision]{At: rv.Bindings.Spaces.Now(), Read: &r,
		Apply: func(r Revision) (Revision, error) {
			if r.State != RevisionStopped {
				return r, Errorf(KindConflict, "only a stopped revision can be retried; this one is %s", r.State)
			}
			r.State, r.Reason, r.Attempts = RevisionPending, "", 0
			return r, nil
		}})
	if err != nil {
		return Revision{}, err
	}
	return res.After, rv.Queue.EnqueueRevision(ctx, org, id)
}
