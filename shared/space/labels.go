package space

import (
	"maps"
	"slices"
	"sort"
	"strings"
)

// Labels are a space's key/value labels, the Kubernetes way: the one rule
// (CheckLabels) serves spaces and the namespaces created on their clusters
// (kubens), and the console's PATTERNS.labelKey/labelValue say the same.
type Labels map[string]string

// MaxLabels bounds a space's labels. Kubernetes sets no count, only 256 KiB
// of annotations; a space is one DynamoDB item that every listing reads
// whole, so 64 (GCP's own limit on a resource's labels) of at most
// 317+63 bytes keeps labels under 25 KB of the item's 400 KB.
const MaxLabels = 64

// The Kubernetes rules (k8s.io/apimachinery/pkg/util/validation,
// IsQualifiedName and IsValidLabelValue): a name is 1-63 characters of
// [A-Za-z0-9-_.], starting and ending alphanumeric; a key is a name with an
// optional DNS-1123 subdomain prefix (at most 253) and '/'; a value is empty
// or a name.
var (
	labelName = MustPattern(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`, 63)
	dnsSub    = MustPattern(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`, 253)
)

const (
	labelKeyHint   = "must be a Kubernetes label key: an optional DNS subdomain prefix (at most 253 lowercase letters, digits, '-' and '.') and '/', then 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	labelValueHint = "must be a Kubernetes label value: empty, or 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
)

// ValidLabelKey reports whether k is a Kubernetes label key.
func ValidLabelKey(k string) bool {
	prefix, name, cut := strings.Cut(k, "/")
	if !cut {
		return labelName.MatchString(k)
	}
	return dnsSub.MatchString(prefix) && labelName.MatchString(name)
}

// ValidLabelValue reports whether v is a Kubernetes label value.
func ValidLabelValue(v string) bool { return v == "" || labelName.MatchString(v) }

// CheckLabels records every bad label of m under field ("labels.<key>"),
// in key order. The count is a space's rule alone (checkSpaceLabels):
// namespaces have none but Kubernetes'.
func CheckLabels(fe *[]FieldError, field string, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !ValidLabelKey(k) {
			*fe = append(*fe, FieldError{Field: field + "." + k, Reason: "is not a valid label key: " + labelKeyHint})
		}
		if !ValidLabelValue(m[k]) {
			*fe = append(*fe, FieldError{Field: field + "." + k, Reason: "is not a valid label value: " + labelValueHint})
		}
	}
}

// checkSpaceLabels is a space's labels' rule: CheckLabels and MaxLabels.
func checkSpaceLabels(fe *fieldErrors, m map[string]string) {
	if len(m) > MaxLabels {
		fe.add("labels", "must hold at most %d labels", MaxLabels)
	}
	CheckLabels((*[]FieldError)(fe), "labels", m)
}

// ValidateLabels checks a space's labels for a whole request.
func ValidateLabels(m map[string]string) error {
	var fe fieldErrors
	checkSpaceLabels(&fe, m)
	return fe.err("the labels are not valid")
}

// Selector is a parsed Kubernetes label selector (the equality- and
// set-based forms: k=v, k==v, k!=v, k, !k, k in (a,b), k notin (a,b),
// requirements joined by ',' meaning AND). The zero Selector matches
// everything. The gt/lt forms of kubectl are not supported.
type Selector struct{ reqs []requirement }

type selOp int

const (
	opIn selOp = iota // =, ==, in
	opNotIn
	opExists
	opNotExists
)

type requirement struct {
	key    string
	op     selOp
	values []string
}

// MaxSelectorLen bounds a selector (it is part of a cursor's scope).
const MaxSelectorLen = 1024

// Matches reports whether labels satisfy every requirement. As in
// Kubernetes, != and notin also match a space without the key.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s.reqs {
		v, has := labels[r.key]
		var ok bool
		switch r.op {
		case opIn:
			ok = has && slices.Contains(r.values, v)
		case opNotIn:
			ok = !has || !slices.Contains(r.values, v)
		case opExists:
			ok = has
		case opNotExists:
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}

// Empty reports whether s has no requirement (matches everything).
func (s Selector) Empty() bool { return len(s.reqs) == 0 }

// String is s in a canonical form: the same selector always prints the
// same, whatever its spacing or the order of a set's values.
func (s Selector) String() string {
	parts := make([]string, 0, len(s.reqs))
	for _, r := range s.reqs {
		switch r.op {
		case opExists:
			parts = append(parts, r.key)
		case opNotExists:
			parts = append(parts, "!"+r.key)
		case opIn, opNotIn:
			if len(r.values) == 1 {
				parts = append(parts, r.key+map[selOp]string{opIn: "=", opNotIn: "!="}[r.op]+r.values[0])
				continue
			}
			word := map[selOp]string{opIn: " in (", opNotIn: " notin ("}[r.op]
			parts = append(parts, r.key+word+strings.Join(r.values, ",")+")")
		}
	}
	return strings.Join(parts, ",")
}

// ParseSelector parses a label selector; a malformed one is KindMalformed
// on field, saying what is wrong.
func ParseSelector(field, text string) (Selector, error) {
	bad := func(reason string) (Selector, error) {
		return Selector{}, &Error{Kind: KindMalformed, Message: "the label selector is not valid",
			Fields: []FieldError{{Field: field, Reason: reason}}}
	}
	if len(text) > MaxSelectorLen {
		return bad("must be at most 1024 characters")
	}
	var sel Selector
	rest := text
	for {
		part, tail, err := nextRequirement(rest)
		if err != "" {
			return bad(err)
		}
		r, msg := parseRequirement(strings.TrimSpace(part))
		if msg != "" {
			return bad(msg)
		}
		sel.reqs = append(sel.reqs, r)
		if tail == nil {
			break
		}
		rest = *tail
	}
	return sel, nil
}

// nextRequirement splits off the first requirement: up to a ',' outside
// parentheses. tail is nil at the end.
func nextRequirement(s string) (part string, tail *string, err string) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			if depth++; depth > 1 {
				return "", nil, "must not nest parentheses"
			}
		case ')':
			if depth--; depth < 0 {
				return "", nil, "has a ')' without its '('"
			}
		case ',':
			if depth == 0 {
				t := s[i+1:]
				return s[:i], &t, ""
			}
		}
	}
	if depth != 0 {
		return "", nil, "has a '(' without its ')'"
	}
	return s, nil, ""
}

func parseRequirement(s string) (requirement, string) {
	if s == "" {
		return requirement{}, "has an empty requirement (a stray ',' or nothing at all)"
	}
	key := func(k string) string {
		if !ValidLabelKey(k) {
			return "names " + quoteShort(k) + ", which " + labelKeyHint
		}
		return ""
	}
	value := func(v string) string {
		if !ValidLabelValue(v) {
			return "compares with " + quoteShort(v) + ", which " + labelValueHint
		}
		return ""
	}
	if k, ok := strings.CutPrefix(s, "!"); ok {
		k = strings.TrimSpace(k)
		return requirement{key: k, op: opNotExists}, key(k)
	}
	for _, op := range []struct {
		sym string
		op  selOp
	}{{"!=", opNotIn}, {"==", opIn}, {"=", opIn}} {
		if k, v, ok := strings.Cut(s, op.sym); ok {
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if msg := key(k); msg != "" {
				return requirement{}, msg
			}
			return requirement{key: k, op: op.op, values: []string{v}}, value(v)
		}
	}
	// k, k in (...), k notin (...): the key ends at the first space or '('.
	end := strings.IndexAny(s, " \t(")
	if end < 0 {
		return requirement{key: s, op: opExists}, key(s)
	}
	k, rest := s[:end], strings.TrimSpace(s[end:])
	if msg := key(k); msg != "" {
		return requirement{}, msg
	}
	r := requirement{key: k}
	switch {
	case strings.HasPrefix(rest, "in") && strings.HasPrefix(strings.TrimSpace(rest[2:]), "("):
		r.op, rest = opIn, strings.TrimSpace(rest[2:])
	case strings.HasPrefix(rest, "notin") && strings.HasPrefix(strings.TrimSpace(rest[5:]), "("):
		r.op, rest = opNotIn, strings.TrimSpace(rest[5:])
	default:
		return requirement{}, "has " + quoteShort(s) + ": expected k=v, k!=v, k, !k, k in (a,b) or k notin (a,b)"
	}
	if !strings.HasSuffix(rest, ")") {
		return requirement{}, "has text after the ')' of " + quoteShort(k)
	}
	for _, v := range strings.Split(rest[1:len(rest)-1], ",") {
		v = strings.TrimSpace(v)
		if msg := value(v); msg != "" {
			return requirement{}, msg
		}
		if !slices.Contains(r.values, v) {
			r.values = append(r.values, v)
		}
	}
	sort.Strings(r.values)
	if len(r.values) == 1 && r.values[0] == "" && strings.TrimSpace(rest[1:len(rest)-1]) == "" {
		return requirement{}, "has an empty set of values for " + quoteShort(k)
	}
	return r, ""
}

// quoteShort quotes s for a message, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + s + `"`
}

// cloneLabels copies m; nil when empty, so that "no labels" is stored one
// way (no attribute).
func cloneLabels(m map[string]string) Labels {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// A listing by selector is read under its positive requirements (=, ==,
// in, exists), its drivers: the store keeps an entry per label of each
// space, by key and value, and reads the entries of each driver's values
// in id order, keeping the ids every driver takes; the whole selector is
// then checked against the spaces read. A selector of negative
// requirements only (!=, notin, !key) has no driver: it matches most
// spaces, and filters the listing.

// Driver is a positive requirement a listing can be read under: its key
// and the values it takes, sorted (Exists: any value, read as the values
// the key has, once the store has found them).
type Driver struct {
	Key    string
	Values []string
	Exists bool
}

// MaxDriverValues bounds the values a driver is read under: each value
// is a range of entries, read and merged in id order at every page, so an
// `in` of more values, or a key with more values for `exists`, is not
// read (its requirement is checked on the spaces read).
const MaxDriverValues = 10

// Drivers are s's positive requirements, fewest values first (an
// equality before a set), exists last, then as written: the order their
// entries are read in.
func (s Selector) Drivers() []Driver {
	var out []Driver
	for _, r := range s.reqs {
		switch r.op {
		case opIn:
			out = append(out, Driver{Key: r.key, Values: slices.Clone(r.values)})
		case opExists:
			out = append(out, Driver{Key: r.key, Exists: true})
		}
	}
	rank := func(d Driver) int {
		if d.Exists {
			return MaxSelectorLen // after every set
		}
		return len(d.Values)
	}
	slices.SortStableFunc(out, func(a, b Driver) int { return rank(a) - rank(b) })
	return out
}

// ReadUnder is the drivers a listing reads the entries of: those of at
// most MaxDriverValues values (an exists driver with the values its key
// has, as found), in the order given; none when none is, and the
// selector then filters the listing. Reading under fewer drivers lists
// the same spaces (each requirement is checked on the spaces read): the
// choice only sets the cost.
func ReadUnder(drivers []Driver) []Driver {
	var out []Driver
	for _, d := range drivers {
		if len(d.Values) <= MaxDriverValues {
			out = append(out, d)
		}
	}
	return out
}

// Takes reports whether labels satisfy d (the key with one of its
// values; any value for Exists).
func (d Driver) Takes(labels map[string]string) bool {
	v, has := labels[d.Key]
	return has && (d.Exists || slices.Contains(d.Values, v))
}
