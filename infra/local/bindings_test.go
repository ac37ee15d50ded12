package local

import (
	"fmt"
	"sort"
	"testing"
)

// TestBindingListsPageAndStayInTheirOrg: environments and policies list in
// id order across pages with opaque cursors, and another org sees none of
// them (404 on reads, empty lists).
func TestBindingListsPageAndStayInTheirOrg(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	other := newClient(t, st, "globex")
	spaceID := c.must(201, c.do("POST", "/spaces", registerBody("aws", c.account("aws"), "paged")))["id"].(string)
	var envs, policies []string
	for i := range 5 {
		envs = append(envs, c.must(201, c.do("POST", "/environments", map[string]any{"name": fmt.Sprintf("e%d", i), "space_id": spaceID}))["id"].(string))
		policies = append(policies, c.must(201, c.do("POST", "/autoscaler-policies", map[string]any{"space_id": spaceID,
			"target": map[string]any{"namespace": "web", "kind": "StatefulSet", "name": fmt.Sprintf("db-%d", i)}, "min_replicas": 0, "max_replicas": 2}))["id"].(string))
	}
	sort.Strings(envs)
	sort.Strings(policies)
	for route, want := range map[string][]string{"/environments": envs, "/autoscaler-policies": policies} {
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			q := route + "?limit=2"
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			m := c.must(200, c.do("GET", q, nil))
			for _, it := range m["items"].([]any) {
				got = append(got, it.(map[string]any)["id"].(string))
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			if pages > 5 {
				t.Fatalf("%s: too many pages", route)
			}
			cursor = next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: paged %v, want %v", route, got, want)
		}
		if n := len(other.must(200, other.do("GET", route, nil))["items"].([]any)); n != 0 {
			t.Errorf("%s: another org lists %d", route, n)
		}
		if r := other.do("GET", route+"/"+want[0], nil); r.status != 404 {
			t.Errorf("%s: another org reads %d", route, r.status)
		}
		// A cursor of one listing is refused by the other.
		m := c.must(200, c.do("GET", route+"?limit=1", nil))
		for other := range map[string]bool{"/environments": true, "/autoscaler-policies": true} {
			if other == route {
				continue
			}
			if r := c.do("GET", other+"?cursor="+m["next_cursor"].(string), nil); r.status != 400 {
				t.Errorf("%s cursor on %s: %d", route, other, r.status)
			}
		}
	}
	if r := other.do("PUT", "/environments/"+envs[0]+"/space", map[string]any{"space_id": spaceID}); r.status != 404 {
		t.Errorf("another org re-binds: %d %s", r.status, r.body)
	}
}
