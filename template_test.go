package spaces_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"spaces/shared/console"
	"spaces/shared/dynamostore"
	"spaces/shared/httpapi"
	"spaces/shared/probing"
)

// TestTemplateMatchesTheCode: every function in template.yaml is built by the
// Makefile, has its folder and sample events, and the HTTP API's routes are
// exactly the routes the mux serves.
func TestTemplateMatchesTheCode(t *testing.T) {
	// The raw form: goformation's typed SAM model predates LoggingConfig.
	tpl := parseRaw(t)
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	fns := tpl.ofType("AWS::Serverless::Function")
	if len(fns) == 0 {
		t.Fatal("no functions in template.yaml")
	}
	var templateRoutes []string
	folders := map[string]bool{}
	for _, id := range fns {
		fn := tpl.Resources[id]
		if fn.Metadata["BuildMethod"] != "makefile" {
			t.Errorf("%s: Metadata.BuildMethod must be makefile", id)
		}
		if !regexp.MustCompile(`(?m)^build-` + id + `:`).Match(makefile) {
			t.Errorf("%s: the Makefile has no build-%s target", id, id)
		}
		dir := strings.ToLower(strings.TrimSuffix(id, "Function"))
		folders[dir] = true
		if _, err := os.Stat(filepath.Join("functions", dir, "main.go")); err != nil {
			t.Errorf("%s: functions/%s/main.go: %v", id, dir, err)
		}
		samples, _ := filepath.Glob(filepath.Join("events", dir, "*.json"))
		if len(samples) == 0 {
			t.Errorf("%s: no sample events in events/%s/", id, dir)
		}
		events, _ := fn.Properties["Events"].(map[string]any)
		for name, ev := range events {
			if get(ev, "Type") != "HttpApi" {
				continue
			}
			method, _ := get(ev, "Properties", "Method").(string)
			path, _ := get(ev, "Properties", "Path").(string)
			if method == "" || path == "" {
				t.Errorf("%s.%s: HttpApi event without Method and Path", id, name)
				continue
			}
			templateRoutes = append(templateRoutes, strings.ToUpper(method)+" "+path)
		}
	}
	entries, err := os.ReadDir("functions")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !folders[e.Name()] {
			t.Errorf("functions/%s is not deployed by template.yaml", e.Name())
		}
	}
	// The cluster-side routes are the discovery function's, and only its.
	var discoveryRoutes []string
	for name, ev := range tpl.Resources["DiscoveryFunction"].Properties["Events"].(map[string]any) {
		if get(ev, "Type") != "HttpApi" {
			t.Errorf("DiscoveryFunction.%s: not an HttpApi event", name)
			continue
		}
		discoveryRoutes = append(discoveryRoutes, fmt.Sprint(get(ev, "Properties", "Method"), " ", get(ev, "Properties", "Path")))
	}
	cluster := httpapi.ClusterRoutes()
	sort.Strings(cluster)
	sort.Strings(discoveryRoutes)
	if !slices.Equal(cluster, discoveryRoutes) {
		t.Errorf("DiscoveryFunction routes %v, want exactly the cluster-side routes %v", discoveryRoutes, cluster)
	}
	// The gateway serves every route but the agent's, which are on
	// AgentFunction's own URL (TestAgentRoutesOnTheFunctionURL).
	served := slices.DeleteFunc(append(httpapi.Routes(), console.Routes...),
		func(r string) bool { return slices.Contains(httpapi.AgentRoutes(), r) })
	sort.Strings(served)
	sort.Strings(templateRoutes)
	if !slices.Equal(served, templateRoutes) {
		t.Errorf("routes differ\n template: %v\n mux:      %v", templateRoutes, served)
	}
}

// TestScheduleCoversEveryShardOnce: the scheduler's schedules split the
// minute's tick by shard (probing.ScheduleInput); at every setting of
// ProbeSchedules, the schedules it enables are ProbeSchedules in number and
// their ranges name every shard of the probe index exactly once, so that no
// space is probed twice a minute or never.
func TestScheduleCoversEveryShardOnce(t *testing.T) {
	tpl := parseRaw(t)
	shards := (*dynamostore.Store)(nil).ProbeShards()
	settings, _ := tpl.Parameters["ProbeSchedules"]["AllowedValues"].([]any)
	if len(settings) == 0 {
		t.Fatal("ProbeSchedules has no AllowedValues")
	}
	events, _ := tpl.Resources["SchedulerFunction"].Properties["Events"].(map[string]any)
	// lookup resolves a property written !FindInMap [ProbeSchedules, !Ref ProbeSchedules, key].
	lookup := func(name, prop, setting string) (string, bool) {
		args, _ := get(events[name], "Properties", prop, "Fn::FindInMap").([]any)
		if len(args) != 3 || args[0] != "ProbeSchedules" || ref(args[1]) != "ProbeSchedules" {
			t.Errorf("%s: %s is %v, want !FindInMap [ProbeSchedules, !Ref ProbeSchedules, key]", name, prop, get(events[name], "Properties", prop))
			return "", false
		}
		key, _ := args[2].(string)
		v, ok := tpl.Mappings["ProbeSchedules"][setting][key].(string)
		if !ok {
			t.Errorf("%s: ProbeSchedules has no %s for %s", name, key, setting)
		}
		return v, ok
	}
	for _, sv := range settings {
		setting, _ := sv.(string)
		covered := make([]int, shards)
		enabled := 0
		for name, ev := range events {
			if get(ev, "Type") != "ScheduleV2" || get(ev, "Properties", "ScheduleExpression") != "rate(1 minute)" {
				t.Errorf("%s: want a ScheduleV2 event every minute", name)
				continue
			}
			state, ok1 := lookup(name, "State", setting)
			raw, ok2 := lookup(name, "Input", setting)
			if !ok1 || !ok2 {
				continue
			}
			var in probing.ScheduleInput
			if err := json.Unmarshal([]byte(raw), &in); err != nil || in.Shards == nil {
				t.Errorf("%s at %s: Input %q names no shard range: %v", name, setting, raw, err)
				continue
			}
			switch state {
			case "DISABLED":
				continue
			case "ENABLED":
				enabled++
			default:
				t.Errorf("%s at %s: State %q", name, setting, state)
				continue
			}
			for s := in.Shards.First; s <= in.Shards.Last; s++ {
				if s < 0 || s >= shards {
					t.Errorf("%s at %s: shard %d is not in the index (0-%d)", name, setting, s, shards-1)
					continue
				}
				covered[s]++
			}
		}
		if fmt.Sprint(enabled) != setting {
			t.Errorf("ProbeSchedules %s enables %d schedules", setting, enabled)
		}
		for s, n := range covered {
			if n != 1 {
				t.Errorf("ProbeSchedules %s: shard %d is fanned out by %d schedules, want 1", setting, s, n)
			}
		}
	}
}
