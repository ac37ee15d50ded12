package emulator

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// Resource types the emulator creates; every other type in a template (SAM
// functions, HTTP APIs, IAM roles, ...) is left alone.
const (
	TypeTable    = "AWS::DynamoDB::Table"
	TypeQueue    = "AWS::SQS::Queue"
	TypeEventBus = "AWS::Events::EventBus"
	TypeKMSKey   = "AWS::KMS::Key"
)

var supported = map[string]bool{TypeTable: true, TypeQueue: true, TypeEventBus: true, TypeKMSKey: true}

// A reference to another resource of the template can only be resolved once
// that resource exists in the emulator, so the intrinsic handlers leave a
// token in its place: @@Ref:Logical@@ or @@GetAtt:Logical.Attribute@@. '@' is
// not in the base64 alphabet, which goformation tries on every string.
var tokenPattern = regexp.MustCompile(`@@(Ref|GetAtt):([A-Za-z0-9]+)(?:\.([A-Za-z0-9.]+))?@@`)

func refToken(id string) string          { return "@@Ref:" + id + "@@" }
func getAttToken(id, attr string) string { return "@@GetAtt:" + id + "." + attr + "@@" }

// parseMu serialises template parsing: goformation registers its YAML tag
// resolvers in a package-level map on every ProcessYAML call, which would
// race between parallel tests.
var parseMu sync.Mutex

// templateResource is one resource of the processed template.
type templateResource struct {
	id   string
	typ  string
	raw  []byte   // the resource's JSON, intrinsics processed, tokens left
	deps []string // logical ids it refers to or DependsOn
}

// parseTemplate processes the template's intrinsic functions and returns the
// resources the emulator creates, each after the resources it depends on.
func parseTemplate(template []byte) ([]templateResource, error) {
	opts := &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
		"Ref":        ref,
		"Fn::GetAtt": getAtt,
		"Fn::Sub":    sub,
	}}
	parseMu.Lock()
	processed, err := intrinsics.ProcessYAML(template, opts)
	parseMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("emulator: parse template: %w", err)
	}
	var doc struct {
		Resources map[string]json.RawMessage
	}
	if err := json.Unmarshal(processed, &doc); err != nil {
		return nil, fmt.Errorf("emulator: parse template: %w", err)
	}

	types := make(map[string]string, len(doc.Resources))
	byID := make(map[string]*templateResource)
	for id, raw := range doc.Resources {
		var head struct {
			Type      string
			DependsOn any
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("emulator: resource %s: %w", id, err)
		}
		types[id] = head.Type
		if !supported[head.Type] {
			continue
		}
		r := &templateResource{id: id, typ: head.Type, raw: raw}
		for _, m := range tokenPattern.FindAllSubmatch(raw, -1) {
			r.deps = append(r.deps, string(m[2]))
		}
		switch d := head.DependsOn.(type) {
		case string:
			r.deps = append(r.deps, d)
		case []any:
			for _, v := range d {
				if s, ok := v.(string); ok {
					r.deps = append(r.deps, s)
				}
			}
		}
		byID[id] = r
	}

	// Depth-first topological order, visiting ids sorted so that the order is
	// the same on every run.
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	const (
		visiting = 1
		done     = 2
	)
	state := make(map[string]int, len(byID))
	order := make([]templateResource, 0, len(byID))
	var visit func(id, from string) error
	visit = func(id, from string) error {
		r, ok := byID[id]
		if !ok {
			if _, declared := types[id]; !declared {
				return fmt.Errorf("emulator: resource %s refers to %s, which the template does not declare", from, id)
			}
			return fmt.Errorf("emulator: resource %s refers to %s (%s), which the emulator does not create", from, id, types[id])
		}
		switch state[id] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("emulator: resources %s and %s depend on each other", from, id)
		}
		state[id] = visiting
		for _, d := range r.deps {
			if err := visit(d, id); err != nil {
				return err
			}
		}
		state[id] = done
		order = append(order, *r)
		return nil
	}
	for _, id := range ids {
		if err := visit(id, id); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// resolveTokens replaces every token in raw (JSON) by the attribute of the
// created resource it names.
func resolveTokens(raw []byte, created Resources) ([]byte, error) {
	var firstErr error
	out := tokenPattern.ReplaceAllFunc(raw, func(tok []byte) []byte {
		m := tokenPattern.FindSubmatch(tok)
		v, err := created.attribute(string(m[1]), string(m[2]), string(m[3]))
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return tok
		}
		// The token sits inside a JSON string: escape the value the same way.
		b, _ := json.Marshal(v)
		return b[1 : len(b)-1]
	})
	return out, firstErr
}

// attribute is what Ref (attr "") or Fn::GetAtt returns for a created resource.
func (rs Resources) attribute(fn, id, attr string) (string, error) {
	r, ok := rs[id]
	if !ok {
		return "", fmt.Errorf("emulator: %s has not been created", id)
	}
	var v string
	switch r.Type + " " + fn + " " + attr {
	case TypeTable + " Ref ", TypeEventBus + " Ref ", TypeQueue + " GetAtt QueueName", TypeEventBus + " GetAtt Name":
		v = r.Name
	case TypeQueue + " Ref ", TypeQueue + " GetAtt QueueUrl":
		v = r.URL
	case TypeKMSKey + " Ref ", TypeKMSKey + " GetAtt KeyId":
		v = r.Name
	case TypeTable + " GetAtt Arn", TypeQueue + " GetAtt Arn", TypeEventBus + " GetAtt Arn", TypeKMSKey + " GetAtt Arn":
		v = r.ARN
	case TypeTable + " GetAtt StreamArn":
		v = r.StreamARN
	default:
		return "", fmt.Errorf("emulator: %s (%s) has no attribute %q", id, r.Type, attr)
	}
	if v == "" {
		return "", fmt.Errorf("emulator: %s (%s) has no value for %s %s", id, r.Type, fn, attr)
	}
	return v, nil
}

// isResource reports whether name is a logical id in the template.
func isResource(template any, name string) bool {
	t, _ := template.(map[string]any)
	rs, _ := t["Resources"].(map[string]any)
	_, ok := rs[name]
	return ok
}

// ref handles Ref: resources become tokens, the pseudo parameters kumo's ARNs
// depend on get the emulator's values, and parameters their defaults
// (goformation's own handler).
func ref(name string, input, template any) any {
	s, ok := input.(string)
	if !ok {
		return nil
	}
	switch s {
	case "AWS::Region":
		return Region
	case "AWS::AccountId":
		return AccountID
	case "AWS::Partition":
		return "aws"
	case "AWS::URLSuffix":
		return "amazonaws.com"
	}
	if isResource(template, s) {
		return refToken(s)
	}
	return intrinsics.Ref(name, input, template)
}

// getAtt handles Fn::GetAtt in both forms: "X.Attr" and [X, Attr].
func getAtt(_ string, input, _ any) any {
	switch v := input.(type) {
	case string:
		if id, attr, ok := strings.Cut(v, "."); ok {
			return getAttToken(id, attr)
		}
	case []any:
		if len(v) == 2 {
			id, ok1 := v[0].(string)
			attr, ok2 := v[1].(string)
			if ok1 && ok2 {
				return getAttToken(id, attr)
			}
		}
	}
	return nil
}

var subVariable = regexp.MustCompile(`\$\{([^}]*)\}`)

// sub handles Fn::Sub in both forms, with ${!Literal} escapes; a variable it
// cannot resolve is left as written.
func sub(_ string, input, template any) any {
	var src string
	vars := map[string]any{}
	switch v := input.(type) {
	case string:
		src = v
	case []any:
		if len(v) != 2 {
			return nil
		}
		src, _ = v[0].(string)
		vars, _ = v[1].(map[string]any)
	default:
		return nil
	}
	return subVariable.ReplaceAllStringFunc(src, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		if v, ok := vars[name]; ok {
			if s, ok := scalar(v); ok {
				return s
			}
			return m
		}
		if id, attr, ok := strings.Cut(name, "."); ok && isResource(template, id) {
			return getAttToken(id, attr)
		}
		if s, ok := scalar(ref("Ref", name, template)); ok {
			return s
		}
		return m
	})
}

func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

// RawJSON is the template as JSON with its intrinsic functions left as
// written ({"Ref": ...}, {"Fn::GetAtt": [...]}), for readers of settings
// the emulator does not create resources for (package lambdarules).
func RawJSON(template []byte) ([]byte, error) {
	parseMu.Lock()
	defer parseMu.Unlock()
	js, err := intrinsics.ProcessYAML(template, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return nil, fmt.Errorf("emulator: parse template: %w", err)
	}
	return js, nil
}
