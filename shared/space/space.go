package space

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Provider is the cloud that hosts a cluster.
type Provider string

const (
	AWS   Provider = "aws"
	GCP   Provider = "gcp"
	Azure Provider = "azure"
)

// Providers lists the supported providers in a stable order.
var Providers = []Provider{AWS, GCP, Azure}

func (p Provider) Valid() bool { return slices.Contains(Providers, p) }

// Status is a space's reachability as the probe sees it.
type Status string

const (
	Active   Status = "active"
	Inactive Status = "inactive"
	Unknown  Status = "unknown"
)

// Statuses lists every status.
var Statuses = []Status{Active, Inactive, Unknown}

func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// TypeKubernetes is the only space type accepted today; others are reserved.
const TypeKubernetes = "kubernetes"

// Config is a provider's cluster identity: exactly the keys that provider
// documents (see configKeys), immutable once registered.
type Config map[string]string

// Space is the platform's pointer to one cluster.
type Space struct {
	ID             string   `json:"id"`
	OrgID          string   `json:"org_id"`
	Name           string   `json:"name"`
	Provider       Provider `json:"provider"`
	SpaceType      string   `json:"space_type"`
	CloudAccountID string   `json:"cloud_account_id"`
	Config         Config   `json:"config"`
	Synthetic      bool     `json:"synthetic"`
	// Labels are the owner's, set at registration and by SetLabels
	// (labels.go); absent when there are none.
	Labels Labels `json:"labels,omitempty"`
	// Location and KubernetesVersion are what the cloud said of the
	// cluster when registration looked it up (ClusterFacts), kept as it
	// said them; a synthetic space has neither (no cloud is asked).
	Location          string `json:"location,omitempty"`
	KubernetesVersion string `json:"kubernetes_version,omitempty"`
	// JobID is set only while a provisioning job registers the cluster it
	// created (RegisterInput.JobID); neither stored nor answered.
	JobID     string     `json:"-" dynamodbav:"-"`
	Status    Status     `json:"status"`
	Probe     Probe      `json:"probe"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	// DeletedBy is who deregistered the space (the token's subject).
	DeletedBy string `json:"deleted_by,omitempty"`
	Version   int64  `json:"version"`

	// Connectivity is direct or agent (agent.go); fixed at registration.
	Connectivity Connectivity `json:"connectivity"`

	// Notices are the inventory's thresholds already announced
	// (notices.go): stored in an attribute of their own by the store,
	// never part of the API's body.
	Notices Notices `json:"-"`
}

// Probe is what the reachability probe last learned about a space.
type Probe struct {
	Reason              string         `json:"reason,omitempty"`
	Message             string         `json:"message,omitempty"`
	LatencyMS           int64          `json:"latency_ms,omitempty"`
	ConsecutiveFailures int            `json:"consecutive_failures"`
	LastProbeAt         *time.Time     `json:"last_probe_at,omitempty"`
	LastSuccessAt       *time.Time     `json:"last_success_at,omitempty"`
	LastTransitionAt    *time.Time     `json:"last_transition_at,omitempty"`
	ServerVersion       *ServerVersion `json:"server_version,omitempty"`
	// Certificate is the API server's serving certificate as the last
	// probe that got an answer saw it; an agent space has none (Spaces
	// never reaches its API server, and the lease does not report one).
	Certificate *Certificate `json:"certificate,omitempty"`
	// Nodes are an agent space's nodes as its agent last reported them
	// (nodes.go), stored when they change; absent for a direct space.
	Nodes *Nodes `json:"nodes,omitempty"`
}

// Certificate is what a TLS handshake with the API server showed of its
// serving (leaf) certificate: when it stops being valid and who issued it.
type Certificate struct {
	NotAfter time.Time `json:"not_after"`
	// Issuer is the issuer's distinguished name as crypto/x509 spells it
	// ("CN=kubernetes").
	Issuer string `json:"issuer"`
}

// ServerVersion is the part of the cluster's /version answer worth keeping.
type ServerVersion struct {
	GitVersion string `json:"gitVersion"`
	Platform   string `json:"platform"`
}

// Deleted reports whether the space has been deregistered.
func (s Space) Deleted() bool { return s.DeletedAt != nil }

// Tombstone is what stays visible of a deregistered space to the views
// that reference it (its own 404, the gate of an environment it held): its
// name, and when and by whom it was deregistered. It is read-only: nothing
// ever makes a tombstone a space again.
type Tombstone struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Provider       Provider  `json:"provider"`
	DeregisteredAt time.Time `json:"deregistered_at"`
	DeregisteredBy string    `json:"deregistered_by,omitempty"`
}

// Tombstone is s's tombstone; nil while s is registered.
func (s Space) Tombstone() *Tombstone {
	if s.DeletedAt == nil {
		return nil
	}
	return &Tombstone{ID: s.ID, Name: s.Name, Provider: s.Provider, DeregisteredAt: s.DeletedAt.UTC(), DeregisteredBy: s.DeletedBy}
}

// Identity is the key that makes a cluster unique within an org: the provider
// and its config, in a canonical form, compared the way the cloud compares:
// Azure resource ids are case-insensitive, so Azure values are folded; EKS and
// GKE names are case-sensitive and kept as they are.
func (s Space) Identity() string { return Identity(s.Provider, s.Config) }

// Identity builds the canonical identity string for provider and config.
func Identity(p Provider, c Config) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(string(p))
	for _, k := range keys {
		v := c[k]
		if p == Azure {
			v = strings.ToLower(v)
		}
		b.WriteString("|" + k + "=" + v)
	}
	return b.String()
}
