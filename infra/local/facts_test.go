package local

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"spaces/shared/space"
)

// TestSpaceFacts: every space body carries its facts (the version the
// cluster answered, the serving certificate, the support computed at read
// time from the provider's file: a version the file does not list is
// unknown), and GET /spaces filters on them; bad filter values are refused
// by name with a problem document and change nothing. The facts are
// written here as the prober stores them (space.Run through the store;
// the prober's own path: TestCertificateFactWrittenOnlyOnChange and
// TestDemoShowsFacts).
func TestSpaceFacts(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "org-facts")
	acct := c.account("aws")
	now := time.Now().UTC()
	type fact struct {
		version string
		expires time.Duration // 0: no certificate
	}
	facts := map[string]fact{
		"old-soon":   {"v1.31.4-eks-2d5f260", 10 * 24 * time.Hour}, // EKS 1.31: all support ended 2026-11-26
		"old-later":  {"v1.31.9", 100 * 24 * time.Hour},
		"future":     {"v1.99.0", 20 * 24 * time.Hour}, // not in the file: unknown
		"agent-like": {"v1.99.1", 0},
	}
	ids := map[string]string{}
	for name, f := range facts {
		body := registerBody("aws", acct, name)
		body["name"] = name
		id := c.must(201, c.do("POST", "/spaces", body))["id"].(string)
		ids[name] = id
		_, err := st.Service.Store.UpdateSpace(context.Background(), "org-facts", id, space.Update[space.Space]{At: now,
			Apply: func(s space.Space) (space.Space, error) {
				s.Probe.LastProbeAt = &now
				s.Probe.ServerVersion = &space.ServerVersion{GitVersion: f.version, Platform: "linux/amd64"}
				if f.expires > 0 {
					s.Probe.Certificate = &space.Certificate{NotAfter: now.Add(f.expires).Truncate(time.Second), Issuer: "CN=kubernetes"}
				}
				return s, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
	}

	got := c.must(200, c.do("GET", "/spaces/"+ids["old-soon"], nil))["facts"].(map[string]any)
	sup := got["support"].(map[string]any)
	cert, _ := got["certificate"].(map[string]any)
	if got["kubernetes_version"] != "v1.31.4-eks-2d5f260" || sup["state"] != "unsupported" || sup["standard_ends"] != "2025-11-26" ||
		sup["extended_ends"] != "2026-11-26" || cert == nil || cert["issuer"] != "CN=kubernetes" {
		t.Errorf("facts of old-soon: %v", got)
	}
	got = c.must(200, c.do("GET", "/spaces/"+ids["future"], nil))["facts"].(map[string]any)
	if sup := got["support"].(map[string]any); sup["state"] != "unknown" || sup["standard_ends"] != nil {
		t.Errorf("a version the file does not list: %v, want unknown without dates", got)
	}

	names := func(path string) []string {
		var out []string
		for _, it := range c.must(200, c.do("GET", path, nil))["items"].([]any) {
			m := it.(map[string]any)
			if _, ok := m["facts"].(map[string]any)["support"]; !ok {
				t.Errorf("%s: an item without facts: %v", path, m)
			}
			out = append(out, m["name"].(string))
		}
		sort.Strings(out)
		return out
	}
	for path, want := range map[string][]string{
		"/spaces?version=1.31":                                          {"old-later", "old-soon"},
		"/spaces?version=1.99":                                          {"agent-like", "future"},
		"/spaces?version=1.30":                                          nil,
		"/spaces?support_ends_within_days=0":                            {"old-later", "old-soon"}, // unknown never matches
		"/spaces?certificate_expires_within_days=30":                    {"future", "old-soon"},    // none never matches
		"/spaces?certificate_expires_within_days=10":                    {"old-soon"},
		"/spaces?certificate_expires_within_days=9":                     nil,
		"/spaces?certificate_expires_within_days=30&version=1.31":       {"old-soon"},
		"/spaces?support_ends_within_days=3650&sort=name&limit=100":     {"old-later", "old-soon"},
		"/spaces?certificate_expires_within_days=3650&sort=-registered": {"future", "old-later", "old-soon"},
	} {
		if got := names(path); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}

	before := itemCount(t, st)
	for path, field := range map[string]string{
		"/spaces?version=1":                                                           "version",
		"/spaces?version=v1.31":                                                       "version",
		"/spaces?version=1.31.4":                                                      "version",
		"/spaces?version=":                                                            "version",
		"/spaces?support_ends_within_days=-1":                                         "support_ends_within_days",
		"/spaces?support_ends_within_days=3651":                                       "support_ends_within_days",
		"/spaces?support_ends_within_days=soon":                                       "support_ends_within_days",
		"/spaces?support_ends_within_days=":                                           "support_ends_within_days",
		"/spaces?certificate_expires_within_days=1.5":                                 "certificate_expires_within_days",
		"/spaces?certificate_expires_within_days=%2B30":                               "certificate_expires_within_days",
		"/spaces?certificate_expires_within_days=30&x=1":                              "x",
		"/spaces?certificate_expires_within_days=1&certificate_expires_within_days=2": "certificate_expires_within_days",
	} {
		r := c.do("GET", path, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"`+field+`"`) ||
			!strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("GET %s: %d %s %s, want a 400 problem naming %s", path, r.status, r.header.Get("Content-Type"), r.body, field)
		}
	}
	if itemCount(t, st) != before {
		t.Errorf("bad requests changed the table")
	}
}
