package space

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Manifests are stored as DynamoDB maps and lists, and DynamoDB refuses
// what its emulator accepts, so its limits are checked here, before
// anything is written, and each refusal names the offending path.
const (
	// MaxManifestDepth is DynamoDB's nesting limit (32 levels), counted
	// from the revision's manifests attribute: the list is level 1, each
	// manifest level 2.
	MaxManifestDepth = 32
	// MaxNumberDigits is DynamoDB's precision: 38 significant digits.
	MaxNumberDigits = 38
	// A non-zero number's magnitude must lie in [1e-130, 1e126).
	minNumberExp, maxNumberExp = -130, 125
	// MaxManifestsSize bounds the manifests in DynamoDB's item-size terms:
	// an item holds at most 400 KB, and the rest of the revision (ids,
	// namespace, state, the cluster's failure message) gets the last 16 KB.
	MaxManifestsSize = 400<<10 - 16<<10
)

// MaxFailureReason bounds the cluster's message kept on a failed revision,
// so that the revision stays within the 16 KB MaxManifestsSize leaves it.
const MaxFailureReason = 4 << 10

// FailureReason is msg cut to MaxFailureReason bytes on a rune boundary.
func FailureReason(msg string) string {
	if len(msg) <= MaxFailureReason {
		return msg
	}
	cut := MaxFailureReason - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

// clusterScoped are the built-in kinds that live outside any namespace. A
// revision is confined to its environment's namespace, so these are refused
// at push; the applier also refuses any kind the cluster reports as
// cluster-scoped (custom resources included).
var clusterScoped = map[string]bool{
	"Namespace": true, "Node": true, "PersistentVolume": true, "ComponentStatus": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "CustomResourceDefinition": true, "APIService": true,
	"StorageClass": true, "CSIDriver": true, "CSINode": true, "VolumeAttachment": true,
	"PriorityClass": true, "RuntimeClass": true, "IngressClass": true, "CertificateSigningRequest": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"FlowSchema": true, "PriorityLevelConfiguration": true,
	"TokenReview": true, "SubjectAccessReview": true, "SelfSubjectAccessReview": true, "SelfSubjectRulesReview": true,
	"IPAddress": true, "ServiceCIDR": true, "DeviceClass": true, "ResourceSlice": true,
	"VolumeAttributesClass": true, "MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"ClusterTrustBundle": true, "StorageVersion": true, "StorageVersionMigration": true,
}

// ClusterScoped reports whether kind is a built-in cluster-scoped kind.
func ClusterScoped(kind string) bool { return clusterScoped[kind] }

// ManifestsSize is the size of the manifests attribute by DynamoDB's
// rules (attribute name, 3 bytes per list or map plus 1 per element, string
// bytes, 1 byte per two significant digits plus 1 per number, 1 per boolean
// or null).
func ManifestsSize(manifests []map[string]any) int {
	var fe fieldErrors
	size := len("manifests") + 3
	for i, m := range manifests {
		size += 1 + checkManifestValues(&fe, "manifests["+strconv.Itoa(i)+"]", m)
	}
	return size
}

// checkManifestValues walks one manifest (level 2 of the manifests list)
// and records the first problem of each kind under path at.
func checkManifestValues(fe *fieldErrors, at string, m map[string]any) int {
	w := manifestWalk{fe: fe, seen: map[string]bool{}}
	return w.value(at, m, 2)
}

type manifestWalk struct {
	fe   *fieldErrors
	seen map[string]bool // one error per kind of problem is enough
}

func (w *manifestWalk) fail(kind, path, format string, args ...any) {
	if !w.seen[kind] {
		w.seen[kind] = true
		w.fe.add(path, format, args...)
	}
}

// value checks v at depth and returns its DynamoDB size (without the
// name it is stored under).
func (w *manifestWalk) value(path string, v any, depth int) int {
	switch v := v.(type) {
	case nil, bool:
		return 1
	case string:
		if !utf8.ValidString(v) {
			w.fail("utf8", path, "must be valid UTF-8")
		}
		return len(v)
	case json.Number:
		digits, ok := checkNumber(string(v))
		if !ok {
			w.fail("number", path, "must be a number DynamoDB can store: at most %d significant digits, magnitude from 1e-130 to below 1e126", MaxNumberDigits)
		}
		return (digits+1)/2 + 1
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			w.fail("number", path, "must be a finite number")
			return 1
		}
		return w.value(path, json.Number(strconv.FormatFloat(v, 'g', -1, 64)), depth)
	case map[string]any:
		if depth > MaxManifestDepth {
			w.fail("depth", path, "is nested deeper than %d levels", MaxManifestDepth)
			return 0
		}
		size := 3
		for k, e := range v {
			if k == "" {
				w.fail("key", path, "has an empty key; object keys must not be empty")
			}
			size += 1 + len(k) + w.value(path+"."+k, e, depth+1)
		}
		return size
	case []any:
		if depth > MaxManifestDepth {
			w.fail("depth", path, "is nested deeper than %d levels", MaxManifestDepth)
			return 0
		}
		size := 3
		for i, e := range v {
			size += 1 + w.value(path+"["+strconv.Itoa(i)+"]", e, depth+1)
		}
		return size
	default:
		w.fail("type", path, "must be a JSON value")
		return 0
	}
}

// checkNumber checks a JSON number literal against DynamoDB's range and
// precision and returns its significant digits (leading and trailing zeros
// trimmed, as DynamoDB stores them).
func checkNumber(s string) (int, bool) {
	s = strings.TrimPrefix(s, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	all := intPart + frac
	if all == "" || strings.Trim(all, "0123456789") != "" {
		return 0, false
	}
	first := strings.IndexFunc(all, func(r rune) bool { return r != '0' })
	if first < 0 {
		return 1, true // zero
	}
	sig := strings.TrimRight(all[first:], "0")
	e := 0
	if exp != "" {
		n, err := strconv.Atoi(exp)
		if err != nil || n < -1e6 || n > 1e6 {
			return len(sig), false
		}
		e = n
	}
	// The exponent of the leading significant digit: d.ddd x 10^lead.
	lead := len(intPart) - 1 - first + e
	return len(sig), len(sig) <= MaxNumberDigits && lead >= minNumberExp && lead <= maxNumberExp
}
