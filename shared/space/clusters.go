package space

import "context"

// ClusterChecker asks the cloud whether the cluster a space names exists in
// the cloud account, before it is registered. It returns what the cloud
// said of the cluster when it does, an *Error of KindInvalid with Reason
// ReasonClusterNotFound (and the cloud's message) when it does not, and
// other *Error values (AccessDenied, CloudUnavailable,
// CredentialsUnavailable) when the cloud cannot tell.
type ClusterChecker interface {
	CheckCluster(ctx context.Context, acct CloudAccount, s Space) (ClusterFacts, error)
}

// ClusterFacts is what the cloud's answer to the registration check says
// of the cluster, in the cloud's own words; a field the cloud left out is
// empty.
type ClusterFacts struct {
	// Location is where it runs: the AWS region, the GCP region or zone,
	// the Azure location (never the resource group).
	Location string `json:"location,omitempty"`
	// KubernetesVersion is the control plane's version as the cloud names
	// it (EKS "1.31", GKE "1.31.5-gke.1023000", AKS "1.31.2").
	KubernetesVersion string `json:"kubernetes_version,omitempty"`
}

// DiscoveredCluster is a cluster a cloud account can see, as the cluster
// picker offers it.
type DiscoveredCluster struct {
	// Name is the cluster's name in its cloud.
	Name string `json:"name"`
	// Location is where it runs: the AWS region, GCP region or zone, or
	// Azure location.
	Location string `json:"location"`
	// Status is the cloud's own word for its state (ACTIVE, RUNNING,
	// Succeeded, ...), passed through.
	Status string `json:"status,omitempty"`
	// Config is the identity config to POST /spaces with.
	Config Config `json:"config"`
	// RegisteredSpaceID names the org's space already holding this cluster.
	RegisteredSpaceID string `json:"registered_space_id,omitempty"`
}

// ClusterLister lists the clusters a cloud account can see. region narrows
// the listing where the cloud lists per region (AWS, where it is required);
// the others list everywhere and ignore it.
type ClusterLister interface {
	ListClusters(ctx context.Context, acct CloudAccount, region string) ([]DiscoveredCluster, error)
}

// CheckRegistration is the cloud-side check of a registration: the cloud
// account must exist in the org for the same provider and be ready, and
// the checker must find the cluster in it. A synthetic space is a
// placeholder, so the cluster is not looked up, but it names a cluster
// all the same: only within a ready account of the org, so that another
// org's copy of an account (failed: the cloud does not trust that org)
// cannot name the first org's clusters. It is meant to run
// after in.Validate() and before the store registers s; it answers what
// the cloud said of the cluster (nothing for a synthetic space, or
// without a checker).
func CheckRegistration(ctx context.Context, store Store, checker ClusterChecker, s Space) (ClusterFacts, error) {
	acct, err := store.GetAccount(ctx, s.OrgID, s.CloudAccountID)
	if KindOf(err) == KindNotFound || (err == nil && acct.Provider != s.Provider) {
		return ClusterFacts{}, &Error{Kind: KindInvalid, Message: "the space is not valid", Fields: []FieldError{{
			Field: "cloud_account_id", Reason: "no " + string(s.Provider) + " cloud account with this id in the org",
		}}}
	}
	if err != nil {
		return ClusterFacts{}, err
	}
	// Only an account whose cloud was seen to trust this org, and only it,
	// takes registrations (confused deputy).
	if !acct.Ready() {
		return ClusterFacts{}, acct.NotReady("cloud_account_id")
	}
	if checker == nil || s.Synthetic {
		return ClusterFacts{}, nil
	}
	return checker.CheckCluster(ctx, acct, s)
}

// ValidateConfigValue checks one config value of provider p against the
// rule for key, returning "" when it is valid and the reason otherwise
// (such as a region given in a query string).
func ValidateConfigValue(p Provider, key, v string) string {
	var fe fieldErrors
	r, ok := configKeys[p][key]
	if !ok {
		return "is not a config key of " + string(p)
	}
	checkKeys(&fe, "config", map[string]string{key: v}, map[string]rule{key: r})
	if len(fe) == 0 {
		return ""
	}
	return fe[0].Reason
}
