package spaces_test

import (
	"slices"
	"sort"
	"testing"

	"spaces/infra/simcloud"
	"spaces/shared/config"
	"spaces/shared/mint"
	"spaces/shared/space"
	"spaces/shared/wiring/parts"
)

// TestEveryMintingIdentityIsTrusted: the minting functions are the
// template's functions whose role may assume the roles in
// CloudAccountRoleArns (the only way any function reaches a customer's
// cloud), so a new one is covered here as soon as the template has it.
// Each is configured from its own environment in the template
// (parts.ReadClouds, as deployed), with the parameters naming the
// simulated cloud's identities. The customer applies, per cloud, the setup
// the API function hands out from its environment
// (space.TrustConfig.Setup); then every minting function must be let in by
// every cloud: the AWS role's trust policy (principal and external id), the
// GCP binding on the org's Google principal, and the Entra app's federated
// credential, whose issuer, subject and audience simcloud matches exactly
// against the token the function presents. (simcloud has one runtime AWS
// identity standing for every function's role; what differs per function
// is its environment, and so the identity it presents to GCP and Azure.)
func TestEveryMintingIdentityIsTrusted(t *testing.T) {
	tpl := parseRaw(t)
	sc := simcloud.StartForTest(t, simcloud.Options{})
	params := map[string]string{
		"SpacesAwsPrincipal":          simcloud.RuntimeARN,
		"GcpWorkloadIdentityProvider": simcloud.GCPWorkloadIdentityProvider,
		"GcpFederationRoleArn":        simcloud.FederationRoleARN,
		"AzureFederatedTokenAudience": simcloud.AzureAudienceBase,
		"AzureFederatedTokenIssuer":   sc.AWSIssuer(),
		"AzureFederationRoleArn":      simcloud.FederationRoleARN,
	}
	trustOf := func(fn string) space.TrustConfig {
		vars, _ := get(tpl.Resources[fn].Properties, "Environment", "Variables").(map[string]any)
		env := map[string]string{}
		for k, v := range vars {
			if p := ref(v); p != "" {
				if val, ok := params[p]; ok {
					env[k] = val
				}
			} else if s, ok := v.(string); ok {
				env[k] = s
			}
		}
		return parts.ReadClouds(&config.Env{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}).Trust()
	}

	var minting []string
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		for _, st := range statements(tpl)[ref(tpl.Resources[fn].Properties["Role"])] {
			for _, a := range list(st["Action"]) {
				for _, r := range list(st["Resource"]) {
					if a == "sts:AssumeRole" && ref(r) == "CloudAccountRoleArns" {
						minting = append(minting, fn)
					}
				}
			}
		}
	}
	sort.Strings(minting)
	minting = slices.Compact(minting)
	if len(minting) < 4 {
		t.Fatalf("minting functions %v: want at least discovery, prober, revisions and provisioner", minting)
	}

	// The customer's accounts, one per cloud, set up as the API says.
	api := trustOf("ApiFunction")
	org := "acme"
	accounts := map[space.Provider]space.CloudAccount{
		space.AWS: {ID: "a-aws", OrgID: org, Provider: space.AWS, Connection: map[string]string{
			"roleArn": "arn:aws:iam::123456789012:role/spaces-access", "externalId": space.NewExternalID()}},
		space.GCP: {ID: "a-gcp", OrgID: org, Provider: space.GCP, Connection: map[string]string{
			"projectId": "acme-prod-1", "serviceAccountEmail": "spaces@acme-prod-1.iam.gserviceaccount.com"}},
		space.Azure: {ID: "a-azure", OrgID: org, Provider: space.Azure, Connection: map[string]string{
			"tenantId": "11111111-2222-3333-4444-555555555555", "clientId": "66666666-7777-8888-9999-000000000000",
			"subscriptionId": "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"}},
	}
	for p, acct := range accounts {
		setup := api.Setup(acct)
		if setup == nil || setup.Principal == "" {
			t.Fatalf("%s: the API hands out no setup: %+v", p, setup)
		}
		if err := sc.Apply(acct, setup); err != nil {
			t.Fatal(err)
		}
	}
	for _, fn := range minting {
		trust := trustOf(fn)
		m := &mint.Minter{Providers: sc.ProvidersFor(trust), Trust: trust}
		for _, p := range space.Providers {
			if err := m.VerifyAccount(t.Context(), accounts[p]); err != nil {
				t.Errorf("%s: %s refuses the identity it presents: %v", fn, p, err)
			}
		}
	}
}
