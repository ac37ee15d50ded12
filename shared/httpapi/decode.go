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
	"sort"
	"strconv"
	"unicode/utf8"

	"spaces/shared/space"
)

// MaxBody is the largest request body accepted.
const MaxBody = 64 << 10

// readObject reads a JSON object body into the given fields, reporting every
// unknown field and every field of the wrong type at once. Each value in
// fields is a pointer to decode into.
func readObject(w http.ResponseWriter, r *http.Request, fields map[string]any) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return &httpError{status: http.StatusUnsupportedMediaType, detail: "the request body must be application/json", field: "Content-Type"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &httpError{status: http.StatusRequestEntityTooLarge, detail: fmt.Sprintf("the request body is larger than %d bytes", MaxBody), field: "body"}
	}
	if err != nil {
		return &space.Error{Kind: space.KindMalformed, Message: "the request body could not be read", Err: err,
			Fields: []space.FieldError{{Field: "body", Reason: "could not be read to the end"}}}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return bodyError("the request body is empty; a JSON object is required")
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return bodyError("the request body is not a JSON object")
	}
	if dec.More() {
		return bodyError("the request body has data after the JSON object")
	}
	// encoding/json silently replaces invalid UTF-8 and keeps the last of
	// duplicate keys; either would store something other than what the
	// client meant, so both are refused.
	if bad := textProblems(body, raw); len(bad) > 0 {
		return &space.Error{Kind: space.KindMalformed, Message: "the request body is not valid UTF-8 JSON with unique keys", Fields: bad}
	}
	var bad []space.FieldError
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
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
		// UseNumber keeps numbers in free-form objects (manifests) exact:
		// an integer above 2^53 must not become a float.
		d := json.NewDecoder(bytes.NewReader(raw[k]))
		d.UseNumber()
		if err := d.Decode(dst); err != nil {
			bad = append(bad, space.FieldError{Field: k, Reason: typeReason(dst)})
		}
	}
	if len(bad) > 0 {
		return &space.Error{Kind: space.KindMalformed, Message: "the request body has unknown or mistyped fields", Fields: bad}
	}
	return nil
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
// in one object of a valid JSON document.
func duplicateKey(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var walk func(path string) (string, bool)
	walk = func(path string) (string, bool) {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return "", false
				}
				k, _ := kt.(string)
				at := k
				if path != "" {
					at = path + "." + k
				}
				if seen[k] {
					return at, true
				}
				seen[k] = true
				if p, dup := walk(at); dup {
					return p, true
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if p, dup := walk(path + "[" + strconv.Itoa(i) + "]"); dup {
					return p, true
				}
			}
			_, _ = dec.Token()
		}
		return "", false
	}
	return walk("")
}
