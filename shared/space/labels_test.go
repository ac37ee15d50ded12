package space

import (
	"fmt"
	"strings"
	"testing"

	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

var (
	long63    = strings.Repeat("a", 63)
	prefix253 = strings.Repeat("a", 61) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63)
	labelKeys = []string{
		"env", "Env", "a", "a.b_c-d", "app.kubernetes.io/name", "example.com/x", "1", long63, long63 + "a",
		prefix253 + "/x", prefix253 + "a/x", "", "/x", "x/", "a/b/c", "-a", "a-", "_a", "a_", ".a", "a.",
		"Example.com/x", "ex_ample.com/x", "-ex.com/x", "ex..com/x", "a b", "ä", "a/é", "a=b", "a!", "a,b",
	}
	labelValues = []string{"", "prod", "Prod-1", "a.b_c", long63, long63 + "a", "-a", "a-", "a b", "a/b", "é", "a=b"}
)

// TestLabelRuleIsKubernetes holds the one label rule to Kubernetes' own
// (k8s.io/apimachinery, linked only by this test: the catalog must not
// link it, see functions/api's TestCatalogLinksNoClusterSDK).
func TestLabelRuleIsKubernetes(t *testing.T) {
	if len(prefix253) != 253 {
		t.Fatalf("prefix253 is %d long", len(prefix253))
	}
	for _, k := range labelKeys {
		if got, want := ValidLabelKey(k), len(validation.IsQualifiedName(k)) == 0; got != want {
			t.Errorf("ValidLabelKey(%q) = %v, Kubernetes says %v", k, got, want)
		}
	}
	for _, v := range labelValues {
		if got, want := ValidLabelValue(v), len(validation.IsValidLabelValue(v)) == 0; got != want {
			t.Errorf("ValidLabelValue(%q) = %v, Kubernetes says %v", v, got, want)
		}
	}
}

func TestCheckLabels(t *testing.T) {
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	full := map[string]string{}
	for i := range MaxLabels {
		full[fmt.Sprintf("k%d", i)] = ""
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		fields []string // the fields reported, in order; none: valid
	}{
		{"none", nil, nil},
		{"empty", map[string]string{}, nil},
		{"simple", map[string]string{"env": "prod", "team": ""}, nil},
		{"prefixed", map[string]string{"example.com/tier": "gold"}, nil},
		{"exactly the maximum", full, nil},
		{"one too many", many, []string{"labels"}},
		{"bad key", map[string]string{"-x": "a"}, []string{"labels.-x"}},
		{"bad value", map[string]string{"x": "a b"}, []string{"labels.x"}},
		{"bad key and value", map[string]string{"a/b/c": "é"}, []string{"labels.a/b/c", "labels.a/b/c"}},
		{"every bad one, by key", map[string]string{"z!": "", "a": "-", "ok": "fine"}, []string{"labels.a", "labels.z!"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fe fieldErrors
			checkSpaceLabels(&fe, tc.labels)
			var got []string
			for _, f := range fe {
				got = append(got, f.Field)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.fields) {
				t.Fatalf("fields = %v, want %v (%v)", got, tc.fields, fe)
			}
			err := ValidateLabels(tc.labels)
			if (err == nil) != (len(tc.fields) == 0) || (err != nil && KindOf(err) != KindInvalid) {
				t.Fatalf("ValidateLabels = %v", err)
			}
		})
	}
}

var selectorLabels = []map[string]string{
	nil,
	{"env": "prod"},
	{"env": "dev", "tier": "gold"},
	{"env": "prod", "tier": "silver", "example.com/team": "a"},
	{"tier": ""},
}

// TestSelector: each selector parses (or not) and selects exactly what
// Kubernetes' own parser selects from the same label sets.
func TestSelector(t *testing.T) {
	for _, tc := range []struct {
		sel       string
		canonical string // "" when malformed
		matches   []int  // indexes into selectorLabels
	}{
		{"env=prod", "env=prod", []int{1, 3}},
		{"env==prod", "env=prod", []int{1, 3}},
		{" env = prod ", "env=prod", []int{1, 3}},
		{"env!=prod", "env!=prod", []int{0, 2, 4}},
		{"tier", "tier", []int{2, 3, 4}},
		{"!tier", "!tier", []int{0, 1}},
		{"tier=", "tier=", []int{4}},
		{"env in (prod,dev)", "env in (dev,prod)", []int{1, 2, 3}},
		{"env in(dev)", "env=dev", []int{2}},
		{"env notin (prod, dev)", "env notin (dev,prod)", []int{0, 4}},
		{"env=prod,tier", "env=prod,tier", []int{3}},
		{"env in (prod,dev),!example.com/team", "env in (dev,prod),!example.com/team", []int{1, 2}},
		{"example.com/team=a", "example.com/team=a", []int{3}},
		{"", "", nil},
		{"env=prod,", "", nil},
		{",env", "", nil},
		{"env=pr od", "", nil},
		{"-env=prod", "", nil},
		{"env in prod", "", nil},
		{"env in ()", "", nil},
		{"env in (a", "", nil},
		{"env in a)", "", nil},
		{"env in ((a))", "", nil},
		{"env in (a) x", "", nil},
		{"env inx (a)", "", nil},
		{"env=a=b", "", nil},
		{"env>1", "", nil},
		{"!", "", nil},
		{"!env=prod", "", nil},
		{"a b", "", nil},
		{strings.Repeat("a", MaxSelectorLen+1), "", nil},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			sel, err := ParseSelector("label_selector", tc.sel)
			if tc.canonical == "" {
				if err == nil {
					t.Fatalf("parsed as %q, want an error", sel)
				}
				e, _ := err.(*Error)
				if KindOf(err) != KindMalformed || e == nil || len(e.Fields) != 1 || e.Fields[0].Field != "label_selector" {
					t.Fatalf("err = %#v, want KindMalformed on label_selector", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sel.String() != tc.canonical {
				t.Errorf("String() = %q, want %q", sel.String(), tc.canonical)
			}
			ks, kerr := k8slabels.Parse(tc.sel)
			if kerr != nil {
				t.Fatalf("Kubernetes refuses %q: %v", tc.sel, kerr)
			}
			var got []int
			for i, l := range selectorLabels {
				if sel.Matches(l) {
					got = append(got, i)
				}
				if sel.Matches(l) != ks.Matches(k8slabels.Set(l)) {
					t.Errorf("on %v: Matches = %v, Kubernetes says %v", l, sel.Matches(l), !sel.Matches(l))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.matches) {
				t.Errorf("matches %v, want %v", got, tc.matches)
			}
		})
	}
}

// A selector's drivers are its positive requirements, fewest values
// first and exists last; every space a selector matches is taken by each
// of its drivers (which is why any of them may drive the listing).
func TestSelectorDrivers(t *testing.T) {
	for _, tc := range []struct {
		sel  string
		want string // the drivers, "key=values" or "key?" for exists
	}{
		{"env=prod", "[env=[prod]]"},
		{"team in (b,a)", "[team=[a b]]"},
		{"env=prod,tier!=db", "[env=[prod]]"},
		{"tier,env in (prod,dev),team=a", "[team=[a] env=[dev prod] tier?]"},
		{"tier,!frozen", "[tier?]"},
		{"env!=prod,team notin (a),!tier", "[]"},
		{"a in (x,y,z),b in (x,y)", "[b=[x y] a=[x y z]]"},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			sel, err := ParseSelector("label_selector", tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			ds := sel.Drivers()
			var got []string
			for _, d := range ds {
				if d.Exists {
					got = append(got, d.Key+"?")
				} else {
					got = append(got, fmt.Sprintf("%s=%v", d.Key, d.Values))
				}
			}
			if s := "[" + strings.Join(got, " ") + "]"; s != tc.want {
				t.Errorf("drivers %s, want %s", s, tc.want)
			}
			for _, l := range selectorLabels {
				for _, d := range ds {
					if sel.Matches(l) && !d.Takes(l) {
						t.Errorf("%v matches but driver %s does not take it", l, d.Key)
					}
				}
			}
		})
	}
}

// The drivers read: those of at most MaxDriverValues values (an exists
// driver once its key's values are found), in the order given; none when
// none is.
func TestReadUnder(t *testing.T) {
	values := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprint(i))
		}
		return out
	}
	eq := Driver{Key: "env", Values: []string{"prod"}}
	set := Driver{Key: "team", Values: values(MaxDriverValues)}
	wide := Driver{Key: "owner", Values: values(MaxDriverValues + 1)}
	none := Driver{Key: "frozen", Exists: true}                           // no space has the key
	some := Driver{Key: "tier", Exists: true, Values: []string{"a", "b"}} // its key's values
	many := Driver{Key: "id", Exists: true, Values: values(MaxDriverValues + 1)}
	for _, tc := range []struct {
		name    string
		drivers []Driver
		want    []string
	}{
		{"none", nil, nil},
		{"an equality", []Driver{eq}, []string{"env"}},
		{"a set of the most values", []Driver{eq, set}, []string{"env", "team"}},
		{"a set of more is not read", []Driver{eq, wide}, []string{"env"}},
		{"nor alone", []Driver{wide}, nil},
		{"an exists of a key no space has reads nothing", []Driver{none}, []string{"frozen"}},
		{"an exists of a few values", []Driver{eq, some}, []string{"env", "tier"}},
		{"an exists of more values is not read", []Driver{many, eq}, []string{"env"}},
	} {
		var got []string
		for _, d := range ReadUnder(tc.drivers) {
			got = append(got, d.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: ReadUnder %v, want %v", tc.name, got, tc.want)
		}
	}
}
