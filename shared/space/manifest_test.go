package space

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func configMap(data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": data}
}

// nested returns n maps nested in each other.
func nested(n int) map[string]any {
	m := map[string]any{}
	for range n - 1 {
		m = map[string]any{"a": m}
	}
	return m
}

func manifestFields(t *testing.T, ms ...map[string]any) map[string]string {
	t.Helper()
	return fields(CheckManifests(ms))
}

// TestManifestLimits checks each DynamoDB limit on both sides of its edge:
// the emulator stores what DynamoDB refuses, so the code must refuse first.
func TestManifestLimits(t *testing.T) {
	num := func(s string) map[string]any { return configMap(map[string]any{"n": json.Number(s)}) }
	// The manifests list is level 1, a manifest level 2, its "data" map
	// level 3, data.x level 4: the deepest map is at the given level.
	deep := func(levels int) map[string]any { return configMap(map[string]any{"x": nested(levels - 3)}) }
	cases := []struct {
		name  string
		m     map[string]any
		field string // "" when valid
	}{
		{"plain", configMap(map[string]any{"k": "v"}), ""},
		{"empty key", configMap(map[string]any{"": "x"}), "manifests[0].data"},
		{"empty key deep", configMap(map[string]any{"a": map[string]any{"b": []any{map[string]any{"": 1}}}}), "manifests[0].data.a.b[0]"},
		{"32 levels", deep(32), ""},
		{"33 levels", deep(33), "manifests[0].data.x" + strings.Repeat(".a", 29)},
		{"38 digits", num(strings.Repeat("9", 38)), ""},
		{"39 digits", num(strings.Repeat("9", 39)), "manifests[0].data.n"},
		{"38 digits with zeros around", num("000" + strings.Repeat("1", 38) + "000"), ""},
		{"39 digits in a fraction", num("0." + strings.Repeat("1", 39)), "manifests[0].data.n"},
		{"largest", num("9." + strings.Repeat("9", 37) + "e125"), ""},
		{"1e126", num("1e126"), "manifests[0].data.n"},
		{"-1e126", num("-1E+126"), "manifests[0].data.n"},
		{"smallest", num("1e-130"), ""},
		{"below smallest", num("1e-131"), "manifests[0].data.n"},
		{"-1e-131", num("-0.1e-130"), "manifests[0].data.n"},
		{"zero with a huge exponent", num("0e999"), ""},
		{"exponent overflow", num("1e99999999999999999999"), "manifests[0].data.n"},
		{"2^63 exactly", num("9223372036854775808"), ""},
		{"NaN", configMap(map[string]any{"n": math.NaN()}), "manifests[0].data.n"},
		{"float", configMap(map[string]any{"n": 1.5}), ""},
		{"ClusterRoleBinding", map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "x"}}, "manifests[0].kind"},
		{"Namespace", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "x"}}, "manifests[0].kind"},
	}
	for _, c := range cases {
		got := manifestFields(t, c.m)
		switch {
		case c.field == "" && len(got) > 0:
			t.Errorf("%s: refused: %v", c.name, got)
		case c.field != "" && got[c.field] == "":
			t.Errorf("%s: want a problem on %s, got %v", c.name, c.field, got)
		}
	}
}

// TestManifestsSizeLimit fills a revision up to MaxManifestsSize exactly
// (accepted) and one byte more (refused).
func TestManifestsSizeLimit(t *testing.T) {
	m := configMap(map[string]any{"blob": ""})
	base := ManifestsSize([]map[string]any{m})
	m["data"] = map[string]any{"blob": strings.Repeat("x", MaxManifestsSize-base)}
	if n := ManifestsSize([]map[string]any{m}); n != MaxManifestsSize {
		t.Fatalf("size %d, want %d", n, MaxManifestsSize)
	}
	if err := CheckManifests([]map[string]any{m}); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	m["data"] = map[string]any{"blob": strings.Repeat("x", MaxManifestsSize-base+1)}
	if got := manifestFields(t, m); got["manifests"] == "" {
		t.Errorf("one byte over the limit accepted: %v", got)
	}
}

// TestManifestsSizeRules pins the size rules to DynamoDB's documented ones.
func TestManifestsSizeRules(t *testing.T) {
	empty := ManifestsSize([]map[string]any{{}})
	if want := len("manifests") + 3 + 1 + 3; empty != want {
		t.Fatalf("one empty map: %d, want %d", empty, want)
	}
	cases := []struct {
		v    any
		want int
	}{
		{"abc", 3}, {true, 1}, {nil, 1},
		{json.Number("12345"), 4}, {json.Number("-0.00120"), 2}, {json.Number("0"), 2},
		{[]any{"a", "b"}, 3 + 2 + 2},
		{map[string]any{"ab": "c"}, 3 + 1 + 2 + 1},
	}
	for _, c := range cases {
		got := ManifestsSize([]map[string]any{{"k": c.v}}) - empty - 1 - len("k")
		if got != c.want {
			t.Errorf("%#v: %d bytes, want %d", c.v, got, c.want)
		}
	}
}

func TestFailureReasonIsBounded(t *testing.T) {
	if got := FailureReason("short"); got != "short" {
		t.Errorf("short message changed: %q", got)
	}
	long := strings.Repeat("é", MaxFailureReason) // 2 bytes a rune
	got := FailureReason(long)
	if len(got) > MaxFailureReason || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("%d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}
