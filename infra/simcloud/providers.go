package simcloud

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"spaces/shared/mint"
	"spaces/shared/mint/aks"
	"spaces/shared/mint/eks"
	"spaces/shared/mint/gke"
	"spaces/shared/space"
)

// Providers are the three provider minters pointed at the cloud, configured
// the way production configures them (mint.ForRuntime) except for the
// endpoints and the runtime identities: the SDKs reach simcloud through
// their ordinary overrides.
func (c Endpoints) Providers() map[space.Provider]mint.Provider { return c.ProvidersFor(c.Trust()) }

// ProvidersFor are Providers presenting the identities trust names, as a
// function configured with them would (a test builds one per minting
// function of the template).
func (c Endpoints) ProvidersFor(trust space.TrustConfig) map[space.Provider]mint.Provider {
	hc := c.HTTPClient()
	awsCfg := c.runtimeAWS()
	fed := mint.Federation{AWS: awsCfg, Trust: trust, STSEndpoint: c.URL, GoogleTokenURL: c.GoogleTokenURL(), HTTPClient: hc}
	azure := azcloud.Configuration{
		ActiveDirectoryAuthorityHost: c.EntraAuthorityHost(),
		Services: map[azcloud.ServiceName]azcloud.ServiceConfiguration{
			azcloud.ResourceManager: {Endpoint: c.URL, Audience: ARMAudience},
		},
	}
	return map[space.Provider]mint.Provider{
		space.AWS:   eks.New(eks.Config{AWS: awsCfg, Endpoint: c.URL}),
		space.GCP:   gke.New(gke.Config{Runtime: fed.Google, HTTPClient: hc, IAMEndpoint: c.URL, ContainerEndpoint: c.URL}),
		space.Azure: aks.New(aks.Config{Cloud: &azure, HTTPClient: hc, Assertion: fed.AzureAssertion}),
	}
}

func (c Endpoints) runtimeAWS() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(RuntimeAccessKeyID, RuntimeSecretAccessKey, ""),
		HTTPClient:  c.HTTPClient(),
	}
}

// Trust is who Spaces is to this cloud: what a customer of the simulated
// cloud is told to trust (space.TrustConfig).
func (c Endpoints) Trust() space.TrustConfig {
	return space.TrustConfig{
		AWSPrincipal:                RuntimeARN,
		GCPWorkloadIdentityProvider: GCPWorkloadIdentityProvider,
		GCPFederationRole:           FederationRoleARN,
		AzureIssuer:                 c.AWSIssuer(),
		AzureFederationRole:         FederationRoleARN,
		AzureAudienceBase:           AzureAudienceBase,
	}
}

// Minter is a mint.Minter reaching the cloud through Providers, with the
// kubeauth grants and cloud accounts read from store.
func (c Endpoints) Minter(store interface {
	mint.Grants
	mint.Accounts
}) *mint.Minter {
	return &mint.Minter{Grants: store, Accounts: store, Providers: c.Providers(), Trust: c.Trust()}
}

// ReviewTimeout bounds one token review made through TokenCheck: an EKS
// token is checked by a round trip to simcloud's STS.
const ReviewTimeout = 5 * time.Second

// ReviewToken authenticates a cluster bearer token the way the token-review
// webhook does for the API server with the given backend key
// (Cluster.Backend): EKS tokens are verified against STS, Google and Entra
// tokens must be live tokens issued to a principal the cluster grants. It
// returns the principal.
func (c *Cloud) ReviewToken(ctx context.Context, backend, token string) (string, error) {
	if token == "" {
		return "", errors.New("no token")
	}
	principal, _, err := c.authenticate(ctx, backend, token)
	return principal, err
}

// TokenCheck is ReviewToken as a yes/no check for a testcluster
// (testcluster.WithTokenCheck): a light cluster backed this way accepts
// exactly the tokens simcloud would accept for a cluster with that backend
// key, EKS tokens included, which are made client-side and so cannot be
// pushed to a TokenSink.
func (c *Cloud) TokenCheck(backend string) func(ctx context.Context, token string) bool {
	return func(ctx context.Context, token string) bool {
		ctx, cancel := context.WithTimeout(ctx, ReviewTimeout)
		defer cancel()
		_, err := c.ReviewToken(ctx, backend, token)
		return err == nil
	}
}

// ApplySetup does in the simulated cloud what the customer of acct is told
// to do (its setup, space.TrustConfig.Setup): put the trust policy on the
// AWS role, grant the org's principal on the GCP service account, add the
// org's federated credential to the Entra app.
func (c *Cloud) ApplySetup(acct space.CloudAccount) error {
	return c.Apply(acct, c.Trust().Setup(acct))
}

// Apply does the setup an API handed out for acct, whatever trust
// configuration it was made with.
func (c *Cloud) Apply(acct space.CloudAccount, setup *space.TrustSetup) error {
	switch acct.Provider {
	case space.AWS:
		return c.SetTrustPolicy(acct.Connection["roleArn"], setup.TrustPolicy)
	case space.GCP:
		c.AddServiceAccount(acct.Connection["serviceAccountEmail"], setup.Principal)
	case space.Azure:
		c.AddApp(acct.Connection["tenantId"], acct.Connection["clientId"],
			FederatedCredential{Issuer: setup.Issuer, Subject: setup.Subject, Audience: setup.Audience})
	}
	return nil
}

// consoleApply is the simulated customers' console: the body is a cloud
// account as POST /cloud-accounts answered it, and its setup is applied as
// the customer would (ApplySetup). Only the demo's loopback users reach it.
func (c *Cloud) consoleApply(w http.ResponseWriter, r *http.Request) {
	var acct space.CloudAccount
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&acct); err != nil || acct.ID == "" || !acct.Provider.Valid() {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body must be a cloud account as POST /cloud-accounts answered it"})
		return
	}
	if err := c.ApplySetup(acct); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if c.opts.OnApply != nil {
		c.opts.OnApply(acct)
	}
	writeJSON(w, http.StatusOK, map[string]string{"applied": string(acct.Provider) + " setup of " + acct.ID})
}

// consoleInstallAgent plays the customer running agent_bootstrap.install
// on the demo's private cluster: the body is the space as POST /spaces
// answered it in agent mode (the token in the body, never in the URL).
func (c *Cloud) consoleInstallAgent(w http.ResponseWriter, r *http.Request) {
	if c.opts.OnInstallAgent == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "this cloud has no cluster to install the agent on"})
		return
	}
	var in struct {
		ID             string `json:"id"`
		AgentBootstrap struct {
			Token string `json:"token"`
		} `json:"agent_bootstrap"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.AgentBootstrap.Token == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body must be a space as POST /spaces answered it in agent mode (with agent_bootstrap)"})
		return
	}
	if err := c.opts.OnInstallAgent(r.Context(), in.AgentBootstrap.Token); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"installed": "the agent for space " + in.ID + ", on the demo's real kube-apiserver"})
}
