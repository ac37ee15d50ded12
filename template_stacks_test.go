package spaces_test

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"spaces/shared/space"
)

// physicalName is, for each resource type of the template, the property
// that names the resource in the account and region ("": the type has no
// name of its own there: its id is generated, or it hangs off a named
// resource). A type missing here fails TestTwoStacksDoNotCollide, so that
// whoever adds one decides how it is named.
var physicalName = map[string]string{
	"AWS::DynamoDB::Table":                       "TableName",
	"AWS::SQS::Queue":                            "QueueName",
	"AWS::SNS::Topic":                            "TopicName",
	"AWS::Events::EventBus":                      "Name",
	"AWS::Logs::LogGroup":                        "LogGroupName",
	"AWS::IAM::Role":                             "RoleName",
	"AWS::SecretsManager::Secret":                "Name",
	"AWS::CloudWatch::Alarm":                     "AlarmName",
	"AWS::CloudWatch::Dashboard":                 "DashboardName",
	"AWS::Scheduler::ScheduleGroup":              "Name",
	"AWS::ApplicationAutoScaling::ScalingPolicy": "PolicyName",
	"AWS::Serverless::Function":                  "FunctionName",
	"AWS::IoT::Authorizer":                       "AuthorizerName",
	"AWS::IoT::TopicRule":                        "RuleName",
	// API ids are generated; a target is its table; subscriptions and
	// policies belong to their topic.
	"AWS::Serverless::HttpApi":                    "",
	"AWS::ApplicationAutoScaling::ScalableTarget": "",
	"AWS::SNS::Subscription":                      "",
	"AWS::SNS::TopicPolicy":                       "",
	"AWS::Lambda::Permission":                     "",
	// A key's id is generated (no alias is given).
	"AWS::KMS::Key": "",
}

// stackNames resolves every name the template gives a resource in the
// account and region when deployed as stack: CloudFormation's generated
// name (stack-LogicalId-random) where the template sets none, the
// template's own expression resolved otherwise; and the schedules SAM
// makes of ScheduleV2 events (named after the function and the event
// unless the event names it, in the event's GroupName or the account's
// "default" group), and the stack's metric namespace.
func stackNames(t *testing.T, tpl rawTemplate, stack string) map[string]string {
	t.Helper()
	var resolve func(v any) string
	name := func(id string) string {
		r, ok := tpl.Resources[id]
		if !ok {
			t.Fatalf("%s is not a resource of the template", id)
		}
		prop, known := physicalName[r.Type]
		if !known {
			t.Fatalf("%s: resource type %s has no naming rule in physicalName", id, r.Type)
		}
		if v, ok := r.Properties[prop]; prop != "" && ok {
			return resolve(v)
		}
		return stack + "-" + id + "-GENERATED"
	}
	word := func(s string) string {
		switch s {
		case "AWS::StackName":
			return stack
		case "AWS::Region":
			return "us-east-1"
		case "AWS::AccountId":
			return "123456789012"
		case "AWS::URLSuffix":
			return "amazonaws.com"
		case "AWS::Partition":
			return "aws"
		}
		if p, ok := tpl.Parameters[s]; ok {
			return fmt.Sprint(p["Default"])
		}
		id, attr, _ := strings.Cut(s, ".")
		if attr != "" {
			return name(id) + "." + attr
		}
		return name(id)
	}
	resolve = func(v any) string {
		switch x := v.(type) {
		case string:
			return x
		case float64:
			return fmt.Sprint(x)
		case map[string]any:
			if r, ok := x["Ref"].(string); ok {
				return word(r)
			}
			if g := list(x["Fn::GetAtt"]); len(g) == 2 {
				return word(fmt.Sprint(g[0], ".", g[1]))
			}
			if sub, ok := x["Fn::Sub"].(string); ok {
				return regexp.MustCompile(`\$\{([^}!]+)\}`).ReplaceAllStringFunc(sub, func(m string) string { return word(m[2 : len(m)-1]) })
			}
		}
		t.Fatalf("cannot resolve %v", v)
		return ""
	}
	names := map[string]string{}
	add := func(what, n string) {
		if other, dup := names[n]; dup {
			t.Errorf("stack %s: %s and %s are both named %q", stack, what, other, n)
		}
		names[n] = what
	}
	for id, r := range tpl.Resources {
		prop, known := physicalName[r.Type]
		if !known {
			t.Errorf("%s: resource type %s has no naming rule in physicalName", id, r.Type)
			continue
		}
		if prop != "" {
			add(id, r.Type+" "+name(id))
		}
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		events, _ := r.Properties["Events"].(map[string]any)
		for ev, e := range events {
			if get(e, "Type") != "ScheduleV2" {
				continue
			}
			p, _ := get(e, "Properties").(map[string]any)
			group, sched := "default", id+ev // SAM's name for the schedule
			if g, ok := p["GroupName"]; ok {
				group = resolve(g)
			}
			if n, ok := p["Name"]; ok {
				sched = resolve(n)
			} else if p["OmitName"] == true {
				sched = stack + "-" + id + ev + "-GENERATED"
			}
			add(id+"."+ev, "AWS::Scheduler::Schedule "+group+"/"+sched)
		}
	}
	add("METRICS_NAMESPACE", "metric namespace "+resolve(get(tpl.Globals["Function"]["Environment"], "Variables", "METRICS_NAMESPACE")))
	return names
}

// TestTwoStacksDoNotCollide: two stacks of the template in one account and
// region name nothing alike (log groups, the bus, the dashboard, alarms,
// schedules and their group, the metric namespace, ...), and the alarms
// and the dashboard read the stack's own metric namespace and schedule
// group.
func TestTwoStacksDoNotCollide(t *testing.T) {
	tpl := parseRaw(t)
	a, b := stackNames(t, tpl, "spaces-dev"), stackNames(t, tpl, "spaces-prod")
	var clash []string
	for n, what := range a {
		if _, ok := b[n]; ok {
			clash = append(clash, what+": "+n)
		}
	}
	sort.Strings(clash)
	for _, c := range clash {
		t.Errorf("both stacks name %s", c)
	}
	if len(a) < len(tpl.Resources)/2 {
		t.Errorf("only %d names resolved for %d resources", len(a), len(tpl.Resources))
	}

	// Every metric outside AWS's namespaces that an alarm or the dashboard
	// reads is the one the functions write to.
	own := fmt.Sprint(get(tpl.Globals["Function"]["Environment"], "Variables", "METRICS_NAMESPACE", "Fn::Sub"))
	if !strings.Contains(own, "${AWS::StackName}") {
		t.Errorf("METRICS_NAMESPACE %q does not derive from the stack name", own)
	}
	for _, id := range tpl.ofType("AWS::CloudWatch::Alarm") {
		for _, m := range alarmMetrics(tpl.Resources[id].Properties) {
			if ns, _, _ := strings.Cut(m, " "); !strings.HasPrefix(ns, "AWS/") && ns != own {
				t.Errorf("%s reads %s, not the stack's namespace %s", id, m, own)
			}
		}
	}
	body, _ := get(tpl.Resources["Dashboard"].Properties, "DashboardBody", "Fn::Sub").(string)
	for _, m := range regexp.MustCompile(`\["([^"]+)", "[A-Za-z]+"`).FindAllStringSubmatch(body, -1) {
		if !strings.HasPrefix(m[1], "AWS/") && m[1] != own {
			t.Errorf("the dashboard reads namespace %q, not the stack's %s", m[1], own)
		}
	}
	// A search of an AWS namespace names one of this stack's resources.
	for _, m := range regexp.MustCompile(`SEARCH\('\{([^,]+),([^']*)'`).FindAllStringSubmatch(body, -1) {
		ns := strings.Trim(m[1], `\"`)
		if ns != own && !(strings.HasPrefix(ns, "AWS/") && regexp.MustCompile(`[A-Za-z]+=\\"\$\{[A-Za-z]+\}\\"`).MatchString(m[2])) {
			t.Errorf("the dashboard searches namespace %q (%s), not the stack's %s nor one of its resources", ns, m[2], own)
		}
	}
	groups := slices.Collect(func(yield func(string) bool) {
		for _, ev := range tpl.Resources["SchedulerFunction"].Properties["Events"].(map[string]any) {
			if !yield(ref(get(ev, "Properties", "GroupName"))) {
				return
			}
		}
	})
	for _, m := range alarmMetrics(tpl.Resources["ScheduleTargetErrorsAlarm"].Properties) {
		if g := strings.Fields(m); len(g) != 3 || !slices.Contains(groups, g[2]) {
			t.Errorf("ScheduleTargetErrorsAlarm watches %q, not the schedules' group %v", m, groups)
		}
	}
}

// TestStackPrefixesDoNotOverlap: the agent client id prefix, the presence
// rule's match and the wake grant of one stack match its own agents'
// client ids and wake topics and never another stack's, however the stack
// names start one another.
func TestStackPrefixesDoNotOverlap(t *testing.T) {
	tpl := parseRaw(t)
	subOf := func(v any) string {
		s, _ := get(v, "Fn::Sub").(string)
		if s == "" {
			t.Fatalf("%v is not a !Sub", v)
		}
		return s
	}
	prefix := subOf(get(tpl.Resources["AgentFunction"].Properties, "Environment", "Variables", "AGENT_CLIENT_PREFIX"))
	sql := subOf(get(tpl.Resources["AgentPresenceRule"].Properties, "TopicRulePayload", "Sql"))
	m := regexp.MustCompile(`startswith\(clientId, '([^']*)'\)`).FindStringSubmatch(sql)
	if m == nil {
		t.Fatalf("AgentPresenceRule %q does not match client ids by prefix", sql)
	}
	rulePrefix := m[1]
	var grant string
	for _, g := range grants(tpl, ref(tpl.Resources["DiscoveryFunction"].Properties["Role"])) {
		if a, res, _ := strings.Cut(g, " "); a == "iot:Publish" {
			grant = res
		}
	}
	if !strings.HasSuffix(grant, "*") {
		t.Fatalf("DiscoveryFunction's iot:Publish grant %q is not a prefix", grant)
	}
	_, grantTopic, _ := strings.Cut(strings.TrimSuffix(grant, "*"), ":topic/")
	type stack struct{ prefix, rule, grant, client, wake string }
	at := func(name string) stack {
		r := strings.NewReplacer("${AWS::StackName}", name)
		s := stack{prefix: r.Replace(prefix), rule: r.Replace(rulePrefix), grant: r.Replace(grantTopic)}
		s.client = space.AgentClientID(s.prefix, "11111111-1111-4111-8111-111111111111")
		s.wake = space.WakeTopic(s.prefix, "11111111-1111-4111-8111-111111111111")
		return s
	}
	names := []string{"spaces", "spaces-dev", "spaces-dev-2", "spaces-", "spaces--dev", "s"}
	for _, a := range names {
		sa := at(a)
		if !strings.HasPrefix(sa.client, sa.rule) || !strings.HasPrefix(sa.wake, sa.grant) {
			t.Errorf("stack %s: its rule %q or grant %q misses its own client %q or wake topic %q", a, sa.rule, sa.grant, sa.client, sa.wake)
		}
		if id, ok := space.SpaceOfClient(sa.prefix, sa.client); !ok || id != "11111111-1111-4111-8111-111111111111" {
			t.Errorf("stack %s: its own client id %q is not its", a, sa.client)
		}
		for _, b := range names {
			if a == b {
				continue
			}
			sb := at(b)
			if strings.HasPrefix(sb.client, sa.prefix) || strings.HasPrefix(sb.client, sa.rule) {
				t.Errorf("stack %s's prefix %q or rule %q matches stack %s's client id %q", a, sa.prefix, sa.rule, b, sb.client)
			}
			if strings.HasPrefix(sb.wake, sa.grant) {
				t.Errorf("stack %s may publish on stack %s's wake topic %q (granted %q)", a, b, sb.wake, sa.grant)
			}
		}
	}
}
