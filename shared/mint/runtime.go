package mint

import (
	"context"
	"errors"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google/externalaccount"

	"spaces/shared/mint/aks"
	"spaces/shared/mint/eks"
	"spaces/shared/mint/gke"
	"spaces/shared/space"
)

// RuntimeConfig is how the deployed functions reach the three clouds from
// their own AWS identity, with no stored secret, always as one org (see
// space.TrustConfig):
//   - AWS: the function's role assumes each account's role with the
//     account's generated external id (eks).
//   - GCP: the function assumes GCPFederationRole with the org's tag as
//     session name and exchanges that session at the workload identity
//     pool provider GCPWorkloadIdentityProvider
//     (projects/N/locations/global/workloadIdentityPools/P/providers/Q).
//   - Azure: the function assumes AzureFederationRole with the org's tag
//     as session name and, as that session, asks STS for its web identity
//     token (sts:GetWebIdentityToken) for the org's audience,
//     AzureTokenAudience + "/" + org tag: the federated client assertion,
//     whose subject is the federation role's ARN whichever function asks.
type RuntimeConfig struct {
	AWS   aws.Config
	Store interface {
		Grants
		Accounts
	}
	GCPWorkloadIdentityProvider string
	GCPFederationRole           string
	AzureTokenAudience          string
	AzureFederationRole         string
	// AWSPrincipal and AzureIssuer are who the customers' clouds are told
	// to trust (the setup each account shows).
	AWSPrincipal string
	AzureIssuer  string
}

// ForRuntime builds the minter of a deployed function.
func ForRuntime(cfg RuntimeConfig) *Minter {
	trust := space.TrustConfig{
		AWSPrincipal: cfg.AWSPrincipal, GCPWorkloadIdentityProvider: cfg.GCPWorkloadIdentityProvider,
		GCPFederationRole: cfg.GCPFederationRole, AzureIssuer: cfg.AzureIssuer, AzureFederationRole: cfg.AzureFederationRole,
		AzureAudienceBase: cfg.AzureTokenAudience,
	}
	fed := Federation{AWS: cfg.AWS, Trust: trust}
	return &Minter{Grants: cfg.Store, Accounts: cfg.Store, Trust: trust, Providers: map[space.Provider]Provider{
		space.AWS:   eks.New(eks.Config{AWS: cfg.AWS}),
		space.GCP:   gke.New(gke.Config{Runtime: fed.Google}),
		space.Azure: aks.New(aks.Config{Assertion: fed.AzureAssertion}),
	}}
}

// Federation is the runtime's identity towards Google and Entra, per org.
// The simulated cloud uses it too, with its endpoints.
type Federation struct {
	// AWS is the runtime's own configuration.
	AWS   aws.Config
	Trust space.TrustConfig
	// STSEndpoint and GoogleTokenURL override AWS STS and Google STS
	// (default: the real ones); HTTPClient carries the Google exchange.
	STSEndpoint    string
	GoogleTokenURL string
	HTTPClient     *http.Client
}

var errNoFederation = errors.New("cloud federation is not configured for this provider")

func (f Federation) sts() *sts.Client { return f.stsAs(f.AWS) }

func (f Federation) stsAs(cfg aws.Config) *sts.Client {
	return sts.NewFromConfig(cfg, func(o *sts.Options) {
		if f.STSEndpoint != "" {
			o.BaseEndpoint = aws.String(f.STSEndpoint)
		}
	})
}

// Google is the org's Google identity: a session of the federation role
// named after the org, exchanged at the workload identity pool, whose
// mapping google.subject=assertion.arn makes the org part of the principal.
func (f Federation) Google(org string) oauth2.TokenSource {
	t := f.Trust
	if t.GCPWorkloadIdentityProvider == "" || t.GCPFederationRole == "" {
		return failingSource{errNoFederation}
	}
	creds := aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(f.sts(), t.GCPFederationRole, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = space.OrgTag(org)
	}))
	ctx := context.Background()
	if f.HTTPClient != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, f.HTTPClient)
	}
	tokenURL := f.GoogleTokenURL
	if tokenURL == "" {
		tokenURL = "https://sts.googleapis.com/v1/token"
	}
	ts, err := externalaccount.NewTokenSource(ctx, externalaccount.Config{
		Audience:                       "//iam.googleapis.com/" + t.GCPWorkloadIdentityProvider,
		SubjectTokenType:               "urn:ietf:params:aws:token-type:aws4_request",
		TokenURL:                       tokenURL,
		Scopes:                         []string{"https://www.googleapis.com/auth/cloud-platform"},
		AwsSecurityCredentialsSupplier: awsSupplier{region: f.AWS.Region, creds: creds},
	})
	if err != nil {
		return failingSource{err}
	}
	return ts
}

type awsSupplier struct {
	region string
	creds  aws.CredentialsProvider
}

func (s awsSupplier) AwsRegion(context.Context, externalaccount.SupplierOptions) (string, error) {
	return s.region, nil
}

func (s awsSupplier) AwsSecurityCredentials(ctx context.Context, _ externalaccount.SupplierOptions) (*externalaccount.AwsSecurityCredentials, error) {
	c, err := s.creds.Retrieve(ctx) // cached until shortly before the session ends
	if err != nil {
		return nil, err
	}
	return &externalaccount.AwsSecurityCredentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}, nil
}

type failingSource struct{ err error }

func (f failingSource) Token() (*oauth2.Token, error) { return nil, f.err }

// AzureAssertion is the STS-issued OIDC token of the org's session of the
// federation role, for the org's audience, which the customer's Entra app
// trusts for that org only. The session lasts one call: Entra tokens are
// cached by the credential (aks), so this runs about once an hour per
// account and instance.
func (f Federation) AzureAssertion(ctx context.Context, org string) (string, error) {
	t := f.Trust
	if t.AzureAudienceBase == "" || t.AzureFederationRole == "" {
		return "", errNoFederation
	}
	role, err := f.sts().AssumeRole(ctx, &sts.AssumeRoleInput{
		RoleArn: aws.String(t.AzureFederationRole), RoleSessionName: aws.String(space.OrgTag(org)), DurationSeconds: aws.Int32(900),
	})
	if err != nil {
		return "", err
	}
	session := f.AWS.Copy()
	c := role.Credentials
	session.Credentials = credentials.NewStaticCredentialsProvider(aws.ToString(c.AccessKeyId), aws.ToString(c.SecretAccessKey), aws.ToString(c.SessionToken))
	out, err := f.stsAs(session).GetWebIdentityToken(ctx, &sts.GetWebIdentityTokenInput{
		Audience: []string{f.Trust.AzureAudience(org)}, SigningAlgorithm: aws.String("RS256"), DurationSeconds: aws.Int32(300),
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.WebIdentityToken), nil
}
