// Package simcloud is a local stand-in for the cloud APIs Spaces' credential
// minters call: AWS STS (AssumeRole, GetCallerIdentity, SigV4-verified) and
// EKS (DescribeCluster, ListClusters); Google's OAuth token endpoint, IAM
// Credentials generateAccessToken and the GKE container API (GetCluster,
// ListClusters, REST); Microsoft Entra's token endpoint and Azure Resource
// Manager's managedClusters (get, list, listClusterUserCredential).
//
// It also creates clusters through the same SDK calls as the real clouds
// (eks:CreateCluster, CreateNodegroup, DescribeNodegroup; GKE
// clusters.create, operations.get and list; managedClusters PUT), as the
// identity the customer allowed (AllowCreate), with the clouds' checks
// (supported versions, machine types, networks added with AddNetwork, a
// node quota, names taken, EKS request tokens) and their kind of refusal.
// A created cluster comes up after Options.CreateDelay on the API server
// set with SetCreationBackend, granted to its creator; Created counts them.
//
// Everything is served by one HTTPS server on a loopback port. The real SDK
// clients reach it through their ordinary endpoint overrides (BaseEndpoint,
// option.WithEndpoint, a custom cloud.Configuration) and the HTTP client from
// HTTPClient, which trusts the server's CA: there is no code path in the
// minters that exists only for it.
//
// Each simulated cluster is backed by a real API server: a testcluster (to
// which the tokens simcloud issues are pushed with AddToken) or a real
// kube-apiserver that asks simcloud's token-review webhook (WebhookURL) about
// every bearer token. The webhook checks EKS tokens the way the EKS
// authenticator does: it decodes the presigned GetCallerIdentity URL, checks
// its host, action, signed x-k8s-aws-id header and age, and executes it
// against simcloud's STS, which verifies the SigV4 signature with the secret
// of the session it issued.
package simcloud

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	"spaces/infra/testcluster"
	"spaces/shared/space"
)

// Principals as simcloud names them in Cluster.Principals and token reviews.
//
//	aws:   the IAM role ARN, arn:aws:iam::<account>:role/<name>
//	gcp:   the service account email
//	azure: "azure:<tenantId>/<clientId>"
func AzurePrincipal(tenantID, clientID string) string { return "azure:" + tenantID + "/" + clientID }

// AKSServerAudience is the application id of the AKS AAD server app: the
// audience of every AKS cluster token, in every tenant.
const AKSServerAudience = "6dae42f8-4368-4678-94ff-3960e28e3630"

// ARMAudience is the Resource Manager audience simcloud's ARM expects.
const ARMAudience = "https://management.simcloud.test"

// Runtime credentials: what the deployed functions' own identity would be.
const (
	// RuntimeAccessKeyID and RuntimeSecretAccessKey sign AssumeRole calls.
	RuntimeAccessKeyID     = "AKIASIMCLOUDRUNTIME1"
	RuntimeSecretAccessKey = "simcloud-runtime-secret-access-key"
	// RuntimeARN is who the runtime's own credentials are.
	RuntimeARN = "arn:aws:iam::000000000000:user/spaces-runtime"
	// FederationRoleARN is Spaces' own role the runtime assumes, session
	// named after the org, before exchanging at Google's STS or asking STS
	// for the org's Entra token (one role for both, as a deployment may
	// have; its web identity tokens' subject is this ARN).
	FederationRoleARN = "arn:aws:iam::000000000000:role/spaces-gcp-federation"
	// GCPWorkloadIdentityProvider is Spaces' pool provider trusting the
	// runtime's AWS account, with google.subject=assertion.arn.
	GCPWorkloadIdentityProvider = "projects/100000000001/locations/global/workloadIdentityPools/spaces/providers/aws"
	// AzureAudienceBase is the stem of the per-org audiences of the
	// runtime's web identity tokens.
	AzureAudienceBase = "api://AzureADTokenExchange"
)

// FederatedCredential is one federated identity credential of an Entra
// app: a token is accepted when issuer, subject and audience all match.
type FederatedCredential struct{ Issuer, Subject, Audience string }

// webToken is a web identity token STS issued (sts:GetWebIdentityToken).
type webToken struct {
	FederatedCredential
	expires time.Time
}

// TokenSink is what a testcluster implements: simcloud pushes the
// tokens it issues to the clusters that should accept them.
type TokenSink interface {
	AddToken(token string)
	RevokeToken(token string)
}

// Cluster is one simulated managed cluster.
type Cluster struct {
	Provider space.Provider
	Name     string
	// Account is the AWS account id, the GCP project id or the Azure
	// subscription id that owns the cluster.
	Account string
	// Location is the AWS region, the GCP region or zone, or the Azure
	// location.
	Location string
	// ResourceGroup is the Azure resource group.
	ResourceGroup string
	// Version is the control plane's version as the cloud names it (EKS
	// "1.31", GKE "1.31.5-gke.1023000", AKS "1.31.2"); empty: DefaultVersions'.
	// A cluster the cloud created reports the version it was created with.
	Version string
	// Server and CAPEM are the backing API server.
	Server string
	CAPEM  []byte
	// Sink receives the tokens that work on the cluster (a testcluster).
	// Nil for a kube-apiserver that reviews tokens through the webhook.
	Sink TokenSink
	// Backend is the webhook key of the backing kube-apiserver (see
	// WebhookURL); empty with a Sink.
	Backend string
	// Principals may see the cluster and get tokens it accepts.
	Principals []string

	made *creation // set on a cluster the cloud created
}

// DefaultVersions are the versions a cluster without a Version reports.
var DefaultVersions = map[space.Provider]string{space.AWS: "1.31", space.GCP: "1.31.5-gke.1023000", space.Azure: "1.31.2"}

func (c *Cluster) version() string {
	if c.Version != "" {
		return c.Version
	}
	return DefaultVersions[c.Provider]
}

func (c *Cluster) grants(principal string) bool {
	for _, p := range c.Principals {
		if p == principal {
			return true
		}
	}
	return false
}

// issued is a token simcloud handed out.
type issued struct {
	principal string
	audience  string // scope or audience it was issued for
	expires   time.Time
}

// session is an AWS session AssumeRole handed out.
type session struct {
	secret, token string
	roleARN       string
	sessionName   string
	expires       time.Time
}

// Options configures a Cloud.
type Options struct {
	// TokenLifetime is how long issued Google and Entra tokens live
	// (default 1 h).
	TokenLifetime time.Duration
	// SessionLifetime is how long AssumeRole sessions live (default 1 h).
	SessionLifetime time.Duration
	// Now reads the clock (default time.Now).
	Now func() time.Time
	// OnApply, when set, is told of every setup the console applied (the
	// demo keeps them across restarts, as a real cloud would).
	OnApply func(space.CloudAccount)
	// CreateDelay is how long a created cluster takes to come up (and,
	// on EKS, its node group after it): CREATING, PROVISIONING or Creating
	// until then. Zero: at once.
	CreateDelay time.Duration
	// NodeQuota bounds the nodes of the clusters created in one account
	// (default DefaultNodeQuota).
	NodeQuota int
	// OnCreate, when set, is told of every cluster the cloud created, and
	// again when its EKS node group is created (Restore takes it back).
	OnCreate func(Record)
	// OnInstallAgent, when set, installs the Spaces agent with a bootstrap
	// token on the demo's private cluster (the console's install-agent).
	OnInstallAgent func(ctx context.Context, token string) error
}

// Endpoints are what a client of the cloud needs to reach it (its URL and
// the CA its certificate is signed by): plain data, so that a process of
// its own (a benchmark's prober measured apart) builds the same minter as
// the process that runs the cloud.
type Endpoints struct {
	// URL is the base URL of every simulated API, https://127.0.0.1:port.
	URL   string
	CAPEM []byte
}

// Cloud is a running simulated cloud. It is safe for concurrent use.
type Cloud struct {
	Endpoints

	srv  *httptest.Server
	opts Options
	self *http.Client // for executing presigned URLs (the webhook)

	mu       sync.Mutex
	clusters []*Cluster
	roles    map[string]trustPolicy           // role ARN -> who may assume it
	sas      map[string][]string              // service account -> principals that may impersonate it
	apps     map[string][]FederatedCredential // azure principal -> its federated credentials
	assert   map[string]webToken              // web identity tokens STS issued
	tokens   map[string]issued
	sessions map[string]session // access key id -> session
	calls    map[string]int
	failing  map[string]int         // op -> HTTP status to answer with
	backend  *Backend               // serves created clusters
	creators map[string]bool        // account + principal -> may create clusters
	networks map[string]string      // provider + account + id -> where it is
	created  map[space.Provider]int // clusters created
}

// Start starts a simulated cloud.
func Start(opts Options) (*Cloud, error) {
	if opts.TokenLifetime <= 0 {
		opts.TokenLifetime = time.Hour
	}
	if opts.SessionLifetime <= 0 {
		opts.SessionLifetime = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ca, err := testcluster.NewCA()
	if err != nil {
		return nil, err
	}
	cert, err := ca.ServerCertificate()
	if err != nil {
		return nil, err
	}
	c := &Cloud{
		Endpoints: Endpoints{CAPEM: ca.PEM()}, opts: opts,
		roles: map[string]trustPolicy{}, sas: map[string][]string{}, apps: map[string][]FederatedCredential{}, assert: map[string]webToken{},
		tokens: map[string]issued{}, sessions: map[string]session{}, calls: map[string]int{}, failing: map[string]int{},
		creators: map[string]bool{}, networks: map[string]string{}, created: map[space.Provider]int{},
	}
	// Spaces' own federation role trusts the runtime (no external id: it
	// is Spaces' role, in Spaces' account).
	c.roles[FederationRoleARN] = trustPolicy{{principals: []string{RuntimeARN}}}
	c.srv = httptest.NewUnstartedServer(c.routes())
	c.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	c.srv.StartTLS()
	c.URL = c.srv.URL
	c.self = c.HTTPClient()
	return c, nil
}

// StartForTest starts a Cloud that closes when tb ends.
func StartForTest(tb testing.TB, opts Options) *Cloud {
	tb.Helper()
	c, err := Start(opts)
	if err != nil {
		tb.Fatalf("simcloud: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Close stops the server.
func (c *Cloud) Close() { c.srv.Close() }

// HTTPClient returns a client that trusts the cloud's certificate, for the
// SDKs' HTTP client options.
func (c Endpoints) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAPEM)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true,
		MaxIdleConnsPerHost: 64,
	}}
}

// Endpoints for the SDKs' overrides.
func (c Endpoints) GoogleTokenURL() string { return c.URL + "/google/sts/v1/token" }

// EntraAuthorityHost is the ActiveDirectoryAuthorityHost of a custom
// cloud.Configuration.
func (c Endpoints) EntraAuthorityHost() string { return c.URL + "/" }

// WebhookURL is the token-review webhook for the kube-apiserver with the
// given backend key (Cluster.Backend).
func (c *Cloud) WebhookURL(backend string) string {
	return c.URL + "/tokenreview/" + url.PathEscape(backend)
}

// AddCluster adds a simulated cluster.
func (c *Cloud) AddCluster(cl Cluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := cl
	c.clusters = append(c.clusters, &cp)
	// Tokens already out for a principal work on a new cluster too.
	if cp.Sink != nil {
		for tok, is := range c.tokens {
			if cp.grants(is.principal) && c.forCluster(cp.Provider, is) {
				cp.Sink.AddToken(tok)
			}
		}
	}
}

// RemoveCluster deletes a simulated cluster, as deleting it in the cloud
// would.
func (c *Cloud) RemoveCluster(p space.Provider, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.clusters[:0]
	for _, cl := range c.clusters {
		if cl.Provider != p || cl.Name != name {
			out = append(out, cl)
		}
	}
	c.clusters = out
}

// AddRole creates roleARN trusting the runtime with the condition
// sts:ExternalId = externalID ("" adds no condition: anyone the principal
// names may assume it, with or without an external id).
func (c *Cloud) AddRole(roleARN, externalID string) {
	tp := trustPolicy{{principals: []string{RuntimeARN}}}
	if externalID != "" {
		tp[0].externalIDs = []string{externalID}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roles[roleARN] = tp
}

// SetTrustPolicy replaces the trust policy of roleARN (creating the role)
// with an IAM policy document, as aws iam update-assume-role-policy does.
func (c *Cloud) SetTrustPolicy(roleARN string, doc []byte) error {
	tp, err := parseTrustPolicy(doc)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roles[roleARN] = tp
	return nil
}

// AddServiceAccount creates the service account (if new) and lets the
// principals impersonate it (roles/iam.serviceAccountTokenCreator):
// principal://iam.googleapis.com/<pool>/subject/<subject>, or
// principalSet://iam.googleapis.com/<pool>/* for the whole pool.
func (c *Cloud) AddServiceAccount(email string, principals ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sas[email] = append(c.sas[email], principals...)
}

// AddApp creates the Entra application (if new) with federated
// credentials.
func (c *Cloud) AddApp(tenantID, clientID string, fics ...FederatedCredential) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := AzurePrincipal(tenantID, clientID)
	c.apps[p] = append(c.apps[p], fics...)
}

// AWSIssuer is the issuer of the runtime's web identity tokens (the AWS
// account's outbound identity federation issuer).
func (c Endpoints) AWSIssuer() string { return c.URL + "/aws-outbound" }

// Revoke invalidates an issued Google or Entra token, or an AWS session by
// its access key id, everywhere.
func (c *Cloud) Revoke(tokenOrKey string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.tokens, tokenOrKey)
	delete(c.sessions, tokenOrKey)
	for _, cl := range c.clusters {
		if cl.Sink != nil {
			cl.Sink.RevokeToken(tokenOrKey)
		}
	}
}

// RevokeAll invalidates every issued token and session.
func (c *Cloud) RevokeAll() {
	c.mu.Lock()
	toks := make([]string, 0, len(c.tokens))
	for t := range c.tokens {
		toks = append(toks, t)
	}
	c.sessions = map[string]session{}
	c.mu.Unlock()
	for _, t := range toks {
		c.Revoke(t)
	}
}

// Fail makes op (a name as counted by Calls) answer with the HTTP status
// until Fail(op, 0).
func (c *Cloud) Fail(op string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if status == 0 {
		delete(c.failing, op)
	} else {
		c.failing[op] = status
	}
}

// Calls counts the requests made to op, such as "sts:AssumeRole",
// "eks:DescribeCluster", "iam:generateAccessToken", "gke:GetCluster",
// "entra:token", "arm:managedClusters.get", "webhook:tokenreview"; and the
// creation calls "eks:CreateCluster", "eks:CreateNodegroup",
// "eks:DescribeNodegroup", "gke:CreateCluster", "gke:GetOperation",
// "gke:ListOperations", "arm:managedClusters.createOrUpdate" (Created
// counts the clusters they made).
func (c *Cloud) Calls(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// TotalCalls counts the requests to every cloud API (the webhook, which the
// clusters call, excluded).
func (c *Cloud) TotalCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for op, v := range c.calls {
		if op != "webhook:tokenreview" && op != "sts:GetCallerIdentity" {
			n += v
		}
	}
	return n
}

// CallCounts returns every counter, sorted by name, for test logs.
func (c *Cloud) CallCounts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.calls))
	for op, n := range c.calls {
		out = append(out, op+"="+itoa(n))
	}
	sort.Strings(out)
	return out
}

// count records a call to op and reports the failure status set for it.
func (c *Cloud) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
	return c.failing[op]
}

// issue hands out a bearer token for principal and pushes it to the
// clusters with sinks that grant the principal.
func (c *Cloud) issue(principal, audience string, provider space.Provider) (string, time.Time) {
	tok := "sim." + randomHex(32)
	exp := c.opts.Now().Add(c.opts.TokenLifetime).UTC().Truncate(time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	is := issued{principal: principal, audience: audience, expires: exp}
	c.tokens[tok] = is
	for _, cl := range c.clusters {
		if cl.Sink != nil && cl.Provider == provider && cl.grants(principal) && c.forCluster(provider, is) {
			cl.Sink.AddToken(tok)
		}
	}
	return tok, exp
}

// forCluster reports whether a token is a cluster token for provider (as
// opposed to a token for the cloud's own APIs).
func (c *Cloud) forCluster(p space.Provider, is issued) bool {
	switch p {
	case space.GCP:
		return true // GKE accepts the service account's access token
	case space.Azure:
		return is.audience == AKSServerAudience
	}
	return false
}

// lookup returns a live token.
func (c *Cloud) lookup(tok string) (issued, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	is, ok := c.tokens[tok]
	if !ok || !c.opts.Now().Before(is.expires) {
		return issued{}, false
	}
	return is, true
}

// findCluster returns the cluster matching match, under the lock.
func (c *Cloud) findCluster(match func(*Cluster) bool) *Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clusters {
		if match(cl) {
			cp := *cl
			return &cp
		}
	}
	return nil
}

func (c *Cloud) listClusters(match func(*Cluster) bool) []Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Cluster
	for _, cl := range c.clusters {
		if match(cl) {
			out = append(out, *cl)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *Cloud) routes() http.Handler {
	mux := http.NewServeMux()
	// AWS: STS (query protocol on /) and EKS (REST-JSON).
	mux.HandleFunc("POST /{$}", c.sts)
	mux.HandleFunc("GET /{$}", c.sts)
	mux.HandleFunc("GET /clusters/{name}", c.eksDescribe)
	mux.HandleFunc("GET /clusters", c.eksList)
	mux.HandleFunc("POST /clusters", c.eksCreate)
	mux.HandleFunc("POST /clusters/{name}/node-groups", c.eksCreateNodegroup)
	mux.HandleFunc("GET /clusters/{name}/node-groups/{ng}", c.eksDescribeNodegroup)
	// Google.
	mux.HandleFunc("POST /google/sts/v1/token", c.googleExchange)
	mux.HandleFunc("POST /v1/projects/-/serviceAccounts/{sa}", c.generateAccessToken)
	mux.HandleFunc("GET /v1/projects/{project}/locations/{location}/clusters/{name}", c.gkeGet)
	mux.HandleFunc("GET /v1/projects/{project}/locations/{location}/clusters", c.gkeList)
	mux.HandleFunc("POST /v1/projects/{project}/locations/{location}/clusters", c.gkeCreate)
	mux.HandleFunc("GET /v1/projects/{project}/locations/{location}/operations/{op}", c.gkeGetOperation)
	mux.HandleFunc("GET /v1/projects/{project}/locations/{location}/operations", c.gkeListOperations)
	// Microsoft.
	mux.HandleFunc("GET /{tenant}/v2.0/.well-known/openid-configuration", c.entraDiscovery)
	mux.HandleFunc("POST /{tenant}/oauth2/v2.0/token", c.entraToken)
	mux.HandleFunc("GET /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{name}", c.armGet)
	mux.HandleFunc("PUT /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{name}", c.armCreate)
	mux.HandleFunc("POST /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{name}/listClusterUserCredential", c.armUserCredential)
	mux.HandleFunc("GET /subscriptions/{sub}/providers/Microsoft.ContainerService/managedClusters", c.armList)
	// The customers' side, for the demo: apply an account's setup.
	mux.HandleFunc("POST /console/apply-setup", c.consoleApply)
	// ... and run an agent space's install on the demo's private cluster.
	mux.HandleFunc("POST /console/install-agent", c.consoleInstallAgent)
	// Kubernetes token review.
	mux.HandleFunc("POST /tokenreview/{backend}", c.tokenReview)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func bearer(r *http.Request) string {
	const p = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) > len(p) && (h[:len(p)] == p || h[:len(p)] == "bearer ") {
		return h[len(p):]
	}
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
