package space

import (
	"encoding/json"
	"strings"
	"testing"
)

var trustCfg = TrustConfig{
	AWSPrincipal:                "arn:aws:iam::999999999999:root",
	GCPWorkloadIdentityProvider: "projects/1/locations/global/workloadIdentityPools/spaces/providers/aws",
	GCPFederationRole:           "arn:aws:iam::999999999999:role/spaces-gcp-federation",
	AzureIssuer:                 "https://issuer.example", AzureFederationRole: "arn:aws:iam::999999999999:role/spaces-mint",
	AzureAudienceBase: "api://AzureADTokenExchange",
}

// Every identity names the org: plain ids readably, others by a hash that
// cannot collide with a plain one.
func TestOrgTag(t *testing.T) {
	for org, want := range map[string]string{"acme": "org-acme", "h-x": "org-h-x"} {
		if got := OrgTag(org); got != want {
			t.Errorf("OrgTag(%q) = %q, want %q", org, got, want)
		}
	}
	a, b := OrgTag("Acme Corp"), OrgTag("acme corp")
	if !strings.HasPrefix(a, "orgh-") || a == b || len(a) > 64 {
		t.Errorf("hashed tags %q %q", a, b)
	}
	if OrgTag(CanaryOrg) == OrgTag("spaces-trust-canary") {
		t.Error("the canary shares a tag with a possible org")
	}
	if got := trustCfg.GCPSubject("acme"); got != "arn:aws:sts::999999999999:assumed-role/spaces-gcp-federation/org-acme" {
		t.Errorf("GCP subject %q", got)
	}
	if got := trustCfg.AzureAudience("acme"); got != "api://AzureADTokenExchange/org-acme" {
		t.Errorf("Azure audience %q", got)
	}
}

// The AWS setup is the whole trust policy, with the account's external id
// as the only way in; a deployment that lacks the identity says so.
func TestAWSSetup(t *testing.T) {
	a := CloudAccount{ID: "id", OrgID: "acme", Provider: AWS,
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": "spaces-abc"}}
	s := trustCfg.Setup(a)
	var doc struct {
		Statement []struct {
			Principal map[string]string
			Condition map[string]map[string]string
		}
	}
	if err := json.Unmarshal(s.TrustPolicy, &doc); err != nil || len(doc.Statement) != 1 ||
		doc.Statement[0].Principal["AWS"] != trustCfg.AWSPrincipal || doc.Statement[0].Condition["StringEquals"]["sts:ExternalId"] != "spaces-abc" {
		t.Fatalf("trust policy %s (%v)", s.TrustPolicy, err)
	}
	if !strings.Contains(s.Steps[0], "--role-name spaces ") || s.ExternalID != "spaces-abc" {
		t.Errorf("steps %q", s.Steps)
	}
	if s := (TrustConfig{}).Setup(a); s.TrustPolicy != nil || !strings.Contains(s.Steps[0], "SPACES_AWS_PRINCIPAL") {
		t.Errorf("unconfigured setup %+v", s)
	}
}

// A new AWS external id is unguessable and new each time.
func TestNewExternalID(t *testing.T) {
	a, b := NewExternalID(), NewExternalID()
	if a == b || len(a) != len("spaces-")+40 || !externalID.MatchString(a) {
		t.Errorf("external ids %q %q", a, b)
	}
}
