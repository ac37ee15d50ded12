package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestAgentCredentialReuseRevokes: a renewal whose answer was lost is
// retried with the old credential, which still works until the new one is
// used; from then on the old one, or the one before it, is a copy: its
// use is refused, revokes every credential of the space (the agent's
// current one too), and is logged and counted (AgentCredentialReuse).
// A new bootstrap starts a new family.
func TestAgentCredentialReuseRevokes(t *testing.T) {
	e := newAgentEnv(t)
	org := "org-" + uuid.NewString()[:8]
	id, boot := e.register(org, "mine")
	credential := func(path, bearer string) string {
		t.Helper()
		code, c := e.do("POST", path, "", bearer, "")
		if code != http.StatusOK {
			t.Fatalf("POST %s: %d %v", path, code, c)
		}
		return c["credential"].(string)
	}
	leaseCode := func(cred string) int {
		code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", cred, lease)
		return code
	}
	c1 := credential("/agent/exchange", boot)
	if code := leaseCode(c1); code != http.StatusOK {
		t.Fatal(code)
	}
	// A renewal whose answer is lost: c2 never reaches the agent, which
	// renews its lease and retries the renewal with c1.
	e.now = e.now.Add(12 * time.Hour)
	_ = credential("/agent/credential", c1)
	if code := leaseCode(c1); code != http.StatusOK {
		t.Fatalf("the old credential before the new one is used: %d, want 200", code)
	}
	c3 := credential("/agent/credential", c1)
	if code := leaseCode(c3); code != http.StatusOK {
		t.Fatal(code)
	}
	if strings.Contains(e.logText(), "AgentCredentialReuse") {
		t.Fatal("the agent's own retry was taken for a reuse")
	}

	// c1 again, after c3 was used: a copy.
	if code := leaseCode(c1); code != http.StatusUnauthorized {
		t.Fatalf("the superseded credential: %d, want 401", code)
	}
	if !strings.Contains(e.logText(), `"AgentCredentialReuse":1`) || !strings.Contains(e.logText(), "someone holds a copy") {
		t.Errorf("the reuse was not logged and counted:\n%s", e.logText())
	}
	// Every credential of the space is revoked, the agent's too.
	if code := leaseCode(c3); code != http.StatusUnauthorized {
		t.Errorf("the current credential after a reuse: %d, want 401", code)
	}
	if code, _ := e.do("POST", "/agent/credential", "", c3, ""); code != http.StatusUnauthorized {
		t.Errorf("renewing the current credential after a reuse: %d, want 401", code)
	}

	// A reinstall: a new family. Its credential before the previous (the
	// superseded one) is a copy too, presented at a renewal.
	code, b := e.do("POST", "/spaces/"+id+"/agent-bootstrap", org, "", "")
	if code != http.StatusCreated {
		t.Fatalf("reissue: %d %v", code, b)
	}
	d1 := credential("/agent/exchange", b["token"].(string))
	if code := leaseCode(d1); code != http.StatusOK {
		t.Fatalf("the reinstalled agent's credential: %d", code)
	}
	d2 := credential("/agent/credential", d1)
	d3 := credential("/agent/credential", d2)
	if code := leaseCode(d3); code != http.StatusOK {
		t.Fatal(code)
	}
	if code, _ := e.do("POST", "/agent/credential", "", d1, ""); code != http.StatusUnauthorized {
		t.Errorf("renewing with the credential before the previous: %d, want 401", code)
	}
	if n := strings.Count(e.logText(), `"AgentCredentialReuse":1`); n != 2 {
		t.Errorf("%d reuses counted, want 2", n)
	}
	if code := leaseCode(d3); code != http.StatusUnauthorized {
		t.Errorf("the reinstalled agent's current credential after a reuse: %d, want 401", code)
	}
}

// logText is every log line so far.
func (e *agentEnv) logText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.String()
}

// TestAgentBoundToItsCluster: an exchange naming the agent's cluster binds
// its credentials to it: a lease naming another cluster, or none, is
// refused (401, logged) and stores nothing; the same cluster's is taken.
// An exchange naming none leaves the credentials unbound (older agents).
func TestAgentBoundToItsCluster(t *testing.T) {
	e := newAgentEnv(t)
	org := "org-" + uuid.NewString()[:8]
	id, boot := e.register(org, "mine")
	cluster := `{"kube_system_uid":"6f1c1c1e-9a2b-4c3d-8e4f-5a6b7c8d9e0f","ca_sha256":"` + strings.Repeat("ab", 32) + `"}`
	other := `{"kube_system_uid":"00000000-9a2b-4c3d-8e4f-5a6b7c8d9e0f","ca_sha256":"` + strings.Repeat("ab", 32) + `"}`
	if code, b := e.do("POST", "/agent/exchange", "", boot, `{"cluster":{"kube_system_uid":"x/y","ca_sha256":"nothex"}}`); code != http.StatusUnprocessableEntity {
		t.Errorf("an exchange with a malformed cluster: %d %v, want 422", code, b)
	}
	code, c := e.do("POST", "/agent/exchange", "", boot, `{"cluster":`+cluster+`}`)
	if code != http.StatusOK {
		t.Fatalf("exchange: %d %v", code, c)
	}
	cred := c["credential"].(string)
	leaseWith := func(cl string) string {
		body := strings.TrimSuffix(lease, "}")
		if cl != "" {
			body += `,"cluster":` + cl
		}
		return body + "}"
	}
	if code, b := e.do("PUT", "/agent/spaces/"+id+"/lease", "", cred, leaseWith(cluster)); code != http.StatusOK {
		t.Fatalf("a lease from its cluster: %d %v", code, b)
	}
	before, err := e.store.GetLease(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(time.Minute)
	for name, cl := range map[string]string{"another cluster": other, "no cluster": ""} {
		if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", cred, leaseWith(cl)); code != http.StatusUnauthorized {
			t.Errorf("a lease naming %s: %d, want 401", name, code)
		}
	}
	if l, _ := e.store.GetLease(t.Context(), id); !l.RenewedAt.Equal(*before.RenewedAt) {
		t.Errorf("a refused lease was stored: renewed at %v, want %v", l.RenewedAt, before.RenewedAt)
	}
	if n := strings.Count(e.logText(), "a cluster other than its own"); n != 2 {
		t.Errorf("%d mismatches logged, want 2", n)
	}
	if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", cred, leaseWith(cluster)); code != http.StatusOK {
		t.Errorf("its own cluster's lease after the refusals: %d, want 200", code)
	}
	// Unbound: an exchange without a body.
	id2, boot2 := e.register(org, "old")
	code, c = e.do("POST", "/agent/exchange", "", boot2, "")
	if code != http.StatusOK {
		t.Fatal(code)
	}
	if code, _ := e.do("PUT", "/agent/spaces/"+id2+"/lease", "", c["credential"].(string), lease); code != http.StatusOK {
		t.Errorf("an unbound agent's lease: %d, want 200", code)
	}
}
