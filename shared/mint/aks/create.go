package aks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"spaces/shared/mint/cloud"
	"spaces/shared/space"
)

// StageCluster is the one stage of an AKS creation: the managed cluster's
// provisioningState is polled until Succeeded.
const StageCluster = "cluster"

// JobTag is the tag naming the provisioning job on the managed cluster. A
// PUT on an existing name would update that cluster, so StartCreate looks
// first and goes on only with a cluster this job made.
const JobTag = "spaces-provisioning-job"

// AgentPoolName names the one (system) agent pool Spaces creates.
const AgentPoolName = "nodepool1"

var _ space.ClusterCreator = (*Minter)(nil)

// StartCreate calls managedClusters.BeginCreateOrUpdate (a PUT, idempotent
// by name) as the account's app, unless the name already holds a cluster:
// this job's (a redelivery: go on polling it) or another (refused, rather
// than updating someone's cluster).
func (m *Minter) StartCreate(ctx context.Context, acct space.CloudAccount, cfg space.Config, spec space.ClusterSpec, token string) (space.CreateProgress, error) {
	api, err := m.clusters(acct, cfg["subscriptionId"])
	if err != nil {
		return space.CreateProgress{}, err
	}
	rg, name := cfg["resourceGroup"], cfg["clusterName"]
	got, err := api.Get(ctx, rg, name, nil)
	var re *azcore.ResponseError
	switch {
	case err == nil:
		if deref(got.Tags[JobTag]) != token {
			return space.CreateProgress{}, cloud.Refused("a managed cluster named "+name+" already exists in resource group "+rg, nil)
		}
		return clusterProgress(got.ManagedCluster)
	case !errors.As(err, &re) || re.StatusCode != http.StatusNotFound:
		return space.CreateProgress{}, classify("arm:managedClusters.get", err)
	}
	np := spec.NodePool
	pool := &armcontainerservice.ManagedClusterAgentPoolProfile{
		Name: to.Ptr(AgentPoolName), Mode: to.Ptr(armcontainerservice.AgentPoolModeSystem),
		OSType: to.Ptr(armcontainerservice.OSTypeLinux), VMSize: to.Ptr(np.MachineType),
		Count: to.Ptr(int32(np.Desired)), MinCount: to.Ptr(int32(np.Min)), MaxCount: to.Ptr(int32(np.Max)),
		EnableAutoScaling: to.Ptr(true),
	}
	if spec.Network.VNetSubnetID != "" {
		pool.VnetSubnetID = to.Ptr(spec.Network.VNetSubnetID)
	}
	tags := map[string]*string{JobTag: to.Ptr(token)}
	for k, v := range spec.Tags {
		tags[k] = to.Ptr(v)
	}
	_, err = api.BeginCreateOrUpdate(ctx, rg, name, armcontainerservice.ManagedCluster{
		Location: to.Ptr(spec.Network.Location),
		Tags:     tags,
		Identity: &armcontainerservice.ManagedClusterIdentity{Type: to.Ptr(armcontainerservice.ResourceIdentityTypeSystemAssigned)},
		Properties: &armcontainerservice.ManagedClusterProperties{
			KubernetesVersion: to.Ptr(spec.KubernetesVersion),
			DNSPrefix:         to.Ptr(name),
			AgentPoolProfiles: []*armcontainerservice.ManagedClusterAgentPoolProfile{pool},
			// Entra ID with Azure RBAC: the cluster takes the tokens the
			// minter fetches for the AKS server app.
			AADProfile: &armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(true), EnableAzureRBAC: to.Ptr(true)},
		},
	}, nil)
	if err != nil {
		return space.CreateProgress{}, createError("arm:managedClusters.createOrUpdate", err)
	}
	// The SDK's poller would wait in this process; the job polls the
	// cluster's provisioningState itself, one call per step.
	return space.CreateProgress{Operation: space.CloudOperation{Stage: StageCluster, ID: resourceID(cfg)}, Status: "Creating"}, nil
}

// Advance reads the managed cluster's provisioningState.
func (m *Minter) Advance(ctx context.Context, acct space.CloudAccount, cfg space.Config, _ space.ClusterSpec, _ string, _ space.CloudOperation) (space.CreateProgress, error) {
	api, err := m.clusters(acct, cfg["subscriptionId"])
	if err != nil {
		return space.CreateProgress{}, err
	}
	got, err := api.Get(ctx, cfg["resourceGroup"], cfg["clusterName"], nil)
	if err != nil {
		return space.CreateProgress{}, classify("arm:managedClusters.get", err)
	}
	return clusterProgress(got.ManagedCluster)
}

func resourceID(cfg space.Config) string {
	return "/subscriptions/" + cfg["subscriptionId"] + "/resourceGroups/" + cfg["resourceGroup"] +
		"/providers/Microsoft.ContainerService/managedClusters/" + cfg["clusterName"]
}

func clusterProgress(mc armcontainerservice.ManagedCluster) (space.CreateProgress, error) {
	state := ""
	if mc.Properties != nil {
		state = deref(mc.Properties.ProvisioningState)
	}
	p := space.CreateProgress{Operation: space.CloudOperation{Stage: StageCluster, ID: deref(mc.ID)}, Status: state,
		Done: state == "Succeeded"}
	if state == "Failed" || state == "Canceled" {
		return p, cloud.Refused("AKS managed cluster "+deref(mc.Name)+" provisioning "+state, nil)
	}
	return p, nil
}

// createError tells ARM's refusals of a creation (4xx: invalid parameter,
// unsupported version or VM size, quota, bad subnet, conflict) from a
// missing permission and from everything a retry can get past.
func createError(op string, err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode >= 400 && re.StatusCode < 500 &&
		re.StatusCode != http.StatusUnauthorized && re.StatusCode != http.StatusForbidden &&
		re.StatusCode != http.StatusTooManyRequests && re.StatusCode != http.StatusNotFound {
		return cloud.Refused(armErrorMessage(re), err)
	}
	return classify(op, err)
}

// armErrorMessage is ARM's own message (error.message), else its code.
func armErrorMessage(re *azcore.ResponseError) string {
	if re.RawResponse != nil {
		if body, err := runtime.Payload(re.RawResponse); err == nil {
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
				return e.Error.Message
			}
		}
	}
	return "Azure: " + re.ErrorCode
}
