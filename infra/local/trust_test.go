package local

import (
	"testing"

	"github.com/google/uuid"

	"spaces/infra/demo"
	"spaces/infra/simcloud"
	"spaces/shared/space"
)

// Confused deputy, per cloud: org B copies org A's connection details. The
// simulated cloud trusts A's identity only (A's generated external id, A's
// Google principal, A's Entra audience), so B's account never becomes
// ready: B cannot list the clusters, register them or reach A's
// namespaces, and nothing is stored for B.
func TestCrossOrgConnectionIsRefused(t *testing.T) {
	st := startDemoStack(t)
	sc := st.Demo.Cloud
	a := newClient(t, st, "org-a-"+uuid.NewString()[:8])
	b := newClient(t, st, "org-b-"+uuid.NewString()[:8])
	for _, p := range space.Providers {
		spec := firstSpec(p)
		acctA := a.connect(sc, p, demo.Connection(p))
		spaceA := a.must(201, a.do("POST", "/spaces", map[string]any{"provider": p, "space_type": "kubernetes",
			"cloud_account_id": acctA, "config": spec.Config()}))["id"].(string)

		// B's account is pending and its own: AWS gets another external id.
		created := b.must(201, b.do("POST", "/cloud-accounts", map[string]any{"provider": p, "name": "copied", "connection": demo.Connection(p)}))
		acctB := accountOf(t, created)
		if acctB.Status != space.AccountPending {
			t.Fatalf("%s: B's copied account is %s, want pending", p, acctB.Status)
		}
		if p == space.AWS && acctB.Connection["externalId"] == accountOf(t, a.must(200, a.do("GET", "/cloud-accounts/"+acctA, nil))).Connection["externalId"] {
			t.Fatalf("aws: B got A's external id")
		}
		// B's verification: the cloud refuses B's identity.
		r := b.do("POST", "/cloud-accounts/"+acctB.ID+"/verify", nil)
		if r.status != 422 || r.json(t)["reason"] != space.ReasonAccessDenied {
			t.Fatalf("%s: B's verify: %d %s", p, r.status, r.body)
		}
		if got := b.must(200, b.do("GET", "/cloud-accounts/"+acctB.ID, nil)); got["status"] != "failed" || got["status_reason"] != space.ReasonAccessDenied {
			t.Errorf("%s: B's account after verify: %v %v", p, got["status"], got["status_reason"])
		}
		// Nothing usable: no picker, no registration, no namespaces.
		picker := "/cloud-accounts/" + acctB.ID + "/clusters"
		if p == space.AWS {
			picker += "?region=" + demo.AWSRegion
		}
		if r := b.do("GET", picker, nil); r.status != 409 || r.json(t)["reason"] != space.ReasonAccountNotReady {
			t.Errorf("%s: B's picker: %d %s", p, r.status, r.body)
		}
		r = b.do("POST", "/spaces", map[string]any{"provider": p, "space_type": "kubernetes", "cloud_account_id": acctB.ID, "config": spec.Config()})
		if r.status != 422 || !hasField(r.json(t), "cloud_account_id") {
			t.Errorf("%s: B's registration: %d %s", p, r.status, r.body)
		}
		if n := len(b.must(200, b.do("GET", "/spaces", nil))["items"].([]any)); n != 0 {
			t.Errorf("%s: B holds %d spaces, want 0", p, n)
		}
		if r := b.do("GET", "/space-discovery/"+spaceA+"/namespaces", nil); r.status != 404 {
			t.Errorf("%s: B listing A's namespaces: %d", p, r.status)
		}
		if r := b.do("POST", "/space-discovery/"+spaceA+"/namespaces", map[string]any{"name": "stolen"}); r.status != 404 {
			t.Errorf("%s: B creating on A's cluster: %d", p, r.status)
		}
		// A's account still works.
		if r := a.do("GET", "/space-discovery/"+spaceA+"/namespaces", nil); r.status != 200 {
			t.Errorf("%s: A's namespaces: %d %s", p, r.status, r.body)
		}
	}
}

// A trust wider than the org is refused: an AWS role assumable without the
// external id, a service account any pool identity may impersonate.
func TestTooWideTrustIsRefused(t *testing.T) {
	st := startDemoStack(t)
	sc := st.Demo.Cloud
	c := newClient(t, st, "org-"+uuid.NewString()[:8])

	created := c.must(201, c.do("POST", "/cloud-accounts", map[string]any{"provider": "aws", "name": "open", "connection": demo.Connection(space.AWS)}))
	acct := accountOf(t, created)
	open := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"` + simcloud.RuntimeARN + `"},"Action":"sts:AssumeRole"}]}`
	if err := sc.SetTrustPolicy(demo.RoleARN, []byte(open)); err != nil {
		t.Fatal(err)
	}
	r := c.do("POST", "/cloud-accounts/"+acct.ID+"/verify", nil)
	if r.status != 422 || r.json(t)["reason"] != space.ReasonExternalIDNotRequired {
		t.Fatalf("open role: %d %s", r.status, r.body)
	}
	if got := c.must(200, c.do("GET", "/cloud-accounts/"+acct.ID, nil)); got["status"] != "failed" {
		t.Errorf("open role account: %v", got["status"])
	}

	created = c.must(201, c.do("POST", "/cloud-accounts", map[string]any{"provider": "gcp", "name": "pool", "connection": demo.Connection(space.GCP)}))
	acct = accountOf(t, created)
	pool := "principalSet://iam.googleapis.com/projects/100000000001/locations/global/workloadIdentityPools/spaces/*"
	sc.AddServiceAccount(demo.GCPServiceAccount, pool)
	r = c.do("POST", "/cloud-accounts/"+acct.ID+"/verify", nil)
	if r.status != 422 || r.json(t)["reason"] != space.ReasonTrustNotOrgBound {
		t.Fatalf("pool-wide grant: %d %s", r.status, r.body)
	}
}

// A client-chosen external id is refused, naming the field, and nothing
// is stored.
func TestClientExternalIDIsRefused(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "org-"+uuid.NewString()[:8])
	before := itemCount(t, st)
	r := c.do("POST", "/cloud-accounts", map[string]any{"provider": "aws", "name": "x",
		"connection": map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": "mine"}})
	if r.status != 422 || !hasField(r.json(t), "connection.externalId") {
		t.Fatalf("client external id: %d %s", r.status, r.body)
	}
	if after := itemCount(t, st); after != before {
		t.Errorf("items %d -> %d after a refused account", before, after)
	}
}

func firstSpec(p space.Provider) demo.Spec {
	for _, s := range demo.Specs {
		if s.Provider == p && !s.Flaps {
			return s
		}
	}
	return demo.Spec{}
}
