package mint_test

import (
	"testing"

	"github.com/google/uuid"

	"spaces/shared/mint/minttest"
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
