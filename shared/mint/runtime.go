package mint

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google/externalaccount"

	"spaces/shared/mint/aks"
	"spaces/shared/mint/eks"
	"spaces/shared/mint/gke"
	"spaces/shared/space"
)

// RuntimeConfig is how the deployed functions reach the three clouds from
// their own AWS identity, with no stored secret:
//   - AWS: the function's role assumes each account's role (eks).
//   - GCP: workload identity federation with AWS as the identity provider;
//     GCPWorkloadIdentityProvider is the provider's resource name
//     (projects/N/locations/global/workloadIdentityPools/P/providers/Q).
//   - Azure: the function's STS web identity token (sts:GetWebIdentityToken,
//     audience AzureTokenAudience) is the federated client assertion.
type RuntimeConfig struct {
	AWS   aws.Config
	Store interface {
		Grants
		Accounts
	}
	GCPWorkloadIdentityProvider string
	AzureTokenAudience          string
}

// ForRuntime builds the minter of a deployed function.
func ForRuntime(cfg RuntimeConfig) *Minter {
	return &Minter{Grants: cfg.Store, Accounts: cfg.Store, Providers: map[space.Provider]Provider{
		space.AWS:   eks.New(eks.Config{AWS: cfg.AWS}),
		space.GCP:   gke.New(gke.Config{Runtime: googleFederation(cfg.AWS, cfg.GCPWorkloadIdentityProvider)}),
		space.Azure: aks.New(aks.Config{Assertion: awsWebIdentity(sts.NewFromConfig(cfg.AWS), cfg.AzureTokenAudience)}),
	}}
}

var errNoFederation = errors.New("cloud federation is not configured for this provider")

// googleFederation exchanges the function's AWS credentials for a Google
// access token through a workload identity pool.
func googleFederation(awsCfg aws.Config, provider string) oauth2.TokenSource {
	if provider == "" {
		return failingSource{errNoFederation}
	}
	ts, err := externalaccount.NewTokenSource(context.Background(), externalaccount.Config{
		Audience:                       "//iam.googleapis.com/" + provider,
		SubjectTokenType:               "urn:ietf:params:aws:token-type:aws4_request",
		TokenURL:                       "https://sts.googleapis.com/v1/token",
		Scopes:                         []string{"https://www.googleapis.com/auth/cloud-platform"},
		AwsSecurityCredentialsSupplier: awsSupplier{awsCfg},
	})
	if err != nil {
		return failingSource{err}
	}
	return ts
}

type awsSupplier struct{ cfg aws.Config }

func (s awsSupplier) AwsRegion(context.Context, externalaccount.SupplierOptions) (string, error) {
	return s.cfg.Region, nil
}

func (s awsSupplier) AwsSecurityCredentials(ctx context.Context, _ externalaccount.SupplierOptions) (*externalaccount.AwsSecurityCredentials, error) {
	c, err := s.cfg.Credentials.Retrieve(ctx) // the SDK's credential cache
	if err != nil {
		return nil, err
	}
	return &externalaccount.AwsSecurityCredentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}, nil
}

type failingSource struct{ err error }

func (f failingSource) Token() (*oauth2.Token, error) { return nil, f.err }

// awsWebIdentity returns the function's own STS-issued OIDC token for
// audience, which an Entra app's federated credential trusts.
func awsWebIdentity(client *sts.Client, audience string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if audience == "" {
			return "", errNoFederation
		}
		out, err := client.GetWebIdentityToken(ctx, &sts.GetWebIdentityTokenInput{
			Audience: []string{audience}, SigningAlgorithm: aws.String("RS256"), DurationSeconds: aws.Int32(300),
		})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.WebIdentityToken), nil
	}
}
