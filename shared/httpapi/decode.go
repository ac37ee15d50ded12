package httpapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"spaces/shared/space"
)

// MaxBody is the largest request body accepted.
const MaxBody = 64 << 10

// readObject reads a JSON object body into the given fields, reporting every
// unknown field and every field of the wrong type at once. Each value in
// fields is a pointer to decode into.
func readObject(w http.ResponseWriter, r *http.Request, fields map[string]any) error {
	return readObjectMax(w, r, MaxBody, fields)
}

// readObjectMax is readObject with another body limit.
func readObjectMax(w http.ResponseWriter, r *http.Request, limit int64, fields map[string]any) error {
	raw, err := readRawObjectMax(w, r, limit)
	if err != nil {
		return err
	}
	var bad []space.FieldError
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst, ok := fields[k]
		if k == "" {
			bad = append(bad, space.FieldError{Field: "body", Reason: "has an empty key"})
			continue
		}
		if !ok {
			bad = append(bad, space.FieldError{Field: k, Reason: "is not a known field"})
			continue
		}
		if err := decodeField(raw[k], dst); err != nil {
			bad = append(bad, space.FieldError{Field: k, Reason: typeReason(dst)})
		}
	}
	if len(bad) > 0 {
		return &space.Error{Kind: space.KindMalformed, Message: "the request body has unknown or mistyped fields", Fields: bad}
	}
	return nil
}

// readRawObject reads the body as one JSON object of valid UTF-8 with
// unique keys, each value left undecoded.
func readRawObject(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, error) {
	return readRawObjectMax(w, r, MaxBody)
}

func readRawObjectMax(w http.ResponseWriter, r *http.Request, limit int64) (map[string]json.RawMessage, error) {
	// The usual header needs no parsing (ParseMediaType allocates).
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, &httpError{status: http.StatusUnsupportedMediaType, detail: "the request body must be application/json", field: "Content-Type"}
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			return nil, &httpError{status: http.StatusRequestEntityTooLarge, detail: fmt.Sprintf("the request body is larger than %d bytes", limit), field: "body"}
		}
		return nil, &space.Error{Kind: space.KindMalformed, Message: "the request body could not be read", Err: err,
			Fields: []space.FieldError{{Field: "body", Reason: "could not be read to the end"}}}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, bodyError("the request body is empty; a JSON object is required")
	}
	raw, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	// encoding/json silently replaces invalid UTF-8 and keeps the last of
	// duplicate keys; either would store something other than what the
	// client meant, so both are refused.
	if bad := textProblems(body, raw); len(bad) > 0 {
		return nil, &space.Error{Kind: space.KindMalformed, Message: "the request body is not valid UTF-8 JSON with unique keys", Fields: bad}
	}
	return raw, nil
}

// decodeObject decodes a body that must be one JSON object, with nothing
// but space after it. json.Unmarshal takes the usual body in one pass; what
// it refuses, a stream decoder tells apart.
func decodeObject(body []byte) (map[string]json.RawMessage, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err == nil && raw != nil {
		return raw, nil
	}
	raw = nil
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&raw); err != nil || raw == nil {
		return nil, bodyError("the request body is not a JSON object")
	}
	return nil, bodyError("the request body has data after the JSON object")
}

// decodeField decodes one field's value. UseNumber keeps numbers in
// free-form objects (manifests) exact: an integer above 2^53 must not
// become a float. Typed fields need no decoder of their own.
func decodeField(v json.RawMessage, dst any) error {
	switch d := dst.(type) {
	case *string:
		// A string without escapes is its own text (the body is valid
		// UTF-8 JSON by now): no decoder needed.
		if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
			*d = string(v[1 : len(v)-1])
			return nil
		}
	case *[]map[string]any, *map[string]any, *any:
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		return dec.Decode(dst)
	}
	return json.Unmarshal(v, dst)
}

// bodyError is a 400 about the body as a whole, named "body".
func bodyError(msg string) error {
	return &space.Error{Kind: space.KindMalformed, Message: msg, Fields: []space.FieldError{{Field: "body", Reason: msg}}}
}

func typeReason(dst any) string {
	switch dst.(type) {
	case *string, **string:
		return "must be a string"
	case *bool, **bool:
		return "must be a boolean"
	case *map[string]string:
		return "must be an object whose values are strings"
	case **[]string:
		return "must be an array of strings"
	case *[]map[string]any:
		return "must be an array of objects"
	case *int, **int:
		return "must be a whole number"
	case **policyTarget:
		return "must be an object with the string fields namespace, kind and name only"
	default:
		return "has the wrong type"
	}
}

// textProblems reports, per top-level field, invalid UTF-8 (raw bytes or an
// escaped lone surrogate) and the first duplicate object key at any depth.
// body is a valid JSON object already decoded into raw.
func textProblems(body []byte, raw map[string]json.RawMessage) []space.FieldError {
	var bad []space.FieldError
	if !utf8.Valid(body) || hasLoneSurrogate(body) {
		keys := slices.Sorted(maps.Keys(raw))
		for _, k := range keys {
			if !utf8.Valid(raw[k]) || hasLoneSurrogate(raw[k]) {
				bad = append(bad, space.FieldError{Field: cmp.Or(k, "body"), Reason: "must be valid UTF-8"})
			}
		}
		if len(bad) == 0 { // the bad text is in a key
			bad = append(bad, space.FieldError{Field: "body", Reason: "must be valid UTF-8, keys included"})
		}
		return bad
	}
	if path, dup := duplicateKey(body); dup {
		if path == "" { // the empty key, twice
			path = "body"
		}
		bad = append(bad, space.FieldError{Field: path, Reason: "is given more than once"})
	}
	return bad
}

// hasLoneSurrogate reports a \u escape of a UTF-16 surrogate that is not
// part of a pair (encoding/json turns it into U+FFFD). In valid JSON a
// backslash only occurs inside strings, so a flat scan is enough.
func hasLoneSurrogate(b []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // a two-character escape such as \" or \\
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}

// duplicateKey returns the dotted path of the first key that occurs twice
// in one object of a valid JSON document. It scans the bytes rather than
// the decoder's tokens (one allocation per token), and keeps keys as
// slices of body; a key with an escape is compared decoded, so "a" and
// "\u0061" are the same key.
func duplicateKey(body []byte) (string, bool) {
	// Most bodies are shallow and have few keys: no allocation for them.
	var stackBuf [8]keyFrame
	var keysBuf [32][]byte
	stack := stackBuf[:0]
	keys := keysBuf[:0] // the keys of every open object, innermost last
	wantKey := false
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			stack = append(stack, keyFrame{object: true, start: len(keys)})
			wantKey = true
		case '[':
			stack = append(stack, keyFrame{start: len(keys)})
		case '}', ']':
			keys = keys[:stack[len(stack)-1].start]
			stack = stack[:len(stack)-1]
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				wantKey = true
			} else {
				top.index++
			}
		case '"':
			end := stringEnd(body, i)
			if wantKey {
				top := &stack[len(stack)-1]
				k := body[i+1 : end]
				if bytes.IndexByte(k, '\\') >= 0 {
					var text string
					_ = json.Unmarshal(body[i:end+1], &text) // valid JSON: cannot fail
					k = []byte(text)
				}
				top.key = k
				if top.seenBefore(keys, k) {
					return keyPath(stack), true
				}
				keys = append(keys, k)
				wantKey = false
			}
			i = end
		}
	}
	return "", false
}

// keyFrame is an object or array duplicateKey is inside.
type keyFrame struct {
	object bool
	start  int             // where the object's keys begin in the keys list
	seen   map[string]bool // the object's keys, once it has many
	key    []byte          // the object's current key
	index  int             // the array's current element
}

// seenBefore reports whether the object already has key k (its keys are
// keys[f.start:]); a linear search, or a map past 16 keys, so that a
// hostile body of thousands of keys stays linear.
func (f *keyFrame) seenBefore(keys [][]byte, k []byte) bool {
	own := keys[f.start:]
	if f.seen == nil && len(own) < 16 {
		for _, o := range own {
			if bytes.Equal(o, k) {
				return true
			}
		}
		return false
	}
	if f.seen == nil {
		f.seen = make(map[string]bool, 2*len(own))
		for _, o := range own {
			f.seen[string(o)] = true
		}
	}
	if f.seen[string(k)] {
		return true
	}
	f.seen[string(k)] = true
	return false
}

// stringEnd returns the index of the quote closing the string that opens
// at body[start].
func stringEnd(body []byte, start int) int {
	for i := start + 1; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(body) - 1
}

// keyPath is the dotted path (a.b[2].c) to the innermost current key.
func keyPath(stack []keyFrame) string {
	var b strings.Builder
	for _, f := range stack {
		if !f.object {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(f.key)
	}
	return b.String()
}
