package iotcore

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

const ruleTemplate = `
Resources:
  AgentPresenceQueue:
    Type: AWS::SQS::Queue
  AgentPresenceRule:
    Type: AWS::IoT::TopicRule
    Properties:
      TopicRulePayload:
        AwsIotSqlVersion: '2016-03-23'
        Sql: !Sub "SELECT * FROM '$aws/events/presence/+/+' WHERE startswith(clientId, '${AWS::StackName}-')"
        Actions:
          - Sqs:
              QueueUrl: !Ref AgentPresenceQueue
              RoleArn: !GetAtt AgentPresenceRuleRole.Arn
  LongFormRule:
    Type: AWS::IoT::TopicRule
    Properties:
      TopicRulePayload:
        Sql: {"Fn::Sub": "SELECT * FROM 'x/${!literal}'"}
        Actions:
          - Sqs:
              QueueUrl: {"Fn::GetAtt": [AgentPresenceQueue, QueueUrl]}
`

func TestTopicRulesFromTemplate(t *testing.T) {
	rules, err := TopicRulesFromTemplate([]byte(ruleTemplate))
	if err != nil {
		t.Fatal(err)
	}
	want := []TemplateRule{
		{Name: "AgentPresenceRule", SQL: "SELECT * FROM '$aws/events/presence/+/+' WHERE startswith(clientId, '${AWS::StackName}-')", QueueLogicalID: "AgentPresenceQueue"},
		{Name: "LongFormRule", SQL: "SELECT * FROM 'x/${!literal}'", QueueLogicalID: "AgentPresenceQueue"},
	}
	if !reflect.DeepEqual(rules, want) {
		t.Fatalf("rules %+v\nwant %+v", rules, want)
	}
	sql := rules[0].SQLFor("spaces")
	if sql != "SELECT * FROM '$aws/events/presence/+/+' WHERE startswith(clientId, 'spaces-')" {
		t.Fatalf("SQLFor: %q", sql)
	}
	if got := rules[1].SQLFor("spaces"); got != "SELECT * FROM 'x/${literal}'" {
		t.Fatalf("SQLFor of an escape: %q", got)
	}
	// The resolved SQL is in the subset Start accepts.
	if _, err := compileRule(Rule{Name: "r", SQL: sql, Action: func(_ context.Context, _ []byte) error { return nil }}); err != nil {
		t.Fatal(err)
	}

	for name, bad := range map[string]string{
		"other Sub variable": strings.Replace(ruleTemplate, "${AWS::StackName}", "${AWS::Region}", 1),
		"Lambda action":      strings.Replace(ruleTemplate, "- Sqs:\n              QueueUrl: !Ref", "- Lambda:\n              FunctionArn: !Ref", 1),
		"QueueUrl literal":   strings.Replace(ruleTemplate, "QueueUrl: !Ref AgentPresenceQueue", "QueueUrl: https://example", 1),
		"no payload":         strings.Replace(ruleTemplate, "TopicRulePayload:\n        AwsIotSqlVersion", "Other:\n        AwsIotSqlVersion", 1),
	} {
		if _, err := TopicRulesFromTemplate([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The project's template parses, and its rules send this stack's
// connected and disconnected events to their queue, and no connect_failed.
func TestTopicRulesFromProjectTemplate(t *testing.T) {
	tmpl, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := TopicRulesFromTemplate(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan string, 10) // "<queue> <eventType>"
	var live []Rule
	for _, r := range rules {
		live = append(live, Rule{Name: r.Name, SQL: r.SQLFor("spaces"), Action: func(_ context.Context, payload []byte) error {
			var ev lifecycle
			_ = json.Unmarshal(payload, &ev)
			queued <- r.QueueLogicalID + " " + ev.EventType
			return nil
		}})
	}
	f := start(t, live...) // compiles them: an error fails here
	if _, err := f.dial(t, "spaces-refused", "bad", 30*time.Second); err == nil {
		t.Fatal("a bad password was let in")
	}
	if ev := f.nextFailed(t); ev.ClientID != "spaces-refused" {
		t.Fatalf("connect_failed event %+v", ev)
	}
	c := f.mustDial(t, "spaces-ok")
	f.next(t)
	c.Disconnect(0)
	f.next(t)
	var got []string
	for len(got) < 2 {
		select {
		case q := <-queued:
			got = append(got, q)
		case <-time.After(5 * time.Second):
			t.Fatalf("queued %q, want the connected and disconnected events", got)
		}
	}
	select {
	case q := <-queued:
		got = append(got, q)
	case <-time.After(5 * sweepEvery):
	}
	sort.Strings(got) // actions run concurrently
	if want := []string{"AgentPresenceQueue connected", "AgentPresenceQueue disconnected"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("queued %q, want %q (no connect_failed)", got, want)
	}
}
