package space

import "context"

// ClusterSpec is what a provisioning job asks a cloud to build, beside the
// cluster's identity Config (clusterName, region, projectId, resourceGroup,
// subscriptionId: the same fields a registration names). Fields that do not
// apply to a provider stay empty; validation per provider is the
// provisioning domain's.
type ClusterSpec struct {
	// KubernetesVersion is the control plane's minor version ("1.31").
	KubernetesVersion string   `json:"kubernetes_version"`
	NodePool          NodePool `json:"node_pool"`
	Network           Network  `json:"network,omitempty"`
	// Tags are AWS tags, GCP resource labels or Azure tags.
	Tags map[string]string `json:"tags,omitempty"`
	// AWS: the IAM roles the EKS control plane and the nodes act as, which
	// the connected role must be allowed to pass (iam:PassRole). Empty
	// means the connected role itself, which must then also trust
	// eks.amazonaws.com and ec2.amazonaws.com.
	ClusterRoleARN string `json:"cluster_role_arn,omitempty"`
	NodeRoleARN    string `json:"node_role_arn,omitempty"`
}

// NodePool is the cluster's one node pool (EKS managed node group, GKE
// node pool, AKS agent pool).
type NodePool struct {
	// MachineType is the EC2 instance type, GCE machine type or Azure VM size.
	MachineType string `json:"machine_type"`
	Min         int    `json:"min_nodes"`
	Max         int    `json:"max_nodes"`
	Desired     int    `json:"desired_nodes"`
}

// Network is where the cloud needs networking named.
type Network struct {
	// AWS: the cluster's subnets (at least two, in two availability zones)
	// and security groups.
	SubnetIDs        []string `json:"subnet_ids,omitempty"`
	SecurityGroupIDs []string `json:"security_group_ids,omitempty"`
	// GCP: the VPC network and subnetwork names.
	Network    string `json:"network,omitempty"`
	Subnetwork string `json:"subnetwork,omitempty"`
	// Azure: the location and the VNet subnet's resource id.
	Location     string `json:"location,omitempty"`
	VNetSubnetID string `json:"vnet_subnet_id,omitempty"`
}

// CloudOperation is a cloud's handle on a creation in progress: stored with
// the job after each call, so that the next step (or a redelivery after a
// crash) polls it instead of creating again.
type CloudOperation struct {
	// Stage is the creation's stage in the provider's sequence ("cluster",
	// then "nodegroup" on EKS; one stage on GKE and AKS).
	Stage string `json:"stage"`
	// ID is what the cloud polls by: the EKS cluster or node group name, the
	// GKE operation's full name (projects/P/locations/L/operations/O), the
	// AKS cluster's resource id.
	ID string `json:"id"`
}

// CreateProgress is where a creation stands after one call.
type CreateProgress struct {
	// Operation is the operation to poll next (it changes when a stage
	// completes and the next one starts).
	Operation CloudOperation
	// Done reports the cluster and its nodes ready: the job registers it.
	Done bool
	// Status is the cloud's own word for the state (CREATING, PROVISIONING,
	// Creating, ...), passed through to the job's steps.
	Status string
}

// ClusterCreator creates clusters in a connected cloud account, as that
// account's identity (never Spaces' own). Every call is idempotent:
//
//   - StartCreate makes the first cloud call. token is the job's id; it makes
//     a repeated call (a redelivery after a crash between the call and the
//     job's write) find the creation already under way instead of starting a
//     second one: EKS's clientRequestToken, and the cluster name on GKE and
//     AKS, which the cloud holds unique.
//   - Advance polls op and, when a stage is complete, starts the next one
//     (EKS: CreateNodegroup once the control plane is ACTIVE), with the same
//     token.
//
// A cloud's refusal (unsupported version or machine type, quota exceeded,
// invalid subnet, cluster name taken by a cluster this job did not start)
// is an *Error of KindInvalid with Reason ReasonCloudRefused and the
// cloud's own message; a cloud that cannot be reached, answers 5xx or
// throttles is ReasonCloudUnavailable (a retry can succeed); an identity
// the customer did not allow to create is ReasonAccessDenied, and an
// account that is not ready ReasonAccountNotReady.
//
// mint.Minter implements it, dispatching by the account's provider to the
// eks, gke and aks minters (which tag or label what they create with
// the token, to tell their own creation from a taken name).
type ClusterCreator interface {
	StartCreate(ctx context.Context, acct CloudAccount, cfg Config, spec ClusterSpec, token string) (CreateProgress, error)
	Advance(ctx context.Context, acct CloudAccount, cfg Config, spec ClusterSpec, token string, op CloudOperation) (CreateProgress, error)
}

// ReasonCloudRefused is the reason of a creation the cloud refused.
const ReasonCloudRefused = "CloudRefused"
