package simcloud

import (
	"context"
	"errors"
	"time"

	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

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
func (c *Cloud) Providers() map[space.Provider]mint.Provider {
	hc := c.HTTPClient()
	awsCfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(RuntimeAccessKeyID, RuntimeSecretAccessKey, ""),
		HTTPClient:  hc,
	}
	google := (&clientcredentials.Config{ClientID: GoogleClientID, ClientSecret: GoogleClientSecret,
		TokenURL: c.GoogleTokenURL()}).TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, hc))
	azure := azcloud.Configuration{
		ActiveDirectoryAuthorityHost: c.EntraAuthorityHost(),
		Services: map[azcloud.ServiceName]azcloud.ServiceConfiguration{
			azcloud.ResourceManager: {Endpoint: c.URL, Audience: ARMAudience},
		},
	}
	return map[space.Provider]mint.Provider{
		space.AWS: eks.New(eks.Config{AWS: awsCfg, Endpoint: c.URL}),
		space.GCP: gke.New(gke.Config{Runtime: google, HTTPClient: hc, IAMEndpoint: c.URL, ContainerEndpoint: c.URL}),
		space.Azure: aks.New(aks.Config{Cloud: &azure, HTTPClient: hc,
			Assertion: func(context.Context) (string, error) { return c.FederatedAssertion(), nil }}),
	}
}

// Minter is a mint.Minter reaching the cloud through Providers, with the
// kubeauth grants and cloud accounts read from store.
func (c *Cloud) Minter(store interface {
	mint.Grants
	mint.Accounts
}) *mint.Minter {
	return &mint.Minter{Grants: store, Accounts: store, Providers: c.Providers()}
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
