package local

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
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

// TestDeletePolicy: DELETE /autoscaler-policies/{id} removes the policy and
// its link to its space (nothing of it is left in the table), at the
// If-Match version or any; again it is 404 and changes nothing; a
// detached policy (its space deregistered) is deleted the same way.
func TestDeletePolicy(t *testing.T) {
	st, _ := startCascadeStack(t, 100*time.Millisecond)
	c := newClient(t, st, "acme")
	acct := c.account("aws")
	create := func(spaceID, name string) string {
		return c.must(201, c.do("POST", "/autoscaler-policies", map[string]any{"space_id": spaceID,
			"target": map[string]any{"namespace": "web", "kind": "Deployment", "name": name}, "min_replicas": 1, "max_replicas": 3}))["id"].(string)
	}
	live := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "live")))["id"].(string)
	doomed := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "doomed")))["id"].(string)
	kept, byTag, anyVersion := create(live, "kept"), create(live, "by-tag"), create(live, "any")
	detached := create(doomed, "detached")
	c.deregister(doomed)
	if m := c.must(200, c.do("GET", "/autoscaler-policies/"+detached, nil)); m["state"] != "detached" {
		t.Fatalf("the policy on a deregistered space is %v", m["state"])
	}
	mentions := func(id string) int {
		n := 0
		for _, it := range registryItems(t, st) {
			if strings.Contains(fmt.Sprint(it["sk"]), id) {
				n++
			}
		}
		return n
	}
	for _, id := range []string{kept, byTag, anyVersion, detached} {
		if n := mentions(id); n != 2 {
			t.Fatalf("policy %s: %d items before the delete, want 2 (the policy and its link)", id, n)
		}
	}
	before := itemCount(t, st)
	r := c.do("GET", "/autoscaler-policies/"+byTag, nil)
	c.must(204, c.do("DELETE", "/autoscaler-policies/"+byTag, nil, "If-Match: "+r.header.Get("ETag")))
	c.must(204, c.do("DELETE", "/autoscaler-policies/"+anyVersion, nil))
	c.must(204, c.do("DELETE", "/autoscaler-policies/"+detached, nil, `If-Match: "2"`))
	for _, id := range []string{byTag, anyVersion, detached} {
		if n := mentions(id); n != 0 {
			t.Errorf("policy %s: %d items left after the delete", id, n)
		}
		if r := c.do("GET", "/autoscaler-policies/"+id, nil); r.status != 404 {
			t.Errorf("GET a deleted policy: %d", r.status)
		}
	}
	if after := itemCount(t, st); after != before-6 {
		t.Errorf("%d items after three deletes, was %d: want 6 fewer", after, before)
	}
	// Again: 404, nothing changed.
	before = itemCount(t, st)
	for _, id := range []string{byTag, anyVersion, detached} {
		if r := c.do("DELETE", "/autoscaler-policies/"+id, nil); r.status != 404 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("DELETE again: %d %s", r.status, r.body)
		}
	}
	if after := itemCount(t, st); after != before {
		t.Errorf("deleting again changed the table: %d items, was %d", after, before)
	}
	items := c.must(200, c.do("GET", "/autoscaler-policies", nil))["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["id"] != kept {
		t.Errorf("listed after the deletes: %v, want only %s", items, kept)
	}
	// The remaining policy's space is deregistered cleanly: its cascade
	// finds no link of a deleted policy.
	c.deregister(live)
	if m := c.must(200, c.do("GET", "/autoscaler-policies/"+kept, nil)); m["state"] != "detached" {
		t.Errorf("the kept policy is %v after its space was deregistered", m["state"])
	}
}
