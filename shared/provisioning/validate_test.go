package provisioning

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"spaces/shared/space"
)

const acct = "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f"

// validInput is a job each provider accepts as is.
func validInput(p space.Provider) Input {
	in := Input{Provider: p, CloudAccountID: acct, Spec: space.ClusterSpec{KubernetesVersion: "1.31",
		NodePool: space.NodePool{Min: 1, Max: 3, Desired: 2}}}
	switch p {
	case space.AWS:
		in.Config = space.Config{"clusterName": "prod", "region": "eu-west-1"}
		in.Spec.NodePool.MachineType = "m5.large"
		in.Spec.Network.SubnetIDs = []string{"subnet-0a1b2c3d", "subnet-4e5f6a7b"}
	case space.GCP:
		in.Config = space.Config{"clusterName": "prod", "region": "europe-west1", "projectId": "acme-prod"}
		in.Spec.NodePool.MachineType = "e2-standard-4"
		in.Spec.Network.Network, in.Spec.Network.Subnetwork = "default", "default"
	case space.Azure:
		in.Config = space.Config{"clusterName": "prod", "resourceGroup": "rg", "subscriptionId": acct}
		in.Spec.NodePool.MachineType = "Standard_D4s_v5"
		in.Spec.Network.Location = "westeurope"
		in.Spec.Network.VNetSubnetID = "/subscriptions/" + acct + "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s"
	}
	return in
}

func tags(kv ...string) func(*Input) {
	return func(in *Input) {
		in.Spec.Tags = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			in.Spec.Tags[kv[i]] = kv[i+1]
		}
	}
}

// TestValidateStepTable: one change to a valid job per row, and the one
// field it must be refused on ("" when it must be accepted).
func TestValidateStepTable(t *testing.T) {
	cases := []struct {
		name     string
		provider space.Provider
		change   func(*Input)
		field    string
	}{
		{"valid aws", space.AWS, func(*Input) {}, ""},
		{"valid gcp", space.GCP, func(*Input) {}, ""},
		{"valid azure", space.Azure, func(*Input) {}, ""},
		{"role ARNs on aws", space.AWS, func(in *Input) {
			in.Spec.ClusterRoleARN, in.Spec.NodeRoleARN = "arn:aws:iam::123456789012:role/eks-cluster", "arn:aws:iam::123456789012:role/eks-nodes"
		}, ""},

		// null is not a value, even where its zero would pass for one.
		{"min_nodes null", space.AWS, func(in *Input) { in.Spec.NodePool.Min = 0; in.Null = []string{"spec.node_pool.min_nodes"} }, "spec.node_pool.min_nodes"},
		{"tag value null", space.Azure, func(in *Input) {
			in.Spec.Tags = map[string]string{"n": ""}
			in.Null = []string{"spec.tags.n"}
		}, "spec.tags.n"},
		{"name null", space.GCP, func(in *Input) { in.Null = []string{"name"} }, "name"},

		// What no cloud takes, refused for every provider before any call.
		{"NUL in an azure tag key", space.Azure, tags("a\x00b", "x"), "spec.tags.a\x00b"},
		{"bidi override in an azure tag value", space.Azure, tags("a", "x\u202ey"), "spec.tags.a"},
		{"BEL in an azure tag value", space.Azure, tags("a", "x\a"), "spec.tags.a"},
		{"zero-width joiner in an aws tag", space.AWS, tags("team", "a\u200db"), "spec.tags.team"},
		{"private use in an azure tag", space.Azure, tags("a", "\ue000"), "spec.tags.a"},
		{"isolate in a gcp label", space.GCP, tags("team", "a\u2066b"), "spec.tags.team"},
		{"newline in an azure tag", space.Azure, tags("a", "x\ny"), "spec.tags.a"},

		// AWS tags: letters, digits, spaces and + - = . _ : / @, key 1-128,
		// value 0-256, no aws: prefix.
		{"aws tag with a space and @", space.AWS, tags("owner email", "ops@example.com"), ""},
		{"aws tag with unicode letters", space.AWS, tags("équipe", "données"), ""},
		{"aws empty value", space.AWS, tags("team", ""), ""},
		{"aws tag with a comma", space.AWS, tags("team", "a,b"), "spec.tags.team"},
		{"aws reserved prefix", space.AWS, tags("AWS:x", "y"), "spec.tags.AWS:x"},
		{"aws key too long", space.AWS, tags(strings.Repeat("k", 129), "v"), "spec.tags." + strings.Repeat("k", 129)},
		{"aws value at its limit", space.AWS, tags("k", strings.Repeat("v", 256)), ""},

		// GCP labels: lowercase letters (international too), digits, _ and -;
		// keys start with a letter; 1-63 and 0-63 characters.
		{"gcp label", space.GCP, tags("team", "payments-1"), ""},
		{"gcp international lowercase label", space.GCP, tags("équipe", "données"), ""},
		{"gcp label key uppercase", space.GCP, tags("Team", "x"), "spec.tags.Team"},
		{"gcp label key starts with a digit", space.GCP, tags("1team", "x"), "spec.tags.1team"},
		{"gcp label value with a dot", space.GCP, tags("team", "a.b"), "spec.tags.team"},
		{"gcp label value too long", space.GCP, tags("team", strings.Repeat("a", 64)), "spec.tags.team"},

		// Azure tags: name 1-512 without < > % & \ ? /, value 0-256.
		{"azure tag with spaces and punctuation", space.Azure, tags("Cost Center", "R&D: 42 (eu)"), ""},
		{"azure tag name with a slash", space.Azure, tags("a/b", "x"), "spec.tags.a/b"},
		{"azure value too long", space.Azure, tags("a", strings.Repeat("v", 257)), "spec.tags.a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := validInput(tc.provider)
			tc.change(&in)
			err := in.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e, ok := err.(*space.Error)
			if !ok || e.Kind != space.KindInvalid {
				t.Fatalf("error %v, want a KindInvalid *space.Error", err)
			}
			if len(e.Fields) != 1 || e.Fields[0].Field != tc.field {
				t.Fatalf("fields %+v, want exactly %q", e.Fields, tc.field)
			}
		})
	}
}

// FuzzValidateTags: any tag on any provider is either refused or holds no
// character a cloud refuses everywhere (control, format, private use,
// surrogate, unassigned), and Validate never panics.
func FuzzValidateTags(f *testing.F) {
	for _, s := range [][2]string{{"team", "payments"}, {"a\x00b", "x\u202ey\a"}, {"équipe", "données"}, {"Cost Center", "R&D"},
		{"aws:x", "y"}, {"k", "\u2066"}, {"", ""}, {"k", "\xff"}} {
		for _, p := range []string{"aws", "gcp", "azure"} {
			f.Add(p, s[0], s[1])
		}
	}
	f.Fuzz(func(t *testing.T, p, k, v string) {
		in := validInput(space.Provider(p))
		if in.Config == nil {
			return
		}
		in.Spec.Tags = map[string]string{k: v}
		if in.Validate() != nil {
			return
		}
		if !utf8.ValidString(k + v) {
			t.Fatalf("%s accepted the tag %q=%q, not UTF-8", p, k, v)
		}
		for _, r := range k + v {
			if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs) || !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z) {
				t.Fatalf("%s accepted the tag %q=%q holding %U", p, k, v, r)
			}
		}
	})
}
