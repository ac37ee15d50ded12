package space

import (
	"errors"
	"strings"
	"testing"
)

const sub = "0b5d3c52-4d7e-4b0e-9a43-2f0d6c1e8a11"

func validInput(p Provider) RegisterInput {
	in := RegisterInput{Provider: p, SpaceType: TypeKubernetes, CloudAccountID: sub}
	switch p {
	case AWS:
		in.Config = Config{"clusterName": "prod-eks_1", "region": "eu-central-1"}
	case GCP:
		in.Config = Config{"clusterName": "prod-gke", "region": "us-central1-a", "projectId": "acme-prod-123"}
	case Azure:
		in.Config = Config{"clusterName": "prod-aks", "resourceGroup": "rg.prod(eu)", "subscriptionId": sub}
	}
	return in
}

func fields(err error) map[string]string {
	var e *Error
	if !errors.As(err, &e) {
		return nil
	}
	m := map[string]string{}
	for _, f := range e.Fields {
		m[f.Field] = f.Reason
	}
	return m
}

func TestRegisterInputValid(t *testing.T) {
	for _, p := range Providers {
		if err := validInput(p).Validate(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// Every partition's shape AWS publishes, the European Sovereign Cloud's
	// and the ISO regions included.
	for _, region := range []string{"us-east-1", "us-gov-west-1", "cn-north-1", "ap-southeast-4", "il-central-1", "mx-central-1",
		"ap-east-2", "eusc-de-east-1", "us-iso-east-1", "us-isob-east-1", "us-isof-south-1", "eu-isoe-west-1", "cn-northwest-1"} {
		in := validInput(AWS)
		in.Config["region"] = region
		if err := in.Validate(); err != nil {
			t.Errorf("aws region %s: %v", region, err)
		}
	}
	for _, loc := range []string{"us-central1", "europe-west4", "northamerica-northeast1", "asia-south2-c"} {
		in := validInput(GCP)
		in.Config["region"] = loc
		if err := in.Validate(); err != nil {
			t.Errorf("gcp location %s: %v", loc, err)
		}
	}
}

func TestRegisterInputInvalid(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*RegisterInput)
		field string
	}{
		{"no provider", func(in *RegisterInput) { in.Provider = "" }, "provider"},
		{"unknown provider", func(in *RegisterInput) { in.Provider = "oracle" }, "provider"},
		{"reserved type", func(in *RegisterInput) { in.SpaceType = "vm" }, "space_type"},
		{"no type", func(in *RegisterInput) { in.SpaceType = "" }, "space_type"},
		{"no account", func(in *RegisterInput) { in.CloudAccountID = "" }, "cloud_account_id"},
		{"account not uuid", func(in *RegisterInput) { in.CloudAccountID = "acct-1" }, "cloud_account_id"},
		{"no config", func(in *RegisterInput) { in.Config = nil }, "config"},
		{"missing key", func(in *RegisterInput) { delete(in.Config, "region") }, "config.region"},
		{"extra key", func(in *RegisterInput) { in.Config["projectId"] = "acme-prod" }, "config.projectId"},
		{"bad region", func(in *RegisterInput) { in.Config["region"] = "us-east" }, "config.region"},
		{"region upper", func(in *RegisterInput) { in.Config["region"] = "US-EAST-1" }, "config.region"},
		{"eks name starts dash", func(in *RegisterInput) { in.Config["clusterName"] = "-prod" }, "config.clusterName"},
		{"eks name too long", func(in *RegisterInput) { in.Config["clusterName"] = strings.Repeat("a", 101) }, "config.clusterName"},
		{"name control char", func(in *RegisterInput) { in.Name = "a\x01b" }, "name"},
		{"name C1 control", func(in *RegisterInput) { in.Name = "a\u0085b" }, "name"},
		{"name BOM", func(in *RegisterInput) { in.Name = "\ufeffprod" }, "name"},
		{"name bidi override", func(in *RegisterInput) { in.Name = "prod\u202eved" }, "name"},
		{"name bidi isolate", func(in *RegisterInput) { in.Name = "prod\u2066x" }, "name"},
		{"name zero-width space", func(in *RegisterInput) { in.Name = "pro\u200bd" }, "name"},
		{"name zero-width joiner", func(in *RegisterInput) { in.Name = "pro\u200dd" }, "name"},
		{"name line separator", func(in *RegisterInput) { in.Name = "a\u2028b" }, "name"},
		{"name private use", func(in *RegisterInput) { in.Name = "a\ue000b" }, "name"},
		{"name replacement char", func(in *RegisterInput) { in.Name = "a\ufffdb" }, "name"},
		{"name invalid UTF-8", func(in *RegisterInput) { in.Name = "a\xffb" }, "name"},
		{"name too long", func(in *RegisterInput) { in.Name = strings.Repeat("n", 101) }, "name"},
	}
	for _, c := range cases {
		in := validInput(AWS)
		c.edit(&in)
		got := fields(in.Validate())
		if _, ok := got[c.field]; !ok {
			t.Errorf("%s: want a problem on %s, got %v", c.name, c.field, got)
		}
	}
	gcp := []struct{ key, value string }{
		{"clusterName", "Prod"}, {"clusterName", "prod-"}, {"clusterName", strings.Repeat("a", 41)},
		{"projectId", "acme"}, {"projectId", "1acme-prod"}, {"projectId", "acme-prod-"},
		{"region", "us-central"}, {"region", "us_central1"},
	}
	for _, c := range gcp {
		in := validInput(GCP)
		in.Config[c.key] = c.value
		if _, ok := fields(in.Validate())["config."+c.key]; !ok {
			t.Errorf("gcp %s=%q accepted", c.key, c.value)
		}
	}
	azure := []struct{ key, value string }{
		{"clusterName", "-aks"}, {"clusterName", strings.Repeat("a", 64)}, {"resourceGroup", "rg."},
		{"resourceGroup", strings.Repeat("r", 91)}, {"resourceGroup", "rg with space"}, {"subscriptionId", "not-a-uuid"},
	}
	for _, c := range azure {
		in := validInput(Azure)
		in.Config[c.key] = c.value
		if _, ok := fields(in.Validate())["config."+c.key]; !ok {
			t.Errorf("azure %s=%q accepted", c.key, c.value)
		}
	}
}

func TestValidateReportsEveryField(t *testing.T) {
	in := RegisterInput{Provider: AWS, SpaceType: "vm", CloudAccountID: "x", Config: Config{"clusterName": "-x", "zone": "a"}}
	got := fields(in.Validate())
	for _, f := range []string{"space_type", "cloud_account_id", "config.clusterName", "config.region", "config.zone"} {
		if _, ok := got[f]; !ok {
			t.Errorf("missing problem on %s in %v", f, got)
		}
	}
	if KindOf(in.Validate()) != KindInvalid {
		t.Errorf("kind = %v", KindOf(in.Validate()))
	}
}

func TestAccountInput(t *testing.T) {
	good := []NewAccountInput{
		{Provider: AWS, Name: "prod", Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces-probe"}},
		{Provider: GCP, Name: "prod", Connection: map[string]string{"projectId": "acme-prod", "serviceAccountEmail": "spaces@acme-prod.iam.gserviceaccount.com"}},
		{Provider: Azure, Name: "prod", Connection: map[string]string{"tenantId": sub, "clientId": sub, "subscriptionId": sub}},
	}
	for _, in := range good {
		if err := in.Validate(); err != nil {
			t.Errorf("%s: %v", in.Provider, err)
		}
	}
	// Spaces generates the external id: a caller's is refused by name.
	bad := NewAccountInput{Provider: AWS, Connection: map[string]string{"roleArn": "arn:aws:iam::12:user/x", "secretKey": "s", "externalId": "mine"}}
	got := fields(bad.Validate())
	for _, f := range []string{"name", "connection.roleArn", "connection.externalId", "connection.secretKey"} {
		if _, ok := got[f]; !ok {
			t.Errorf("missing problem on %s in %v", f, got)
		}
	}
}

// TestRoleARNPartitions: a role in any partition AWS publishes is accepted;
// an unknown partition, a user or a short account id is refused.
func TestRoleARNPartitions(t *testing.T) {
	check := func(arn string) bool {
		in := NewAccountInput{Provider: AWS, Name: "prod", Connection: map[string]string{"roleArn": arn, "externalId": "spaces-acme"}}
		_, bad := fields(in.Validate())["connection.roleArn"]
		return !bad
	}
	for _, p := range []string{"aws", "aws-cn", "aws-us-gov", "aws-iso", "aws-iso-b", "aws-iso-e", "aws-iso-f", "aws-eusc"} {
		if arn := "arn:" + p + ":iam::123456789012:role/spaces"; !check(arn) {
			t.Errorf("%s refused", arn)
		}
	}
	// The role's path and name: 1 to 512 characters.
	if arn := "arn:aws:iam::123456789012:role/" + strings.Repeat("r", 512); !check(arn) {
		t.Errorf("a 512-character role name refused")
	}
	for _, arn := range []string{"arn:aws-moon:iam::123456789012:role/spaces", "arn:aws:iam::123456789012:user/spaces", "arn:aws-eusc:iam::1234:role/spaces", "ARN:AWS:IAM::123456789012:role/x",
		"arn:aws:iam::123456789012:role/", "arn:aws:iam::123456789012:role/" + strings.Repeat("r", 513)} {
		if check(arn) {
			t.Errorf("%s accepted", arn)
		}
	}
}

func TestIdentityFoldsAzureOnly(t *testing.T) {
	a := Identity(Azure, Config{"clusterName": "AKS", "resourceGroup": "RG", "subscriptionId": sub})
	b := Identity(Azure, Config{"clusterName": "aks", "resourceGroup": "rg", "subscriptionId": sub})
	if a != b {
		t.Errorf("azure identities differ: %s vs %s", a, b)
	}
	if Identity(AWS, Config{"clusterName": "A", "region": "us-east-1"}) == Identity(AWS, Config{"clusterName": "a", "region": "us-east-1"}) {
		t.Error("EKS names are case-sensitive")
	}
}

// Refusing invisible characters must not refuse ordinary names in any
// script, with combining marks, symbols and inner spaces.
func TestNameAcceptsPrintableUnicode(t *testing.T) {
	for _, name := range []string{"Prod (EU) – Ω", "東京 本番", "cafe\u0301 №1", "Ops ✓ #7", "a\u00a0b"} {
		in := validInput(AWS)
		in.Name = name
		if err := in.Validate(); err != nil {
			t.Errorf("name %q refused: %v", name, err)
		}
	}
}
