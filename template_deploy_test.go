package spaces_test

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSafeDeployments: every function publishes a version behind the
// alias "live" on each deploy and moves to it gradually (DeploymentConfig,
// a canary by default), rolled back by its own errors alarm; the API calls
// discovery through the alias too. (make sam-check checks in the
// transformed template that every trigger and route invokes the alias.)
func TestSafeDeployments(t *testing.T) {
	tpl := parseRaw(t)
	g := tpl.Globals["Function"]
	if g["AutoPublishAlias"] != "live" {
		t.Errorf("Globals AutoPublishAlias = %v, want live", g["AutoPublishAlias"])
	}
	if g["AutoPublishAliasAllProperties"] != true {
		t.Errorf("Globals AutoPublishAliasAllProperties = %v, want true: a change of Timeout, Role or LoggingConfig alone would publish no version", g["AutoPublishAliasAllProperties"])
	}
	if p := ref(get(g["DeploymentPreference"], "Type")); p != "DeploymentConfig" {
		t.Errorf("Globals DeploymentPreference.Type refers to %q, want the DeploymentConfig parameter", p)
	}
	if d := fmt.Sprint(tpl.Parameters["DeploymentConfig"]["Default"]); !strings.Contains(d, "Canary") {
		t.Errorf("DeploymentConfig defaults to %s, want a canary", d)
	}
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		p := tpl.Resources[fn].Properties
		if a, ok := p["AutoPublishAlias"]; ok && a != "live" {
			t.Errorf("%s: AutoPublishAlias %v, want the Globals' live", fn, a)
		}
		if get(p, "DeploymentPreference", "Enabled") == false {
			t.Errorf("%s: gradual deployment disabled", fn)
		}
		var alarms []string
		for _, a := range list(get(p, "DeploymentPreference", "Alarms")) {
			id := ref(a)
			if tpl.Resources[id].Type != "AWS::CloudWatch::Alarm" {
				t.Errorf("%s: rolls back on %v, not an alarm of the template", fn, a)
			}
			alarms = append(alarms, id)
		}
		if own := strings.TrimSuffix(fn, "Function") + "ErrorsAlarm"; !slices.Contains(alarms, own) {
			t.Errorf("%s: rolls back on %v, want its own %s", fn, alarms, own)
		}
		for _, a := range alarms {
			if got := rollbackDimensions(tpl.Resources[a].Properties); !slices.Equal(got, executedVersion(fn)) {
				t.Errorf("%s: rollback alarm %s measures %v, want the version the alias executed %v", fn, a, got, executedVersion(fn))
			}
		}
	}
	api := tpl.Resources["ApiFunction"].Properties
	if got := ref(get(api, "Environment", "Variables", "DISCOVERY_FUNCTION")); got != "DiscoveryFunction.Alias" {
		t.Errorf("ApiFunction DISCOVERY_FUNCTION refers to %q, want DiscoveryFunction.Alias", got)
	}
}

// executedVersion is what a rollback alarm of fn measures: the alias
// "live" and the version it executed, not every version of fn together.
func executedVersion(fn string) []string {
	return []string{"FunctionName=" + fn, "Resource=${" + fn + "}:live", "ExecutedVersion=" + fn + ".Version.Version"}
}

// rollbackDimensions lists an alarm's single metric's dimensions as
// Name=value ("" for an alarm of metric math, which has none of its own).
func rollbackDimensions(p map[string]any) []string {
	var out []string
	for _, d := range list(p["Dimensions"]) {
		v := get(d, "Value")
		s := ref(v)
		if sub, ok := get(v, "Fn::Sub").(string); ok {
			s = sub
		}
		if g, ok := get(v, "Fn::GetAtt").(string); ok {
			s = g
		} else if g := list(get(v, "Fn::GetAtt")); len(g) == 2 {
			s = fmt.Sprint(g[0], ".", g[1])
		}
		out = append(out, fmt.Sprint(get(d, "Name"), "=", s))
	}
	return out
}

// TestLambdaLogsAreJSON: Lambda writes its own lines as JSON (the
// functions' lines already are), and no function turns it back to text.
func TestLambdaLogsAreJSON(t *testing.T) {
	tpl := parseRaw(t)
	if f := get(tpl.Globals["Function"]["LoggingConfig"], "LogFormat"); f != "JSON" {
		t.Errorf("Globals LoggingConfig.LogFormat = %v, want JSON", f)
	}
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		if f := get(tpl.Resources[fn].Properties, "LoggingConfig", "LogFormat"); f != nil && f != "JSON" {
			t.Errorf("%s: LogFormat %v", fn, f)
		}
	}
}

// TestQueueTriggersRedriveAfterFive: every queue that triggers a function
// dead-letters after at least 5 receives, as Lambda advises
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
func TestQueueTriggersRedriveAfterFive(t *testing.T) {
	tpl := parseRaw(t)
	triggers := 0
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		events, _ := tpl.Resources[fn].Properties["Events"].(map[string]any)
		for name, ev := range events {
			if get(ev, "Type") != "SQS" {
				continue
			}
			triggers++
			q := ref(get(ev, "Properties", "Queue"))
			n, err := strconv.Atoi(fmt.Sprint(get(tpl.Resources[q].Properties, "RedrivePolicy", "maxReceiveCount")))
			if err != nil || n < 5 {
				t.Errorf("%s.%s: %s maxReceiveCount %v, want at least 5", fn, name, q, n)
			}
		}
	}
	if triggers == 0 {
		t.Fatal("no SQS trigger in the template")
	}
}

// samconfig reads samconfig.toml's "env.command.parameters" tables: each
// key's string value, parameter_overrides as its list (the file's form:
// quoted strings, one per line, # comments).
func samconfig(t *testing.T) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open("samconfig.toml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{"": {}}
	var table, list string
	quoted := regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case list != "":
			if line == "]" {
				list = ""
				continue
			}
			for _, m := range quoted.FindAllStringSubmatch(line, -1) {
				out[table][list] = append(out[table][list], m[1])
			}
		case strings.HasPrefix(line, "["):
			table = strings.Trim(line, "[]")
			out[table] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("samconfig.toml: %q", line)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if v == "[" {
				list = k
				continue
			}
			out[table][k] = []string{strings.Trim(v, `"`)}
		}
	}
	return out
}

// TestSamConfigEnvironments: samconfig.toml has a dev and a prod
// environment, each its own stack, each naming every parameter that has
// no default; every override is a parameter of the template with a value
// it accepts, and docs/deploying.md documents it.
func TestSamConfigEnvironments(t *testing.T) {
	tpl := parseRaw(t)
	cfg := samconfig(t)
	deploying, err := os.ReadFile("docs/deploying.md")
	if err != nil {
		t.Fatal(err)
	}
	stacks := map[string]string{}
	for _, env := range []string{"dev", "prod"} {
		stack := cfg[env+".global.parameters"]["stack_name"]
		if len(stack) != 1 || stack[0] == "" {
			t.Errorf("%s: no stack_name", env)
		} else if other, dup := stacks[stack[0]]; dup {
			t.Errorf("%s and %s deploy the same stack %s", env, other, stack[0])
		} else {
			stacks[stack[0]] = env
		}
		deploy := cfg[env+".deploy.parameters"]
		if deploy == nil {
			t.Errorf("%s: no deploy parameters", env)
			continue
		}
		given := map[string]bool{}
		for _, o := range deploy["parameter_overrides"] {
			name, value, _ := strings.Cut(o, "=")
			given[name] = true
			p, ok := tpl.Parameters[name]
			if !ok {
				t.Errorf("%s: overrides %s, not a parameter of the template", env, name)
				continue
			}
			if !strings.Contains(string(deploying), "`"+name+"`") {
				t.Errorf("%s: docs/deploying.md does not document %s", env, name)
			}
			if allowed := list(p["AllowedValues"]); allowed != nil && !slices.ContainsFunc(allowed, func(a any) bool { return fmt.Sprint(a) == value }) {
				t.Errorf("%s: %s=%s is not one of %v", env, name, value, allowed)
			}
			if p["Type"] == "Number" {
				n, err := strconv.ParseFloat(value, 64)
				lo, hasLo := p["MinValue"].(float64)
				hi, hasHi := p["MaxValue"].(float64)
				if err != nil || (hasLo && n < lo) || (hasHi && n > hi) {
					t.Errorf("%s: %s=%s is not a number within [%v, %v]", env, name, value, p["MinValue"], p["MaxValue"])
				}
			}
			if pat, ok := p["AllowedPattern"].(string); ok && !regexp.MustCompile(pat).MatchString(value) {
				t.Errorf("%s: %s=%s does not match %s", env, name, value, pat)
			}
		}
		for name, p := range tpl.Parameters {
			if _, ok := p["Default"]; !ok && !given[name] {
				t.Errorf("%s: %s has no default and no override", env, name)
			}
		}
	}
}
