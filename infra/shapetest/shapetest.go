// Package shapetest freezes the shapes of the API's bodies and the table's
// items in golden files, so that renaming a json tag, or adding or
// dropping a field, fails a test before it changes the contract or the
// stored data.
//
// Why golden files and not wire and stored types apart from the domain:
// the domain's types carry json tags that are at once the API's field
// names and the table's attribute names (dynamostore encodes with the json
// tag). Wire and stored copies of the dozens of types the two share, each
// with its two mappers, would keep the domain free of tags but make every
// new field a change in three places, and a mapper that forgets a field
// fails nothing. Golden files keep one type per thing and still make the
// coupling loud: a renamed tag of a type both use fails the API's golden
// test and the table's, each saying what it changes, and the golden
// files' diff is what a reviewer reads.
//
// A shape is one line per field path and its type, from the real encoder's
// output of a value that Fill populated completely (every omitempty field
// included). Map keys the data chooses are shown as <key>, list elements
// as [].
package shapetest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

var update = flag.Bool("update", false, "rewrite the golden shape files from the code")

// Key is the key Fill puts in every map whose keys are strings.
const Key = "<key>"

// At is the time Fill puts in every time.Time.
var At = time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// Fill sets every exported field reachable from ptr (a pointer) to a
// non-zero value: strings "x", numbers 1, booleans true, times At, one
// element in every slice and one Key in every map, pointers allocated. An
// interface gets the string "x", a json.RawMessage the empty object. A
// type that contains itself is filled to a few levels.
func Fill(ptr any) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic("shapetest.Fill needs a non-nil pointer")
	}
	fill(v.Elem(), 0)
}

func fill(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	switch v.Type() {
	case timeType:
		v.Set(reflect.ValueOf(At))
		return
	case rawType:
		v.SetBytes([]byte(`{}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		if k.Kind() == reflect.String {
			k.SetString(Key)
		} else {
			fill(k, depth+1)
		}
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf("x"))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() && v.Type().Field(i).Anonymous && f.Kind() == reflect.Struct {
				// encoding/json promotes the exported fields of an
				// unexported embedded struct, which reflect will not set.
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			if f.CanSet() {
				fill(f, depth+1)
			}
		}
	}
}

// JSON is the shape of a JSON document: "path type" per field, type one
// of string, number, boolean, null, object, array.
func JSON(t testing.TB, doc []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("shapetest: %v in %s", err, doc)
	}
	var out []string
	walkJSON("", v, &out)
	return Lines(out)
}

// Marshal is JSON of json.Marshal(v).
func Marshal(t testing.TB, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("shapetest: marshal %T: %v", v, err)
	}
	return JSON(t, b)
}

func walkJSON(path string, v any, out *[]string) {
	line := func(typ string) {
		if path != "" {
			*out = append(*out, path+" "+typ)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		line("object")
		for k, e := range x {
			walkJSON(Join(path, k), e, out)
		}
	case []any:
		line("array")
		for _, e := range x {
			walkJSON(path+"[]", e, out)
		}
	case string:
		line("string")
	case json.Number:
		line("number")
	case bool:
		line("boolean")
	case nil:
		line("null")
	default:
		line(fmt.Sprintf("%T", v))
	}
}

// Join is the path of field k under path.
func Join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// Lines sorts lines and drops repeats.
func Lines(lines []string) []string {
	out := slices.Clone(lines)
	slices.Sort(out)
	return slices.Compact(out)
}

// Golden compares got, shapes by section name, with file. With -update it
// rewrites file instead (and says so). header opens the file; contract
// names what a difference changes and how to accept it, for the failure
// message.
func Golden(t testing.TB, file, header, contract string, got map[string][]string) {
	t.Helper()
	text := format(header, got)
	if *update {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatalf("shapetest: %v", err)
		}
		t.Logf("wrote %s", file)
		return
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("shapetest: %v (%s)", err, contract)
	}
	want := parse(string(b))
	var diffs []string
	for _, name := range sortedKeys(want, got) {
		w, inWant := want[name]
		g, inGot := got[name]
		switch {
		case !inGot:
			diffs = append(diffs, fmt.Sprintf("%s: gone (the golden file has it)", name))
			continue
		case !inWant:
			diffs = append(diffs, fmt.Sprintf("%s: new (not in the golden file)", name))
			continue
		}
		g = Lines(g)
		for _, l := range w {
			if !slices.Contains(g, l) {
				diffs = append(diffs, fmt.Sprintf("%s: - %s", name, l))
			}
		}
		for _, l := range g {
			if !slices.Contains(w, l) {
				diffs = append(diffs, fmt.Sprintf("%s: + %s", name, l))
			}
		}
	}
	if len(diffs) > 0 {
		t.Errorf("%s differs from the code (- golden, + code):\n\t%s\n%s", file, strings.Join(diffs, "\n\t"), contract)
	}
}

func sortedKeys(a, b map[string][]string) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		out = append(out, k)
	}
	return Lines(out)
}

// format writes sections as "== name" followed by its lines, in name order.
func format(header string, sections map[string][]string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(header), "\n") {
		b.WriteString("# " + l + "\n")
	}
	for _, name := range sortedKeys(sections, nil) {
		b.WriteString("\n== " + name + "\n")
		for _, l := range Lines(sections[name]) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func parse(text string) map[string][]string {
	out := map[string][]string{}
	var cur string
	for _, l := range strings.Split(text, "\n") {
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "== "):
			cur = strings.TrimPrefix(l, "== ")
			out[cur] = []string{}
		case cur != "":
			out[cur] = append(out[cur], l)
		}
	}
	return out
}
