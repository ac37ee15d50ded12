package iamcheck

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"spaces/infra/emulator"
)

// StackName is the local stack's AWS::StackName (infra/local names its
// agents' clients and wake topics "spaces-..."): the wake topics' grants
// name it.
const StackName = "spaces"

// Statement is one Allow statement of a function's role, resolved.
type Statement struct {
	Role, Sid string
	Actions   []string
	// Resources are ARN patterns (IAM's * and ?), named as Local names
	// them.
	Resources []string
	// Justified maps the actions its "# iam:" comments excuse to why.
	Justified map[string]string
}

// Policies are the roles of the template's functions.
type Policies struct {
	// Roles maps each function's logical id to its role's logical id.
	Roles map[string]string
	// Statements are each role's statements, by role.
	Statements map[string][]Statement
}

// Read resolves template's function roles. Every function must run as an
// AWS::IAM::Role of the template with inline Allow statements of Action and
// Resource (no SAM policy templates, managed policies, NotAction or
// Condition: they are not modelled, and Read refuses them).
func Read(template []byte) (Policies, error) {
	js, err := emulator.RawJSON(template)
	if err != nil {
		return Policies{}, err
	}
	var doc tmpl
	if err := json.Unmarshal(js, &doc); err != nil {
		return Policies{}, fmt.Errorf("iamcheck: %w", err)
	}
	just, err := justifications(template)
	if err != nil {
		return Policies{}, err
	}
	p := Policies{Roles: map[string]string{}, Statements: map[string][]Statement{}}
	for id, res := range doc.Resources {
		if res.Type != "AWS::Serverless::Function" {
			continue
		}
		var props struct {
			Role     any
			Policies any
		}
		if err := json.Unmarshal(res.Properties, &props); err != nil {
			return Policies{}, fmt.Errorf("iamcheck: %s: %w", id, err)
		}
		role := getAtt(props.Role, "Arn")
		if role == "" || doc.Resources[role].Type != "AWS::IAM::Role" || props.Policies != nil {
			return Policies{}, fmt.Errorf("iamcheck: %s: its Role must be !GetAtt <an AWS::IAM::Role of the template>.Arn, with no SAM Policies", id)
		}
		p.Roles[id] = role
		if _, done := p.Statements[role]; done {
			continue
		}
		var rp struct {
			ManagedPolicyArns any
			Policies          []struct {
				PolicyDocument struct {
					Statement []map[string]any
				}
			}
		}
		if err := json.Unmarshal(doc.Resources[role].Properties, &rp); err != nil {
			return Policies{}, fmt.Errorf("iamcheck: %s: %w", role, err)
		}
		if rp.ManagedPolicyArns != nil {
			return Policies{}, fmt.Errorf("iamcheck: %s: managed policies are not modelled", role)
		}
		sts := []Statement{}
		for _, pol := range rp.Policies {
			for _, raw := range pol.PolicyDocument.Statement {
				st, err := doc.statement(role, raw)
				if err != nil {
					return Policies{}, err
				}
				for a, why := range just[[2]string{role, st.Sid}] {
					i := slices.IndexFunc(st.Actions, func(s string) bool { return strings.EqualFold(s, a) })
					if i < 0 {
						return Policies{}, fmt.Errorf("iamcheck: %s %s: the \"# iam:\" comment names %s, which the statement does not grant", role, st.Sid, a)
					}
					if st.Justified == nil {
						st.Justified = map[string]string{}
					}
					st.Justified[st.Actions[i]] = why
				}
				delete(just, [2]string{role, st.Sid})
				sts = append(sts, st)
			}
		}
		p.Statements[role] = sts
	}
	for k := range just {
		if doc.Resources[k[0]].Type == "AWS::IAM::Role" {
			return Policies{}, fmt.Errorf("iamcheck: %s %s: an \"# iam:\" comment above a statement of no function's role", k[0], k[1])
		}
	}
	return p, nil
}

type tmpl struct {
	Parameters map[string]struct {
		Type    string
		Default any
	}
	Globals struct {
		Function struct{ AutoPublishAlias string }
	}
	Resources map[string]struct {
		Type       string
		Properties json.RawMessage
	}
}

func (doc tmpl) statement(role string, raw map[string]any) (Statement, error) {
	sid, _ := raw["Sid"].(string)
	st := Statement{Role: role, Sid: sid}
	for k := range raw {
		switch k {
		case "Sid", "Effect", "Action", "Resource":
		default:
			return st, fmt.Errorf("iamcheck: %s %s: %s is not modelled", role, sid, k)
		}
	}
	if sid == "" || raw["Effect"] != "Allow" {
		return st, fmt.Errorf("iamcheck: %s: a statement without a Sid, or not Allow: %v", role, raw)
	}
	for _, a := range asList(raw["Action"]) {
		s, ok := a.(string)
		if !ok {
			return st, fmt.Errorf("iamcheck: %s %s: action %v", role, sid, a)
		}
		st.Actions = append(st.Actions, s)
	}
	for _, r := range asList(raw["Resource"]) {
		rs, err := doc.resolve(r)
		if err != nil {
			return st, fmt.Errorf("iamcheck: %s %s: %w", role, sid, err)
		}
		st.Resources = append(st.Resources, rs...)
	}
	if len(st.Actions) == 0 || len(st.Resources) == 0 {
		return st, fmt.Errorf("iamcheck: %s %s: no action or no resource", role, sid)
	}
	return st, nil
}

// resolve turns a statement's Resource entry into ARN patterns in the
// local stack's names: a logical resource's ARN names it by its logical id.
func (doc tmpl) resolve(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case map[string]any:
		if len(x) != 1 {
			break
		}
		if r, ok := x["Ref"].(string); ok {
			return doc.ref(r)
		}
		if g := x["Fn::GetAtt"]; g != nil {
			id, attr := splitGetAtt(g)
			s, err := doc.attr(id, attr)
			return []string{s}, err
		}
		if s, ok := x["Fn::Sub"].(string); ok {
			var err error
			out := subVar.ReplaceAllStringFunc(s, func(m string) string {
				name := m[2 : len(m)-1]
				if id, attr, ok := strings.Cut(name, "."); ok {
					v, e := doc.attr(id, attr)
					if e != nil {
						err = e
					}
					return v
				}
				rs, e := doc.ref(name)
				if e == nil && len(rs) != 1 {
					e = fmt.Errorf("${%s} is a list", name)
				}
				if e != nil {
					err = e
					return ""
				}
				return rs[0]
			})
			return []string{out}, err
		}
	}
	return nil, fmt.Errorf("resource %v is not modelled", v)
}

var subVar = regexp.MustCompile(`\$\{[^}!]+\}`)

func (doc tmpl) ref(name string) ([]string, error) {
	switch name {
	case "AWS::Partition":
		return []string{"aws"}, nil
	case "AWS::Region":
		return []string{emulator.Region}, nil
	case "AWS::AccountId":
		return []string{emulator.AccountID}, nil
	case "AWS::StackName":
		return []string{StackName}, nil
	}
	if fn, ok := strings.CutSuffix(name, ".Alias"); ok && doc.Resources[fn].Type == "AWS::Serverless::Function" {
		return []string{arn("lambda", "function:"+fn+":"+doc.Globals.Function.AutoPublishAlias)}, nil
	}
	if p, ok := doc.Parameters[name]; ok {
		s, _ := p.Default.(string)
		if p.Type == "CommaDelimitedList" {
			return strings.Split(s, ","), nil
		}
		return []string{s}, nil
	}
	switch doc.Resources[name].Type {
	case "AWS::SecretsManager::Secret":
		return []string{arn("secretsmanager", "secret:"+name)}, nil
	}
	return nil, fmt.Errorf("!Ref %s is not modelled", name)
}

func (doc tmpl) attr(id, attr string) (string, error) {
	typ := doc.Resources[id].Type
	switch {
	case attr == "Arn" && typ == "AWS::DynamoDB::Table":
		return arn("dynamodb", "table/"+id), nil
	case attr == "StreamArn" && typ == "AWS::DynamoDB::Table":
		return arn("dynamodb", "table/"+id+"/stream/"+StreamLabel), nil
	case attr == "Arn" && typ == "AWS::SQS::Queue":
		return arn("sqs", id), nil
	case attr == "Arn" && typ == "AWS::Events::EventBus":
		return arn("events", "event-bus/"+id), nil
	case attr == "Arn" && typ == "AWS::KMS::Key":
		return arn("kms", "key/"+id), nil
	case attr == "Arn" && typ == "AWS::Logs::LogGroup":
		return arn("logs", "log-group:"+id+":*"), nil
	case attr == "Arn" && typ == "AWS::Serverless::Function":
		return arn("lambda", "function:"+id), nil
	}
	return "", fmt.Errorf("!GetAtt %s.%s (%s) is not modelled", id, attr, typ)
}

func splitGetAtt(g any) (id, attr string) {
	switch x := g.(type) {
	case string:
		id, attr, _ = strings.Cut(x, ".")
	case []any:
		if len(x) == 2 {
			id, _ = x[0].(string)
			attr, _ = x[1].(string)
		}
	}
	return id, attr
}

func getAtt(v any, attr string) string {
	m, _ := v.(map[string]any)
	if m == nil {
		return ""
	}
	id, a := splitGetAtt(m["Fn::GetAtt"])
	if a != attr {
		return ""
	}
	return id
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

var (
	resourceLine = regexp.MustCompile(`^  ([A-Za-z0-9]+):\s*$`)
	sidLine      = regexp.MustCompile(`^\s*- Sid:\s*"?([A-Za-z0-9]+)"?\s*$`)
	actionName   = regexp.MustCompile(`^[a-z0-9-]+:[A-Za-z0-9*]+$`)
)

// justifications reads the "# iam:" comments of template.yaml's text: for
// each (resource, Sid) the actions a comment right above the statement's
// "- Sid:" line names, with the reason. A justification anywhere else is
// an error.
func justifications(template []byte) (map[[2]string]map[string]string, error) {
	out := map[[2]string]map[string]string{}
	var (
		resource string
		pending  map[string]string // the comment block's justifications
		last     string            // the action the reason continues for
		at       int
	)
	for n, line := range strings.Split(string(template), "\n") {
		trimmed := strings.TrimSpace(line)
		if c, ok := strings.CutPrefix(trimmed, "#"); ok {
			c = strings.TrimSpace(c)
			if body, ok := strings.CutPrefix(c, "iam:"); ok {
				actions, reason, err := parseJustification(body)
				if err != nil {
					return nil, fmt.Errorf("template.yaml:%d: %w", n+1, err)
				}
				if pending == nil {
					pending, at = map[string]string{}, n+1
				}
				for _, a := range actions {
					pending[a] = reason
				}
				last = strings.Join(actions, " ")
				continue
			}
			if pending != nil && last != "" {
				for _, a := range strings.Fields(last) {
					pending[a] = strings.TrimSpace(pending[a] + " " + c)
				}
			}
			continue
		}
		if m := resourceLine.FindStringSubmatch(line); m != nil {
			resource = m[1]
		}
		if pending != nil {
			m := sidLine.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("template.yaml:%d: an \"# iam:\" comment must be right above a statement's \"- Sid:\" line", at)
			}
			for a, why := range pending {
				if why == "" {
					return nil, fmt.Errorf("template.yaml:%d: the \"# iam:\" comment on %s gives no reason", at, a)
				}
			}
			out[[2]string{resource, m[1]}] = pending
		}
		pending, last = nil, ""
	}
	if pending != nil {
		return nil, fmt.Errorf("template.yaml:%d: an \"# iam:\" comment at the end", at)
	}
	return out, nil
}

// parseJustification parses "<action> <action>...: <reason>".
func parseJustification(body string) (actions []string, reason string, err error) {
	fields := strings.Fields(body)
	for i, f := range fields {
		a, end := strings.CutSuffix(f, ":")
		if !actionName.MatchString(a) {
			return nil, "", fmt.Errorf("\"# iam:\" names %q, not an action (want \"# iam: svc:Action ...: why\")", a)
		}
		actions = append(actions, a)
		if end {
			return actions, strings.Join(fields[i+1:], " "), nil
		}
	}
	return nil, "", fmt.Errorf("\"# iam:%s\": want \"# iam: svc:Action ...: why\"", body)
}

// sortedKeys is m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
