// Package clouds reads how a deployed function reaches the three clouds
// and builds its minter: the one place the api, prober and revisions
// functions take their federation settings from.
package clouds

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces/shared/config"
	"spaces/shared/mint"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// Settings name the federation the deployed functions use (README,
// "Deploying").
type Settings struct {
	GCPWorkloadIdentityProvider string
	AzureTokenAudience          string
	// Who the customers' clouds are told to trust (each account's setup).
	GCPFederationRole string
	AWSPrincipal      string
	AzureIssuer       string
	AzureSubject      string
}

// Read reads GCP_WORKLOAD_IDENTITY_PROVIDER and AZURE_FEDERATED_TOKEN_AUDIENCE.
func Read(env *config.Env) Settings {
	return Settings{
		GCPWorkloadIdentityProvider: env.String("GCP_WORKLOAD_IDENTITY_PROVIDER", ""),
		AzureTokenAudience:          env.String("AZURE_FEDERATED_TOKEN_AUDIENCE", ""),
		GCPFederationRole:           env.String("GCP_FEDERATION_ROLE_ARN", ""),
		AWSPrincipal:                env.String("SPACES_AWS_PRINCIPAL", ""),
		AzureIssuer:                 env.String("AZURE_FEDERATED_TOKEN_ISSUER", ""),
		AzureSubject:                env.String("AZURE_FEDERATED_TOKEN_SUBJECT", ""),
	}
}

// Minter is the deployed functions' minter; store holds the grants and
// accounts.
func Minter(s Settings, awsCfg aws.Config, store interface {
	mint.Grants
	mint.Accounts
},
) *mint.Minter {
	return mint.ForRuntime(mint.RuntimeConfig{AWS: awsCfg, Store: store,
		GCPWorkloadIdentityProvider: s.GCPWorkloadIdentityProvider, AzureTokenAudience: s.AzureTokenAudience,
		GCPFederationRole: s.GCPFederationRole, AWSPrincipal: s.AWSPrincipal, AzureIssuer: s.AzureIssuer, AzureSubject: s.AzureSubject})
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
