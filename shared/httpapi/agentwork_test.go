package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/shared/space"
)

// TestAgentWork: the cluster-side work of an agent space through the API
// and the real store. A lease answer carries what waits (the namespace
// list wanted, creates, revisions handed); the agent's reports change its
// own space only, once: another space's agent (same org or not) is
// refused and changes nothing, bad reports are 4xx problems that change
// nothing, and a repeated report does nothing twice.
func TestAgentWork(t *testing.T) {
	e := newAgentEnv(t)
	orgA, orgB := "org-"+uuid.NewString()[:8], "org-"+uuid.NewString()[:8]
	mine, boot := e.register(orgA, "mine")
	sameOrg, bootSame := e.register(orgA, "theirs")
	otherOrg, bootOther := e.register(orgB, "far")
	cred := map[string]string{}
	for id, b := range map[string]string{mine: boot, sameOrg: bootSame, otherOrg: bootOther} {
		code, c := e.do("POST", "/agent/exchange", "", b, "")
		if code != http.StatusOK {
			t.Fatalf("exchange: %d %v", code, c)
		}
		cred[id] = c["credential"].(string)
	}
	renew := func(id string) map[string]any {
		t.Helper()
		code, body := e.do("PUT", "/agent/spaces/"+id+"/lease", "", cred[id], lease)
		if code != http.StatusOK {
			t.Fatalf("lease: %d %v", code, body)
		}
		return body["work"].(map[string]any)
	}
	namespaces := func() map[string]any {
		t.Helper()
		code, body := e.do("GET", "/space-discovery/"+mine+"/namespaces", orgA, "", "")
		if code != http.StatusOK {
			t.Fatalf("list: %d %v", code, body)
		}
		return body
	}

	// Connected, never reported: the list is wanted, nothing else waits.
	if w := renew(mine); w["namespaces_wanted"] != true || len(w["namespace_creates"].([]any)) != 0 || len(w["revisions"].([]any)) != 0 {
		t.Fatalf("first work: %v", w)
	}
	if l := namespaces(); len(l["items"].([]any)) != 0 || l["observed_at"] != nil {
		t.Fatalf("before any report: %v", l)
	}

	// Creates: validated as a direct space's; recorded (202) for the agent.
	if code, body := e.do("POST", "/space-discovery/"+mine+"/namespaces", orgA, "", `{"name":"Team_A"}`); code != http.StatusUnprocessableEntity {
		t.Fatalf("bad create: %d %v", code, body)
	}
	if code, body := e.do("POST", "/space-discovery/"+mine+"/namespaces", orgB, "", `{"name":"team-a"}`); code != http.StatusNotFound {
		t.Fatalf("another org's create: %d %v", code, body)
	}
	if l := namespaces(); l["pending"] != nil {
		t.Fatalf("refused creates were recorded: %v", l)
	}
	code, body := e.do("POST", "/space-discovery/"+mine+"/namespaces", orgA, "", `{"name":"team-a","labels":{"team":"a"}}`)
	if code != http.StatusAccepted || body["name"] != "team-a" || body["labels"].(map[string]any)["team"] != "a" {
		t.Fatalf("create: %d %v", code, body)
	}
	if code, body := e.do("POST", "/space-discovery/"+mine+"/namespaces", orgA, "", `{"name":"team-a"}`); code != http.StatusConflict {
		t.Fatalf("a create already pending: %d %v", code, body)
	}
	w := renew(mine)
	if cs := w["namespace_creates"].([]any); len(cs) != 1 || cs[0].(map[string]any)["name"] != "team-a" || w["namespaces_wanted"] != true {
		t.Fatalf("work with a create: %v", w)
	}

	report := `{"items":[{"name":"default","phase":"Active","labels":{},"created_at":"2026-12-01T00:00:00Z"},` +
		`{"name":"team-a","phase":"Active","labels":{"team":"a"},"created_at":"2026-12-02T00:00:00Z"}],"creates":[{"name":"team-a","error":""}]}`
	// Another space's agent, of the org or not, cannot report for mine;
	// mine's cannot report on another's path.
	for _, try := range []struct{ path, cred string }{
		{"/agent/spaces/" + mine + "/namespaces", cred[sameOrg]},
		{"/agent/spaces/" + mine + "/namespaces", cred[otherOrg]},
		{"/agent/spaces/" + sameOrg + "/namespaces", cred[mine]},
		{"/agent/spaces/" + otherOrg + "/namespaces", cred[mine]},
	} {
		if code, body := e.do("PUT", try.path, "", try.cred, report); code != http.StatusNotFound || body["type"] == nil {
			t.Errorf("PUT %s with another space's credential: %d %v", try.path, code, body)
		}
	}
	// Bad reports: a problem each, nothing stored.
	for _, bad := range []struct {
		body string
		code int
	}{
		{`{"items":[{"name":"Bad_Name","phase":"Active","labels":{}}],"creates":[]}`, http.StatusUnprocessableEntity},
		{`{"items":[{"name":"a","phase":"Active","labels":{"bad key!":"x"}}],"creates":[]}`, http.StatusUnprocessableEntity},
		{`{"items":[{"name":"a","phase":"Active"},{"name":"a","phase":"Active"}],"creates":[]}`, http.StatusUnprocessableEntity},
		{`{"items":[],"creates":[{"name":"-x-","error":""}]}`, http.StatusUnprocessableEntity},
		{`{"items":[],"creates":[],"extra":1}`, http.StatusBadRequest},
		{`{"items":"x"}`, http.StatusBadRequest},
		{`{"items":[{"name":"a","phase":"Active","created_at":"yesterday"}]}`, http.StatusUnprocessableEntity},
		{`{"items":[{"name":"a","phase":"Active","created_at":7}]}`, http.StatusBadRequest},
	} {
		code, body := e.do("PUT", "/agent/spaces/"+mine+"/namespaces", "", cred[mine], bad.body)
		if code != bad.code || body["type"] == nil || body["status"] != float64(code) {
			t.Errorf("%s: %d %v, want a %d problem", bad.body, code, body, bad.code)
		}
	}
	if l := namespaces(); len(l["items"].([]any)) != 0 || l["observed_at"] != nil || len(l["pending"].([]any)) != 1 {
		t.Fatalf("refused reports changed the list: %v", l)
	}
	// The report: stored, the create done; the same report again answers
	// a create no longer pending (409) and changes nothing.
	for i := range 2 {
		if code, body := e.do("PUT", "/agent/spaces/"+mine+"/namespaces", "", cred[mine], report); i == 0 && code != http.StatusNoContent ||
			i == 1 && (code != http.StatusConflict || body["reason"] != "NotRequested") {
			t.Fatalf("report %d: %d %v", i+1, code, body)
		}
		l := namespaces()
		items := l["items"].([]any)
		if len(items) != 2 || items[1].(map[string]any)["name"] != "team-a" || l["observed_at"] != e.now.Format(time.RFC3339) || l["pending"] != nil {
			t.Fatalf("after the report: %v", l)
		}
	}
	// A create the cluster refused shows under failed, with its message.
	if code, _ := e.do("POST", "/space-discovery/"+mine+"/namespaces", orgA, "", `{"name":"team-b"}`); code != http.StatusAccepted {
		t.Fatal(code)
	}
	refusedReport := strings.Replace(report, `"creates":[{"name":"team-a","error":""}]`, `"creates":[{"name":"team-b","error":"namespaces is forbidden"}]`, 1)
	if code, body := e.do("PUT", "/agent/spaces/"+mine+"/namespaces", "", cred[mine], refusedReport); code != http.StatusNoContent {
		t.Fatalf("report: %d %v", code, body)
	}
	if l := namespaces(); l["pending"] != nil || len(l["failed"].([]any)) != 1 || l["failed"].([]any)[0].(map[string]any)["message"] != "namespaces is forbidden" {
		t.Fatalf("after a refused create: %v", l)
	}
	// At most MaxPendingNamespaceCreates wait; one more is 409.
	for i := range space.MaxPendingNamespaceCreates {
		if code, body := e.do("POST", "/space-discovery/"+mine+"/namespaces", orgA, "", fmt.Sprintf(`{"name":"bulk-%d"}`, i)); code != http.StatusAccepted {
			t.Fatalf("create %d: %d %v", i, code, body)
		}
	}
	if code, body := e.do("POST", "/space-discovery/"+mine+"/namespaces", orgA, "", `{"name":"one-too-many"}`); code != http.StatusConflict {
		t.Fatalf("create past the bound: %d %v", code, body)
	}
	var done []string
	for i := range space.MaxPendingNamespaceCreates {
		done = append(done, fmt.Sprintf(`{"name":"bulk-%d","error":""}`, i))
	}
	if code, body := e.do("PUT", "/agent/spaces/"+mine+"/namespaces", "", cred[mine], `{"items":[],"creates":[`+strings.Join(done, ",")+`]}`); code != http.StatusNoContent {
		t.Fatalf("bulk report: %d %v", code, body)
	}
	listOnly := strings.Replace(report, `"creates":[{"name":"team-a","error":""}]`, `"creates":[]`, 1)
	e.now = e.now.Add(space.ReportInterval) // an unasked change of the list: one a ReportInterval
	if code, body := e.do("PUT", "/agent/spaces/"+mine+"/namespaces", "", cred[mine], listOnly); code != http.StatusNoContent {
		t.Fatalf("report: %d %v", code, body)
	}
	if l := namespaces(); l["pending"] != nil || len(l["items"].([]any)) != 2 {
		t.Fatalf("after the bulk creates: %v", l)
	}

	// Reported: a create of an existing namespace is 409, as a direct space's.
	if code, body := e.do("POST", "/space-discovery/"+mine+"/namespaces", orgA, "", `{"name":"team-a"}`); code != http.StatusConflict {
		t.Fatalf("a create of a reported namespace: %d %v", code, body)
	}
	// The list was asked for (the GETs above) at the report's instant:
	// wanted once more; a later renewal without an ask wants nothing.
	e.now = e.now.Add(time.Second)
	if code, _ := e.do("PUT", "/agent/spaces/"+mine+"/namespaces", "", cred[mine], `{"items":[],"creates":[]}`); code != http.StatusNoContent {
		t.Fatal(code)
	}
	if w := renew(mine); w["namespaces_wanted"] != false || len(w["namespace_creates"].([]any)) != 0 {
		t.Fatalf("nothing asked: %v", w)
	}
	e.now = e.now.Add(time.Second)
	namespaces()
	if w := renew(mine); w["namespaces_wanted"] != true {
		t.Fatalf("a user asked for the list: %v", w)
	}

	// Revisions handed to the agent (as the claimer does).
	push := func(manifestNS string) space.Revision {
		t.Helper()
		r := space.Revision{ID: uuid.NewString(), OrgID: orgA, EnvironmentID: uuid.NewString(), SpaceID: mine, Namespace: "team-a",
			Manifests: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app", "namespace": manifestNS}}},
			State:     space.RevisionPending, CreatedAt: e.now, UpdatedAt: e.now, Version: 1}
		if err := e.store.CreateRevision(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if err := e.store.HandRevision(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	rev := func(id string) space.Revision {
		t.Helper()
		r, err := e.store.GetRevision(t.Context(), orgA, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r1 := push("team-a")
	w = renew(mine)
	if rs := w["revisions"].([]any); len(rs) != 1 || rs[0].(map[string]any)["id"] != r1.ID || rs[0].(map[string]any)["version"] != float64(1) ||
		rs[0].(map[string]any)["namespace"] != "team-a" || len(rs[0].(map[string]any)["manifests"].([]any)) != 1 {
		t.Fatalf("work with a revision: %v", w)
	}
	ok := `{"version":1,"error":""}`
	for _, try := range []struct {
		path, cred string
		code       int
	}{
		// Another agent reporting on its own path: the revision is not its.
		{"/agent/spaces/" + sameOrg + "/revisions/" + r1.ID, cred[sameOrg], http.StatusConflict},
		{"/agent/spaces/" + otherOrg + "/revisions/" + r1.ID, cred[otherOrg], http.StatusConflict},
		// On mine's path, with its credential: not its space.
		{"/agent/spaces/" + mine + "/revisions/" + r1.ID, cred[sameOrg], http.StatusNotFound},
		{"/agent/spaces/" + mine + "/revisions/" + r1.ID, cred[otherOrg], http.StatusNotFound},
	} {
		if code, body := e.do("PUT", try.path, "", try.cred, ok); code != try.code || body["type"] == nil {
			t.Errorf("PUT %s with another space's credential: %d %v, want %d", try.path, code, body, try.code)
		}
	}
	for _, bad := range []struct {
		path, body string
		code       int
	}{
		{r1.ID, `{"version":0,"error":""}`, http.StatusUnprocessableEntity},
		{r1.ID, `{"version":2,"error":""}`, http.StatusConflict}, // not the version handed
		{r1.ID, `{"version":"1"}`, http.StatusBadRequest},
		{r1.ID, `{"version":1,"state":"deployed"}`, http.StatusBadRequest},
		{"not-an-id", ok, http.StatusUnprocessableEntity},
		{uuid.NewString(), ok, http.StatusConflict}, // never handed
	} {
		code, body := e.do("PUT", "/agent/spaces/"+mine+"/revisions/"+bad.path, "", cred[mine], bad.body)
		if code != bad.code || body["type"] == nil || body["status"] != float64(code) {
			t.Errorf("%s %s: %d %v, want a %d problem", bad.path, bad.body, code, body, bad.code)
		}
	}
	if r := rev(r1.ID); r.State != space.RevisionPending || r.Version != 1 {
		t.Fatalf("refused reports moved the revision: %+v", r)
	}
	if code, body := e.do("PUT", "/agent/spaces/"+mine+"/revisions/"+r1.ID, "", cred[mine], ok); code != http.StatusNoContent {
		t.Fatalf("report: %d %v", code, body)
	}
	if r := rev(r1.ID); r.State != space.RevisionDeployed || r.Reason != "" || r.Version != 2 {
		t.Fatalf("reported deployed: %+v", r)
	}
	// Again (a report whose answer was lost): 409, nothing written twice.
	if code, _ := e.do("PUT", "/agent/spaces/"+mine+"/revisions/"+r1.ID, "", cred[mine], ok); code != http.StatusConflict {
		t.Fatalf("repeated report: %d", code)
	}
	if r := rev(r1.ID); r.Version != 2 {
		t.Fatalf("a repeated report wrote: %+v", r)
	}

	// A failure carries the applier's message as the reason, cut as the
	// claimer cuts it.
	r2 := push("elsewhere")
	msg := `manifest 0 (ConfigMap app): namespace "elsewhere" is not the environment's namespace "team-a"` + strings.Repeat(".", 2000)
	if code, body := e.do("PUT", "/agent/spaces/"+mine+"/revisions/"+r2.ID, "", cred[mine], toJSON(map[string]any{"version": 1, "error": msg})); code != http.StatusNoContent {
		t.Fatalf("report: %d %v", code, body)
	}
	if r := rev(r2.ID); r.State != space.RevisionFailed || r.Reason != space.FailureReason(msg) {
		t.Fatalf("reported failed: %+v", r)
	}

	// A handed revision that moved on (here: stopped) is not carried, and
	// is dropped from the agent's item.
	r3 := push("team-a")
	if _, err := e.store.UpdateRevision(t.Context(), orgA, r3.ID, space.Update[space.Revision]{At: e.now,
		Apply: func(r space.Revision) (space.Revision, error) { r.State = space.RevisionStopped; return r, nil }}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if w := renew(mine); len(w["revisions"].([]any)) != 0 {
			t.Fatalf("a stopped revision was carried: %v", w)
		}
	}
	if code, _ := e.do("PUT", "/agent/spaces/"+mine+"/revisions/"+r3.ID, "", cred[mine], ok); code != http.StatusConflict {
		t.Fatalf("report of a dropped revision: %d", code)
	}
	if r := rev(r3.ID); r.State != space.RevisionStopped || r.Version != 2 {
		t.Fatalf("the dropped revision moved: %+v", r)
	}

	// Deregistered: the agent's reports are refused.
	if code, _ := e.do("DELETE", "/spaces/"+mine, orgA, "", ""); code != http.StatusNoContent {
		t.Fatal(code)
	}
	if code, _ := e.do("PUT", "/agent/spaces/"+mine+"/namespaces", "", cred[mine], `{"items":[],"creates":[]}`); code != http.StatusUnauthorized {
		t.Fatalf("report after deregistration: %d", code)
	}
}
