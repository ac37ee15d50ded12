package space

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// TrustConfig is who Spaces is in its own clouds: what the customer's cloud
// is told to trust. Every identity Spaces presents to a customer's cloud
// names the org it acts for, so that one org's grant never covers another:
//   - AWS: the customer's role trusts AWSPrincipal only with the external
//     id Spaces generated for that connection (sts:ExternalId condition).
//   - GCP: Spaces assumes GCPFederationRole with the org's tag as the role
//     session name and exchanges that session at its workload identity pool
//     (attribute mapping google.subject=assertion.arn), so the Google
//     principal carries the org: .../subject/arn:aws:sts::A:assumed-role/R/<tag>.
//     The customer grants that principal on their service account.
//   - Azure: Spaces assumes AzureFederationRole with the org's tag as the
//     role session name and, as that session, asks STS for its web
//     identity token (issuer AzureIssuer) with a per-org audience,
//     AzureAudienceBase + "/" + tag. The token's subject is the role's ARN
//     (a role session's sub is its role), so it is the same whichever
//     function mints: the customer's app needs one federated credential,
//     which Entra matches on issuer, subject and audience exactly.
//
// Every minting function (discovery, prober, revisions, provisioner)
// presents one of these identities, never its own role: the customer's
// setup names one identity per cloud, and a new minting function needs
// no change in any customer's cloud.
type TrustConfig struct {
	AWSPrincipal string
	// GCPWorkloadIdentityProvider is the pool provider's resource name,
	// projects/N/locations/global/workloadIdentityPools/P/providers/Q.
	GCPWorkloadIdentityProvider string
	// GCPFederationRole is the role Spaces assumes, session named after the
	// org, before exchanging at the pool.
	GCPFederationRole string
	AzureIssuer       string
	// AzureFederationRole is the role Spaces assumes, session named after
	// the org, before asking STS for the org's token: its ARN is the
	// token's subject.
	AzureFederationRole string
	AzureAudienceBase   string
}

// TrustSetup is what the customer sets up in their cloud for one account,
// answered by POST /cloud-accounts so it can be copied.
type TrustSetup struct {
	// Principal is the identity Spaces presents for this org.
	Principal string `json:"principal"`
	// ExternalID and TrustPolicy (AWS): the role's whole trust policy.
	ExternalID  string          `json:"external_id,omitempty"`
	TrustPolicy json.RawMessage `json:"trust_policy,omitempty"`
	// Issuer, Subject and Audience (Azure): the federated credential.
	Issuer   string `json:"issuer,omitempty"`
	Subject  string `json:"subject,omitempty"`
	Audience string `json:"audience,omitempty"`
	// Steps are the commands that set it up, in order.
	Steps []string `json:"steps"`
}

// CanaryOrg is an org id no token can carry (it starts with a NUL): the
// identity Spaces presents for it must be refused by every customer's
// cloud, or the customer's grant is wider than their org.
const CanaryOrg = "\x00spaces-trust-canary"

var plainOrg = MustPattern(`^[a-z0-9][a-z0-9-]*$`, 47)

// OrgTag names an org in what Spaces presents to a cloud (an AWS role
// session name, a Google subject, an Entra audience): the org id itself
// when it is short and plain, else a hash of it. The two forms cannot
// collide (org- versus orgh-).
func OrgTag(org string) string {
	if plainOrg.MatchString(org) {
		return "org-" + org
	}
	sum := sha256.Sum256([]byte(org))
	return "orgh-" + hex.EncodeToString(sum[:16])
}

// GCPSubject is the Google subject of the org: the ARN of Spaces'
// federation role session named after the org.
func (c TrustConfig) GCPSubject(org string) string {
	// arn:aws:iam::<account>:role/<path/name> -> arn:aws:sts::<account>:assumed-role/<name>/<session>
	parts := strings.SplitN(c.GCPFederationRole, ":", 6)
	if len(parts) < 6 {
		return ""
	}
	name := parts[5][strings.LastIndex(parts[5], "/")+1:]
	return "arn:" + parts[1] + ":sts::" + parts[4] + ":assumed-role/" + name + "/" + OrgTag(org)
}

// GCPPrincipal is the Google principal of the org, as the customer grants it.
func (c TrustConfig) GCPPrincipal(org string) string {
	pool, _, _ := strings.Cut(c.GCPWorkloadIdentityProvider, "/providers/")
	return "principal://iam.googleapis.com/" + pool + "/subject/" + c.GCPSubject(org)
}

// AzureAudience is the audience of the org's federated token.
func (c TrustConfig) AzureAudience(org string) string {
	return strings.TrimSuffix(c.AzureAudienceBase, "/") + "/" + OrgTag(org)
}

// AWSTrustPolicy is the trust policy of a customer role for one connection.
func (c TrustConfig) AWSTrustPolicy(externalID string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []any{map[string]any{
			"Effect":    "Allow",
			"Principal": map[string]string{"AWS": c.AWSPrincipal},
			"Action":    "sts:AssumeRole",
			"Condition": map[string]any{"StringEquals": map[string]string{"sts:ExternalId": externalID}},
		}},
	})
	return b
}

// Setup is the customer's setup for a. A deployment that does not say who
// Spaces is to a cloud gets no made-up setup, only that fact.
func (c TrustConfig) Setup(a CloudAccount) *TrustSetup {
	missing := map[Provider]string{}
	if c.AWSPrincipal == "" {
		missing[AWS] = "SPACES_AWS_PRINCIPAL"
	}
	if c.GCPWorkloadIdentityProvider == "" || c.GCPFederationRole == "" {
		missing[GCP] = "GCP_WORKLOAD_IDENTITY_PROVIDER and GCP_FEDERATION_ROLE_ARN"
	}
	if c.AzureIssuer == "" || c.AzureFederationRole == "" || c.AzureAudienceBase == "" {
		missing[Azure] = "AZURE_FEDERATED_TOKEN_ISSUER and _AUDIENCE and AZURE_FEDERATION_ROLE_ARN"
	}
	if env, ok := missing[a.Provider]; ok {
		return &TrustSetup{ExternalID: a.Connection["externalId"], Steps: []string{
			"this deployment does not say who Spaces is to " + string(a.Provider) + " (" + env + "): ask its operator"}}
	}
	verify := "curl -X POST $API/cloud-accounts/" + a.ID + "/verify -H \"Authorization: Bearer $TOKEN\""
	switch a.Provider {
	case AWS:
		ext := a.Connection["externalId"]
		policy := c.AWSTrustPolicy(ext)
		role := a.Connection["roleArn"]
		return &TrustSetup{Principal: c.AWSPrincipal, ExternalID: ext, TrustPolicy: policy, Steps: []string{
			"aws iam update-assume-role-policy --role-name " + role[strings.LastIndex(role, "/")+1:] + " --policy-document '" + string(policy) + "'",
			"allow the role eks:ListClusters and eks:DescribeCluster, and map it in each cluster's access entries",
			verify,
		}}
	case GCP:
		p := c.GCPPrincipal(a.OrgID)
		sa := a.Connection["serviceAccountEmail"]
		return &TrustSetup{Principal: p, Subject: c.GCPSubject(a.OrgID), Steps: []string{
			"gcloud iam service-accounts add-iam-policy-binding " + sa + " --project " + a.Connection["projectId"] +
				" --role roles/iam.serviceAccountTokenCreator --member '" + p + "'",
			"gcloud projects add-iam-policy-binding " + a.Connection["projectId"] + " --member serviceAccount:" + sa + " --role roles/container.clusterViewer",
			"give " + sa + " what it may do in each cluster through Kubernetes RBAC",
			verify,
		}}
	case Azure:
		aud := c.AzureAudience(a.OrgID)
		fic, _ := json.Marshal(map[string]any{"name": "spaces-" + OrgTag(a.OrgID), "issuer": c.AzureIssuer,
			"subject": c.AzureFederationRole, "audiences": []string{aud}})
		return &TrustSetup{Principal: c.AzureFederationRole, Issuer: c.AzureIssuer, Subject: c.AzureFederationRole, Audience: aud, Steps: []string{
			"az ad app federated-credential create --id " + a.Connection["clientId"] + " --parameters '" + string(fic) + "'",
			"az role assignment create --assignee " + a.Connection["clientId"] + " --role 'Azure Kubernetes Service Cluster User Role' --scope /subscriptions/" + a.Connection["subscriptionId"],
			"az role assignment create --assignee " + a.Connection["clientId"] + " --role Reader --scope /subscriptions/" + a.Connection["subscriptionId"],
			"give the app what it may do in each cluster through Kubernetes RBAC",
			verify,
		}}
	}
	return nil
}
