package space

import (
	"cmp"
	"time"
)

// RegisterInput is what a caller supplies to register an existing cluster.
type RegisterInput struct {
	Name           string
	Provider       Provider
	SpaceType      string
	CloudAccountID string
	Config         Config
	Synthetic      bool
	Labels         Labels `json:",omitempty"` // omitted when empty, so stored hashes of label-less requests stay valid
	// Connectivity defaults to Direct.
	Connectivity Connectivity
	// JobID is the provisioning job registering the cluster it created
	// (never a client's field): the one registration the job's claim on
	// the cluster lets through. Left out of the idempotency hash.
	JobID string `json:"-"`
}

// Validate reports every bad field at once. It does not look at the cloud
// account; the service checks that against the store.
func (in RegisterInput) Validate() error {
	var fe fieldErrors
	if checkProvider(&fe, in.Provider) {
		if in.Config == nil {
			fe.add("config", "is required")
		} else {
			checkKeys(&fe, "config", in.Config, configKeys[in.Provider])
		}
	}
	switch in.SpaceType {
	case "":
		fe.add("space_type", "is required")
	case TypeKubernetes:
	default:
		fe.add("space_type", "is reserved; only %q is accepted today", TypeKubernetes)
	}
	if in.CloudAccountID == "" {
		fe.add("cloud_account_id", "is required")
	} else if !ValidID(in.CloudAccountID) {
		fe.add("cloud_account_id", "must be a UUID")
	}
	checkName(&fe, in.Name)
	checkSpaceLabels(&fe, in.Labels)
	if in.Connectivity != "" && !in.Connectivity.Valid() {
		fe.add("connectivity", "must be one of direct, agent")
	}
	return fe.err("the space is not valid")
}

// NewSpace builds the space a valid input registers.
func NewSpace(id, org string, in RegisterInput, now time.Time) Space {
	name := in.Name
	if name == "" {
		name = in.Config["clusterName"]
	}
	cfg := make(Config, len(in.Config))
	for k, v := range in.Config {
		cfg[k] = v
	}
	return Space{
		ID:             id,
		OrgID:          org,
		Name:           name,
		Provider:       in.Provider,
		SpaceType:      in.SpaceType,
		CloudAccountID: in.CloudAccountID,
		Config:         cfg,
		Synthetic:      in.Synthetic,
		Labels:         cloneLabels(in.Labels),
		Connectivity:   cmp.Or(in.Connectivity, Direct),
		JobID:          in.JobID,
		Status:         Unknown,
		CreatedAt:      now,
		UpdatedAt:      now,
		Version:        1,
	}
}
