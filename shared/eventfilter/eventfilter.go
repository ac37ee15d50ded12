// Package eventfilter matches events against the subset of the EventBridge /
// Lambda event-filtering pattern syntax that Spaces' templates use, so that
// the local stack filters stream records with the very patterns
// template.yaml gives Lambda (FilterCriteria) rather than a copy of them.
//
// Supported: nested objects (every key must match); at a leaf, an array of
// alternatives, each a literal (string, number, boolean, null) or an
// operator object {"exists": true|false} or {"prefix": "..."}. A leaf
// matches an event value that equals an alternative or, when the event value
// is an array, any of its elements. Anything else is refused when the pattern
// is compiled, so a pattern the local stack cannot honour fails loudly
// instead of matching differently from Lambda.
package eventfilter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Pattern is a compiled filter pattern.
type Pattern struct{ root node }

type node struct {
	fields map[string]*node // an object pattern
	alts   []alt            // a leaf pattern
}

type alt struct {
	op      string // "", "exists", "prefix"
	literal any    // for op "": a decoded JSON scalar
	exists  bool
	prefix  string
}

// Compile parses a pattern (a JSON object).
func Compile(pattern string) (*Pattern, error) {
	dec := json.NewDecoder(strings.NewReader(pattern))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("eventfilter: pattern is not JSON: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("eventfilter: a pattern must be a JSON object")
	}
	n, err := compileObject(obj, "")
	if err != nil {
		return nil, err
	}
	return &Pattern{root: *n}, nil
}

func compileObject(obj map[string]any, path string) (*node, error) {
	n := &node{fields: map[string]*node{}}
	for k, v := range obj {
		p := path + "." + k
		switch v := v.(type) {
		case map[string]any:
			child, err := compileObject(v, p)
			if err != nil {
				return nil, err
			}
			n.fields[k] = child
		case []any:
			leaf := &node{}
			for _, a := range v {
				c, err := compileAlt(a, p)
				if err != nil {
					return nil, err
				}
				leaf.alts = append(leaf.alts, c)
			}
			if len(leaf.alts) == 0 {
				return nil, fmt.Errorf("eventfilter: %s: an empty array matches nothing", p)
			}
			n.fields[k] = leaf
		default:
			return nil, fmt.Errorf("eventfilter: %s: a pattern value must be an object or an array", p)
		}
	}
	return n, nil
}

func compileAlt(a any, path string) (alt, error) {
	m, ok := a.(map[string]any)
	if !ok {
		return alt{literal: a}, nil
	}
	if len(m) != 1 {
		return alt{}, fmt.Errorf("eventfilter: %s: an operator object has exactly one key", path)
	}
	for op, arg := range m {
		switch op {
		case "exists":
			b, ok := arg.(bool)
			if !ok {
				return alt{}, fmt.Errorf("eventfilter: %s: exists takes true or false", path)
			}
			return alt{op: op, exists: b}, nil
		case "prefix":
			s, ok := arg.(string)
			if !ok {
				return alt{}, fmt.Errorf("eventfilter: %s: prefix takes a string", path)
			}
			return alt{op: op, prefix: s}, nil
		default:
			return alt{}, fmt.Errorf("eventfilter: %s: operator %q is not supported locally", path, op)
		}
	}
	panic("unreachable")
}

// Match reports whether the event (JSON) matches the pattern.
func (p *Pattern) Match(event []byte) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(event))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return false, fmt.Errorf("eventfilter: event is not JSON: %w", err)
	}
	return p.root.match(v, true), nil
}

// MatchValue marshals v to JSON and matches it.
func (p *Pattern) MatchValue(v any) (bool, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return false, err
	}
	return p.Match(b)
}

func (n *node) match(v any, present bool) bool {
	if n.fields != nil {
		obj, _ := v.(map[string]any) // absent or not an object: every key is absent
		keys := make([]string, 0, len(n.fields))
		for k := range n.fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child, ok := obj[k]
			if !n.fields[k].match(child, ok) {
				return false
			}
		}
		return true
	}
	for _, a := range n.alts {
		if a.matches(v, present) {
			return true
		}
	}
	return false
}

func (a alt) matches(v any, present bool) bool {
	if a.op == "exists" {
		// A leaf exists when it is present and not an object.
		_, isObj := v.(map[string]any)
		return a.exists == (present && !isObj)
	}
	if !present {
		return false
	}
	if arr, ok := v.([]any); ok {
		for _, e := range arr {
			if a.matches(e, true) {
				return true
			}
		}
		return false
	}
	switch a.op {
	case "prefix":
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, a.prefix)
	default:
		return equal(a.literal, v)
	}
}

func equal(a, b any) bool {
	if an, ok := a.(json.Number); ok {
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		af, e1 := an.Float64()
		bf, e2 := bn.Float64()
		return e1 == nil && e2 == nil && af == bf
	}
	return a == b
}
