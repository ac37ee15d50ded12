package eks

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"

	"spaces/shared/mint/cloud"
	"spaces/shared/space"
)

// Stages of an EKS creation (space.CloudOperation.Stage): the control
// plane, then the managed node group.
const (
	StageCluster   = "cluster"
	StageNodegroup = "nodegroup"
)

// NodegroupName names the one managed node group Spaces creates.
const NodegroupName = "spaces-default"

// JobTag is the tag naming the provisioning job on the cluster and its node
// group: a repeated call that finds the name taken tells its own creation
// (continue) from someone else's cluster (refuse) by it, since EKS does not
// say which request token made a resource.
const JobTag = "spaces:provisioning-job"

var _ space.ClusterCreator = (*Minter)(nil)

// StartCreate calls eks:CreateCluster as the account's role, with the job's
// token as the client request token: EKS answers a repeated request with
// the same token with the same cluster instead of a second one.
func (m *Minter) StartCreate(ctx context.Context, acct space.CloudAccount, cfg space.Config, spec space.ClusterSpec, token string) (space.CreateProgress, error) {
	name := cfg["clusterName"]
	c := m.eksClient(acct, cfg["region"])
	out, err := c.CreateCluster(ctx, &eks.CreateClusterInput{
		Name:    aws.String(name),
		Version: aws.String(spec.KubernetesVersion),
		RoleArn: aws.String(roleOr(spec.ClusterRoleARN, acct)),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{
			SubnetIds: spec.Network.SubnetIDs, SecurityGroupIds: spec.Network.SecurityGroupIDs,
		},
		ClientRequestToken: aws.String(token),
		Tags:               jobTags(spec.Tags, token),
	})
	var inUse *ekstypes.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
		// A redelivery whose first call went through, or a taken name.
		return m.adoptCluster(ctx, c, name, token, inUse.ErrorMessage())
	case err != nil:
		return space.CreateProgress{}, createError("eks:CreateCluster", err)
	}
	return clusterProgress(out.Cluster), nil
}

// Advance polls the stage of op; once the control plane is ACTIVE it calls
// eks:CreateNodegroup (same token), and the creation is done when the node
// group is ACTIVE.
func (m *Minter) Advance(ctx context.Context, acct space.CloudAccount, cfg space.Config, spec space.ClusterSpec, token string, op space.CloudOperation) (space.CreateProgress, error) {
	name := cfg["clusterName"]
	c := m.eksClient(acct, cfg["region"])
	switch op.Stage {
	case StageCluster:
		out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
		if err != nil {
			return space.CreateProgress{}, classify("eks:DescribeCluster", err)
		}
		p := clusterProgress(out.Cluster)
		switch out.Cluster.Status {
		case ekstypes.ClusterStatusActive:
			return m.createNodegroup(ctx, c, acct, name, spec, token)
		case ekstypes.ClusterStatusFailed:
			return p, cloud.Refused("EKS cluster "+name+" failed to create"+healthOf(out.Cluster.Health), nil)
		}
		return p, nil
	case StageNodegroup:
		out, err := c.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(name), NodegroupName: aws.String(op.ID)})
		if err != nil {
			return space.CreateProgress{}, classify("eks:DescribeNodegroup", err)
		}
		return nodegroupProgress(out.Nodegroup)
	}
	return space.CreateProgress{}, cloud.Errorf(space.ReasonCloudUnavailable, "unknown EKS creation stage "+op.Stage, nil)
}

func (m *Minter) createNodegroup(ctx context.Context, c *eks.Client, acct space.CloudAccount, cluster string, spec space.ClusterSpec, token string) (space.CreateProgress, error) {
	np := spec.NodePool
	out, err := c.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
		ClusterName:   aws.String(cluster),
		NodegroupName: aws.String(NodegroupName),
		NodeRole:      aws.String(roleOr(spec.NodeRoleARN, acct)),
		Subnets:       spec.Network.SubnetIDs,
		InstanceTypes: []string{np.MachineType},
		ScalingConfig: &ekstypes.NodegroupScalingConfig{
			MinSize: aws.Int32(int32(np.Min)), MaxSize: aws.Int32(int32(np.Max)), DesiredSize: aws.Int32(int32(np.Desired)),
		},
		ClientRequestToken: aws.String(token),
		Tags:               jobTags(spec.Tags, token),
	})
	var inUse *ekstypes.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
		d, derr := c.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(NodegroupName)})
		if derr != nil {
			return space.CreateProgress{}, classify("eks:DescribeNodegroup", derr)
		}
		if d.Nodegroup.Tags[JobTag] != token {
			return space.CreateProgress{}, cloud.Refused(inUse.ErrorMessage(), err)
		}
		return nodegroupProgress(d.Nodegroup)
	case err != nil:
		return space.CreateProgress{}, createError("eks:CreateNodegroup", err)
	}
	return nodegroupProgress(out.Nodegroup)
}

// adoptCluster continues a creation this job already started (the cluster
// carries its tag) and refuses a name taken by any other cluster.
func (m *Minter) adoptCluster(ctx context.Context, c *eks.Client, name, token, refusal string) (space.CreateProgress, error) {
	out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		return space.CreateProgress{}, takenOr(classify("eks:DescribeCluster", err), refusal)
	}
	if out.Cluster.Tags[JobTag] != token {
		return space.CreateProgress{}, cloud.Refused(refusal, nil)
	}
	return clusterProgress(out.Cluster), nil
}

func clusterProgress(cl *ekstypes.Cluster) space.CreateProgress {
	return space.CreateProgress{Operation: space.CloudOperation{Stage: StageCluster, ID: aws.ToString(cl.Name)}, Status: string(cl.Status)}
}

func nodegroupProgress(ng *ekstypes.Nodegroup) (space.CreateProgress, error) {
	p := space.CreateProgress{Operation: space.CloudOperation{Stage: StageNodegroup, ID: aws.ToString(ng.NodegroupName)},
		Status: string(ng.Status), Done: ng.Status == ekstypes.NodegroupStatusActive}
	if ng.Status == ekstypes.NodegroupStatusCreateFailed {
		var issues []string
		if ng.Health != nil {
			for _, i := range ng.Health.Issues {
				issues = append(issues, string(i.Code)+": "+aws.ToString(i.Message))
			}
		}
		return p, cloud.Refused("EKS node group "+aws.ToString(ng.NodegroupName)+" failed to create: "+strings.Join(issues, "; "), nil)
	}
	return p, nil
}

func healthOf(h *ekstypes.ClusterHealth) string {
	if h == nil || len(h.Issues) == 0 {
		return ""
	}
	var issues []string
	for _, i := range h.Issues {
		issues = append(issues, string(i.Code)+": "+aws.ToString(i.Message))
	}
	return ": " + strings.Join(issues, "; ")
}

// roleOr is the role EKS or the nodes act as: the spec's, else the
// connected role itself (which must then trust eks.amazonaws.com and
// ec2.amazonaws.com too).
func roleOr(arn string, acct space.CloudAccount) string {
	if arn != "" {
		return arn
	}
	return acct.Connection["roleArn"]
}

func jobTags(tags map[string]string, token string) map[string]string {
	out := make(map[string]string, len(tags)+1)
	for k, v := range tags {
		out[k] = v
	}
	out[JobTag] = token
	return out
}

// createError tells EKS's refusals of a creation, which the same request
// will meet again, from everything a retry can get past.
func createError(op string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "InvalidParameterException", "InvalidRequestException", "ResourceLimitExceededException",
			"UnsupportedAvailabilityZoneException", "ResourceInUseException":
			return cloud.Refused(ae.ErrorMessage(), err)
		}
	}
	return classify(op, err)
}

// takenOr is the refusal of a taken name when the cluster holding it
// cannot be read (another's, hidden from this identity), else err.
func takenOr(err error, refusal string) error {
	var de *space.Error
	if errors.As(err, &de) && (de.Reason == space.ReasonAccessDenied || de.Reason == space.ReasonClusterNotFound) {
		return cloud.Refused(refusal, err)
	}
	return err
}
