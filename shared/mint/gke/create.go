package gke

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"

	"spaces/shared/mint/cloud"
	"spaces/shared/space"
)

// StageCluster is the one stage of a GKE creation: its operation is polled
// until DONE.
const StageCluster = "cluster"

// JobLabel is the resource label naming the provisioning job on the
// cluster: a repeated clusters.create that finds the name taken tells its
// own creation (continue polling) from someone else's cluster (refuse).
const JobLabel = "spaces-provisioning-job"

// NodePoolName names the one node pool Spaces creates.
const NodePoolName = "default-pool"

var _ space.ClusterCreator = (*Minter)(nil)

// StartCreate calls clusters.create as the account's service account. The
// cluster name is unique in its location, so a repeated call finds the
// cluster (with this job's label) and its creation operation.
func (m *Minter) StartCreate(ctx context.Context, acct space.CloudAccount, cfg space.Config, spec space.ClusterSpec, token string) (space.CreateProgress, error) {
	api, err := m.creatorAPI(ctx, acct)
	if err != nil {
		return space.CreateProgress{}, err
	}
	parent := "projects/" + cfg["projectId"] + "/locations/" + cfg["region"]
	np := spec.NodePool
	labels := map[string]string{JobLabel: token}
	for k, v := range spec.Tags {
		labels[k] = v
	}
	op, err := api.CreateCluster(ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
		Name:                  cfg["clusterName"],
		InitialClusterVersion: spec.KubernetesVersion,
		Network:               spec.Network.Network,
		Subnetwork:            spec.Network.Subnetwork,
		ResourceLabels:        labels,
		NodePools: []*containerpb.NodePool{{
			Name:             NodePoolName,
			InitialNodeCount: int32(np.Desired),
			Config:           &containerpb.NodeConfig{MachineType: np.MachineType},
			Autoscaling:      &containerpb.NodePoolAutoscaling{Enabled: true, MinNodeCount: int32(np.Min), MaxNodeCount: int32(np.Max)},
		}},
	}})
	if err == nil {
		return operationProgress(parent, op)
	}
	if httpCode(err) != http.StatusConflict {
		return space.CreateProgress{}, createError("gke:CreateCluster", err)
	}
	return adopt(ctx, api, parent, cfg["clusterName"], token, err)
}

// adopt continues this job's creation after ALREADY_EXISTS: the cluster
// carries the job's label, and its CREATE_CLUSTER operation is polled.
func adopt(ctx context.Context, api *container.ClusterManagerClient, parent, name, token string, taken error) (space.CreateProgress, error) {
	cl, err := api.GetCluster(ctx, &containerpb.GetClusterRequest{Name: parent + "/clusters/" + name})
	if err != nil {
		// Another's cluster, hidden from this identity: the name is taken.
		var de *space.Error
		if errors.As(classify("gke:GetCluster", err), &de) && (de.Reason == space.ReasonAccessDenied || de.Reason == space.ReasonClusterNotFound) {
			return space.CreateProgress{}, cloud.Refused(googleMessage(taken), taken)
		}
		return space.CreateProgress{}, classify("gke:GetCluster", err)
	}
	if cl.GetResourceLabels()[JobLabel] != token {
		return space.CreateProgress{}, cloud.Refused(googleMessage(taken), taken)
	}
	ops, err := api.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: parent})
	if err != nil {
		return space.CreateProgress{}, classify("gke:ListOperations", err)
	}
	for _, op := range ops.GetOperations() {
		if op.GetOperationType() == containerpb.Operation_CREATE_CLUSTER && strings.HasSuffix(op.GetTargetLink(), "/clusters/"+name) {
			return operationProgress(parent, op)
		}
	}
	return space.CreateProgress{}, cloud.Errorf(space.ReasonCloudUnavailable, "GKE lists no creation operation for "+name+" yet", nil)
}

// Advance polls the creation operation (operations.get) until DONE.
func (m *Minter) Advance(ctx context.Context, acct space.CloudAccount, cfg space.Config, _ space.ClusterSpec, _ string, op space.CloudOperation) (space.CreateProgress, error) {
	api, err := m.creatorAPI(ctx, acct)
	if err != nil {
		return space.CreateProgress{}, err
	}
	got, err := api.GetOperation(ctx, &containerpb.GetOperationRequest{Name: op.ID})
	if err != nil {
		return space.CreateProgress{}, classify("gke:GetOperation", err)
	}
	parent, _, _ := strings.Cut(op.ID, "/operations/")
	return operationProgress(parent, got)
}

func (m *Minter) creatorAPI(ctx context.Context, acct space.CloudAccount) (*container.ClusterManagerClient, error) {
	sa := acct.Connection["serviceAccountEmail"]
	if _, err := m.token(ctx, acct.OrgID, sa); err != nil {
		return nil, err
	}
	return m.api(ctx, acct.OrgID, sa)
}

// operationProgress is where an operation stands; its full name
// (projects/P/locations/L/operations/O) is what operations.get takes.
func operationProgress(parent string, op *containerpb.Operation) (space.CreateProgress, error) {
	p := space.CreateProgress{Operation: space.CloudOperation{Stage: StageCluster, ID: parent + "/operations/" + op.GetName()},
		Status: op.GetStatus().String()}
	if op.GetStatus() != containerpb.Operation_DONE {
		return p, nil
	}
	if e := op.GetError(); e != nil && e.GetCode() != 0 {
		return p, cloud.Refused(e.GetMessage(), nil)
	}
	p.Done = true
	return p, nil
}

// createError tells GKE's refusals of a creation (invalid argument, failed
// precondition, name taken, quota: 403 RESOURCE_EXHAUSTED) from a missing
// permission and from everything a retry can get past.
func createError(op string, err error) error {
	code, status := httpCode(err), googleStatus(err)
	switch {
	case code == http.StatusBadRequest || code == http.StatusConflict || code == http.StatusPreconditionFailed,
		code == http.StatusForbidden && status == "RESOURCE_EXHAUSTED":
		return cloud.Refused(googleMessage(err), err)
	}
	return classify(op, err)
}

func httpCode(err error) int {
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		return ae.HTTPCode()
	}
	return 0
}

// googleStatus is the canonical status word of a REST error body
// (error.status), which the HTTP code alone does not carry.
func googleStatus(err error) string {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return ""
	}
	var body struct {
		Error struct {
			Status string `json:"status"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(ge.Body), &body)
	return body.Error.Status
}

// googleMessage is the cloud's own message, without the client's wrapping.
func googleMessage(err error) string {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Message != "" {
		return ge.Message
	}
	return err.Error()
}
