package mint_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/minttest"
	"spaces/infra/testcluster"
	"spaces/shared/space"
)

// The simulated clouds enforce the org's trust themselves: an account of
// another org with the same connection details (its own generated external
// id, its own Google principal, its own Entra audience) is refused by the
// cloud, even if Spaces were to consider it ready, while the org's own
// account lists the cluster.
func TestCloudRefusesAnotherOrgsIdentity(t *testing.T) {
	env := minttest.Start(t)
	for _, p := range space.Providers {
		env.Cloud.AddCluster(minttest.Cluster(p, "trust-"+string(p), "https://127.0.0.1:1", []byte("x")))
		region := ""
		if p == space.AWS {
			region = minttest.Region
		}
		mine, err := env.Minter.ListClusters(t.Context(), env.Accounts[p], region)
		if err != nil || len(mine) != 1 {
			t.Fatalf("%s: the org's own account lists %v, %v", p, mine, err)
		}

		other := env.Accounts[p]
		other.ID, other.OrgID = uuid.NewString(), "other-"+uuid.NewString()[:8]
		if p == space.AWS {
			other.Connection = map[string]string{"roleArn": minttest.RoleARN, "externalId": space.NewExternalID()}
		}
		if err := env.Minter.VerifyAccount(t.Context(), other); reasonOf(err) != space.ReasonAccessDenied {
			t.Errorf("%s: verifying the other org's copy: %v, want AccessDenied", p, err)
		}
		other.Status = space.AccountReady // as if Spaces had been fooled
		// Entra refusing the sign-in reads, to a probe, as credentials
		// that cannot be had.
		want := space.ReasonAccessDenied
		if p == space.Azure {
			want = space.ReasonCredentialsUnavailable
		}
		if got, err := env.Minter.ListClusters(t.Context(), other, region); reasonOf(err) != want {
			t.Errorf("%s: the other org's copy lists %v, %v; want %s", p, got, err, want)
		}
	}
}

// Verification refuses an AWS role that does not require the external id,
// and one that does not trust Spaces at all.
func TestVerifyAWSTrustPolicy(t *testing.T) {
	env := minttest.Start(t)
	acct := env.Accounts[space.AWS]
	open := []byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:root"},"Action":"sts:AssumeRole"}]}`)
	if err := env.Cloud.SetTrustPolicy(minttest.RoleARN, open); err != nil {
		t.Fatal(err)
	}
	if err := env.Minter.VerifyAccount(t.Context(), acct); reasonOf(err) != space.ReasonExternalIDNotRequired {
		t.Errorf("open trust policy: %v, want ExternalIdNotRequired", err)
	}
	none := []byte(`{"Version":"2012-10-17","Statement":[]}`)
	if err := env.Cloud.SetTrustPolicy(minttest.RoleARN, none); err != nil {
		t.Fatal(err)
	}
	if err := env.Minter.VerifyAccount(t.Context(), acct); reasonOf(err) != space.ReasonAccessDenied {
		t.Errorf("no trust: %v, want AccessDenied", err)
	}
}

func reasonOf(err error) string {
	if e, ok := err.(*space.Error); ok {
		return e.Reason
	}
	return ""
}

// An AWS account stored before verification existed keeps minting for the
// space already on it, takes no new registration, and on its first
// verification trades its customer-chosen external id for a generated one:
// pending until the role names the new id, then ready.
func TestLegacyAccount(t *testing.T) {
	env := minttest.Start(t)
	ctx := t.Context()
	const role = "arn:aws:iam::" + minttest.AWSAccount + ":role/legacy"
	env.Cloud.AddRole(role, "chosen-by-customer")
	legacy := space.CloudAccount{ID: uuid.NewString(), OrgID: env.Org, Provider: space.AWS, Name: "old",
		Connection: map[string]string{"roleArn": role, "externalId": "chosen-by-customer"}, CreatedAt: time.Now().UTC(), Version: 1}
	if err := env.Store.CreateAccount(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	tc := testcluster.NewForTest(t)
	cl := minttest.Cluster(space.AWS, "legacy-1", tc.URL(), tc.CAPEM())
	cl.Principals = []string{role}
	env.Cloud.AddCluster(cl)
	// A space registered back then (the store does not check readiness).
	old := space.NewSpace(uuid.NewString(), env.Org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: legacy.ID, Config: minttest.Config(space.AWS, "legacy-1")}, time.Now().UTC())
	if err := env.Store.Register(ctx, old, space.Idempotency{}); err != nil {
		t.Fatal(err)
	}

	got, err := env.Service.GetAccount(ctx, env.Org, legacy.ID)
	if err != nil || got.Status != space.AccountPending || got.StatusReason != space.ReasonReverificationRequired {
		t.Fatalf("legacy account reads %+v, %v", got, err)
	}
	if _, err := env.Minter.Mint(ctx, old); err != nil {
		t.Errorf("the legacy account's space no longer mints: %v", err)
	}
	_, _, err = env.Service.Register(ctx, env.Org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: legacy.ID, Config: minttest.Config(space.AWS, "legacy-2")}, "")
	if e, ok := err.(*space.Error); !ok || e.Reason != space.ReasonAccountNotReady || len(e.Fields) != 1 || e.Fields[0].Field != "cloud_account_id" {
		t.Errorf("registering on the legacy account: %v", err)
	}

	rotated, err := env.Service.VerifyAccount(ctx, env.Org, legacy.ID)
	if reasonOf(err) != space.ReasonReverificationRequired || rotated.Status != space.AccountPending ||
		rotated.Connection["externalId"] == "chosen-by-customer" || rotated.Setup == nil || rotated.Setup.ExternalID != rotated.Connection["externalId"] {
		t.Fatalf("first verification of the legacy account: %+v, %v", rotated, err)
	}
	if err := env.Cloud.ApplySetup(rotated); err != nil {
		t.Fatal(err)
	}
	ready, err := env.Service.VerifyAccount(ctx, env.Org, legacy.ID)
	if err != nil || !ready.Ready() {
		t.Fatalf("after the role names the new id: %+v, %v", ready, err)
	}
	env.Minter.Invalidate(old.ID)
	if _, err := env.Minter.Mint(ctx, old); err != nil {
		t.Errorf("the space does not mint through the verified account: %v", err)
	}
}
