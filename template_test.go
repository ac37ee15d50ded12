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
	served := append(httpapi.Routes(), console.Routes...)
	sort.Strings(served)
	sort.Strings(templateRoutes)
	if !slices.Equal(served, templateRoutes) {
		t.Errorf("routes differ\n template: %v\n mux:      %v", templateRoutes, served)
	}
}

// TestScheduleCoversEveryShardOnce: the scheduler's schedules split the
// minute's tick by shard (probing.ScheduleInput); together their ranges
// name every shard of the probe index exactly once, so that no space is
// probed twice a minute or never.
func TestScheduleCoversEveryShardOnce(t *testing.T) {
	tpl := parseRaw(t)
	shards := (*dynamostore.Store)(nil).ProbeShards()
	covered := make([]int, shards)
	events, _ := tpl.Resources["SchedulerFunction"].Properties["Events"].(map[string]any)
	for name, ev := range events {
		if get(ev, "Type") != "ScheduleV2" || get(ev, "Properties", "ScheduleExpression") != "rate(1 minute)" {
			t.Errorf("%s: want a ScheduleV2 event every minute", name)
			continue
		}
		raw, _ := get(ev, "Properties", "Input").(string)
		var in probing.ScheduleInput
		if err := json.Unmarshal([]byte(raw), &in); err != nil || in.Shards == nil {
			t.Errorf("%s: Input %q names no shard range: %v", name, raw, err)
			continue
		}
		for s := in.Shards.First; s <= in.Shards.Last; s++ {
			if s < 0 || s >= shards {
				t.Errorf("%s: shard %d is not in the index (0-%d)", name, s, shards-1)
				continue
			}
			covered[s]++
		}
	}
	for s, n := range covered {
		if n != 1 {
			t.Errorf("shard %d is fanned out by %d schedules, want 1", s, n)
		}
	}
}
