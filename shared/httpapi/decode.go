package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"

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
		return &httpError{http.StatusUnsupportedMediaType, "the request body must be application/json"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", MaxBody)}
	}
	if err != nil {
		return &space.Error{Kind: space.KindMalformed, Message: "the request body could not be read", Err: err}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return space.Errorf(space.KindMalformed, "the request body is empty; a JSON object is required")
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return space.Errorf(space.KindMalformed, "the request body is not a JSON object")
	}
	if dec.More() {
		return space.Errorf(space.KindMalformed, "the request body has data after the JSON object")
	}
	var bad []space.FieldError
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dst, ok := fields[k]
		if !ok {
			bad = append(bad, space.FieldError{Field: k, Reason: "is not a known field"})
			continue
		}
		if err := json.Unmarshal(raw[k], dst); err != nil {
			bad = append(bad, space.FieldError{Field: k, Reason: typeReason(dst)})
		}
	}
	if len(bad) > 0 {
		return &space.Error{Kind: space.KindMalformed, Message: "the request body has unknown or mistyped fields", Fields: bad}
	}
	return nil
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
