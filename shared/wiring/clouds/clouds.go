// Package clouds builds the deployed functions' minter: the one place the
// discovery, prober and revisions functions reach the three clouds from.
// It links the cloud SDKs; the settings it takes are parts.Clouds.
package clouds

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces/shared/config"
	"spaces/shared/mint"
	"spaces/shared/provisioning"
	"spaces/shared/space"
	"spaces/shared/wiring/parts"
)

// Settings name the federation the deployed functions use.
type Settings = parts.Clouds

// Read reads the federation settings (parts.ReadClouds).
func Read(env *config.Env) Settings { return parts.ReadClouds(env) }

// Minter is the deployed functions' minter; store holds the grants and
// accounts.
func Minter(s Settings, awsCfg aws.Config, store interface {
	mint.Grants
	mint.Accounts
},
) *mint.Minter {
	return mint.ForRuntime(mint.RuntimeConfig{AWS: awsCfg, Store: store,
		GCPWorkloadIdentityProvider: s.GCPWorkloadIdentityProvider, AzureTokenAudience: s.AzureTokenAudience,
		GCPFederationRole: s.GCPFederationRole, AWSPrincipal: s.AWSPrincipal, AzureIssuer: s.AzureIssuer, AzureFederationRole: s.AzureFederationRole})
}

// Creator is the deployed provisioner's cluster creator: the minter's
// clouds (EKS, GKE, AKS adapters in shared/mint) as each org's connected
// identity. This is the one place the real adapters plug in; a minter that
// does not create clusters yields provisioning.Unconfigured.
func Creator(m *mint.Minter) space.ClusterCreator {
	if m == nil {
		return provisioning.Unconfigured{}
	}
	return m
}
