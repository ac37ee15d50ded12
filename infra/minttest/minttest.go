// Package minttest wires a mint.Minter to the simulated clouds for tests:
// one cloud account per provider in a fresh org, each allowed into
// simcloud, and helpers to add clusters backed by a testcluster or a real
// kube-apiserver.
package minttest

import (
	"testing"

	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/infra/simcloud"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/mint"
	"spaces/shared/space"
)

// Fixed identities of the simulated accounts.
const (
	AWSAccount    = "123456789012"
	RoleARN       = "arn:aws:iam::" + AWSAccount + ":role/spaces-access"
	Region        = "eu-west-1"
	GCPProject    = "acme-prod-1"
	GCPLocation   = "europe-west1"
	ServiceAcct   = "spaces@acme-prod-1.iam.gserviceaccount.com"
	TenantID      = "11111111-2222-3333-4444-555555555555"
	ClientID      = "66666666-7777-8888-9999-000000000000"
	Subscription  = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	ResourceGroup = "rg-prod"
	AzureLocation = "westeurope"
)

// Networks of the simulated accounts, for creations to name (AllowCreation
// adds them).
const (
	SubnetA       = "subnet-0a1b2c3d4e5f60001"
	SubnetB       = "subnet-0a1b2c3d4e5f60002"
	SecurityGroup = "sg-0a1b2c3d4e5f60003"
	GCPNetwork    = "acme-vpc"
	GCPSubnetwork = "acme-europe-west1"
	AzureSubnet   = "/subscriptions/" + Subscription + "/resourceGroups/" + ResourceGroup +
		"/providers/Microsoft.Network/virtualNetworks/vnet-prod/subnets/aks"
)

// AllowCreation plays the customer who lets the connected identities
// create clusters (docs/trust.md, "Creating clusters") and has the networks
// above.
func AllowCreation(sc *simcloud.Cloud) { creator.Allow(sc) }

var creator = simcloud.Creator{
	AWSAccount: AWSAccount, AWSRegion: Region, RoleARN: RoleARN, SubnetA: SubnetA, SubnetB: SubnetB, SecurityGroup: SecurityGroup,
	GCPProject: GCPProject, ServiceAccount: ServiceAcct, GCPNetwork: GCPNetwork, GCPSubnetwork: GCPSubnetwork,
	AzureSubscription: Subscription, AzurePrincipal: simcloud.AzurePrincipal(TenantID, ClientID),
	AzureLocation: AzureLocation, AzureSubnet: AzureSubnet,
}

// Spec is a cluster spec every simulated cloud accepts for p, with the
// networks of AllowCreation.
func Spec(p space.Provider) space.ClusterSpec {
	s := creator.Spec(p)
	s.Tags = map[string]string{"team": "platform"}
	return s
}

// Env is one test's world.
type Env struct {
	Cloud    *simcloud.Cloud
	Store    *dynamostore.Store
	Service  *space.Service
	Minter   *mint.Minter
	Org      string
	Accounts map[space.Provider]space.CloudAccount
}

// Start builds the world: the emulator's table, the simulated clouds and a
// minter reaching them through endpoint overrides only.
func Start(t testing.TB) *Env { return StartWith(t, simcloud.Options{}) }

// StartWith is Start with the simulated cloud configured by opts (the
// creation delay, the node quota).
func StartWith(t testing.TB, opts simcloud.Options) *Env {
	t.Helper()
	emu := emulatortest.Start(t)
	store := dynamostore.New(awsclient.DynamoDB(emu.Config, emu.Endpoint), emu.Name(t, "SpacesTable"))
	sc := simcloud.StartForTest(t, opts)

	env := &Env{Cloud: sc, Store: store, Service: space.NewService(store, 0), Org: uuid.NewString(),
		Accounts: map[space.Provider]space.CloudAccount{}}
	env.Minter = sc.Minter(store)
	env.Service.Verifier, env.Service.Trust = env.Minter, env.Minter.Trust

	for p, conn := range map[space.Provider]map[string]string{
		space.AWS:   {"roleArn": RoleARN},
		space.GCP:   {"projectId": GCPProject, "serviceAccountEmail": ServiceAcct},
		space.Azure: {"tenantId": TenantID, "clientId": ClientID, "subscriptionId": Subscription},
	} {
		a, err := env.Service.CreateAccount(t.Context(), env.Org, space.NewAccountInput{Provider: p, Name: string(p), Connection: conn})
		if err != nil {
			t.Fatal(err)
		}
		// The customer applies the setup; the account is then verified.
		if err := sc.ApplySetup(a); err != nil {
			t.Fatal(err)
		}
		if a, err = env.Service.VerifyAccount(t.Context(), env.Org, a.ID); err != nil || !a.Ready() {
			t.Fatalf("verify %s account: %v (%s)", p, err, a.Status)
		}
		env.Accounts[p] = a
	}
	return env
}

// Providers are the three provider minters pointed at sc
// (simcloud.Cloud.Providers).
func Providers(sc *simcloud.Cloud) map[space.Provider]mint.Provider { return sc.Providers() }

// Config is the identity config of a cluster called name on provider.
func Config(p space.Provider, name string) space.Config {
	switch p {
	case space.AWS:
		return space.Config{"clusterName": name, "region": Region}
	case space.GCP:
		return space.Config{"clusterName": name, "region": GCPLocation, "projectId": GCPProject}
	}
	return space.Config{"clusterName": name, "resourceGroup": ResourceGroup, "subscriptionId": Subscription}
}

// Cluster describes a simulated cluster of provider named name, granted to
// the env's account, backed by server/ca (set Sink or Backend on the result).
func Cluster(p space.Provider, name, server string, ca []byte) simcloud.Cluster {
	c := simcloud.Cluster{Provider: p, Name: name, Server: server, CAPEM: ca}
	switch p {
	case space.AWS:
		c.Account, c.Location, c.Principals = AWSAccount, Region, []string{RoleARN}
	case space.GCP:
		c.Account, c.Location, c.Principals = GCPProject, GCPLocation, []string{ServiceAcct}
	case space.Azure:
		c.Account, c.ResourceGroup, c.Location = Subscription, ResourceGroup, AzureLocation
		c.Principals = []string{simcloud.AzurePrincipal(TenantID, ClientID)}
	}
	return c
}

// Register registers a space for the cluster called name.
func (e *Env) Register(t testing.TB, p space.Provider, name string, synthetic bool) space.Space {
	t.Helper()
	s, _, err := e.Service.Register(t.Context(), e.Org, space.RegisterInput{
		Provider: p, SpaceType: space.TypeKubernetes, CloudAccountID: e.Accounts[p].ID, Config: Config(p, name), Synthetic: synthetic,
	}, "")
	if err != nil {
		t.Fatalf("register %s %s: %v", p, name, err)
	}
	return s
}
