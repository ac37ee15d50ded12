package spaces_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/intrinsics"
	"github.com/pb33f/libopenapi"

	"spaces"
)

// rawTemplate is template.yaml as JSON with its intrinsic functions left as
// written ({"Ref": ...}, {"Fn::GetAtt": [...]}), so tests can check what the
// template refers to, not what some parameter default resolves to.
type rawTemplate struct {
	Globals    map[string]map[string]any
	Parameters map[string]map[string]any
	Mappings   map[string]map[string]map[string]any
	Resources  map[string]rawResource
	Outputs    map[string]map[string]any
}

type rawResource struct {
	Type                string
	Condition           string
	DeletionPolicy      string
	UpdateReplacePolicy string
	Metadata            map[string]any
	Properties          map[string]any
}

func parseRaw(t *testing.T) rawTemplate {
	t.Helper()
	js, err := intrinsics.ProcessYAML(spaces.Template, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	var tpl rawTemplate
	if err := json.Unmarshal(js, &tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

func (tpl rawTemplate) ofType(typ string) []string {
	var ids []string
	for id, r := range tpl.Resources {
		if r.Type == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// ref returns the logical id v refers to with Ref or Fn::GetAtt, or "".
func ref(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	switch g := m["Fn::GetAtt"].(type) {
	case []any:
		if len(g) == 2 {
			s, _ := g[0].(string)
			return s
		}
	case string:
		id, _, _ := strings.Cut(g, ".")
		return id
	}
	return ""
}

// get walks a path of map keys.
func get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// TestFunctionsLogWithRetention: every function writes to its own log group
// (LoggingConfig), and every log group, the API's access log included, keeps
// events for LogRetentionDays (default 30).
func TestFunctionsLogWithRetention(t *testing.T) {
	tpl := parseRaw(t)
	if d := tpl.Parameters["LogRetentionDays"]["Default"]; fmt.Sprint(d) != "30" {
		t.Errorf("LogRetentionDays default = %v, want 30", d)
	}
	groups := map[string]bool{}
	for _, id := range tpl.ofType("AWS::Logs::LogGroup") {
		groups[id] = true
		if got := ref(tpl.Resources[id].Properties["RetentionInDays"]); got != "LogRetentionDays" {
			t.Errorf("%s: RetentionInDays refers to %q, want LogRetentionDays", id, got)
		}
	}
	used := map[string]string{}
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		g := ref(get(tpl.Resources[fn].Properties, "LoggingConfig", "LogGroup"))
		if !groups[g] {
			t.Errorf("%s: LoggingConfig.LogGroup = %q, not a log group of the template", fn, g)
			continue
		}
		if other, dup := used[g]; dup {
			t.Errorf("%s and %s share the log group %s", fn, other, g)
		}
		used[g] = fn
	}
	api := tpl.Resources["HttpApi"].Properties
	if g := ref(get(api, "AccessLogSettings", "DestinationArn")); !groups[g] {
		t.Errorf("HttpApi access logs go to %q, not a log group of the template", g)
	}
	format, _ := get(api, "AccessLogSettings", "Format").(string)
	if !json.Valid([]byte(format)) || !strings.Contains(format, "$context.requestId") || !strings.Contains(format, "$context.status") {
		t.Errorf("HttpApi access log format is not one JSON object with the request id and status: %s", format)
	}
}

// alarmMetrics lists what an alarm watches as "Namespace MetricName
// dimension-ref" (a single metric or every MetricStat of its math).
func alarmMetrics(p map[string]any) []string {
	one := func(m map[string]any) string {
		ns := m["Namespace"]
		if sub, ok := get(ns, "Fn::Sub").(string); ok {
			ns = sub
		}
		s := fmt.Sprint(ns, " ", m["MetricName"])
		for _, d := range list(m["Dimensions"]) {
			v := get(d, "Value")
			if r := ref(v); r != "" {
				s += " " + r
			} else if sub, ok := get(v, "Fn::Sub").(string); ok {
				s += " " + sub
			} else {
				s += " " + fmt.Sprint(v)
			}
		}
		return s
	}
	var out []string
	if p["MetricName"] != nil {
		out = append(out, one(p))
	}
	for _, m := range list(p["Metrics"]) {
		if ms, ok := get(m, "MetricStat", "Metric").(map[string]any); ok {
			out = append(out, one(ms))
		}
	}
	return out
}

// TestAlarmsReachSomeone: every alarm notifies the alarm topic when it fires
// and when it clears, the topic takes an optional e-mail subscription, and
// the alarms the on-call needs exist: errors of every function, throttles,
// API 5xx rate and p99 latency, the stream's iterator age, the oldest message
// of the probe and revisions queues, the depth of every dead-letter queue,
// the schedule's target errors and the share of stale statuses.
func TestAlarmsReachSomeone(t *testing.T) {
	tpl := parseRaw(t)
	if tpl.Resources["AlarmTopic"].Type != "AWS::SNS::Topic" {
		t.Fatal("no AlarmTopic (AWS::SNS::Topic)")
	}
	sub := tpl.Resources["AlarmEmailSubscription"]
	if sub.Type != "AWS::SNS::Subscription" || sub.Condition != "HasAlarmEmail" || ref(sub.Properties["Endpoint"]) != "AlarmEmail" {
		t.Errorf("AlarmEmailSubscription = %+v, want an e-mail subscription to the AlarmEmail parameter, only when it is set", sub)
	}
	if d, ok := tpl.Parameters["AlarmEmail"]["Default"]; !ok || d != "" {
		t.Errorf("AlarmEmail default = %v, want empty (optional)", d)
	}
	operating, err := os.ReadFile("docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	watched := map[string]bool{}
	for _, id := range tpl.ofType("AWS::CloudWatch::Alarm") {
		p := tpl.Resources[id].Properties
		// docs/operating.md says what each alarm means and what to do.
		if !strings.Contains(string(operating), "`"+id+"`") {
			t.Errorf("%s: docs/operating.md does not explain it", id)
		}
		for _, key := range []string{"AlarmActions", "OKActions"} {
			acts := list(p[key])
			if len(acts) == 0 || !slices.ContainsFunc(acts, func(a any) bool { return ref(a) == "AlarmTopic" }) {
				t.Errorf("%s: %s does not notify AlarmTopic", id, key)
			}
		}
		if d, _ := p["AlarmDescription"].(string); d == "" {
			t.Errorf("%s: no AlarmDescription (the on-call reads it first)", id)
		}
		for _, m := range alarmMetrics(p) {
			watched[m] = true
		}
	}
	want := []string{
		"AWS/Lambda Throttles ApiFunction", "AWS/Lambda Throttles SchedulerFunction", "AWS/Lambda Throttles ProberFunction",
		"AWS/Lambda Throttles CascadeFunction", "AWS/Lambda Throttles RevisionsFunction", "AWS/Lambda Throttles ProvisionerFunction",
		"AWS/ApiGateway 5xx HttpApi", "AWS/ApiGateway Count HttpApi", "AWS/ApiGateway Latency HttpApi",
		"AWS/Lambda IteratorAge CascadeFunction",
		"AWS/SQS ApproximateAgeOfOldestMessage ProbeQueue", "AWS/SQS ApproximateAgeOfOldestMessage RevisionsQueue",
		"AWS/Scheduler TargetErrorCount ProbeScheduleGroup",
		"Spaces/${AWS::StackName} FanOutSize", "Spaces/${AWS::StackName} Ticks", "Spaces/${AWS::StackName} StaleTicks",
		// A throttle: the on-demand caps (OnDemandThroughput) or a hot
		// partition (every operation: TestEveryTableOperationThrottleIsWatched).
		"AWS/DynamoDB ThrottledRequests SpacesTable Query", "AWS/DynamoDB ThrottledRequests SpacesTable TransactWriteItems",
	}
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		// The alias's executed version (TestSafeDeployments).
		want = append(want, "AWS/Lambda Errors "+fn+" ${"+fn+"}:live "+fn)
	}
	// Every dead-letter target of a queue, and every failure destination.
	dlqs := map[string]bool{"SchedulerDLQ": true, "CascadeFailureQueue": true}
	for _, q := range tpl.ofType("AWS::SQS::Queue") {
		if d := ref(get(tpl.Resources[q].Properties, "RedrivePolicy", "deadLetterTargetArn")); d != "" {
			dlqs[d] = true
		}
	}
	for d := range dlqs {
		want = append(want, "AWS/SQS ApproximateNumberOfMessagesVisible "+d)
	}
	for _, w := range want {
		if !watched[w] {
			t.Errorf("no alarm watches %s", w)
		}
	}
	p99 := tpl.Resources["ApiLatencyAlarm"].Properties
	if p99["ExtendedStatistic"] != "p99" {
		t.Errorf("ApiLatencyAlarm statistic = %v, want p99", p99["ExtendedStatistic"])
	}
	if tpl.Resources["Dashboard"].Type != "AWS::CloudWatch::Dashboard" || tpl.Resources["Dashboard"].Condition != "HasDashboard" {
		t.Fatal("no Dashboard (AWS::CloudWatch::Dashboard) on the condition HasDashboard (parameter CreateDashboard)")
	}
	body, _ := get(tpl.Resources["Dashboard"].Properties, "DashboardBody", "Fn::Sub").(string)
	// A digit stands for every substitution: valid inside a string and as
	// a number (the stale threshold's annotation).
	body = regexp.MustCompile(`\$\{[^}]+\}`).ReplaceAllString(body, "0")
	if !json.Valid([]byte(body)) {
		t.Errorf("DashboardBody is not JSON once substituted: %s", body)
	}
	for _, m := range []string{`"Probes"`, `MetricName=\"ProbeFailures\"`, `"Transitions"`, `"FanOutDuration"`, `"ProbeLatency"`, `"StaleTicks"`,
		// Mint latency per cloud, as the prober emits it (a metric a cloud).
		`"MintLatencyAWS"`, `"MintLatencyGCP"`, `"MintLatencyAzure"`,
		`"ConsumedReadCapacityUnits"`, `"ConsumedWriteCapacityUnits"`, `MetricName=\"ThrottledRequests\"`} {
		if !strings.Contains(body, m) {
			t.Errorf("the dashboard does not show %s", m)
		}
	}
	// The stale share: StaleTicks over Ticks, a fan-out that reaches no
	// prober counting as all stale, and silence as breaching.
	stale := tpl.Resources["StaleStatusAlarm"].Properties
	var expr string
	for _, m := range list(stale["Metrics"]) {
		if e, ok := get(m, "Expression").(string); ok {
			expr = e
		}
	}
	if !strings.Contains(expr, "100 * FILL(stale, 0) / FILL(ticks, 1)") || !strings.Contains(expr, "IF(FILL(fanout, 0) > 0, 100, 0)") ||
		stale["TreatMissingData"] != "breaching" || ref(stale["Threshold"]) != "StaleProbeAlarmThreshold" {
		t.Errorf("StaleStatusAlarm = %v, want 100 * StaleTicks / Ticks (100 when ticks stop while the fan-out goes on) against StaleProbeAlarmThreshold, missing data breaching", stale)
	}
}

// TestEveryTableOperationThrottleIsWatched: the table's throttle alarm
// reads ThrottledRequests for every DynamoDB operation the service's code
// sends (the Go sources outside infra/, the local stack's), which counts a
// request throttled by the table or by any index (template.yaml,
// TableThrottleAlarm), so no index, nor one added later, throttles unseen;
// no alarm's math reads more than the 10 metrics CloudWatch allows.
func TestEveryTableOperationThrottleIsWatched(t *testing.T) {
	tpl := parseRaw(t)
	watched := map[string]bool{}
	for _, id := range tpl.ofType("AWS::CloudWatch::Alarm") {
		p := tpl.Resources[id].Properties
		if n := len(alarmMetrics(p)); p["Metrics"] != nil && n > 10 {
			t.Errorf("%s reads %d metrics, more than an alarm's 10", id, n)
		}
		for _, m := range alarmMetrics(p) {
			watched[m] = true
		}
	}
	call := regexp.MustCompile(`\.(GetItem|PutItem|UpdateItem|DeleteItem|Query|Scan|BatchGetItem|BatchWriteItem|TransactGetItems|TransactWriteItems|ExecuteStatement|BatchExecuteStatement|ExecuteTransaction)\(ctx|dynamodb\.New(Query|Scan)Paginator`)
	sent := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "infra" || strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			sent[m[1]+m[2]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sent["UpdateItem"] || !sent["TransactWriteItems"] || !sent["Query"] {
		t.Fatalf("operations found in the code %v: the scan misses the store's calls", sent)
	}
	for op := range sent {
		if w := "AWS/DynamoDB ThrottledRequests SpacesTable " + op; !watched[w] {
			t.Errorf("the code sends %s, and no alarm watches %s", op, w)
		}
	}
}

// TestTableIsOnDemand: the spaces table is on demand (no capacity is
// reserved: an idle stack pays nothing for it, and a burst needs no
// standing minimum), with no auto scaling left, and the table and each of
// its indexes (probe-digest, names, registered, status, since, problems,
// env-revisions and stopped-revisions) carry the on-demand caps, a cost guard, from the two
// parameters; without a cap on an index, its reads or writes would be
// unbounded.
func TestTableIsOnDemand(t *testing.T) {
	tpl := parseRaw(t)
	table := tpl.Resources["SpacesTable"].Properties
	if table["BillingMode"] != "PAY_PER_REQUEST" || table["ProvisionedThroughput"] != nil {
		t.Fatalf("SpacesTable BillingMode = %v with throughput %v, want PAY_PER_REQUEST and none", table["BillingMode"], table["ProvisionedThroughput"])
	}
	caps := map[string]any{"table": table["OnDemandThroughput"]}
	for _, g := range list(table["GlobalSecondaryIndexes"]) {
		if get(g, "ProvisionedThroughput") != nil {
			t.Errorf("index %v has a ProvisionedThroughput", get(g, "IndexName"))
		}
		caps["index "+fmt.Sprint(get(g, "IndexName"))] = get(g, "OnDemandThroughput")
	}
	if len(caps) != 9 {
		t.Fatalf("SpacesTable has indexes %v, want probe-digest, names, registered, status, since, problems, env-revisions and stopped-revisions (this test names each)", caps)
	}
	for name, c := range caps {
		for rw, param := range map[string]string{"MaxReadRequestUnits": "TableMaxReadRequestUnits", "MaxWriteRequestUnits": "TableMaxWriteRequestUnits"} {
			if got := ref(get(c, rw)); got != param {
				t.Errorf("%s: %s = %v, want Ref %s", name, rw, get(c, rw), param)
			}
		}
	}
	for _, param := range []string{"TableMaxReadRequestUnits", "TableMaxWriteRequestUnits"} {
		if tpl.Parameters[param]["Default"] == nil {
			t.Errorf("%s has no default", param)
		}
	}
	for _, typ := range []string{"AWS::ApplicationAutoScaling::ScalableTarget", "AWS::ApplicationAutoScaling::ScalingPolicy"} {
		if ids := tpl.ofType(typ); len(ids) != 0 {
			t.Errorf("%s left: %v", typ, ids)
		}
	}
}

// TestTracing: X-Ray active tracing is on for every function (Globals, and
// no function turns it off) but the scheduler and the prober, whose
// tracing is the ProbeTracing parameter (PassThrough by default: Lambda's
// sampling of their invocations costs more than the fleet's logs, and the
// ticks' traces are an idle stack's), the functions export
// their spans to it, and every function's role may send its traces.
func TestTracing(t *testing.T) {
	tpl := parseRaw(t)
	if got := tpl.Globals["Function"]["Tracing"]; got != "Active" {
		t.Errorf("Globals.Function.Tracing = %v, want Active", got)
	}
	// The functions send their own spans to X-Ray too (shared/tracing).
	if got := get(tpl.Globals["Function"]["Environment"], "Variables", "OTEL_TRACES_EXPORTER"); got != "xray" {
		t.Errorf("Globals OTEL_TRACES_EXPORTER = %v, want xray", got)
	}
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		p := tpl.Resources[fn].Properties
		if fn == "ProberFunction" || fn == "SchedulerFunction" {
			param := tpl.Parameters[ref(p["Tracing"])]
			if ref(p["Tracing"]) != "ProbeTracing" || param["Default"] != "PassThrough" || !slices.Contains(list(param["AllowedValues"]), any("Active")) {
				t.Errorf("%s: Tracing = %v (%+v), want the parameter ProbeTracing, PassThrough by default, Active allowed", fn, p["Tracing"], param)
			}
		} else if v, ok := p["Tracing"]; ok && v != "Active" {
			t.Errorf("%s: Tracing = %v, want Active (from Globals)", fn, v)
		}
		role := ref(p["Role"])
		granted := map[string]bool{}
		for _, st := range statements(tpl)[role] {
			for _, a := range list(st["Action"]) {
				if st["Effect"] == "Allow" && slices.Contains(list(st["Resource"]), any("*")) {
					granted[fmt.Sprint(a)] = true
				}
			}
		}
		for _, a := range []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords"} {
			if !granted[a] {
				t.Errorf("%s: its role %s is not allowed %s", fn, role, a)
			}
		}
	}
}

// statements returns every IAM statement of the template's roles, with the
// role it belongs to.
func statements(tpl rawTemplate) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, id := range tpl.ofType("AWS::IAM::Role") {
		for _, pol := range list(tpl.Resources[id].Properties["Policies"]) {
			for _, st := range list(get(pol, "PolicyDocument", "Statement")) {
				if m, ok := st.(map[string]any); ok {
					out[id] = append(out[id], m)
				}
			}
		}
	}
	return out
}

// TestLeastPrivilege: every function runs as a role of the template, so SAM
// adds no managed policy (AWSLambdaSQSQueueExecutionRole and
// AWSLambdaDynamoDBExecutionRole grant their actions on "*"); no statement
// grants anything on "*" but X-Ray's trace uploads, which have no resource
// type (no function asks STS for a web identity token as itself: AKS
// minting goes through the Azure federation role, docs/deploying.md);
// queue, stream, log, table, bus and secret actions name this stack's
// resources.
func TestLeastPrivilege(t *testing.T) {
	tpl := parseRaw(t)
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		p := tpl.Resources[fn].Properties
		role := ref(p["Role"])
		if tpl.Resources[role].Type != "AWS::IAM::Role" {
			t.Errorf("%s: Role = %q, want a role of the template (SAM's generated role adds wildcard managed policies)", fn, role)
		}
		if p["Policies"] != nil {
			t.Errorf("%s: has SAM Policies; put statements in its role", fn)
		}
	}
	for role, sts := range statements(tpl) {
		if mp := tpl.Resources[role].Properties["ManagedPolicyArns"]; mp != nil {
			t.Errorf("%s: managed policies %v", role, mp)
		}
		for _, st := range sts {
			actions := list(st["Action"])
			for _, r := range list(st["Resource"]) {
				if r != "*" {
					continue
				}
				if !slices.Equal(actions, []any{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}) {
					t.Errorf("%s %v: %v on \"*\"", role, st["Sid"], actions)
				}
			}
			for _, a := range actions {
				s, _ := a.(string)
				if strings.Contains(s, "*") {
					t.Errorf("%s %v: wildcard action %s", role, st["Sid"], s)
				}
				svc, _, _ := strings.Cut(s, ":")
				switch svc {
				case "sqs", "dynamodb", "logs", "events", "secretsmanager":
					for _, r := range list(st["Resource"]) {
						if id := ref(r); id == "" {
							if sub, ok := get(r, "Fn::Sub").(string); !ok || !strings.HasPrefix(sub, "${SpacesTable.Arn}/") {
								t.Errorf("%s %v: %s on %v, not a resource of this stack", role, st["Sid"], s, r)
							}
						}
					}
				}
			}
		}
	}
}

// TestSecretsStayOutOfTheEnvironment: no parameter carries a secret
// (NoEcho), no environment variable holds one, and the API reads the cursor
// secret's ARN from its environment and the value from Secrets Manager,
// with permission for that one secret.
func TestSecretsStayOutOfTheEnvironment(t *testing.T) {
	tpl := parseRaw(t)
	for name, p := range tpl.Parameters {
		if p["NoEcho"] == true {
			t.Errorf("parameter %s is NoEcho: a secret passed as a parameter lands in the function's configuration", name)
		}
	}
	secretLike := func(name string) bool {
		// The federated token settings are public identifiers (audience,
		// issuer URL, subject ARN), not credentials.
		if strings.HasPrefix(name, "AZURE_FEDERATED_TOKEN_") {
			return false
		}
		// An endpoint is an address (the console's OIDC token endpoint).
		if strings.HasSuffix(name, "_ENDPOINT") {
			return false
		}
		for _, w := range []string{"SECRET", "PASSWORD", "TOKEN", "KEY", "CREDENTIAL"} {
			if strings.Contains(name, w) {
				return true
			}
		}
		return false
	}
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		vars, _ := get(tpl.Resources[fn].Properties, "Environment", "Variables").(map[string]any)
		for name, v := range vars {
			switch {
			case !secretLike(name):
			case !strings.HasSuffix(name, "_ARN"):
				t.Errorf("%s: environment variable %s looks like a secret", fn, name)
			case tpl.Resources[ref(v)].Type != "AWS::SecretsManager::Secret":
				t.Errorf("%s: %s does not refer to a Secrets Manager secret", fn, name)
			}
		}
	}
	vars, _ := get(tpl.Resources["ApiFunction"].Properties, "Environment", "Variables").(map[string]any)
	if ref(vars["CURSOR_SECRET_ARN"]) != "CursorSecret" {
		t.Fatalf("ApiFunction: CURSOR_SECRET_ARN = %v, want a Ref to CursorSecret", vars["CURSOR_SECRET_ARN"])
	}
	granted := false
	for _, st := range statements(tpl)[ref(tpl.Resources["ApiFunction"].Properties["Role"])] {
		if slices.Contains(list(st["Action"]), any("secretsmanager:GetSecretValue")) {
			granted = slices.ContainsFunc(list(st["Resource"]), func(r any) bool { return ref(r) == "CursorSecret" })
		}
	}
	if !granted {
		t.Error("the API's role cannot read CursorSecret")
	}
}

// TestStatefulResourcesAreKept: every queue has an explicit deletion and
// replacement policy and retention; the table is retained and protected from
// deletion; the API has reserved concurrency and stage throttling from
// parameters.
func TestStatefulResourcesAreKept(t *testing.T) {
	tpl := parseRaw(t)
	for _, q := range tpl.ofType("AWS::SQS::Queue") {
		r := tpl.Resources[q]
		if r.DeletionPolicy == "" || r.UpdateReplacePolicy == "" {
			t.Errorf("%s: DeletionPolicy %q, UpdateReplacePolicy %q; want both explicit", q, r.DeletionPolicy, r.UpdateReplacePolicy)
		}
		if r.Properties["MessageRetentionPeriod"] == nil {
			t.Errorf("%s: no MessageRetentionPeriod", q)
		}
	}
	table := tpl.Resources["SpacesTable"]
	if table.DeletionPolicy != "Retain" || table.UpdateReplacePolicy != "Retain" || table.Properties["DeletionProtectionEnabled"] != true {
		t.Errorf("SpacesTable: %q/%q, deletion protection %v; want Retain, Retain, true", table.DeletionPolicy, table.UpdateReplacePolicy, table.Properties["DeletionProtectionEnabled"])
	}
	if ref(tpl.Resources["ApiFunction"].Properties["ReservedConcurrentExecutions"]) != "ApiReservedConcurrency" {
		t.Error("ApiFunction: ReservedConcurrentExecutions is not the ApiReservedConcurrency parameter")
	}
	rs := get(tpl.Resources["HttpApi"].Properties, "DefaultRouteSettings")
	if ref(get(rs, "ThrottlingRateLimit")) != "ThrottlingRateLimit" || ref(get(rs, "ThrottlingBurstLimit")) != "ThrottlingBurstLimit" {
		t.Errorf("HttpApi DefaultRouteSettings = %v, want rate and burst from parameters", rs)
	}
}

// TestGatewayEnforcesTheInternalScope: PATCH /spaces/{id}/status needs the
// spaces:internal scope at the gateway, not only in the function; no other
// route asks for a scope.
func TestGatewayEnforcesTheInternalScope(t *testing.T) {
	tpl := parseRaw(t)
	events, _ := tpl.Resources["ApiFunction"].Properties["Events"].(map[string]any)
	for name, ev := range events {
		p := get(ev, "Properties")
		scopes := list(get(p, "Auth", "AuthorizationScopes"))
		route := fmt.Sprint(get(p, "Method"), " ", get(p, "Path"))
		if route == "PATCH /spaces/{id}/status" {
			if !slices.Equal(scopes, []any{"spaces:internal"}) || get(p, "Auth", "Authorizer") != "PlatformJwt" {
				t.Errorf("%s (%s): Auth = %v, want PlatformJwt with scope spaces:internal", name, route, get(p, "Auth"))
			}
		} else if len(scopes) > 0 {
			t.Errorf("%s (%s): unexpected scopes %v", name, route, scopes)
		}
	}
}

// TestCORSLetsTheConsoleUseTheWholeAPI: with a console origin set, the
// gateway allows exactly that origin, every method the API serves, every
// request header openapi.yaml declares, and exposes every response header
// it declares; without one there is no CORS at all.
func TestCORSLetsTheConsoleUseTheWholeAPI(t *testing.T) {
	tpl := parseRaw(t)
	if d := tpl.Parameters["ConsoleOrigin"]["Default"]; d != "" {
		t.Errorf("ConsoleOrigin default = %v, want empty (no cross-origin access)", d)
	}
	cors := list(get(tpl.Resources["HttpApi"].Properties, "CorsConfiguration", "Fn::If"))
	if len(cors) != 3 || cors[0] != "HasConsoleOrigin" || ref(cors[2]) != "AWS::NoValue" {
		t.Fatalf("HttpApi CorsConfiguration = %v, want Fn::If [HasConsoleOrigin, config, AWS::NoValue]", cors)
	}
	cfg := cors[1]
	origins := list(get(cfg, "AllowOrigins"))
	if len(origins) != 1 || ref(origins[0]) != "ConsoleOrigin" {
		t.Errorf("AllowOrigins = %v, want exactly the ConsoleOrigin parameter", origins)
	}
	lower := func(key string) map[string]bool {
		out := map[string]bool{}
		for _, v := range list(get(cfg, key)) {
			out[strings.ToLower(fmt.Sprint(v))] = true
		}
		return out
	}
	methods, allowed, exposed := lower("AllowMethods"), lower("AllowHeaders"), lower("ExposeHeaders")

	doc, err := libopenapi.NewDocument(spaces.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	need := map[string]bool{"authorization": true, "content-type": true}
	var expose []string
	for _, item := range m.Model.Paths.PathItems.FromOldest() {
		params := item.Parameters
		for method, op := range item.GetOperations().FromOldest() {
			if !methods[strings.ToLower(method)] && method != "get" {
				t.Errorf("AllowMethods lacks %s", strings.ToUpper(method))
			}
			for _, p := range append(slices.Clone(params), op.Parameters...) {
				if p.In == "header" {
					need[strings.ToLower(p.Name)] = true
				}
			}
			for _, resp := range op.Responses.Codes.FromOldest() {
				for name := range resp.Headers.KeysFromOldest() {
					expose = append(expose, strings.ToLower(name))
				}
			}
		}
	}
	for h := range need {
		if !allowed[h] {
			t.Errorf("AllowHeaders lacks %s, which the API takes", h)
		}
	}
	for _, h := range expose {
		// Browsers always expose the CORS-safelisted response headers.
		if h != "www-authenticate" && !exposed[h] {
			t.Errorf("ExposeHeaders lacks %s, which the API sends", h)
		}
	}
}

// TestEverySampleEventIsExercised: each sample event under events/ is read
// by some test, by its path or by a glob of its folder, so that a sample
// cannot rot unnoticed.
func TestEverySampleEventIsExercised(t *testing.T) {
	var sources strings.Builder
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") && path != "template_ops_test.go" {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := filepath.Glob("events/*/*.json")
	if len(samples) == 0 {
		t.Fatal("no sample events")
	}
	for _, s := range samples {
		dir, name := filepath.Split(s)
		if !strings.Contains(sources.String(), s) && !strings.Contains(sources.String(), dir+"*.json") &&
			!strings.Contains(sources.String(), `"`+name+`"`) {
			t.Errorf("%s is read by no test", s)
		}
	}
}

// TestLambdaRulesAreMet: the settings that make AWS run the functions as
// the local stack does (infra/lambdarules, which reads them too).
//   - The scheduler is invoked asynchronously by EventBridge Scheduler: no
//     retry of a failed tick, no tick older than a minute, the records of
//     dropped ticks in a queue its role may send to, and an alarm on
//     AsyncEventsDropped.
//   - Only the provisioner, whose chain of steps per job outlives Lambda's
//     16 invocations and is bounded by the job's own deadline, allows the
//     recursive loop.
//   - Timeouts nest: the discovery function, invoked synchronously by the
//     API with the API's deadline handed down, may run as long as the API,
//     and the API ends before the HTTP API's 30 s integration limit.
func TestLambdaRulesAreMet(t *testing.T) {
	tpl := parseRaw(t)
	sched := tpl.Resources["SchedulerFunction"].Properties
	eic, _ := sched["EventInvokeConfig"].(map[string]any)
	if r, _ := eic["MaximumRetryAttempts"].(float64); eic == nil || eic["MaximumRetryAttempts"] == nil || r != 0 {
		t.Errorf("SchedulerFunction EventInvokeConfig.MaximumRetryAttempts = %v, want 0 (a late retry is a second fan-out)", eic["MaximumRetryAttempts"])
	}
	if age, _ := eic["MaximumEventAgeInSeconds"].(float64); age < 60 || age > 120 {
		t.Errorf("SchedulerFunction EventInvokeConfig.MaximumEventAgeInSeconds = %v, want at most two minutes", eic["MaximumEventAgeInSeconds"])
	}
	dest := ref(get(eic, "DestinationConfig", "OnFailure", "Destination"))
	if get(eic, "DestinationConfig", "OnFailure", "Type") != "SQS" || tpl.Resources[dest].Type != "AWS::SQS::Queue" {
		t.Errorf("SchedulerFunction: on-failure destination %v, want an SQS queue of the template", get(eic, "DestinationConfig", "OnFailure"))
	}
	role := tpl.Resources[ref(sched["Role"])].Properties
	maySend := false
	for _, pol := range list(role["Policies"]) {
		for _, st := range list(get(pol, "PolicyDocument", "Statement")) {
			if get(st, "Action") == "sqs:SendMessage" && ref(get(st, "Resource")) == dest {
				maySend = true
			}
		}
	}
	if !maySend {
		t.Errorf("SchedulerFunction's role may not sqs:SendMessage to its on-failure destination %s", dest)
	}
	alarmed := false
	for _, id := range tpl.ofType("AWS::CloudWatch::Alarm") {
		if slices.Contains(alarmMetrics(tpl.Resources[id].Properties), "AWS/Lambda AsyncEventsDropped SchedulerFunction") {
			alarmed = true
		}
	}
	if !alarmed {
		t.Error("no alarm on the scheduler's AsyncEventsDropped")
	}

	for _, id := range tpl.ofType("AWS::Serverless::Function") {
		loop, _ := tpl.Resources[id].Properties["RecursiveLoop"].(string)
		if want := map[bool]string{true: "Allow", false: ""}[id == "ProvisionerFunction" || id == "WebhooksFunction"]; loop != want {
			t.Errorf("%s: RecursiveLoop %q, want %q", id, loop, want)
		}
	}

	timeout := func(id string) float64 {
		if v, ok := tpl.Resources[id].Properties["Timeout"].(float64); ok {
			return v
		}
		v, _ := tpl.Globals["Function"]["Timeout"].(float64)
		return v
	}
	if api, disc := timeout("ApiFunction"), timeout("DiscoveryFunction"); api == 0 || api >= 30 || disc < api {
		t.Errorf("timeouts: ApiFunction %v s, DiscoveryFunction %v s; want the API under 30 s and discovery at least the API's", api, disc)
	}
}
