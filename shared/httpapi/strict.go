package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"spaces/shared/space"
)

// readStruct reads a JSON object body into dst, a pointer to a struct whose
// json tags are the body's fields: the known fields are the struct's, so the
// decoder cannot drift from the type the domain uses (no hand-kept list of
// fields to fall behind the domain, the validator and openapi.yaml).
// Nested structs, maps and slices are read as strictly.
// It reports every unknown and mistyped field at once (400), and returns
// the paths given as JSON null, which the decoder leaves at their zero
// value: the caller's validation refuses them (422), as null is not a value
// and a zero may be (min_nodes: 0).
func readStruct(w http.ResponseWriter, r *http.Request, dst any) (nulls []string, err error) {
	raw, err := readRawObject(w, r)
	if err != nil {
		return nil, err
	}
	var d strictDecoder
	d.object("", raw, reflect.ValueOf(dst).Elem())
	if len(d.bad) > 0 {
		return nil, &space.Error{Kind: space.KindMalformed, Message: "the request body has unknown or mistyped fields", Fields: d.bad}
	}
	return d.nulls, nil
}

// StructFields lists the JSON field paths a struct type accepts, nested
// structs as a.b, map values as a.*, slice elements as a[]: what readStruct
// takes, for tests that compare it with the document.
func StructFields(v any) []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		switch t.Kind() {
		case reflect.Struct:
			for _, f := range jsonFields(t) {
				walk(join(prefix, f.name), t.Field(f.index).Type)
			}
			return
		case reflect.Map:
			walk(prefix+".*", t.Elem())
			return
		case reflect.Slice:
			walk(prefix+"[]", t.Elem())
			return
		}
		out = append(out, prefix)
	}
	walk("", reflect.TypeOf(v))
	slices.Sort(out)
	return out
}

type strictDecoder struct {
	bad   []space.FieldError
	nulls []string
}

type jsonField struct {
	name  string
	index int
}

// jsonFields are the exported fields of t that have a json name.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		out = append(out, jsonField{name: name, index: i})
	}
	return out
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// object decodes the members of one JSON object into the struct v.
func (d *strictDecoder) object(prefix string, raw map[string]json.RawMessage, v reflect.Value) {
	known := map[string]int{}
	for _, f := range jsonFields(v.Type()) {
		known[f.name] = f.index
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		at := join(prefix, k)
		i, ok := known[k]
		switch {
		case k == "":
			d.bad = append(d.bad, space.FieldError{Field: join(prefix, "body"), Reason: "has an empty key"})
		case !ok:
			d.bad = append(d.bad, space.FieldError{Field: at, Reason: "is not a known field"})
		default:
			d.value(at, raw[k], v.Field(i))
		}
	}
}

// value decodes one JSON value into v, recording a null's path.
func (d *strictDecoder) value(at string, raw json.RawMessage, v reflect.Value) {
	if string(bytes.TrimSpace(raw)) == "null" {
		d.nulls = append(d.nulls, at)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			d.bad = append(d.bad, space.FieldError{Field: at, Reason: "must be an object"})
			return
		}
		d.object(at, m, v)
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			d.bad = append(d.bad, space.FieldError{Field: at, Reason: kindReason(v.Type())})
			return
		}
		out := reflect.MakeMapWithSize(v.Type(), len(m))
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			e := reflect.New(v.Type().Elem()).Elem()
			n := len(d.bad)
			d.value(at+"."+k, m[k], e)
			if len(d.bad) == n {
				out.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
			}
		}
		v.Set(out)
	case reflect.Slice:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil || items == nil {
			d.bad = append(d.bad, space.FieldError{Field: at, Reason: kindReason(v.Type())})
			return
		}
		out := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, it := range items {
			d.value(at+"["+strconv.Itoa(i)+"]", it, out.Index(i))
		}
		v.Set(out)
	default:
		if json.Unmarshal(raw, v.Addr().Interface()) != nil {
			d.bad = append(d.bad, space.FieldError{Field: at, Reason: kindReason(v.Type())})
		}
	}
}

func kindReason(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "must be a string"
	case reflect.Bool:
		return "must be a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "must be a whole number"
	case reflect.Map:
		return "must be an object whose values are " + plural(t.Elem())
	case reflect.Slice:
		return "must be an array of " + plural(t.Elem())
	case reflect.Struct:
		return "must be an object"
	}
	return "has the wrong type"
}

func plural(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "strings"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "whole numbers"
	case reflect.Bool:
		return "booleans"
	}
	return "objects"
}
