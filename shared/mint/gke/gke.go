// Package gke mints credentials for GKE clusters: an OAuth2 access token of
// the cloud account's service account, obtained by impersonation (IAM
// Credentials generateAccessToken) from the runtime's own Google
// credentials, and the cluster's endpoint and CA from the container API's
// GetCluster. The access token is also the cluster bearer token, as with
// gke-gcloud-auth-plugin.
package gke

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2/apierror"
	"golang.org/x/oauth2"
	"google.golang.org/api/option"

	"spaces/shared/kubecred"
	"spaces/shared/mint/cloud"
	"spaces/shared/space"
)

const (
	// Scope is what the impersonated token may do: the container API and
	// the clusters.
	Scope = "https://www.googleapis.com/auth/cloud-platform"
	// DefaultIAMEndpoint and DefaultContainerEndpoint are Google's.
	DefaultIAMEndpoint       = "https://iamcredentials.googleapis.com"
	DefaultContainerEndpoint = "https://container.googleapis.com"
	// refreshBefore renews a token this long before it expires.
	refreshBefore = 2 * time.Minute
	// lifetime is what generateAccessToken is asked for.
	lifetime = "3600s"
)

// Config configures a Minter.
type Config struct {
	// Runtime is the runtime's own Google identity acting for an org
	// (workload identity federation with the org in the subject, see
	// space.TrustConfig): the customer's service account grants it to that
	// org's principal only.
	Runtime func(org string) oauth2.TokenSource
	// HTTPClient carries every call (default http.DefaultClient); its
	// transport is wrapped with the tokens.
	HTTPClient *http.Client
	// IAMEndpoint and ContainerEndpoint override Google's endpoints (the
	// simulated cloud).
	IAMEndpoint, ContainerEndpoint string
	// Now reads the clock (default time.Now).
	Now func() time.Time
}

// Minter mints GKE credentials. It is safe for concurrent use.
type Minter struct {
	cfg    Config
	mu     sync.Mutex
	iam    map[string]*http.Client       // org -> IAM client with the org's federated identity
	tokens map[string]oauth2.TokenSource // org + service account -> cached impersonated tokens
	apis   map[string]*container.ClusterManagerClient
}

// New returns a Minter.
func New(cfg Config) *Minter {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.IAMEndpoint == "" {
		cfg.IAMEndpoint = DefaultIAMEndpoint
	}
	if cfg.ContainerEndpoint == "" {
		cfg.ContainerEndpoint = DefaultContainerEndpoint
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Minter{
		cfg:    cfg,
		iam:    map[string]*http.Client{},
		tokens: map[string]oauth2.TokenSource{},
		apis:   map[string]*container.ClusterManagerClient{},
	}
}

func withTokens(base *http.Client, ts oauth2.TokenSource) *http.Client {
	c := *base
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = &oauth2.Transport{Source: ts, Base: rt}
	return &c
}

// impersonated is a token source of the service account, caching each
// token until shortly before it expires.
type impersonated struct {
	m       *Minter
	org, sa string
}

func (i impersonated) Token() (*oauth2.Token, error) {
	return i.m.generateAccessToken(context.Background(), i.org, i.sa)
}

// key names what an org's impersonation of a service account caches.
func key(org, sa string) string { return org + "\x00" + sa }

func (m *Minter) tokenSource(org, sa string) oauth2.TokenSource {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts, ok := m.tokens[key(org, sa)]
	if !ok {
		ts = oauth2.ReuseTokenSourceWithExpiry(nil, impersonated{m: m, org: org, sa: sa}, refreshBefore)
		m.tokens[key(org, sa)] = ts
	}
	return ts
}

// iamClient is the IAM Credentials client acting as the org's federated
// identity.
func (m *Minter) iamClient(org string) (*http.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.iam[org]; ok {
		return c, nil
	}
	if m.cfg.Runtime == nil {
		return nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "no federated identity is configured for GCP", nil)
	}
	c := withTokens(m.cfg.HTTPClient, m.cfg.Runtime(org))
	m.iam[org] = c
	return c, nil
}

// generateAccessToken is IAM Credentials' generateAccessToken, called as
// the org's federated identity.
func (m *Minter) generateAccessToken(ctx context.Context, org, sa string) (*oauth2.Token, error) {
	iam, err := m.iamClient(org)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]any{"scope": []string{Scope}, "lifetime": lifetime})
	u := strings.TrimSuffix(m.cfg.IAMEndpoint, "/") + "/v1/projects/-/serviceAccounts/" + url.PathEscape(sa) + ":generateAccessToken"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := iam.Do(req)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "the runtime's Google credentials were refused: "+re.ErrorCode, err)
		}
		return nil, cloud.Unavailable("iam:generateAccessToken", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		msg := fmt.Sprintf("impersonating %s as %s: %s", sa, space.OrgTag(org), e.Error.Message)
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
			return nil, cloud.Errorf(space.ReasonCredentialsUnavailable, msg, nil)
		case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound:
			return nil, cloud.Errorf(space.ReasonAccessDenied, msg, nil)
		}
		return nil, cloud.Errorf(space.ReasonCloudUnavailable, msg, fmt.Errorf("HTTP %d", resp.StatusCode))
	}
	var out struct {
		AccessToken string    `json:"accessToken"`
		ExpireTime  time.Time `json:"expireTime"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.AccessToken == "" {
		return nil, cloud.Errorf(space.ReasonCloudUnavailable, "generateAccessToken answered without a token", err)
	}
	return &oauth2.Token{AccessToken: out.AccessToken, TokenType: "Bearer", Expiry: out.ExpireTime}, nil
}

// Forget drops the account's cached access token and client.
func (m *Minter) Forget(acct space.CloudAccount) {
	k := key(acct.OrgID, acct.Connection["serviceAccountEmail"])
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tokens, k)
	if c, ok := m.apis[k]; ok {
		_ = c.Close()
		delete(m.apis, k)
	}
}

// api returns the container API client acting as the service account.
func (m *Minter) api(ctx context.Context, org, sa string) (*container.ClusterManagerClient, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.apis[key(org, sa)]; ok {
		return c, nil
	}
	ts := m.tokens[key(org, sa)]
	c, err := container.NewClusterManagerRESTClient(ctx,
		option.WithEndpoint(m.cfg.ContainerEndpoint),
		option.WithHTTPClient(withTokens(m.cfg.HTTPClient, ts)))
	if err != nil {
		return nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "cannot build the GKE client", err)
	}
	m.apis[key(org, sa)] = c
	return c, nil
}

// token returns the service account's current access token.
func (m *Minter) token(ctx context.Context, org, sa string) (*oauth2.Token, error) {
	tok, err := m.tokenSource(org, sa).Token()
	if err != nil {
		var de *space.Error
		if errors.As(err, &de) {
			return nil, de
		}
		return nil, cloud.Unavailable("iam:generateAccessToken", err)
	}
	return tok, nil
}

// Mint returns credentials for the space's cluster.
func (m *Minter) Mint(ctx context.Context, acct space.CloudAccount, s space.Space) (kubecred.Credentials, error) {
	sa := acct.Connection["serviceAccountEmail"]
	tok, err := m.token(ctx, acct.OrgID, sa)
	if err != nil {
		return kubecred.Credentials{}, err
	}
	cl, err := m.get(ctx, acct.OrgID, sa, s)
	if err != nil {
		return kubecred.Credentials{}, err
	}
	ca, err := base64.StdEncoding.DecodeString(cl.GetMasterAuth().GetClusterCaCertificate())
	if err != nil {
		return kubecred.Credentials{}, cloud.Errorf(space.ReasonCloudUnavailable, "GKE returned a CA that is not base64", err)
	}
	return kubecred.Credentials{Server: "https://" + cl.GetEndpoint(), CAData: ca, Token: tok.AccessToken, ExpiresAt: tok.Expiry}, nil
}

func (m *Minter) get(ctx context.Context, org, sa string, s space.Space) (*containerpb.Cluster, error) {
	if _, err := m.token(ctx, org, sa); err != nil {
		return nil, err
	}
	api, err := m.api(ctx, org, sa)
	if err != nil {
		return nil, err
	}
	name := "projects/" + s.Config["projectId"] + "/locations/" + s.Config["region"] + "/clusters/" + s.Config["clusterName"]
	cl, err := api.GetCluster(ctx, &containerpb.GetClusterRequest{Name: name})
	if err != nil {
		return nil, classify("gke:GetCluster", err)
	}
	if cl.GetEndpoint() == "" {
		return nil, cloud.Errorf(space.ReasonCloudUnavailable, fmt.Sprintf("GKE cluster %s has no endpoint yet (status %s)", name, cl.GetStatus()), nil)
	}
	return cl, nil
}

// CheckCluster looks the cluster up (registration check) and answers its
// location (region or zone) and its control plane's version.
// https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster
func (m *Minter) CheckCluster(ctx context.Context, acct space.CloudAccount, s space.Space) (space.ClusterFacts, error) {
	cl, err := m.get(ctx, acct.OrgID, acct.Connection["serviceAccountEmail"], s)
	if err != nil {
		return space.ClusterFacts{}, err
	}
	return space.ClusterFacts{Location: cl.GetLocation(), KubernetesVersion: cl.GetCurrentMasterVersion()}, nil
}

// ListClusters lists the project's clusters in every location.
func (m *Minter) ListClusters(ctx context.Context, acct space.CloudAccount, _ string) ([]space.DiscoveredCluster, error) {
	sa, project := acct.Connection["serviceAccountEmail"], acct.Connection["projectId"]
	if _, err := m.token(ctx, acct.OrgID, sa); err != nil {
		return nil, err
	}
	api, err := m.api(ctx, acct.OrgID, sa)
	if err != nil {
		return nil, err
	}
	out, err := api.ListClusters(ctx, &containerpb.ListClustersRequest{Parent: "projects/" + project + "/locations/-"})
	if err != nil {
		return nil, classify("gke:ListClusters", err)
	}
	var list []space.DiscoveredCluster
	for _, cl := range out.GetClusters() {
		list = append(list, space.DiscoveredCluster{Name: cl.GetName(), Location: cl.GetLocation(), Status: cl.GetStatus().String(),
			Config: space.Config{"clusterName": cl.GetName(), "region": cl.GetLocation(), "projectId": project}})
	}
	return list, nil
}

func classify(op string, err error) error {
	var de *space.Error
	if errors.As(err, &de) {
		return de
	}
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		msg := ae.Error()
		if st := ae.GRPCStatus(); st != nil && st.Message() != "" {
			msg = st.Message()
		}
		switch ae.HTTPCode() {
		case http.StatusNotFound:
			return cloud.Errorf(space.ReasonClusterNotFound, msg, err)
		case http.StatusForbidden, http.StatusUnauthorized:
			return cloud.Errorf(space.ReasonAccessDenied, op+": "+msg, err)
		}
	}
	return cloud.Unavailable(op, err)
}

// VerifyAccount checks the account's trust: the org's federated identity
// may impersonate the service account and list the project's clusters,
// and another org's identity (space.CanaryOrg) may not impersonate it.
func (m *Minter) VerifyAccount(ctx context.Context, acct space.CloudAccount) error {
	m.Forget(acct)
	if _, err := m.ListClusters(ctx, acct, ""); err != nil {
		return err
	}
	sa := acct.Connection["serviceAccountEmail"]
	_, err := m.generateAccessToken(ctx, space.CanaryOrg, sa)
	var de *space.Error
	switch {
	case err == nil:
		return &space.Error{Kind: space.KindInvalid, Reason: space.ReasonTrustNotOrgBound, Message: sa +
			" lets identities of other orgs impersonate it: grant roles/iam.serviceAccountTokenCreator to this org's principal only, not to the whole pool"}
	case errors.As(err, &de) && de.Reason == space.ReasonAccessDenied:
		return nil
	}
	return err
}
