package simcloud_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"spaces/infra/simcloud"
	"spaces/infra/testcluster"
	"spaces/shared/space"
)

const (
	roleARN  = "arn:aws:iam::123456789012:role/spaces"
	external = "ext-1"
	project  = "proj-1"
	sa       = "spaces@proj-1.iam.gserviceaccount.com"
	tenant   = "11111111-2222-3333-4444-555555555555"
	client   = "66666666-7777-8888-9999-000000000000"
	sub      = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
)

// clusterFor adds a simulated cluster called name backed by a testcluster
// that checks tokens through the cloud, with the backend key name; it
// grants the test's principals when grant is set.
func clusterFor(t *testing.T, sc *simcloud.Cloud, p space.Provider, name string, grant bool) *testcluster.Cluster {
	t.Helper()
	tc := testcluster.NewForTest(t, testcluster.WithTokenCheck(sc.TokenCheck(name)))
	tc.SetTokens()
	c := simcloud.Cluster{Provider: p, Name: name, Server: tc.URL(), CAPEM: tc.CAPEM(), Backend: name}
	switch p {
	case space.AWS:
		c.Account, c.Location, c.Principals = "123456789012", "eu-west-1", []string{roleARN}
	case space.GCP:
		c.Account, c.Location, c.Principals = project, "europe-west1", []string{sa}
	case space.Azure:
		c.Account, c.ResourceGroup, c.Location = sub, "rg", "westeurope"
		c.Principals = []string{simcloud.AzurePrincipal(tenant, client)}
	}
	if !grant {
		c.Principals = nil
	}
	sc.AddCluster(c)
	return tc
}

func spaceFor(p space.Provider, name string) space.Space {
	cfg := map[space.Provider]space.Config{
		space.AWS:   {"clusterName": name, "region": "eu-west-1"},
		space.GCP:   {"clusterName": name, "region": "europe-west1", "projectId": project},
		space.Azure: {"clusterName": name, "resourceGroup": "rg", "subscriptionId": sub},
	}[p]
	return space.Space{ID: "s-" + name, Provider: p, SpaceType: space.TypeKubernetes, Config: cfg}
}

func get(t *testing.T, tc *testcluster.Cluster, token string) int {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(tc.CAPEM())
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", tc.URL()+"/version", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// The providers mint, through the SDKs, credentials that a testcluster
// backed by TokenCheck accepts for its own cluster and refuses for another
// cluster of the same cloud, EKS tokens included.
func TestProvidersAndTokenCheck(t *testing.T) {
	sc := simcloud.StartForTest(t, simcloud.Options{})
	accounts := map[space.Provider]space.CloudAccount{
		space.AWS:   {ID: "a-aws", OrgID: "acme", Provider: space.AWS, Connection: map[string]string{"roleArn": roleARN, "externalId": external}},
		space.GCP:   {ID: "a-gcp", OrgID: "acme", Provider: space.GCP, Connection: map[string]string{"projectId": project, "serviceAccountEmail": sa}},
		space.Azure: {ID: "a-az", OrgID: "acme", Provider: space.Azure, Connection: map[string]string{"tenantId": tenant, "clientId": client, "subscriptionId": sub}},
	}
	for _, a := range accounts {
		if err := sc.ApplySetup(a); err != nil {
			t.Fatal(err)
		}
	}
	providers := sc.Providers()
	for _, p := range []space.Provider{space.AWS, space.GCP, space.Azure} {
		mine := clusterFor(t, sc, p, string(p)+"-mine", true)
		other := clusterFor(t, sc, p, string(p)+"-other", false)

		creds, err := providers[p].Mint(t.Context(), accounts[p], spaceFor(p, string(p)+"-mine"))
		if err != nil {
			t.Fatalf("%s: mint: %v", p, err)
		}
		if creds.Server != mine.URL() {
			t.Errorf("%s: server %s, want %s", p, creds.Server, mine.URL())
		}
		if got := get(t, mine, creds.Token); got != 200 {
			t.Errorf("%s: own cluster answered %d", p, got)
		}
		if got := get(t, other, creds.Token); got != 401 {
			t.Errorf("%s: a cluster that does not grant the principal answered %d", p, got)
		}
		if got := get(t, mine, "forged"+creds.Token); got != 401 {
			t.Errorf("%s: a forged token answered %d", p, got)
		}
		principal, err := sc.ReviewToken(t.Context(), string(p)+"-mine", creds.Token)
		want := map[space.Provider]string{space.AWS: roleARN, space.GCP: sa, space.Azure: simcloud.AzurePrincipal(tenant, client)}[p]
		if err != nil || principal != want {
			t.Errorf("%s: review: %q, %v; want %q", p, principal, err, want)
		}
	}
	if _, err := sc.ReviewToken(t.Context(), "aws-mine", ""); err == nil {
		t.Error("an empty token passed review")
	}
	// Revoking a Google or Entra token makes the clusters refuse it.
	creds, err := providers[space.GCP].Mint(t.Context(), accounts[space.GCP], spaceFor(space.GCP, "gcp-mine"))
	if err != nil {
		t.Fatal(err)
	}
	sc.Revoke(creds.Token)
	if _, err := sc.ReviewToken(t.Context(), "gcp-mine", creds.Token); err == nil {
		t.Error("a revoked token passed review")
	}
}

// The demo's console applies an account's setup as its customer would; a
// body that is not an account changes nothing.
func TestConsoleAppliesSetup(t *testing.T) {
	sc := simcloud.StartForTest(t, simcloud.Options{})
	acct := space.CloudAccount{ID: "a-aws", OrgID: "acme", Provider: space.AWS,
		Connection: map[string]string{"roleArn": roleARN, "externalId": external}}
	clusterFor(t, sc, space.AWS, "console", true)
	eks := sc.Providers()[space.AWS].(interface {
		VerifyAccount(context.Context, space.CloudAccount) error
	})
	post := func(body string) int {
		res, err := sc.HTTPClient().Post(sc.URL+"/console/apply-setup", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := post(`{"provider":"nope"}`); got != http.StatusBadRequest {
		t.Errorf("a body that is not an account: %d", got)
	}
	if err := eks.VerifyAccount(t.Context(), acct); err == nil {
		t.Fatal("the role trusts Spaces before any setup")
	}
	raw, _ := json.Marshal(acct)
	if got := post(string(raw)); got != http.StatusOK {
		t.Fatalf("applying the setup: %d", got)
	}
	if err := eks.VerifyAccount(t.Context(), acct); err != nil {
		t.Errorf("after the setup: %v", err)
	}
}

// The console's install-agent hands the bootstrap token of an agent-mode
// registration answer to the cloud's installer (the demo's), and only
// that: a body without one is 400 and installs nothing; a cloud without an
// installer says so.
func TestConsoleInstallsAgent(t *testing.T) {
	var got []string
	sc := simcloud.StartForTest(t, simcloud.Options{OnInstallAgent: func(_ context.Context, token string) error {
		got = append(got, token)
		return nil
	}})
	post := func(sc *simcloud.Cloud, body string) int {
		res, err := sc.HTTPClient().Post(sc.URL+"/console/install-agent", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, bad := range []string{`{"id":"s-1"}`, `{"agent_bootstrap":{"token":""}}`, `not json`} {
		if code := post(sc, bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, code)
		}
	}
	if len(got) != 0 {
		t.Fatalf("a bad body installed %v", got)
	}
	if code := post(sc, `{"id":"s-1","agent_bootstrap":{"token":"spb1.s-1.secret","install":"kubectl ..."}}`); code != http.StatusOK {
		t.Fatalf("a registration answer: %d", code)
	}
	if len(got) != 1 || got[0] != "spb1.s-1.secret" {
		t.Errorf("installed %v, want the answer's token", got)
	}
	if code := post(simcloud.StartForTest(t, simcloud.Options{}), `{"agent_bootstrap":{"token":"x"}}`); code != http.StatusNotFound {
		t.Errorf("a cloud without an installer: %d, want 404", code)
	}
}
