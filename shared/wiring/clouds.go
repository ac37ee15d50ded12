package wiring

import (
	"spaces/shared/config"
	"spaces/shared/space"
)

// Clouds name the federation the deployed functions use (README,
// "Deploying"). They are read here, apart from the minter (wiring/clouds),
// so that the catalog API can show each account's trust setup without
// linking a cloud SDK.
type Clouds struct {
	GCPWorkloadIdentityProvider string
	AzureTokenAudience          string
	// Who the customers' clouds are told to trust (each account's setup).
	GCPFederationRole string
	AWSPrincipal      string
	AzureIssuer       string
	AzureSubject      string
}

// ReadClouds reads GCP_WORKLOAD_IDENTITY_PROVIDER, AZURE_FEDERATED_TOKEN_*,
// GCP_FEDERATION_ROLE_ARN and SPACES_AWS_PRINCIPAL.
func ReadClouds(env *config.Env) Clouds {
	return Clouds{
		GCPWorkloadIdentityProvider: env.String("GCP_WORKLOAD_IDENTITY_PROVIDER", ""),
		AzureTokenAudience:          env.String("AZURE_FEDERATED_TOKEN_AUDIENCE", ""),
		GCPFederationRole:           env.String("GCP_FEDERATION_ROLE_ARN", ""),
		AWSPrincipal:                env.String("SPACES_AWS_PRINCIPAL", ""),
		AzureIssuer:                 env.String("AZURE_FEDERATED_TOKEN_ISSUER", ""),
		AzureSubject:                env.String("AZURE_FEDERATED_TOKEN_SUBJECT", ""),
	}
}

// Trust is who Spaces is in its clouds, as the minter built from c sees it.
func (c Clouds) Trust() space.TrustConfig {
	return space.TrustConfig{
		AWSPrincipal: c.AWSPrincipal, GCPWorkloadIdentityProvider: c.GCPWorkloadIdentityProvider,
		GCPFederationRole: c.GCPFederationRole, AzureIssuer: c.AzureIssuer, AzureSubject: c.AzureSubject,
		AzureAudienceBase: c.AzureTokenAudience,
	}
}
