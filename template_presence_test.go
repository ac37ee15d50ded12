package spaces_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"spaces/shared/config"
	"spaces/shared/space"
	"spaces/shared/wiring/agents"
)

// grants lists what a role allows on a resource: "action resource-id" (or
// the resource as written when it is not a Ref/GetAtt).
func grants(tpl rawTemplate, role string) []string {
	var out []string
	for _, st := range statements(tpl)[role] {
		if st["Effect"] != "Allow" {
			continue
		}
		for _, a := range list(st["Action"]) {
			for _, r := range list(st["Resource"]) {
				res := ref(r)
				if res == "" {
					res = fmt.Sprint(get(r, "Fn::Sub"))
				}
				out = append(out, fmt.Sprint(a, " ", res))
			}
		}
	}
	return out
}

// TestAgentPresenceChannel: the presence channel's resources
// (shared/space/presence.go) are wired as the code expects: IoT Core's
// custom authorizer invokes PresenceFunction (and only it may); the topic
// rule selects this stack's clients' lifecycle events into
// AgentPresenceQueue, with a role that may only send there;
// PresenceFunction consumes the queue with partial batch failures; the
// names both agent functions read from their environments are the
// resources' (agents.Read, fed the environment as a stack would resolve
// it); the functions that wake agents may publish on this stack's wake
// topics only. PresenceFunction is apart from AgentFunction, whose URL is
// public: no URL of its own, its own role and reserved concurrency, and
// AgentFunction neither consumes the queue nor may read it.
func TestAgentPresenceChannel(t *testing.T) {
	tpl := parseRaw(t)
	const stackName = "spaces-dev"
	sub := func(v any) string {
		s, _ := get(v, "Fn::Sub").(string)
		return strings.ReplaceAll(s, "${AWS::StackName}", stackName)
	}

	// signing resolves a value as the stack does once AgentTokenPublicKey
	// is passed (AgentTokenSigning true; only a first deploy has it false).
	signing := func(v any) any {
		if args, ok := get(v, "Fn::If").([]any); ok && len(args) == 3 && args[0] == "AgentTokenSigning" {
			return args[1]
		}
		return v
	}
	auth := tpl.Resources["AgentAuthorizer"]
	keyName, _ := signing(auth.Properties["TokenKeyName"]).(string)
	if auth.Type != "AWS::IoT::Authorizer" || ref(auth.Properties["AuthorizerFunctionArn"]) != "PresenceFunction.Alias" ||
		signing(auth.Properties["SigningDisabled"]) != false || keyName != "spaces-token" ||
		ref(get(signing(auth.Properties["TokenSigningPublicKeys"]), "current")) != "AgentTokenPublicKey" ||
		auth.Properties["Status"] != "ACTIVE" {
		t.Errorf("AgentAuthorizer = %+v, want an ACTIVE IoT authorizer of PresenceFunction.Alias with token signing on "+
			"(TokenKeyName spaces-token, the local stack's too; the public key AgentTokenPublicKey)", auth)
	}
	key := tpl.Resources["AgentTokenKey"]
	if key.Type != "AWS::KMS::Key" || key.Properties["KeySpec"] != "RSA_2048" || key.Properties["KeyUsage"] != "SIGN_VERIFY" {
		t.Errorf("AgentTokenKey = %+v, want an RSA_2048 SIGN_VERIFY KMS key (IoT takes RSA keys of at least 2,048 bits)", key)
	}
	if d, ok := tpl.Parameters["AgentTokenPublicKey"]["Default"]; !ok || d != "" {
		t.Errorf("AgentTokenPublicKey default = %v, want empty (a first deploy creates the key)", d)
	}
	perm := tpl.Resources["AgentAuthorizerPermission"].Properties
	if perm["Principal"] != "iot.amazonaws.com" || perm["Action"] != "lambda:InvokeFunction" ||
		ref(perm["FunctionName"]) != "PresenceFunction.Alias" || ref(perm["SourceArn"]) != "AgentAuthorizer" {
		t.Errorf("AgentAuthorizerPermission = %v, want iot.amazonaws.com invoking PresenceFunction.Alias for AgentAuthorizer only", perm)
	}

	// The functions' settings, as the stack resolves them: the agent
	// function tells agents the channel, the presence function checks it.
	var s agents.Settings
	for _, id := range []string{"AgentFunction", "PresenceFunction"} {
		vars, _ := get(tpl.Resources[id].Properties, "Environment", "Variables").(map[string]any)
		env := map[string]string{"PROBE_QUEUE_URL": "https://sqs/probe", "TABLE_NAME": "t"}
		for k, v := range vars {
			switch {
			case ref(v) == "AgentMQTTEndpoint":
				env[k] = "abc-ats.iot.us-east-1.amazonaws.com:443"
			case get(v, "Fn::GetAtt") != nil && ref(v) == "AgentTokenKey":
				env[k] = "key-id"
			case sub(v) != "":
				env[k] = sub(v)
			default:
				if str, ok := signing(v).(string); ok {
					env[k] = str
				}
			}
		}
		s = agents.Read(&config.Env{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		want := space.PresenceConfig{Endpoint: "abc-ats.iot.us-east-1.amazonaws.com:443", Authorizer: sub(auth.Properties["AuthorizerName"]),
			ClientPrefix: stackName + "_", TokenKeyName: keyName}
		if s.Presence != want || want.Authorizer != stackName+"-agent" {
			t.Errorf("%s reads %+v from its environment, want %+v", id, s.Presence, want)
		}
		// Only the issuer signs: the authorizer needs no key.
		if wantKey := map[string]string{"AgentFunction": "key-id"}[id]; s.TokenKey != wantKey {
			t.Errorf("%s reads the token key %q, want %q", id, s.TokenKey, wantKey)
		}
	}
	if g := grants(tpl, ref(tpl.Resources["AgentFunction"].Properties["Role"])); !slices.Contains(g, "kms:Sign AgentTokenKey") {
		t.Errorf("AgentFunction's role grants %v, want kms:Sign on AgentTokenKey", g)
	}
	for _, g := range grants(tpl, ref(tpl.Resources["PresenceFunction"].Properties["Role"])) {
		if strings.Contains(g, "AgentTokenKey") {
			t.Errorf("PresenceFunction's role grants %s, want nothing on the token key", g)
		}
	}
	fn := tpl.Resources["PresenceFunction"].Properties
	agentFn := tpl.Resources["AgentFunction"].Properties
	if fn["FunctionUrlConfig"] != nil {
		t.Errorf("PresenceFunction has a function URL %v, want none: the public edge is AgentFunction's", fn["FunctionUrlConfig"])
	}
	if ref(fn["Role"]) == ref(agentFn["Role"]) || ref(fn["Role"]) == "" {
		t.Errorf("PresenceFunction's role is %q, want one of its own (AgentFunction's is %q)", ref(fn["Role"]), ref(agentFn["Role"]))
	}
	if n, ok := fn["ReservedConcurrentExecutions"].(float64); !ok || n < 1 {
		t.Errorf("PresenceFunction ReservedConcurrentExecutions = %v, want its own, at least 1", fn["ReservedConcurrentExecutions"])
	}
	for name, ev := range func() map[string]any { m, _ := agentFn["Events"].(map[string]any); return m }() {
		if get(ev, "Type") == "SQS" {
			t.Errorf("AgentFunction has the queue trigger %s, want none: the presence queue is PresenceFunction's", name)
		}
	}
	for _, g := range grants(tpl, ref(agentFn["Role"])) {
		if strings.HasSuffix(g, " AgentPresenceQueue") {
			t.Errorf("AgentFunction's role grants %s, want nothing on the presence queue", g)
		}
	}
	if d, ok := tpl.Parameters["AgentMQTTEndpoint"]["Default"]; !ok || d != "" {
		t.Errorf("AgentMQTTEndpoint default = %v, want empty (no presence channel: agents renew over HTTP)", d)
	}

	rule := tpl.Resources["AgentPresenceRule"]
	p := get(rule.Properties, "TopicRulePayload")
	sql := sub(get(p, "Sql"))
	if rule.Type != "AWS::IoT::TopicRule" ||
		sql != "SELECT * FROM '$aws/events/presence/+/+' WHERE startswith(clientId, '"+s.Presence.ClientPrefix+"') AND eventType <> 'connect_failed'" ||
		get(p, "AwsIotSqlVersion") != "2016-03-23" || get(p, "RuleDisabled") != false {
		t.Errorf("AgentPresenceRule = %v, want this stack's clients' lifecycle events (SQL %q)", p, sql)
	}
	actions := list(get(p, "Actions"))
	if len(actions) != 1 || ref(get(actions[0], "Sqs", "QueueUrl")) != "AgentPresenceQueue" || get(actions[0], "Sqs", "UseBase64") == true {
		t.Fatalf("AgentPresenceRule actions = %v, want one SQS action to AgentPresenceQueue, the JSON as it is", actions)
	}
	role := ref(get(actions[0], "Sqs", "RoleArn"))
	if got := grants(tpl, role); !slices.Equal(got, []string{"sqs:SendMessage AgentPresenceQueue"}) {
		t.Errorf("%s grants %v, want only sqs:SendMessage on AgentPresenceQueue", role, got)
	}
	if pr := get(list(get(tpl.Resources[role].Properties, "AssumeRolePolicyDocument", "Statement"))[0], "Principal", "Service"); pr != "iot.amazonaws.com" {
		t.Errorf("%s is assumed by %v, want iot.amazonaws.com", role, pr)
	}

	var src any
	for _, ev := range fn["Events"].(map[string]any) {
		if get(ev, "Type") == "SQS" && ref(get(ev, "Properties", "Queue")) == "AgentPresenceQueue" {
			src = get(ev, "Properties")
		}
	}
	if src == nil || fmt.Sprint(get(src, "BatchSize")) != "10" ||
		!slices.Contains(list(get(src, "FunctionResponseTypes")), any("ReportBatchItemFailures")) {
		t.Errorf("PresenceFunction's AgentPresenceQueue trigger = %v, want BatchSize 10 with ReportBatchItemFailures", src)
	}
	got := grants(tpl, ref(fn["Role"]))
	for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"} {
		if !slices.Contains(got, a+" AgentPresenceQueue") {
			t.Errorf("PresenceFunction's role lacks %s on AgentPresenceQueue", a)
		}
	}
	if d := ref(get(tpl.Resources["AgentPresenceQueue"].Properties, "RedrivePolicy", "deadLetterTargetArn")); d != "AgentPresenceDLQ" {
		t.Errorf("AgentPresenceQueue dead-letters to %q, want AgentPresenceDLQ", d)
	}

	// The wakes: the data endpoint and the topics' prefix, and publish on
	// this stack's wake topics only.
	for _, id := range []string{"DiscoveryFunction", "RevisionsFunction", "CascadeFunction"} {
		p := tpl.Resources[id].Properties
		vars, _ := get(p, "Environment", "Variables").(map[string]any)
		if v := fmt.Sprint(vars["IOT_DATA_ENDPOINT"]); !strings.Contains(v, "HasAgentMQTTEndpoint") || !strings.Contains(v, "https://${Host}") ||
			!strings.Contains(v, "AgentMQTTEndpoint") {
			t.Errorf("%s IOT_DATA_ENDPOINT = %v, want https:// and AgentMQTTEndpoint's host when it is set", id, v)
		}
		if sub(vars["AGENT_CLIENT_PREFIX"]) != s.Presence.ClientPrefix {
			t.Errorf("%s AGENT_CLIENT_PREFIX = %v, want the agent function's %q", id, vars["AGENT_CLIENT_PREFIX"], s.Presence.ClientPrefix)
		}
		wake := "iot:Publish arn:${AWS::Partition}:iot:${AWS::Region}:${AWS::AccountId}:topic/spaces/${AWS::StackName}_*"
		if g := grants(tpl, ref(p["Role"])); !slices.Contains(g, wake) {
			t.Errorf("%s's role lacks %s", id, wake)
		}
		if topic := space.WakeTopic(s.Presence.ClientPrefix, "11111111-1111-4111-8111-111111111111"); !strings.HasPrefix(topic, "spaces/"+stackName+"_") {
			t.Errorf("wake topic %s is outside the granted topic/spaces/%s_*", topic, stackName)
		}
	}
}
