// Package eks mints credentials for EKS clusters: sts:AssumeRole into the
// cloud account's role (with its external id), eks:DescribeCluster for the
// endpoint and CA, and the EKS bearer token — a presigned STS
// GetCallerIdentity URL that names the cluster in a signed x-k8s-aws-id
// header.
package eks

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"spaces/shared/kubecred"
	"spaces/shared/mint/cloud"
	"spaces/shared/space"
)

const (
	// TokenPrefix starts every EKS bearer token.
	TokenPrefix = "k8s-aws-v1."
	// ClusterIDHeader names the cluster inside the signed request.
	ClusterIDHeader = "x-k8s-aws-id"
	// TokenLifetime is how long Spaces treats a token as valid: STS honours
	// a presigned GetCallerIdentity for 15 minutes from signing, and a
	// minute is left for clock skew and the request in flight.
	TokenLifetime = 14 * time.Minute
	// sessionWindow renews an assumed-role session this long before it
	// expires, so a token is never signed with a session about to end.
	sessionWindow = 5 * time.Minute
	sessionName   = "spaces"
)

// Config configures a Minter.
type Config struct {
	// AWS is the runtime's own configuration (region, credentials, HTTP
	// client); the space's region replaces the region per call.
	AWS aws.Config
	// Endpoint overrides the STS and EKS endpoints (the simulated cloud);
	// empty means AWS.
	Endpoint string
	// Now reads the clock (default time.Now).
	Now func() time.Time
}

// Minter mints EKS credentials. It is safe for concurrent use.
type Minter struct {
	cfg Config

	mu       sync.Mutex
	sessions map[string]aws.CredentialsProvider // role ARN + external id -> cached session
}

// New returns a Minter.
func New(cfg Config) *Minter {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Minter{cfg: cfg, sessions: map[string]aws.CredentialsProvider{}}
}

// session returns the cached assumed-role credentials of the account: one
// AssumeRole per role and external id until shortly before it expires.
func (m *Minter) session(acct space.CloudAccount) aws.CredentialsProvider {
	role, ext := acct.Connection["roleArn"], acct.Connection["externalId"]
	key := role + "\x00" + ext
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.sessions[key]; ok {
		return p
	}
	stsc := sts.NewFromConfig(m.cfg.AWS, m.stsOptions)
	p := aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsc, role, func(o *stscreds.AssumeRoleOptions) {
		o.ExternalID = aws.String(ext)
		o.RoleSessionName = sessionName
		o.Duration = time.Hour
	}), func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = sessionWindow })
	m.sessions[key] = p
	return p
}

// Forget drops the account's assumed-role session.
func (m *Minter) Forget(acct space.CloudAccount) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, acct.Connection["roleArn"]+"\x00"+acct.Connection["externalId"])
}

func (m *Minter) stsOptions(o *sts.Options) {
	if m.cfg.Endpoint != "" {
		o.BaseEndpoint = aws.String(m.cfg.Endpoint)
	}
}

func (m *Minter) eksClient(acct space.CloudAccount, region string) *eks.Client {
	return eks.NewFromConfig(m.cfg.AWS, func(o *eks.Options) {
		o.Region = region
		o.Credentials = m.session(acct)
		if m.cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(m.cfg.Endpoint)
		}
	})
}

// Mint returns credentials for the space's cluster.
func (m *Minter) Mint(ctx context.Context, acct space.CloudAccount, s space.Space) (kubecred.Credentials, error) {
	name, region := s.Config["clusterName"], s.Config["region"]
	cl, err := m.describe(ctx, acct, name, region)
	if err != nil {
		return kubecred.Credentials{}, err
	}
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(cl.CertificateAuthority.Data))
	if err != nil {
		return kubecred.Credentials{}, cloud.Errorf(space.ReasonCloudUnavailable, "EKS returned a CA that is not base64", err)
	}
	signedAt := m.cfg.Now()
	tok, err := m.Token(ctx, acct, name, region)
	if err != nil {
		return kubecred.Credentials{}, err
	}
	return kubecred.Credentials{
		Server: aws.ToString(cl.Endpoint), CAData: ca, Token: tok, ExpiresAt: signedAt.Add(TokenLifetime),
	}, nil
}

func (m *Minter) describe(ctx context.Context, acct space.CloudAccount, name, region string) (*ekstypes.Cluster, error) {
	out, err := m.eksClient(acct, region).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		return nil, classify("eks:DescribeCluster", err)
	}
	cl := out.Cluster
	if cl == nil || aws.ToString(cl.Endpoint) == "" || cl.CertificateAuthority == nil {
		// A cluster still being created has no endpoint yet.
		return nil, cloud.Errorf(space.ReasonCloudUnavailable, fmt.Sprintf("EKS cluster %s has no endpoint yet (status %s)", name, statusOf(cl)), nil)
	}
	return cl, nil
}

func statusOf(cl *ekstypes.Cluster) string {
	if cl == nil {
		return "unknown"
	}
	return string(cl.Status)
}

// Token presigns sts:GetCallerIdentity with the account's assumed role and
// the cluster name in the signed x-k8s-aws-id header: the EKS bearer token.
func (m *Minter) Token(ctx context.Context, acct space.CloudAccount, cluster, region string) (string, error) {
	stsc := sts.NewFromConfig(m.cfg.AWS, m.stsOptions, func(o *sts.Options) {
		o.Region = region
		o.Credentials = m.session(acct)
	})
	req, err := sts.NewPresignClient(stsc).PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{},
		func(po *sts.PresignOptions) {
			po.ClientOptions = append(po.ClientOptions, func(o *sts.Options) {
				o.APIOptions = append(o.APIOptions,
					smithyhttp.SetHeaderValue(ClusterIDHeader, cluster),
					// Hoisted into the query by the presigner; STS ignores it
					// (the URL is good for 15 minutes), authenticators that
					// check it expect 60.
					smithyhttp.SetHeaderValue("X-Amz-Expires", "60"))
			})
		})
	if err != nil {
		return "", classify("sts:AssumeRole", err)
	}
	if req.SignedHeader.Get(ClusterIDHeader) != cluster {
		return "", cloud.Errorf(space.ReasonCredentialsUnavailable, "the presigned request does not sign "+ClusterIDHeader, nil)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)), nil
}

// CheckCluster looks the cluster up (registration check) and answers its
// region, as its ARN names it, and its version.
func (m *Minter) CheckCluster(ctx context.Context, acct space.CloudAccount, s space.Space) (space.ClusterFacts, error) {
	region := s.Config["region"]
	cl, err := m.describe(ctx, acct, s.Config["clusterName"], region)
	if err != nil {
		return space.ClusterFacts{}, err
	}
	return facts(cl, region), nil
}

// facts reads what DescribeCluster said: the Cluster object has no region
// field, but its ARN (arn:aws:eks:<region>:<account>:cluster/<name>) does;
// without one, the region that answered (DescribeCluster is regional).
// https://docs.aws.amazon.com/eks/latest/APIReference/API_Cluster.html
func facts(cl *ekstypes.Cluster, asked string) space.ClusterFacts {
	f := space.ClusterFacts{Location: asked, KubernetesVersion: aws.ToString(cl.Version)}
	if a, err := arn.Parse(aws.ToString(cl.Arn)); err == nil && a.Region != "" {
		f.Location = a.Region
	}
	return f
}

// ListClusters lists the account's clusters in region, with their status.
func (m *Minter) ListClusters(ctx context.Context, acct space.CloudAccount, region string) ([]space.DiscoveredCluster, error) {
	c := m.eksClient(acct, region)
	var out []space.DiscoveredCluster
	p := eks.NewListClustersPaginator(c, &eks.ListClustersInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, classify("eks:ListClusters", err)
		}
		for _, name := range page.Clusters {
			out = append(out, space.DiscoveredCluster{Name: name, Location: region,
				Config: space.Config{"clusterName": name, "region": region}})
		}
	}
	return out, nil
}

// classify maps an SDK error to a domain error.
func classify(op string, err error) error {
	var re *smithyhttp.ResponseError
	status := 0
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	code, msg := "", err.Error()
	if errors.As(err, &ae) {
		code, msg = ae.ErrorCode(), ae.ErrorMessage()
	}
	switch {
	case code == "ResourceNotFoundException" || code == "NotFoundException":
		return cloud.Errorf(space.ReasonClusterNotFound, msg, err)
	case code == "AccessDenied" || code == "AccessDeniedException" || code == "UnrecognizedClientException" ||
		code == "InvalidClientTokenId" || code == "ExpiredToken" || code == "ExpiredTokenException" ||
		code == "SignatureDoesNotMatch" || code == "InvalidSignatureException" || status == http.StatusForbidden:
		return cloud.Errorf(space.ReasonAccessDenied, op+": "+msg, err)
	}
	return cloud.Unavailable(op, err)
}

// VerifyAccount checks the role's trust the way the prober will use it:
// AssumeRole with the account's external id must succeed, and AssumeRole
// without one must be refused, or the trust policy does not require the
// external id and any other customer of Spaces could name the role.
func (m *Minter) VerifyAccount(ctx context.Context, acct space.CloudAccount) error {
	m.Forget(acct)
	if _, err := m.session(acct).Retrieve(ctx); err != nil {
		return classify("sts:AssumeRole", err)
	}
	role := acct.Connection["roleArn"]
	_, err := sts.NewFromConfig(m.cfg.AWS, m.stsOptions).AssumeRole(ctx, &sts.AssumeRoleInput{
		RoleArn: aws.String(role), RoleSessionName: aws.String(sessionName), DurationSeconds: aws.Int32(900),
	})
	if err == nil {
		return &space.Error{Kind: space.KindInvalid, Reason: space.ReasonExternalIDNotRequired, Message: "the trust policy of " + role +
			" does not require the external id: it must allow sts:AssumeRole only with the condition StringEquals sts:ExternalId = " +
			acct.Connection["externalId"]}
	}
	var de *space.Error
	if errors.As(classify("sts:AssumeRole", err), &de) && de.Reason == space.ReasonAccessDenied {
		return nil
	}
	return classify("sts:AssumeRole", err)
}
