package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/shared/space"
)

// countingBody is a request body that counts the bytes read from it.
type countingBody struct {
	r    io.Reader
	read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

// TestAgentAuthenticatesBeforeReading: a request to an agent route with
// a large body and no credential, a malformed one, a forged one or
// another space's is refused without a byte of its body read.
func TestAgentAuthenticatesBeforeReading(t *testing.T) {
	e := newAgentEnv(t)
	org := "org-" + uuid.NewString()[:8]
	mine, boot := e.register(org, "mine")
	_, bootOther := e.register(org, "other")
	if code, _ := e.do("POST", "/agent/exchange", "", boot, ""); code != http.StatusOK {
		t.Fatal(code)
	}
	code, c := e.do("POST", "/agent/exchange", "", bootOther, "")
	if code != http.StatusOK {
		t.Fatal(code)
	}
	otherCred := c["credential"].(string)
	big := `{"items":[` + strings.Repeat(`{"name":"a","phase":"Active","labels":{},"created_at":"2026-12-01T00:00:00Z"},`, 300<<10/79) + `]}`
	if len(big) < 300_000 {
		t.Fatalf("the body is %d bytes, want 300 KB", len(big))
	}
	type try struct {
		name, path, auth string
		code             int
	}
	var tries []try
	for _, path := range []string{"/agent/spaces/" + mine + "/namespaces", "/agent/spaces/" + mine + "/revisions/" + uuid.NewString(), "/agent/spaces/" + mine + "/lease"} {
		tries = append(tries,
			try{"no credential", path, "", http.StatusUnauthorized},
			try{"not a credential", path, "Bearer not-a-credential", http.StatusUnauthorized},
			try{"another space's", path, "Bearer " + otherCred, http.StatusNotFound})
		if !strings.HasSuffix(path, "/lease") { // the lease's renewal is its check
			tries = append(tries, try{"forged", path, "Bearer " + space.NewAgentCredential(mine).Raw, http.StatusUnauthorized})
		} else { // its body is bounded first: nothing read past the bound
			tries = append(tries, try{"forged", path, "Bearer " + space.NewAgentCredential(mine).Raw, http.StatusRequestEntityTooLarge})
		}
	}
	for _, tr := range tries {
		body := &countingBody{r: strings.NewReader(big)}
		req := httptest.NewRequest("PUT", tr.path, body)
		req.ContentLength = int64(len(big))
		req.Header.Set("Content-Type", "application/json")
		if tr.auth != "" {
			req.Header.Set("Authorization", tr.auth)
		}
		rec := httptest.NewRecorder()
		e.agent.ServeHTTP(rec, req)
		if rec.Code != tr.code || !strings.Contains(rec.Header().Get("Content-Type"), "problem+json") {
			t.Errorf("PUT %s, %s: %d %s, want a %d problem", tr.path, tr.name, rec.Code, rec.Header().Get("Content-Type"), tr.code)
		}
		if body.read != 0 {
			t.Errorf("PUT %s, %s: %d bytes of the body read before the credential was checked", tr.path, tr.name, body.read)
		}
	}
	// A lease report of unknown length from a forged credential: read up
	// to the lease's small bound at most, then refused.
	for _, b := range []string{big, `{"agent_version":"v1","server_version":{"gitVersion":"v1.31.0","platform":"linux/amd64"}}`} {
		body := &countingBody{r: strings.NewReader(b)}
		req := httptest.NewRequest("PUT", "/agent/spaces/"+mine+"/lease", body)
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+space.NewAgentCredential(mine).Raw)
		rec := httptest.NewRecorder()
		e.agent.ServeHTTP(rec, req)
		want := http.StatusUnauthorized
		if len(b) > maxLeaseBody {
			want = http.StatusRequestEntityTooLarge
		}
		if rec.Code != want || body.read > maxLeaseBody+512 {
			t.Errorf("a forged lease of %d bytes, length unknown: %d after reading %d bytes, want %d after at most %d", len(b), rec.Code, body.read, want, maxLeaseBody+512)
		}
	}
}

// TestAgentReportsRefuseWhatWasNotAsked: a create outcome Spaces never
// asked for, and agent text holding control, bidi or zero-width
// characters, are refused with a problem and store nothing.
func TestAgentReportsRefuseWhatWasNotAsked(t *testing.T) {
	e := newAgentEnv(t)
	org := "org-" + uuid.NewString()[:8]
	mine, boot := e.register(org, "mine")
	code, c := e.do("POST", "/agent/exchange", "", boot, "")
	if code != http.StatusOK {
		t.Fatal(code)
	}
	cred := c["credential"].(string)
	if code, body := e.do("POST", "/space-discovery/"+mine+"/namespaces", org, "", `{"name":"team-a"}`); code != http.StatusAccepted {
		t.Fatalf("create: %d %v", code, body)
	}
	unchanged := func(what string) {
		t.Helper()
		code, l := e.do("GET", "/space-discovery/"+mine+"/namespaces", org, "", "")
		if code != http.StatusOK || len(l["items"].([]any)) != 0 || l["observed_at"] != nil || l["failed"] != nil ||
			len(l["pending"].([]any)) != 1 || l["pending"].([]any)[0].(map[string]any)["name"] != "team-a" {
			t.Errorf("%s: the list is %d %v, want nothing reported and team-a pending", what, code, l)
		}
	}
	items := `"items":[{"name":"default","phase":"Active","labels":{},"created_at":"2026-12-01T00:00:00Z"}]`
	for name, creates := range map[string]string{
		"never asked":                `[{"name":"never-asked","error":""}]`,
		"never asked beside one was": `[{"name":"team-a","error":""},{"name":"never-asked","error":"refused"}]`,
	} {
		code, body := e.do("PUT", "/agent/spaces/"+mine+"/namespaces", "", cred, `{`+items+`,"creates":`+creates+`}`)
		if code != http.StatusConflict || body["reason"] != "NotRequested" || body["status"] != float64(code) {
			t.Errorf("%s: %d %v, want a 409 NotRequested problem", name, code, body)
		}
		unchanged(name)
	}
	texts := map[string]string{"a bidi override": "denied \u202e", "a zero-width space": "den\u200bied", "a control character": "denied\u0007",
		"a line break": "denied\nby policy", "broken UTF-8": "denied \xff"}
	for name, text := range texts {
		code, body := e.do("PUT", "/agent/spaces/"+mine+"/namespaces", "", cred,
			`{`+items+`,"creates":[{"name":"team-a","error":`+jsonString(text)+`}]}`)
		if code != http.StatusUnprocessableEntity || body["status"] != float64(code) || !strings.Contains(fmt.Sprint(body), "creates[0].error") {
			t.Errorf("a create error with %s: %d %v, want a 422 problem on creates[0].error", name, code, body)
		}
		unchanged(name)
	}

	// A revision's error: the same rules; the revision stays pending and
	// handed.
	r := space.Revision{ID: uuid.NewString(), OrgID: org, EnvironmentID: uuid.NewString(), SpaceID: mine, Namespace: "team-a",
		Manifests: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app", "namespace": "team-a"}}},
		State:     space.RevisionPending, CreatedAt: e.now, UpdatedAt: e.now, Version: 1}
	if err := e.store.CreateRevision(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if err := e.store.HandRevision(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	for name, text := range texts {
		code, body := e.do("PUT", "/agent/spaces/"+mine+"/revisions/"+r.ID, "", cred, `{"version":1,"error":`+jsonString(text)+`}`)
		if code != http.StatusUnprocessableEntity || body["status"] != float64(code) || !strings.Contains(fmt.Sprint(body), "error") {
			t.Errorf("a revision error with %s: %d %v, want a 422 problem", name, code, body)
		}
		got, err := e.store.GetRevision(t.Context(), org, r.ID)
		if err != nil || got.State != space.RevisionPending || got.Reason != "" {
			t.Errorf("a revision error with %s: the revision reads %+v %v, want pending", name, got, err)
		}
	}
	// Still handed: the agent's correct report is taken.
	if code, body := e.do("PUT", "/agent/spaces/"+mine+"/revisions/"+r.ID, "", cred, `{"version":1,"error":"denied by policy"}`); code != http.StatusNoContent {
		t.Fatalf("a valid report after the refused ones: %d %v", code, body)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestAgentReportsCheapAndLimited: a namespaces report equal to the stored
// list writes one small UpdateItem and no list (the time observed moves);
// a changed list the agent was not asked for, within space.ReportInterval
// of the last, is refused 429 with Retry-After and stores nothing; a
// user's ask, a create's outcome, or the interval passing lets the next
// one in.
func TestAgentReportsCheapAndLimited(t *testing.T) {
	e := newAgentEnv(t)
	org := "org-" + uuid.NewString()[:8]
	mine, boot := e.register(org, "mine")
	code, c := e.do("POST", "/agent/exchange", "", boot, "")
	if code != http.StatusOK {
		t.Fatal(code)
	}
	cred := c["credential"].(string)
	report := func(names ...string) string {
		var items []string
		for _, n := range names {
			items = append(items, `{"name":"`+n+`","phase":"Active","labels":{"team":"x"},"created_at":"2026-12-01T00:00:00Z"}`)
		}
		return `{"items":[` + strings.Join(items, ",") + `],"creates":[]}`
	}
	put := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("PUT", "/agent/spaces/"+mine+"/namespaces", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+cred)
		rec := httptest.NewRecorder()
		e.agent.ServeHTTP(rec, req)
		return rec
	}
	// listed reads the stored list as the API answers it, without asking
	// the agent for it (a GET of the route records an ask).
	listed := func() ([]string, string) {
		t.Helper()
		l, err := e.store.ReportedNamespaces(t.Context(), org, mine)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range l.Items {
			names = append(names, it.Name)
		}
		at := ""
		if l.ObservedAt != nil {
			at = l.ObservedAt.Format(time.RFC3339)
		}
		return names, at
	}
	// The first list (none yet: asked) is written.
	if rec := put(report("default", "team-a")); rec.Code != http.StatusNoContent {
		t.Fatalf("first report: %d %s", rec.Code, rec.Body)
	}
	_, first := listed()

	// The same list, in another order, a second later: one UpdateItem, no
	// transaction; the list stands and its time moves.
	e.now = e.now.Add(time.Second)
	tx, upd := e.calls("TransactWriteItems"), e.calls("UpdateItem")
	if rec := put(report("team-a", "default")); rec.Code != http.StatusNoContent {
		t.Fatalf("unchanged report: %d %s", rec.Code, rec.Body)
	}
	if n := e.calls("TransactWriteItems") - tx; n != 0 {
		t.Errorf("an unchanged report ran %d transactions, want none", n)
	}
	if n := e.calls("UpdateItem") - upd; n != 1 {
		t.Errorf("an unchanged report made %d UpdateItem calls, want 1", n)
	}
	names, at := listed()
	if strings.Join(names, ",") != "default,team-a" || at == first || at != e.now.Format(time.RFC3339) {
		t.Errorf("after an unchanged report the list is %v observed %s, want default,team-a observed %s", names, at, e.now.Format(time.RFC3339))
	}

	// A changed list, unasked, 30 s after the last list: 429, nothing stored.
	e.now = e.now.Add(29 * time.Second)
	tx = e.calls("TransactWriteItems")
	rec := put(report("default", "team-a", "team-b"))
	var p map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "30" || p["reason"] != "ReportTooSoon" || p["status"] != float64(429) {
		t.Errorf("a changed list 30 s after the last: %d Retry-After %q %v, want a 429 ReportTooSoon problem, Retry-After 30", rec.Code, rec.Header().Get("Retry-After"), p)
	}
	if names, _ := listed(); strings.Join(names, ",") != "default,team-a" {
		t.Errorf("after a refused report the list is %v, want default,team-a", names)
	}
	// Refused by the transaction's condition: one attempt, no write.
	if n := e.calls("TransactWriteItems") - tx; n != 1 {
		t.Errorf("a refused report ran %d transactions, want 1 (refused by its condition)", n)
	}

	// A user asks for the list: the agent's answer is taken at once.
	if code, body := e.do("GET", "/space-discovery/"+mine+"/namespaces", org, "", ""); code != http.StatusOK {
		t.Fatalf("list: %d %v", code, body)
	}
	if rec := put(report("default", "team-a", "team-b")); rec.Code != http.StatusNoContent {
		t.Fatalf("a report after a user's ask: %d %s", rec.Code, rec.Body)
	}
	if names, _ := listed(); strings.Join(names, ",") != "default,team-a,team-b" {
		t.Errorf("after an asked report the list is %v", names)
	}
	// The next change, a second later and unasked, is too soon again…
	e.now = e.now.Add(time.Second)
	if rec := put(report("default")); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "59" {
		t.Errorf("a change 1 s after the last list: %d Retry-After %q, want 429, 59", rec.Code, rec.Header().Get("Retry-After"))
	}
	// …but not one that answers a pending create…
	if code, body := e.do("POST", "/space-discovery/"+mine+"/namespaces", org, "", `{"name":"team-c"}`); code != http.StatusAccepted {
		t.Fatalf("create: %d %v", code, body)
	}
	if rec := put(`{"items":[{"name":"team-c","phase":"Active","labels":{},"created_at":"2026-12-01T00:00:00Z"}],"creates":[{"name":"team-c","error":""}]}`); rec.Code != http.StatusNoContent {
		t.Errorf("a report answering a create: %d %s, want 204", rec.Code, rec.Body)
	}
	// …and once the interval has passed, a change is taken unasked.
	e.now = e.now.Add(space.ReportInterval)
	if rec := put(report("default", "team-c")); rec.Code != http.StatusNoContent {
		t.Errorf("a change a minute after the last list: %d %s, want 204", rec.Code, rec.Body)
	}
	if names, _ := listed(); strings.Join(names, ",") != "default,team-c" {
		t.Errorf("the list is %v, want default,team-c", names)
	}
}
