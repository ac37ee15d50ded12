package space

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Environments and autoscaler policies bind to a space. Binding follows the
// pickers' rules (picker.go) on the observed space: an environment needs a
// registered space that is not inactive; an autoscaler policy also refuses
// synthetic spaces. Deregistering a space gates its environments and detaches
// its policies (the cascade); neither is ever deleted by it.

// GateSpaceDeregistered is the gate reason the cascade sets on every
// environment bound to a deregistered space.
const GateSpaceDeregistered = "Space deregistered"

// Environment is a deployment environment bound to one space.
type Environment struct {
	ID      string `json:"id"`
	OrgID   string `json:"org_id"`
	Name    string `json:"name"`
	SpaceID string `json:"space_id"`
	// Namespace is where the environment's revisions are applied on the
	// space's cluster.
	Namespace string `json:"namespace"`
	// Gate, when set, stops new deployments to the environment; re-binding
	// to a registered space clears it.
	Gate      *Gate     `json:"gate,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
}

// Gate is why an environment takes no new deployments, and since when.
type Gate struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	// Space is the tombstone of the deregistered space that gated it.
	Space *Tombstone `json:"space,omitempty"`
}

// PolicyState is whether an autoscaler policy is being applied.
type PolicyState string

const (
	PolicyApplied  PolicyState = "applied"
	PolicyDetached PolicyState = "detached"
)

// PolicyTarget is the workload an autoscaler policy scales.
type PolicyTarget struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
}

// ScalableKinds are the workload kinds a policy may target.
var ScalableKinds = []string{"Deployment", "StatefulSet", "ReplicaSet"}

// MaxReplicas bounds a policy's max_replicas.
const MaxReplicas = 1000

// AutoscalerPolicy scales one workload inside a space. Detaching it stops
// the platform applying it; the cloud-side policy is left as it was.
type AutoscalerPolicy struct {
	ID          string       `json:"id"`
	OrgID       string       `json:"org_id"`
	SpaceID     string       `json:"space_id"`
	Target      PolicyTarget `json:"target"`
	MinReplicas int          `json:"min_replicas"`
	MaxReplicas int          `json:"max_replicas"`
	State       PolicyState  `json:"state"`
	StateReason string       `json:"state_reason,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
	Version     int64        `json:"version"`
}

// BindingStore keeps environments and policies. Every write that binds to a
// space is conditional on the space still being registered at commit time,
// so a binding never slips in behind a deregistration unseen by the cascade.
type BindingStore interface {
	// CreateEnvironment stores e, bound to e.SpaceID (KindInvalid naming
	// space_id if that space is not registered in e.OrgID).
	CreateEnvironment(ctx context.Context, e Environment) error
	GetEnvironment(ctx context.Context, org, id string) (Environment, error)
	ListEnvironments(ctx context.Context, org string, page Page) ([]Environment, string, error)
	// RebindEnvironment binds environment id to spaceID and clears its gate,
	// if its version is version (0: any). It returns the stored result.
	RebindEnvironment(ctx context.Context, org, id, spaceID string, version int64, at time.Time) (Environment, error)

	CreatePolicy(ctx context.Context, p AutoscalerPolicy) error
	GetPolicy(ctx context.Context, org, id string) (AutoscalerPolicy, error)
	ListPolicies(ctx context.Context, org string, page Page) ([]AutoscalerPolicy, string, error)
	// DeletePolicy deletes policy id and its link to its space, if its
	// version is version (0: any): KindNotFound when there is none,
	// KindChanged at another version.
	DeletePolicy(ctx context.Context, org, id string, version int64) error
}

// Bindings is the use case of environments and autoscaler policies.
type Bindings struct {
	Spaces *Service
	Store  BindingStore
}

// NewEnvironmentInput is a request to create an environment.
type NewEnvironmentInput struct {
	Name    string
	SpaceID string
	// Namespace defaults to Name when Name is a DNS label.
	Namespace string
}

// NewPolicyInput is a request to create an autoscaler policy.
type NewPolicyInput struct {
	SpaceID     string
	Target      PolicyTarget
	MinReplicas *int
	MaxReplicas *int
}

var (
	dnsLabel     = MustPattern(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, 63)
	dnsSubdomain = MustPattern(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`, 253)
)

func checkSpaceID(fe *fieldErrors, id string) {
	switch {
	case id == "":
		fe.add("space_id", "is required")
	case !ValidID(id):
		fe.add("space_id", "must be a UUID")
	}
}

// Validate reports every bad field.
func (in NewEnvironmentInput) Validate() error {
	var fe fieldErrors
	if in.Name == "" {
		fe.add("name", "is required")
	} else {
		checkName(&fe, in.Name)
	}
	checkSpaceID(&fe, in.SpaceID)
	switch ns := in.namespace(); {
	case ns == "" && in.Namespace == "":
		fe.add("namespace", "is required when the name is not a DNS label")
	case !dnsLabel.MatchString(ns):
		fe.add("namespace", "must be a DNS label (lowercase letters, digits and '-', at most 63)")
	case ReservedNamespace(ns) != "":
		fe.add("namespace", "%s", ReservedNamespace(ns))
	}
	return fe.err("the environment is not valid")
}

// namespace is the namespace asked for, else the name when it is a DNS
// label, else "".
func (in NewEnvironmentInput) namespace() string {
	if in.Namespace != "" {
		return in.Namespace
	}
	if dnsLabel.MatchString(in.Name) {
		return in.Name
	}
	return ""
}

// Validate reports every bad field.
func (in NewPolicyInput) Validate() error {
	var fe fieldErrors
	checkSpaceID(&fe, in.SpaceID)
	t := in.Target
	switch {
	case t.Namespace == "":
		fe.add("target.namespace", "is required")
	case !dnsLabel.MatchString(t.Namespace):
		fe.add("target.namespace", "must be a DNS label (lowercase letters, digits and '-', at most 63)")
	case ReservedNamespace(t.Namespace) != "":
		fe.add("target.namespace", "%s", ReservedNamespace(t.Namespace))
	}
	switch {
	case t.Kind == "":
		fe.add("target.kind", "is required")
	case !slices.Contains(ScalableKinds, t.Kind):
		fe.add("target.kind", "must be one of %s", strings.Join(ScalableKinds, ", "))
	}
	switch {
	case t.Name == "":
		fe.add("target.name", "is required")
	case !dnsSubdomain.MatchString(t.Name):
		fe.add("target.name", "must be a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253)")
	}
	minOK := false
	switch {
	case in.MinReplicas == nil:
		fe.add("min_replicas", "is required")
	case *in.MinReplicas < 0 || *in.MinReplicas > MaxReplicas:
		fe.add("min_replicas", "must be from 0 to %d", MaxReplicas)
	default:
		minOK = true
	}
	switch {
	case in.MaxReplicas == nil:
		fe.add("max_replicas", "is required")
	case *in.MaxReplicas < 1 || *in.MaxReplicas > MaxReplicas:
		fe.add("max_replicas", "must be from 1 to %d", MaxReplicas)
	case minOK && *in.MaxReplicas < *in.MinReplicas:
		fe.add("max_replicas", "must be at least min_replicas")
	}
	return fe.err("the autoscaler policy is not valid")
}

// bindable checks the picker's rule for binding to spaceID: a live space of
// org that the picker allows, as observed now. A refusal is KindInvalid
// naming space_id.
func (b *Bindings) bindable(ctx context.Context, org, spaceID string, p Picker) error {
	s, err := b.Spaces.Get(ctx, org, spaceID)
	if KindOf(err) == KindNotFound {
		return invalidSpaceID("no registered space with this id in the org")
	}
	if err != nil {
		return err
	}
	if !p.Allows(s) {
		if s.Synthetic && p != PickerEnvironment {
			return invalidSpaceID("the space is synthetic (not a real cluster) and cannot be scaled")
		}
		return invalidSpaceID("the space is inactive; bind to a space that is active or unknown")
	}
	return nil
}

func invalidSpaceID(reason string) *Error {
	return &Error{Kind: KindInvalid, Message: "the space cannot be bound",
		Fields: []FieldError{{Field: "space_id", Reason: reason}}}
}

// ErrSpaceNotBindable is what a store answers when the space a write binds to
// is no longer registered at commit time.
func ErrSpaceNotBindable() *Error {
	return invalidSpaceID("no registered space with this id in the org")
}

// CreateEnvironment creates an environment bound to a space the
// environment picker allows.
func (b *Bindings) CreateEnvironment(ctx context.Context, org string, in NewEnvironmentInput) (Environment, error) {
	if err := in.Validate(); err != nil {
		return Environment{}, err
	}
	if err := b.bindable(ctx, org, in.SpaceID, PickerEnvironment); err != nil {
		return Environment{}, err
	}
	now := b.Spaces.Now().UTC()
	e := Environment{ID: b.Spaces.NewID(), OrgID: org, Name: in.Name, SpaceID: in.SpaceID, Namespace: in.namespace(),
		CreatedAt: now, UpdatedAt: now, Version: 1}
	return e, b.Store.CreateEnvironment(ctx, e)
}

// GetEnvironment returns one environment of org.
func (b *Bindings) GetEnvironment(ctx context.Context, org, id string) (Environment, error) {
	if !ValidID(id) {
		return Environment{}, ErrNotFound("environment")
	}
	return b.Store.GetEnvironment(ctx, org, id)
}

// ListEnvironments returns a page of org's environments in id order.
func (b *Bindings) ListEnvironments(ctx context.Context, org string, page Page) ([]Environment, string, error) {
	return b.Store.ListEnvironments(ctx, org, page)
}

// Rebind binds an environment to another (or the same) space and clears its
// gate; version is the If-Match version (0: any).
func (b *Bindings) Rebind(ctx context.Context, org, id, spaceID string, version int64) (Environment, error) {
	var fe fieldErrors
	checkSpaceID(&fe, spaceID)
	if err := fe.err("the binding is not valid"); err != nil {
		return Environment{}, err
	}
	if !ValidID(id) {
		return Environment{}, ErrNotFound("environment")
	}
	if _, err := b.Store.GetEnvironment(ctx, org, id); err != nil {
		return Environment{}, err
	}
	if err := b.bindable(ctx, org, spaceID, PickerEnvironment); err != nil {
		return Environment{}, err
	}
	return b.Store.RebindEnvironment(ctx, org, id, spaceID, version, b.Spaces.Now().UTC())
}

// CreatePolicy creates an autoscaler policy on a space the autoscaler picker
// allows; it starts applied.
func (b *Bindings) CreatePolicy(ctx context.Context, org string, in NewPolicyInput) (AutoscalerPolicy, error) {
	if err := in.Validate(); err != nil {
		return AutoscalerPolicy{}, err
	}
	if err := b.bindable(ctx, org, in.SpaceID, PickerAutoscaler); err != nil {
		return AutoscalerPolicy{}, err
	}
	now := b.Spaces.Now().UTC()
	p := AutoscalerPolicy{ID: b.Spaces.NewID(), OrgID: org, SpaceID: in.SpaceID, Target: in.Target,
		MinReplicas: *in.MinReplicas, MaxReplicas: *in.MaxReplicas, State: PolicyApplied,
		CreatedAt: now, UpdatedAt: now, Version: 1}
	return p, b.Store.CreatePolicy(ctx, p)
}

// GetPolicy returns one autoscaler policy of org.
func (b *Bindings) GetPolicy(ctx context.Context, org, id string) (AutoscalerPolicy, error) {
	if !ValidID(id) {
		return AutoscalerPolicy{}, ErrNotFound("autoscaler policy")
	}
	return b.Store.GetPolicy(ctx, org, id)
}

// ListPolicies returns a page of org's autoscaler policies in id order.
func (b *Bindings) ListPolicies(ctx context.Context, org string, page Page) ([]AutoscalerPolicy, string, error) {
	return b.Store.ListPolicies(ctx, org, page)
}

// DeletePolicy deletes an autoscaler policy of org, applied or detached,
// if it is at version (0: any). Deleting it again is KindNotFound, as for
// a webhook endpoint, a cloud account or a space: a retry changes nothing.
func (b *Bindings) DeletePolicy(ctx context.Context, org, id string, version int64) error {
	if !ValidID(id) {
		return ErrNotFound("autoscaler policy")
	}
	return b.Store.DeletePolicy(ctx, org, id, version)
}

// BoundKind is what kind of item is bound to a space.
type BoundKind string

const (
	BoundEnvironment BoundKind = "environment"
	BoundPolicy      BoundKind = "policy"
)

// Bound is one item bound to a space, as the cascade finds it.
type Bound struct {
	OrgID string
	Kind  BoundKind
	ID    string
}
