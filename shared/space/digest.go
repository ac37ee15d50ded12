package space

import (
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ProbeDigest is what the probe index holds of a registered space: enough
// to probe it (its identity) and to tell whether a probe's result changes
// what is stored (NeedsWrite) without reading the space. It is one short
// string attribute of the space's item (MarshalText), rewritten with every
// write of the space, so that the index's page, read every minute, costs
// a fraction of the space's own attributes (BENCHMARKS.md, "Probing on
// the current tree"). What a write stores but a probe does not compare
// (the name, the message, the timestamps, the facts themselves) is not in
// it: a result that changes something reads the space before writing it.
type ProbeDigest struct {
	// Version is the space's version (its conditional write's).
	Version  int64
	Status   Status
	Failures int
	Reason   string
	// LastProbeAt is the stored probe's time, to the second (nil: never
	// probed).
	LastProbeAt *time.Time
	// Facts are the fingerprints of the stored probe's facts, one for each
	// of probeFacts in order (factPrint).
	Facts          []string
	Provider       Provider
	CloudAccountID string
	Config         Config
	// Connectivity is empty for Direct.
	Connectivity Connectivity
	// Due are the windows in which an inventory threshold of the stored
	// facts is due and not yet announced (Space.NoticeWindows): a probe
	// inside one writes, one outside reads nothing.
	Due []NoticeWindow
}

// DigestOf is the digest of s as stored.
func DigestOf(s Space) ProbeDigest {
	d := ProbeDigest{Version: s.Version, Status: s.Status, Failures: s.Probe.ConsecutiveFailures, Reason: s.Probe.Reason,
		Provider: s.Provider, CloudAccountID: s.CloudAccountID}
	if len(s.Config) > 0 {
		d.Config = s.Config
	}
	if s.Connectivity != Direct {
		d.Connectivity = s.Connectivity
	}
	if s.Probe.LastProbeAt != nil {
		t := s.Probe.LastProbeAt.UTC().Truncate(time.Second)
		d.LastProbeAt = &t
	}
	for _, f := range probeFacts {
		d.Facts = append(d.Facts, factPrint(f.of(s.Probe)))
	}
	d.Due = s.NoticeWindows()
	return d
}

// factPrint is a fact's fingerprint: 36 bits of a hash of its text, so
// that two different facts print alike about once in 7·10¹⁰ changes
// (and such a change would go unwritten until the next).
func factPrint(v any) string {
	h := fnv.New64a()
	h.Write([]byte(factText(v)))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))[:6]
}

// Space is the space of org and id as far as d says: its identity, status,
// failure count and reason, last probe and version; its name, message,
// other times and facts are not known.
func (d ProbeDigest) Space(org, id string) Space {
	s := Space{ID: id, OrgID: org, Provider: d.Provider, SpaceType: TypeKubernetes, CloudAccountID: d.CloudAccountID,
		Config: d.Config, Connectivity: d.Connectivity, Status: d.Status, Version: d.Version,
		Probe: Probe{ConsecutiveFailures: d.Failures, Reason: d.Reason}}
	if s.Connectivity == "" {
		s.Connectivity = Direct
	}
	if d.LastProbeAt != nil {
		t := *d.LastProbeAt
		s.Probe.LastProbeAt = &t
	}
	return s
}

// NeedsWrite reports whether outcome o changes what is stored of the
// space d digests: NeedsWrite(stored, ApplyProbe(stored, o)), from d
// alone. A fact o replaces is compared by its fingerprint; a digest
// written before a fact was added lacks it, and says a write is needed
// (which stores it).
func (d ProbeDigest) NeedsWrite(o Outcome) bool {
	old := d.Space("", "")
	next, _ := ApplyProbe(old, o)
	if stateChanged(old, next) {
		return true
	}
	for _, w := range d.Due {
		if w.Contains(o.At.UTC()) {
			return true
		}
	}
	if len(d.Facts) < len(probeFacts) {
		return true
	}
	for i, f := range probeFacts {
		if f.set(o) && factPrint(f.of(next.Probe)) != d.Facts[i] {
			return true
		}
	}
	return false
}

// The digest's text: "1" (the format) then its fields in digestFields'
// order, each separated by "|", with "%", "|", "," and "=" escaped in
// strings. A field is one line of digestFields, appended at the end: a
// digest of fewer fields reads with the rest zero, one of more with the
// rest ignored, so old and new digests read across a deploy. The short
// codes (statuses, config keys) keep the index entry small: it is read for
// every space every minute.
const digestFormat = "1"

var digestEscape = strings.NewReplacer("%", "%25", "|", "%7C", ",", "%2C", "=", "%3D")

func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("a truncated escape")
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("escape %q: %w", s[i:i+3], err)
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String(), nil
}

// Short codes of the common values; any other is written as it is, after
// a "~".
var (
	statusCodes    = map[Status]string{Active: "a", Inactive: "i", Unknown: "u"}
	configKeyCodes = map[string]string{"clusterName": "c", "region": "r", "projectId": "p", "resourceGroup": "g", "subscriptionId": "s"}
)

func code[K comparable](codes map[K]string, v K) (string, bool) {
	c, ok := codes[v]
	return c, ok
}

func uncode[K comparable](codes map[K]string, c string) (K, bool) {
	for k, v := range codes {
		if v == c {
			return k, true
		}
	}
	var zero K
	return zero, false
}

func encodeStatus(s Status) string {
	if c, ok := code(statusCodes, s); ok {
		return c
	}
	if s == "" {
		return ""
	}
	return "~" + digestEscape.Replace(string(s))
}

func decodeStatus(s string) (Status, error) {
	if lit, ok := strings.CutPrefix(s, "~"); ok {
		v, err := unescape(lit)
		return Status(v), err
	}
	if st, ok := uncode(statusCodes, s); ok || s == "" {
		return st, nil
	}
	return "", fmt.Errorf("status code %q is unknown", s)
}

// encodeConfig writes key=value pairs in key order, a known key by its
// code and any other prefixed with "~".
func encodeConfig(c Config) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		key, ok := code(configKeyCodes, k)
		if !ok {
			key = "~" + digestEscape.Replace(k)
		}
		parts = append(parts, key+"="+digestEscape.Replace(c[k]))
	}
	return strings.Join(parts, ",")
}

func decodeConfig(s string) (Config, error) {
	if s == "" {
		return nil, nil
	}
	c := Config{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("config entry %q has no '='", part)
		}
		var key string
		if lit, isLit := strings.CutPrefix(k, "~"); isLit {
			var err error
			if key, err = unescape(lit); err != nil {
				return nil, err
			}
		} else if key, ok = uncode(configKeyCodes, k); !ok {
			return nil, fmt.Errorf("config key code %q is unknown", k)
		}
		val, err := unescape(v)
		if err != nil {
			return nil, err
		}
		if _, dup := c[key]; dup {
			return nil, fmt.Errorf("config key %q twice", key)
		}
		c[key] = val
	}
	return c, nil
}

func encodeString(s string) string { return digestEscape.Replace(s) }

// digestFields are the digest's fields in the order of its text: one line
// each, a new one at the end.
var digestFields = []struct {
	name string
	enc  func(d *ProbeDigest) string
	dec  func(d *ProbeDigest, s string) error
}{
	{"version", func(d *ProbeDigest) string { return strconv.FormatInt(d.Version, 36) },
		func(d *ProbeDigest, s string) (err error) { d.Version, err = strconv.ParseInt(s, 36, 64); return }},
	{"status", func(d *ProbeDigest) string { return encodeStatus(d.Status) },
		func(d *ProbeDigest, s string) (err error) { d.Status, err = decodeStatus(s); return }},
	{"failures", func(d *ProbeDigest) string { return strconv.Itoa(d.Failures) },
		func(d *ProbeDigest, s string) (err error) { d.Failures, err = strconv.Atoi(s); return }},
	{"reason", func(d *ProbeDigest) string { return encodeString(d.Reason) },
		func(d *ProbeDigest, s string) (err error) { d.Reason, err = unescape(s); return }},
	{"last_probe_at", func(d *ProbeDigest) string {
		if d.LastProbeAt == nil {
			return ""
		}
		return strconv.FormatInt(d.LastProbeAt.Unix(), 36)
	}, func(d *ProbeDigest, s string) error {
		if s == "" {
			return nil
		}
		n, err := strconv.ParseInt(s, 36, 64)
		t := time.Unix(n, 0).UTC()
		d.LastProbeAt = &t
		return err
	}},
	{"facts", func(d *ProbeDigest) string { return strings.Join(d.Facts, ",") },
		func(d *ProbeDigest, s string) error {
			if s != "" {
				d.Facts = strings.Split(s, ",")
			}
			return nil
		}},
	{"provider", func(d *ProbeDigest) string { return encodeString(string(d.Provider)) },
		func(d *ProbeDigest, s string) error { v, err := unescape(s); d.Provider = Provider(v); return err }},
	{"cloud_account_id", func(d *ProbeDigest) string { return encodeString(d.CloudAccountID) },
		func(d *ProbeDigest, s string) (err error) { d.CloudAccountID, err = unescape(s); return }},
	{"config", func(d *ProbeDigest) string { return encodeConfig(d.Config) },
		func(d *ProbeDigest, s string) (err error) { d.Config, err = decodeConfig(s); return }},
	{"connectivity", func(d *ProbeDigest) string { return encodeString(string(d.Connectivity)) },
		func(d *ProbeDigest, s string) error {
			v, err := unescape(s)
			d.Connectivity = Connectivity(v)
			return err
		}},
	// "s" (support) or "c" (certificate), the window's end in seconds
	// base 36, "-" and its length in days (the first threshold not yet
	// announced): "s<end>-<days>", comma-separated, about 10 bytes a
	// window. A digest written before this field has none: its space
	// announces with its next write.
	{"due", encodeDue, decodeDue},
}

var dueCodes = map[EventType]string{EventSupportEnding: "s", EventCertificateExpiring: "c"}

func encodeDue(d *ProbeDigest) string {
	parts := make([]string, 0, len(d.Due))
	for _, w := range d.Due {
		c, _ := code(dueCodes, w.Type)
		days := int64(w.End.Sub(w.Start) / (24 * time.Hour))
		parts = append(parts, c+strconv.FormatInt(w.End.Unix(), 36)+"-"+strconv.FormatInt(days, 10))
	}
	return strings.Join(parts, ",")
}

func decodeDue(d *ProbeDigest, s string) error {
	if s == "" {
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			return errors.New("an empty window")
		}
		t, ok := uncode(dueCodes, part[:1])
		end, days, cut := strings.Cut(part[1:], "-")
		if !ok || !cut {
			return fmt.Errorf("window %q is not a kind, end-days", part)
		}
		e, err := strconv.ParseInt(end, 36, 64)
		if err != nil {
			return fmt.Errorf("window %q: %w", part, err)
		}
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return fmt.Errorf("window %q: %w", part, err)
		}
		endAt := time.Unix(e, 0).UTC()
		d.Due = append(d.Due, NoticeWindow{Type: t, Start: endAt.Add(-time.Duration(n) * 24 * time.Hour), End: endAt})
	}
	return nil
}

// digestBaseFields are the fields every digest writes, empty or not.
const digestBaseFields = 10

// MarshalText is the digest's text (the item's attribute, a message's
// field).
func (d ProbeDigest) MarshalText() ([]byte, error) {
	parts := []string{digestFormat}
	for _, f := range digestFields {
		parts = append(parts, f.enc(&d))
	}
	// A field added after the first ten is left out while empty (the
	// common case), so that it costs the index nothing until it is set.
	for len(parts) > 1+digestBaseFields && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return []byte(strings.Join(parts, "|")), nil
}

// String is the digest's text.
func (d ProbeDigest) String() string {
	b, _ := d.MarshalText()
	return string(b)
}

// UnmarshalText reads a digest's text; a text it cannot read is an error
// (the space is then read instead).
func (d *ProbeDigest) UnmarshalText(text []byte) error {
	parts := strings.Split(string(text), "|")
	if parts[0] != digestFormat {
		return fmt.Errorf("probe digest: format %q is unknown", parts[0])
	}
	var out ProbeDigest
	for i, f := range digestFields {
		if i+1 >= len(parts) {
			break
		}
		if err := f.dec(&out, parts[i+1]); err != nil {
			return fmt.Errorf("probe digest: %s: %w", f.name, err)
		}
	}
	if out.Version < 1 {
		return errors.New("probe digest: no version")
	}
	*d = out
	return nil
}

// ParseDigest reads a digest's text.
func ParseDigest(text string) (ProbeDigest, error) {
	var d ProbeDigest
	err := d.UnmarshalText([]byte(text))
	return d, err
}
