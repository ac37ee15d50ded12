// Package aks mints credentials for AKS clusters with Entra ID (AAD)
// integration: the cloud account's application signs in through workload
// identity federation (a client assertion from the runtime), Resource
// Manager's listClusterUserCredential gives the API server and its CA, and a
// token for the AKS server application is the cluster bearer token (what
// kubelogin would fetch).
package aks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"sigs.k8s.io/yaml"

	"spaces/shared/kubecred"
	"spaces/shared/mint/cloud"
	"spaces/shared/space"
)

// ServerScope is the scope of a cluster token: the AKS AAD server
// application, the same in every tenant.
const ServerScope = "6dae42f8-4368-4678-94ff-3960e28e3630/.default"

// Config configures a Minter.
type Config struct {
	// Assertion returns the runtime's federated identity token for an org,
	// presented to Entra as the client assertion; its audience names the
	// org (space.TrustConfig.AzureAudience), so an app's federated
	// credential trusts one org only.
	Assertion func(ctx context.Context, org string) (string, error)
	// Cloud is the Azure cloud (default azcloud.AzurePublic); a custom one
	// points at a sovereign cloud or the simulated cloud. Custom authority
	// hosts skip MSAL's instance discovery.
	Cloud *azcloud.Configuration
	// HTTPClient carries every call (default: the SDK's).
	HTTPClient *http.Client
	// Retries bounds the SDK's retries per call (default 1): a mint must
	// fail fast, the prober and the API retry on their own schedules.
	Retries int32
}

// Minter mints AKS credentials. It is safe for concurrent use.
type Minter struct {
	cfg   Config
	mu    sync.Mutex
	creds map[string]*azidentity.ClientAssertionCredential // tenant/client/org
}

// New returns a Minter.
func New(cfg Config) *Minter {
	if cfg.Cloud == nil {
		c := azcloud.AzurePublic
		cfg.Cloud = &c
	}
	if cfg.Retries == 0 {
		cfg.Retries = 1
	}
	return &Minter{cfg: cfg, creds: map[string]*azidentity.ClientAssertionCredential{}}
}

func (m *Minter) clientOptions() policy.ClientOptions {
	o := policy.ClientOptions{Cloud: *m.cfg.Cloud, Retry: policy.RetryOptions{MaxRetries: m.cfg.Retries, RetryDelay: 200 * time.Millisecond}}
	if m.cfg.HTTPClient != nil {
		o.Transport = m.cfg.HTTPClient
	}
	return o
}

// credential returns the account's cached federated credential (it caches
// its tokens until they expire).
func (m *Minter) credential(acct space.CloudAccount) (*azidentity.ClientAssertionCredential, error) {
	tenant, client, org := acct.Connection["tenantId"], acct.Connection["clientId"], acct.OrgID
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.creds[credKey(acct)]; ok {
		return c, nil
	}
	if m.cfg.Assertion == nil {
		return nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "no federated identity is configured for Azure", nil)
	}
	assertion := func(ctx context.Context) (string, error) { return m.cfg.Assertion(ctx, org) }
	c, err := azidentity.NewClientAssertionCredential(tenant, client, assertion, &azidentity.ClientAssertionCredentialOptions{
		ClientOptions:            m.clientOptions(),
		DisableInstanceDiscovery: m.cfg.Cloud.ActiveDirectoryAuthorityHost != azcloud.AzurePublic.ActiveDirectoryAuthorityHost,
	})
	if err != nil {
		return nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "cannot build the Azure credential", err)
	}
	m.creds[credKey(acct)] = c
	return c, nil
}

func credKey(acct space.CloudAccount) string {
	return acct.Connection["tenantId"] + "/" + acct.Connection["clientId"] + "/" + acct.OrgID
}

// Forget drops the account's credential and the tokens it caches.
func (m *Minter) Forget(acct space.CloudAccount) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.creds, credKey(acct))
}

func (m *Minter) clusters(acct space.CloudAccount, subscription string) (*armcontainerservice.ManagedClustersClient, error) {
	cred, err := m.credential(acct)
	if err != nil {
		return nil, err
	}
	c, err := armcontainerservice.NewManagedClustersClient(subscription, cred, &arm.ClientOptions{ClientOptions: m.clientOptions()})
	if err != nil {
		return nil, cloud.Errorf(space.ReasonCredentialsUnavailable, "cannot build the AKS client", err)
	}
	return c, nil
}

// Mint returns credentials for the space's cluster.
func (m *Minter) Mint(ctx context.Context, acct space.CloudAccount, s space.Space) (kubecred.Credentials, error) {
	server, ca, err := m.endpoint(ctx, acct, s)
	if err != nil {
		return kubecred.Credentials{}, err
	}
	cred, err := m.credential(acct)
	if err != nil {
		return kubecred.Credentials{}, err
	}
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{ServerScope}})
	if err != nil {
		return kubecred.Credentials{}, classify("entra:token", err)
	}
	return kubecred.Credentials{Server: server, CAData: ca, Token: tok.Token, ExpiresAt: tok.ExpiresOn}, nil
}

// endpoint reads the API server URL and CA from the cluster user
// kubeconfig (the managed cluster resource carries the FQDN but no CA).
func (m *Minter) endpoint(ctx context.Context, acct space.CloudAccount, s space.Space) (string, []byte, error) {
	api, err := m.clusters(acct, s.Config["subscriptionId"])
	if err != nil {
		return "", nil, err
	}
	out, err := api.ListClusterUserCredentials(ctx, s.Config["resourceGroup"], s.Config["clusterName"], nil)
	if err != nil {
		return "", nil, classify("arm:listClusterUserCredential", err)
	}
	for _, r := range out.Kubeconfigs {
		if r == nil {
			continue
		}
		server, ca, err := parseKubeconfig(r.Value)
		if err == nil {
			return server, ca, nil
		}
		return "", nil, cloud.Errorf(space.ReasonCloudUnavailable, "the cluster user kubeconfig is not usable: "+err.Error(), err)
	}
	return "", nil, cloud.Errorf(space.ReasonCloudUnavailable, "AKS returned no cluster user kubeconfig", nil)
}

// parseKubeconfig takes the current context's cluster server and CA.
func parseKubeconfig(data []byte) (string, []byte, error) {
	var kc struct {
		CurrentContext string `json:"current-context"`
		Clusters       []struct {
			Name    string `json:"name"`
			Cluster struct {
				Server string `json:"server"`
				CAData []byte `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Contexts []struct {
			Name    string `json:"name"`
			Context struct {
				Cluster string `json:"cluster"`
			} `json:"context"`
		} `json:"contexts"`
	}
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return "", nil, err
	}
	want := ""
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			want = c.Context.Cluster
		}
	}
	for _, c := range kc.Clusters {
		if (want == "" || c.Name == want) && c.Cluster.Server != "" {
			return c.Cluster.Server, c.Cluster.CAData, nil
		}
	}
	return "", nil, errors.New("no cluster with a server")
}

// CheckCluster looks the cluster up (registration check) and answers its
// location and version.
func (m *Minter) CheckCluster(ctx context.Context, acct space.CloudAccount, s space.Space) (space.ClusterFacts, error) {
	api, err := m.clusters(acct, s.Config["subscriptionId"])
	if err != nil {
		return space.ClusterFacts{}, err
	}
	res, err := api.Get(ctx, s.Config["resourceGroup"], s.Config["clusterName"], nil)
	if err != nil {
		return space.ClusterFacts{}, classify("arm:managedClusters.get", err)
	}
	return facts(res.ManagedCluster), nil
}

// facts reads a managed cluster's location and version: the version it
// runs (currentKubernetesVersion, a patch version) when ARM says it, else
// the one asked for (kubernetesVersion, which may be a bare minor).
// https://learn.microsoft.com/en-us/rest/api/aks/managed-clusters/get
func facts(mc armcontainerservice.ManagedCluster) space.ClusterFacts {
	f := space.ClusterFacts{Location: deref(mc.Location)}
	if p := mc.Properties; p != nil {
		f.KubernetesVersion = deref(p.CurrentKubernetesVersion)
		if f.KubernetesVersion == "" {
			f.KubernetesVersion = deref(p.KubernetesVersion)
		}
	}
	return f
}

// ListClusters lists the subscription's managed clusters.
func (m *Minter) ListClusters(ctx context.Context, acct space.CloudAccount, _ string) ([]space.DiscoveredCluster, error) {
	sub := acct.Connection["subscriptionId"]
	api, err := m.clusters(acct, sub)
	if err != nil {
		return nil, err
	}
	var list []space.DiscoveredCluster
	for p := api.NewListPager(nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, classify("arm:managedClusters.list", err)
		}
		for _, mc := range page.Value {
			if mc == nil || mc.ID == nil {
				continue
			}
			rg := resourceGroupOf(*mc.ID)
			status := ""
			if mc.Properties != nil && mc.Properties.ProvisioningState != nil {
				status = *mc.Properties.ProvisioningState
			}
			name := deref(mc.Name)
			list = append(list, space.DiscoveredCluster{Name: name, Location: deref(mc.Location), Status: status,
				Config: space.Config{"clusterName": name, "resourceGroup": rg, "subscriptionId": sub}})
		}
	}
	return list, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// resourceGroupOf reads the resource group from a resource id,
// /subscriptions/<sub>/resourceGroups/<rg>/providers/...
func resourceGroupOf(id string) string {
	parts := strings.Split(id, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], "resourceGroups") {
			return parts[i+1]
		}
	}
	return ""
}

func classify(op string, err error) error {
	var de *space.Error
	if errors.As(err, &de) {
		return de
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("%s: %s", op, re.ErrorCode)
		switch {
		case re.StatusCode == http.StatusNotFound:
			return cloud.Errorf(space.ReasonClusterNotFound, armMessage(re), err)
		case re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized:
			return cloud.Errorf(space.ReasonAccessDenied, msg, err)
		}
		return cloud.Unavailable(op, err)
	}
	var af *azidentity.AuthenticationFailedError
	if errors.As(err, &af) {
		if af.RawResponse != nil && af.RawResponse.StatusCode >= 500 {
			return cloud.Unavailable(op, err)
		}
		return cloud.Errorf(space.ReasonCredentialsUnavailable, "Entra refused the federated sign-in", err)
	}
	return cloud.Unavailable(op, err)
}

// armMessage is the not-found message without the SDK's request dump.
func armMessage(re *azcore.ResponseError) string {
	if re.ErrorCode != "" {
		return "Azure: " + re.ErrorCode
	}
	return "Azure: the managed cluster was not found"
}

// VerifyAccount checks the account's trust: the org's federated token
// signs the app in and lists the subscription's clusters, and another
// org's token (space.CanaryOrg) is refused by Entra.
func (m *Minter) VerifyAccount(ctx context.Context, acct space.CloudAccount) error {
	m.Forget(acct)
	if _, err := m.ListClusters(ctx, acct, ""); err != nil {
		// Entra refusing the org's token is the customer's answer here,
		// not an outage.
		var af *azidentity.AuthenticationFailedError
		if errors.As(err, &af) && (af.RawResponse == nil || af.RawResponse.StatusCode < 500) {
			return cloud.Errorf(space.ReasonAccessDenied, "Entra refused this org's federated token for app "+
				acct.Connection["clientId"]+": "+entraMessage(af), err)
		}
		return err
	}
	canary := acct
	canary.OrgID = space.CanaryOrg
	cred, err := m.credential(canary)
	if err != nil {
		return err
	}
	defer m.Forget(canary)
	_, err = cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{m.cfg.Cloud.Services[azcloud.ResourceManager].Audience + "/.default"}})
	var de *space.Error
	switch {
	case err == nil:
		return &space.Error{Kind: space.KindInvalid, Reason: space.ReasonTrustNotOrgBound, Message: "the app " + acct.Connection["clientId"] +
			" accepts tokens of other orgs: its federated credential must name this org's audience"}
	case errors.As(classify("entra:token", err), &de) && de.Reason == space.ReasonCredentialsUnavailable:
		return nil
	}
	return classify("entra:token", err)
}

// entraMessage is Entra's error description (AADSTS...), without the
// SDK's request dump.
func entraMessage(af *azidentity.AuthenticationFailedError) string {
	if af.RawResponse == nil || af.RawResponse.Body == nil {
		return "sign-in refused"
	}
	var body struct {
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(af.RawResponse.Body, 1<<16)).Decode(&body); err != nil || body.Description == "" {
		return "sign-in refused"
	}
	return body.Description
}
