package iotcore

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Rule is a topic rule: messages published on a topic its SQL selects run
// its Action with the payload.
type Rule struct {
	Name string
	// SQL as in AWS::IoT::TopicRule, in the subset
	// SELECT * FROM '<filter>' [WHERE <condition> [AND <condition>]...],
	// a condition being startswith(<attribute>, '<literal>'),
	// <attribute> = '<literal>' or <attribute> <> '<literal>'; anything
	// else is an error at Start.
	SQL    string
	Action func(ctx context.Context, payload []byte) error // e.g. SQS SendMessage
}

// ruleSQL is the subset of IoT SQL the model reads
// (https://docs.aws.amazon.com/iot/latest/developerguide/iot-sql-reference.html):
// SELECT * passes the JSON payload through; FROM names a topic filter with
// MQTT wildcards; WHERE is a conjunction of conditions (whereCond) on
// top-level string attributes (operators:
// https://docs.aws.amazon.com/iot/latest/developerguide/iot-sql-operators.html;
// the WHERE page's example uses color <> 'red':
// https://docs.aws.amazon.com/iot/latest/developerguide/iot-sql-where.html).
var (
	ruleSQL   = regexp.MustCompile(`(?is)^\s*SELECT\s+\*\s+FROM\s+'([^']+)'(?:\s+WHERE\s+(.*?))?\s*$`)
	whereCond = regexp.MustCompile(`(?is)^(?:startswith\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,\s*'([^']*)'\s*\)|([A-Za-z_][A-Za-z0-9_]*)\s*(=|<>)\s*'([^']*)')\s*`)
	whereAnd  = regexp.MustCompile(`(?is)^AND\s+`)
)

// condition is one WHERE condition: op is "startswith", "=" or "<>".
type condition struct{ attr, op, literal string }

type compiledRule struct {
	Rule
	filter string
	where  []condition // all must hold; none: every message on the filter
}

func compileRule(r Rule) (compiledRule, error) {
	bad := fmt.Errorf("iotcore: rule %s: SQL %q is not SELECT * FROM '<filter>' [WHERE <condition> [AND <condition>]...] "+
		"with conditions startswith(<attribute>, '<literal>'), <attribute> = '<literal>' or <attribute> <> '<literal>'", r.Name, r.SQL)
	ix := ruleSQL.FindStringSubmatchIndex(r.SQL)
	if ix == nil {
		return compiledRule{}, bad
	}
	m := []string{r.SQL, r.SQL[ix[2]:ix[3]], ""}
	hasWhere := ix[4] >= 0
	if hasWhere {
		m[2] = r.SQL[ix[4]:ix[5]]
	}
	if !validFilter(m[1]) {
		return compiledRule{}, fmt.Errorf("iotcore: rule %s: %q is not a topic filter", r.Name, m[1])
	}
	if r.Action == nil {
		return compiledRule{}, fmt.Errorf("iotcore: rule %s has no action", r.Name)
	}
	cr := compiledRule{Rule: r, filter: m[1]}
	rest := m[2]
	if hasWhere && rest == "" {
		return compiledRule{}, bad
	}
	for rest != "" {
		c := whereCond.FindStringSubmatch(rest)
		if c == nil {
			return compiledRule{}, bad
		}
		if c[1] != "" {
			cr.where = append(cr.where, condition{attr: c[1], op: "startswith", literal: c[2]})
		} else {
			cr.where = append(cr.where, condition{attr: c[3], op: c[4], literal: c[5]})
		}
		rest = rest[len(c[0]):]
		if rest == "" {
			break
		}
		and := whereAnd.FindString(rest)
		if and == "" {
			return compiledRule{}, bad
		}
		rest = rest[len(and):]
		if rest == "" {
			return compiledRule{}, bad
		}
	}
	return cr, nil
}

// selects reports whether a message on topic with payload triggers the rule.
// WHERE attributes are read from the JSON payload; a payload that is not a
// JSON object, or lacks an attribute as a string, does not match (IoT SQL's
// undefined is not true, and comparing undefined is undefined).
func (r compiledRule) selects(topic string, payload []byte) bool {
	if !matchFilter(r.filter, topic) {
		return false
	}
	if len(r.where) == 0 {
		return true
	}
	var doc map[string]any
	if json.Unmarshal(payload, &doc) != nil {
		return false
	}
	for _, c := range r.where {
		v, ok := doc[c.attr].(string)
		if !ok {
			return false
		}
		switch c.op {
		case "startswith":
			ok = strings.HasPrefix(v, c.literal)
		case "=":
			ok = v == c.literal
		case "<>":
			ok = v != c.literal
		}
		if !ok {
			return false
		}
	}
	return true
}

// matchFilter matches an MQTT topic filter ('+' one level, '#' the rest)
// against a topic name. As MQTT says, a filter starting with a wildcard does
// not match a topic starting with '$'.
func matchFilter(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	f := strings.Split(filter, "/")
	t := strings.Split(topic, "/")
	for i, level := range f {
		if level == "#" {
			return true
		}
		if i >= len(t) {
			return false
		}
		if level != "+" && level != t[i] {
			return false
		}
	}
	return len(f) == len(t)
}

// validFilter: '#' only as the last level, '+' and '#' only as whole levels.
func validFilter(filter string) bool {
	if filter == "" {
		return false
	}
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return false
		}
		if strings.Contains(l, "+") && l != "+" {
			return false
		}
	}
	return true
}

// TemplateRule is an AWS::IoT::TopicRule of the template: its logical id, its
// SQL as written (Fn::Sub variables left in place: see SQLFor) and the
// logical id of the queue its one Sqs action sends to.
type TemplateRule struct{ Name, SQL, QueueLogicalID string }

// SQLFor is the rule's SQL with ${AWS::StackName} resolved to stack (and
// ${!Literal} escapes undone), as CloudFormation would for that stack.
func (t TemplateRule) SQLFor(stack string) string {
	return subVariable.ReplaceAllStringFunc(t.SQL, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		return stack // the only variable TopicRulesFromTemplate lets through
	})
}

var subVariable = regexp.MustCompile(`\$\{([^}]*)\}`)

// TopicRulesFromTemplate reads template.yaml's AWS::IoT::TopicRule resources
// (TopicRulePayload.Sql, a string or Fn::Sub of one whose only variable is
// ${AWS::StackName}; TopicRulePayload.Actions, exactly one Sqs action whose
// QueueUrl is a Ref, or GetAtt QueueUrl, of a queue's logical id), so the
// local stack builds its rules from the template, as infra/emulator does for
// queues. Rules come sorted by logical id.
func TopicRulesFromTemplate(template []byte) ([]TemplateRule, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(template, &doc); err != nil {
		return nil, fmt.Errorf("iotcore: parse template: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("iotcore: empty template")
	}
	resources := mapValue(doc.Content[0], "Resources")
	if resources == nil || resources.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("iotcore: template has no Resources")
	}
	var out []TemplateRule
	for i := 0; i+1 < len(resources.Content); i += 2 {
		id, res := resources.Content[i].Value, resources.Content[i+1]
		if t := mapValue(res, "Type"); t == nil || t.Value != "AWS::IoT::TopicRule" {
			continue
		}
		payload := mapValue(mapValue(res, "Properties"), "TopicRulePayload")
		if payload == nil {
			return nil, fmt.Errorf("iotcore: rule %s has no TopicRulePayload", id)
		}
		sql, err := subString(mapValue(payload, "Sql"))
		if err != nil {
			return nil, fmt.Errorf("iotcore: rule %s Sql: %w", id, err)
		}
		actions := mapValue(payload, "Actions")
		if actions == nil || actions.Kind != yaml.SequenceNode || len(actions.Content) != 1 {
			return nil, fmt.Errorf("iotcore: rule %s: the model needs exactly one action", id)
		}
		sqs := mapValue(actions.Content[0], "Sqs")
		if sqs == nil {
			return nil, fmt.Errorf("iotcore: rule %s: only the Sqs action is modelled", id)
		}
		queue, err := refID(mapValue(sqs, "QueueUrl"))
		if err != nil {
			return nil, fmt.Errorf("iotcore: rule %s Sqs.QueueUrl: %w", id, err)
		}
		out = append(out, TemplateRule{Name: id, SQL: sql, QueueLogicalID: queue})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// mapValue is the value of key in a YAML mapping (nil when absent).
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// subString reads a plain string or a Fn::Sub (short or long form, string
// form) whose variables are ${AWS::StackName} or ${!Literal} escapes only.
func subString(n *yaml.Node) (string, error) {
	if n == nil {
		return "", fmt.Errorf("missing")
	}
	switch {
	case n.Kind == yaml.ScalarNode && (n.Tag == "!!str" || n.Tag == "!Sub"):
		for _, m := range subVariable.FindAllStringSubmatch(n.Value, -1) {
			if n.Tag == "!Sub" && m[1] != "AWS::StackName" && !strings.HasPrefix(m[1], "!") {
				return "", fmt.Errorf("variable ${%s} is not modelled (only ${AWS::StackName})", m[1])
			}
		}
		return n.Value, nil
	case n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "Fn::Sub":
		v := *n.Content[1]
		if v.Kind != yaml.ScalarNode {
			return "", fmt.Errorf("only the string form of Fn::Sub is modelled")
		}
		v.Tag = "!Sub"
		return subString(&v)
	}
	return "", fmt.Errorf("not a string or Fn::Sub")
}

// refID reads !Ref X, {Ref: X}, !GetAtt X.QueueUrl or {Fn::GetAtt: [X, QueueUrl]}.
func refID(n *yaml.Node) (string, error) {
	if n == nil {
		return "", fmt.Errorf("missing")
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!Ref":
		return n.Value, nil
	case n.Kind == yaml.ScalarNode && n.Tag == "!GetAtt":
		if id, attr, ok := strings.Cut(n.Value, "."); ok && attr == "QueueUrl" {
			return id, nil
		}
	case n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "Ref":
		return n.Content[1].Value, nil
	case n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "Fn::GetAtt":
		v := n.Content[1]
		if v.Kind == yaml.SequenceNode && len(v.Content) == 2 && v.Content[1].Value == "QueueUrl" {
			return v.Content[0].Value, nil
		}
		if id, attr, ok := strings.Cut(v.Value, "."); ok && attr == "QueueUrl" {
			return id, nil
		}
	}
	return "", fmt.Errorf("not a Ref or GetAtt QueueUrl of a queue")
}
