package space

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRegisterInput: validation never panics, and what it accepts is
// printable, within the documented limits and of the provider's shape.
func FuzzRegisterInput(f *testing.F) {
	f.Add("prod", "aws", "kubernetes", "0b5d3c52-4d7e-4b0e-9a43-2f0d6c1e8a11", "clusterName", "c-1", "region", "us-east-1")
	f.Add("\ufeffprod", "aws", "kubernetes", "x", "clusterName", "c", "region", "us-east-1")
	f.Add("a\u202eb", "gcp", "vm", "", "projectId", "acme-prod", "region", "us-central1")
	f.Add(" x", "azure", "kubernetes", "0B5D3C52-4D7E-4B0E-9A43-2F0D6C1E8A11", "subscriptionId", "0b5d3c52-4d7e-4b0e-9a43-2f0d6c1e8a11", "", "")
	f.Add("\xff", "AWS", "kubernetes", "", "clusterName", "\x00", "region", "us-east-1\n")
	f.Fuzz(func(t *testing.T, name, provider, spaceType, account, k1, v1, k2, v2 string) {
		in := RegisterInput{Name: name, Provider: Provider(provider), SpaceType: spaceType, CloudAccountID: account,
			Config: Config{k1: v1, k2: v2}}
		err := in.Validate()
		if err != nil {
			if KindOf(err) != KindInvalid || len(fields(err)) == 0 {
				t.Fatalf("refusal is not a 422 naming a field: %v", err)
			}
			return
		}
		if !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxNameLen || strings.TrimSpace(name) != name {
			t.Fatalf("accepted name %q", name)
		}
		for _, r := range name {
			if invisible(r) {
				t.Fatalf("accepted name %q with U+%04X", name, r)
			}
		}
		if !in.Provider.Valid() || spaceType != TypeKubernetes || !ValidID(account) {
			t.Fatalf("accepted %+v", in)
		}
		for k, v := range in.Config {
			if !configKeys[in.Provider][k].re.MatchString(v) {
				t.Fatalf("accepted config %s=%q", k, v)
			}
		}
	})
}

// FuzzCheckManifests: the manifest checks never panic, and what they accept
// fits DynamoDB: no empty key, no deeper than 32 levels, no cluster-scoped
// kind, numbers within range (checked a second way, with big.Float) and
// precision.
func FuzzCheckManifests(f *testing.F) {
	for _, s := range []string{
		`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"":"x"}}]`,
		`[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"n":[1e125,9.99e125,1e126,1e-130,1e-131,123456789012345678901234567890123456789]}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":7}}]`,
		`[]`, `[null]`, `[{}]`,
		`[{"a":` + strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40) + `}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var manifests []map[string]any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if dec.Decode(&manifests) != nil {
			return
		}
		err := CheckManifests(manifests)
		if err != nil {
			if KindOf(err) != KindInvalid || len(fields(err)) == 0 {
				t.Fatalf("refusal is not a 422 naming a field: %v", err)
			}
			return
		}
		if len(manifests) == 0 || len(manifests) > MaxManifests || ManifestsSize(manifests) > MaxManifestsSize {
			t.Fatalf("accepted %d manifests of %d bytes", len(manifests), ManifestsSize(manifests))
		}
		var walk func(v any, depth int)
		walk = func(v any, depth int) {
			switch v := v.(type) {
			case map[string]any:
				if depth > MaxManifestDepth {
					t.Fatalf("accepted a map at depth %d", depth)
				}
				for k, e := range v {
					if k == "" {
						t.Fatalf("accepted an empty key")
					}
					walk(e, depth+1)
				}
			case []any:
				if depth > MaxManifestDepth {
					t.Fatalf("accepted a list at depth %d", depth)
				}
				for _, e := range v {
					walk(e, depth+1)
				}
			case json.Number:
				if !dynamoNumber(string(v)) {
					t.Fatalf("accepted number %s", v)
				}
			}
		}
		for _, m := range manifests {
			if ClusterScoped(m["kind"].(string)) {
				t.Fatalf("accepted kind %v", m["kind"])
			}
			walk(m, 2)
		}
	})
}

// dynamoNumber is an independent statement of DynamoDB's number rules: at
// most 38 significant digits, and zero or a magnitude in [1e-130, 1e126).
func dynamoNumber(s string) bool {
	mant, _, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(s, "-")), "e")
	digits := strings.Trim(strings.Replace(mant, ".", "", 1), "0")
	if len(digits) > MaxNumberDigits {
		return false
	}
	x, _, err := big.ParseFloat(s, 10, 1024, big.ToNearestEven)
	if err != nil {
		return false
	}
	x.Abs(x)
	lo, _, _ := big.ParseFloat("1e-130", 10, 1024, big.ToNearestEven)
	hi, _, _ := big.ParseFloat("1e126", 10, 1024, big.ToNearestEven)
	return x.Sign() == 0 || x.Cmp(lo) >= 0 && x.Cmp(hi) < 0
}
