package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/auth"
	"spaces/shared/awsclient"
	"spaces/shared/cursor"
	"spaces/shared/dynamostore"
	"spaces/shared/kubens"
	"spaces/shared/space"
)

// agentEnv is the API on the real store (emulator), with a settable clock
// and every log line captured.
type agentEnv struct {
	t *testing.T
	h http.Handler
	// cluster serves the cluster-side routes (/space-discovery/...).
	cluster http.Handler
	agent   http.Handler
	store   *dynamostore.Store
	now     time.Time
	mu      sync.Mutex
	logs    bytes.Buffer
	probe   []string // spaces whose lease asked for an immediate check
	signer  *auth.Signer
	ops     map[string]int // the store's DynamoDB calls, by operation
}

// calls answers the store's DynamoDB calls of operation op so far.
func (e *agentEnv) calls(op string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ops[op]
}

func (e *agentEnv) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.Write(p)
}

type probeRecorder struct{ e *agentEnv }

func (p probeRecorder) ProbeRegistered(_ context.Context, s space.Space) error {
	p.e.probe = append(p.e.probe, s.OrgID+"/"+s.ID)
	return nil
}

func newAgentEnv(t *testing.T) *agentEnv {
	env := emulatortest.Start(t)
	e := &agentEnv{t: t, now: time.Now().UTC().Truncate(time.Second)}
	clock := func() time.Time { return e.now }
	e.ops = map[string]int{}
	count := func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("count", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			e.mu.Lock()
			e.ops[awsmiddleware.GetOperationName(ctx)]++
			e.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
	db := dynamodb.New(awsclient.DynamoDB(env.Config, env.Endpoint).Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, count) })
	e.store = dynamostore.New(db, env.Name(t, "SpacesTable"), dynamostore.WithClock(clock))
	svc := &space.Service{Store: e.store, Now: clock, NewID: uuid.NewString}
	cursors, err := cursor.New(cursor.KeyFromSecret("test-secret-test-secret-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	// The real verifier of the local stack: an agent's secret presented
	// on a user route meets what a user's token meets.
	cfg := auth.LocalConfig{KeyPath: filepath.Join(t.TempDir(), "key.pem")}
	verifier, err := auth.NewLocalVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e.signer, err = auth.NewSigner(cfg); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(e, &slog.HandlerOptions{Level: slog.LevelDebug}))
	api := &API{Spaces: svc, Auth: verifier, Cursors: cursors,
		Agents: &space.Agents{Store: e.store, Spaces: e.store, Now: clock, Work: e.store, Revisions: e.store},
		Log:    log,
		Probes: probeRecorder{e}}
	e.h = api.Handler()
	// The agent's routes (functions/agent, on its function URL).
	e.agent = (&API{AgentSide: true, Agents: api.Agents, Log: log, Probes: api.Probes}).Handler()
	// The cluster-side routes (functions/discovery) with no cloud: an
	// agent space's namespaces are its agent's.
	e.cluster = (&API{Spaces: svc, Auth: verifier, Log: log, ClusterSide: true,
		Discovery: &Discovery{Namespaces: &kubens.Service{Spaces: svc, Agent: e.store, Now: clock}}}).Handler()
	return e
}

func (e *agentEnv) do(method, path, org, bearer, body string) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if org != "" {
		tok, err := e.signer.Mint(org, "user", nil, time.Hour)
		if err != nil {
			e.t.Fatal(err)
		}
		bearer = tok
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	rec := httptest.NewRecorder()
	switch {
	case strings.HasPrefix(path, "/space-discovery/"):
		e.cluster.ServeHTTP(rec, req)
	case strings.HasPrefix(path, "/agent/"):
		e.agent.ServeHTTP(rec, req)
	default:
		e.h.ServeHTTP(rec, req)
	}
	var m map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			e.t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
	return rec.Code, m
}

// register makes an account and an agent space in org; it returns the
// space id and its bootstrap token.
func (e *agentEnv) register(org, cluster string) (string, string) {
	e.t.Helper()
	svc := &space.Service{Store: e.store, Now: func() time.Time { return e.now }, NewID: uuid.NewString}
	acct, err := svc.CreateAccount(e.t.Context(), org, space.NewAccountInput{Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		e.t.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1 // as a verification would
	if err := e.store.SaveAccount(e.t.Context(), acct); err != nil {
		e.t.Fatal(err)
	}
	code, body := e.do("POST", "/spaces", org, "", `{"provider":"aws","space_type":"kubernetes","cloud_account_id":"`+acct.ID+
		`","config":{"clusterName":"`+cluster+`","region":"us-east-1"},"connectivity":"agent"}`)
	if code != http.StatusCreated {
		e.t.Fatalf("register: %d %v", code, body)
	}
	if body["connectivity"] != "agent" || body["status"] != "unknown" || body["probe"].(map[string]any)["reason"] != space.ReasonAgentNotConnected {
		e.t.Fatalf("a new agent space reads %v", body)
	}
	b, _ := body["agent_bootstrap"].(map[string]any)
	tok, _ := b["token"].(string)
	exp, err := time.Parse(time.RFC3339, b["expires_at"].(string))
	if tok == "" || err != nil || exp.After(e.now.Add(time.Hour)) || !exp.After(e.now) {
		e.t.Fatalf("bootstrap %v", b)
	}
	// The token is in the bootstrap Secret's manifest, never in the
	// command (shell history, ps, CI logs), which reads it on stdin.
	if install, _ := b["install"].(string); install != "kubectl apply -f spaces-agent.yaml -f -" {
		e.t.Fatalf("install command %q", install)
	}
	if m, _ := b["manifest"].(string); !strings.Contains(m, "\n  token: \""+tok+"\"\n") || !strings.Contains(m, "\nkind: Secret\n") {
		e.t.Fatalf("bootstrap manifest %q", m)
	}
	return body["id"].(string), tok
}

func (e *agentEnv) agentItem(id string) map[string]any {
	l, err := e.store.GetLease(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := json.Marshal(l)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

const lease = `{"agent_version":"0.1.0","server_version":{"gitVersion":"v1.37.2","platform":"linux/amd64"}}`

func TestAgentBootstrapExchangeRenewLease(t *testing.T) {
	e := newAgentEnv(t)
	org := "org-" + uuid.NewString()[:8]
	id, boot := e.register(org, "c1")

	// A direct space has no bootstrap; registering one answers none.
	if code, body := e.do("POST", "/spaces/"+id+"/agent-bootstrap", "other-org", "", ""); code != http.StatusNotFound {
		t.Fatalf("another org re-issues: %d %v", code, body)
	}

	code, cred := e.do("POST", "/agent/exchange", "", boot, "")
	if code != http.StatusOK || cred["space_id"] != id || cred["lease_interval_seconds"] != float64(35) {
		t.Fatalf("exchange: %d %v", code, cred)
	}
	c1 := cred["credential"].(string)
	// Single use: the second exchange is refused, and logged as a reuse.
	if code, body := e.do("POST", "/agent/exchange", "", boot, ""); code != http.StatusUnauthorized {
		t.Fatalf("second exchange: %d %v", code, body)
	}
	if !strings.Contains(e.logs.String(), "a used bootstrap token was presented again") {
		t.Fatalf("the reuse is not logged:\n%s", e.logs.String())
	}
	// The credential is no bootstrap token, and the bootstrap no credential.
	if code, _ := e.do("POST", "/agent/exchange", "", c1, ""); code != http.StatusUnauthorized {
		t.Fatalf("a credential exchanged: %d", code)
	}
	if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", boot, lease); code != http.StatusUnauthorized {
		t.Fatalf("a bootstrap renewed the lease: %d", code)
	}
	if l := e.agentItem(id); l["RenewedAt"] != nil {
		t.Fatalf("a refused lease was stored: %v", l)
	}

	// The first lease asks for an immediate status check (after the
	// registration's own).
	if len(e.probe) != 1 {
		t.Fatalf("registration checks %v", e.probe)
	}
	e.probe = nil
	code, body := e.do("PUT", "/agent/spaces/"+id+"/lease", "", c1, lease)
	if code != http.StatusOK || body["lease_interval_seconds"] != float64(35) {
		t.Fatalf("lease: %d %v", code, body)
	}
	if len(e.probe) != 1 || e.probe[0] != org+"/"+id {
		t.Fatalf("immediate checks %v", e.probe)
	}
	l, _ := e.store.GetLease(t.Context(), id)
	if l.RenewedAt == nil || !l.RenewedAt.Equal(e.now) || l.AgentVersion != "0.1.0" || l.ServerVersion.GitVersion != "v1.37.2" {
		t.Fatalf("lease stored %+v", l)
	}
	if o := space.LeaseCadence(0).Outcome(l, e.now.Add(10*time.Second)); !o.OK() {
		t.Fatalf("a fresh lease reads %+v", o)
	}
	// A renewal on time asks for nothing more.
	e.now = e.now.Add(30 * time.Second)
	if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", c1, lease); code != http.StatusOK || len(e.probe) != 1 {
		t.Fatalf("renewal: %d, checks %v", code, e.probe)
	}

	// Renewal rotates the credential; the old one keeps working until it
	// expires (a lost answer must not lock the agent out).
	code, cred2 := e.do("POST", "/agent/credential", "", c1, "")
	c2, _ := cred2["credential"].(string)
	if code != http.StatusOK || c2 == "" || c2 == c1 {
		t.Fatalf("renew: %d %v", code, cred2)
	}
	for _, c := range []string{c1, c2} {
		if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", c, lease); code != http.StatusOK {
			it, _ := e.store.GetLease(t.Context(), id)
			t.Fatalf("lease after renewal with c1=%v: %d %+v\n%s", c == c1, code, it, e.logs.String()[max(0, e.logs.Len()-600):])
		}
	}
	// After its expiry a credential is refused.
	e.now = e.now.Add(space.AgentCredentialTTL + time.Second)
	if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", c1, lease); code != http.StatusUnauthorized {
		t.Fatalf("an expired credential renewed the lease: %d", code)
	}
	if code, _ := e.do("POST", "/agent/credential", "", c2, ""); code != http.StatusUnauthorized {
		t.Fatalf("an expired credential was renewed: %d", code)
	}

	// A re-issued bootstrap reinstalls the agent.
	code, nb := e.do("POST", "/spaces/"+id+"/agent-bootstrap", org, "", "")
	if m, _ := nb["manifest"].(string); code != http.StatusCreated || !strings.Contains(m, "token: \""+nb["token"].(string)+"\"") {
		t.Fatalf("reissue: %d %v", code, nb)
	}
	code, cred3 := e.do("POST", "/agent/exchange", "", nb["token"].(string), "")
	c3, _ := cred3["credential"].(string)
	if code != http.StatusOK || c3 == "" {
		t.Fatalf("exchange of the re-issued bootstrap: %d %v", code, cred3)
	}
	// An unused bootstrap expires.
	_, nb2 := e.do("POST", "/spaces/"+id+"/agent-bootstrap", org, "", "")
	e.now = e.now.Add(space.BootstrapTTL + time.Second)
	if code, _ := e.do("POST", "/agent/exchange", "", nb2["token"].(string), ""); code != http.StatusUnauthorized {
		t.Fatalf("an expired bootstrap was exchanged: %d", code)
	}

	// Deregistration refuses every token of the space from then on.
	if code, _ := e.do("DELETE", "/spaces/"+id, org, "", ""); code != http.StatusNoContent {
		t.Fatalf("deregister: %d", code)
	}
	if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", c3, lease); code != http.StatusUnauthorized {
		t.Fatalf("lease after deregistration: %d", code)
	}
	if code, _ := e.do("POST", "/agent/credential", "", c3, ""); code != http.StatusUnauthorized {
		t.Fatalf("renewal after deregistration: %d", code)
	}
	if code, _ := e.do("POST", "/spaces/"+id+"/agent-bootstrap", org, "", ""); code != http.StatusNotFound {
		t.Fatalf("bootstrap after deregistration: %d", code)
	}
	if l := e.agentItem(id); l["RenewedAt"] != nil {
		t.Fatalf("a refused lease recreated the agent item: %v", l)
	}

	// No token ever reaches the log.
	for _, tok := range []string{boot, c1, c2, c3, nb["token"].(string), nb2["token"].(string)} {
		secret := tok[strings.LastIndex(tok, ".")+1:]
		if strings.Contains(e.logs.String(), secret) {
			t.Fatalf("a token is in the log:\n%s", e.logs.String())
		}
	}
}

// TestHostileAgent: an agent's credential acts for its own space only. It
// tries another space of its org and of another org, with a valid report
// and with bad ones; every try is 4xx and changes nothing.
func TestHostileAgent(t *testing.T) {
	e := newAgentEnv(t)
	orgA, orgB := "org-"+uuid.NewString()[:8], "org-"+uuid.NewString()[:8]
	mine, boot := e.register(orgA, "mine")
	sameOrg, bootSame := e.register(orgA, "theirs")
	otherOrg, bootOther := e.register(orgB, "far")
	_, cred := e.do("POST", "/agent/exchange", "", boot, "")
	c := cred["credential"].(string)
	// The victims' agents are connected, so there is a lease to spoil.
	for _, b := range []struct{ id, boot string }{{sameOrg, bootSame}, {otherOrg, bootOther}} {
		_, vc := e.do("POST", "/agent/exchange", "", b.boot, "")
		if code, _ := e.do("PUT", "/agent/spaces/"+b.id+"/lease", "", vc["credential"].(string), lease); code != http.StatusOK {
			t.Fatalf("victim lease: %d", code)
		}
	}
	before := map[string]map[string]any{sameOrg: e.agentItem(sameOrg), otherOrg: e.agentItem(otherOrg)}
	e.now = e.now.Add(20 * time.Second)

	for _, victim := range []string{sameOrg, otherOrg} {
		for _, try := range []struct{ method, path, body string }{
			{"PUT", "/agent/spaces/" + victim + "/lease", lease},
			{"GET", "/space-discovery/" + victim + "/namespaces", ""},
			{"POST", "/space-discovery/" + victim + "/namespaces", `{"name":"pwned"}`},
			{"GET", "/spaces/" + victim, ""},
			{"POST", "/spaces/" + victim + "/agent-bootstrap", ""},
			{"POST", "/environments/" + uuid.NewString() + "/revisions", `{"manifests":[]}`},
			{"DELETE", "/spaces/" + victim, ""},
		} {
			code, body := e.do(try.method, try.path, "", c, try.body)
			if code < 400 || code >= 500 {
				t.Errorf("%s %s with another space's credential: %d %v", try.method, try.path, code, body)
			}
		}
		if got := e.agentItem(victim); got["RenewedAt"] != before[victim]["RenewedAt"] {
			t.Errorf("the hostile agent moved %s's lease: %v -> %v", victim, before[victim], got)
		}
	}
	// Its credential names its space: a forged token with another space id
	// and its secret is another token, refused.
	forged := strings.Replace(c, mine, sameOrg, 1)
	if code, _ := e.do("PUT", "/agent/spaces/"+sameOrg+"/lease", "", forged, lease); code != http.StatusUnauthorized {
		t.Errorf("a forged credential: %d", code)
	}

	// Bad input from an agent: a 4xx problem, and its own lease unchanged.
	mineBefore := e.agentItem(mine)
	for _, bad := range []struct {
		body string
		code int
	}{
		{`{}`, http.StatusUnprocessableEntity},
		{`{"agent_version":"0.1.0"}`, http.StatusUnprocessableEntity},
		{`{"agent_version":"0.1.0","server_version":{"gitVersion":"v1\n","platform":"linux/amd64"}}`, http.StatusUnprocessableEntity},
		{`{"agent_version":"` + strings.Repeat("9", 65) + `","server_version":{"gitVersion":"v1","platform":"p"}}`, http.StatusUnprocessableEntity},
		{`{"agent_version":"0.1.0","server_version":{"gitVersion":"v1","platform":"p"},"namespaces":["x"]}`, http.StatusBadRequest},
		{`{"agent_version":"0.1.0","agent_version":"0.2.0","server_version":{"gitVersion":"v1","platform":"p"}}`, http.StatusBadRequest},
		{`[1]`, http.StatusBadRequest},
		{`not json`, http.StatusBadRequest},
	} {
		code, body := e.do("PUT", "/agent/spaces/"+mine+"/lease", "", c, bad.body)
		if code != bad.code || body["type"] == nil || body["status"] != float64(code) {
			t.Errorf("%s: %d %v, want a %d problem", bad.body, code, body, bad.code)
		}
	}
	for _, h := range []string{"", "Basic " + c, "Bearer", "Bearer " + c + "x", "Bearer spa1.not-a-uuid.x"} {
		req := httptest.NewRequest("PUT", "/agent/spaces/"+mine+"/lease", strings.NewReader(lease))
		req.Header.Set("Content-Type", "application/json")
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		rec := httptest.NewRecorder()
		e.agent.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d", h, rec.Code)
		}
	}
	if code, _ := e.do("POST", "/agent/exchange", "", boot, `{"x":1}`); code != http.StatusBadRequest {
		t.Errorf("exchange with a body: %d", code)
	}
	if got := e.agentItem(mine); got["RenewedAt"] != mineBefore["RenewedAt"] {
		t.Errorf("bad input moved the lease: %v -> %v", mineBefore, got)
	}
	// A bad connectivity is refused at registration, and nothing is stored.
	code, body := e.do("POST", "/spaces", orgA, "", `{"provider":"aws","space_type":"kubernetes","cloud_account_id":"`+uuid.NewString()+
		`","config":{"clusterName":"x","region":"us-east-1"},"connectivity":"tunnel"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(toJSON(body), "connectivity") {
		t.Errorf("bad connectivity: %d %v", code, body)
	}
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestAgentLeaseWithPresence: a connected agent's fallback renewal (10
// minutes after the last) is no lapse and asks for no check; after a
// disconnect long enough ago, the renewal is one and does.
func TestAgentLeaseWithPresence(t *testing.T) {
	e := newAgentEnv(t)
	org := "org-" + uuid.NewString()[:8]
	id, boot := e.register(org, "c1")
	code, cred := e.do("POST", "/agent/exchange", "", boot, "")
	if code != http.StatusOK || cred["presence"] != nil {
		t.Fatalf("exchange on a stack without presence: %d %v", code, cred)
	}
	c := cred["credential"].(string)
	if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", c, lease); code != http.StatusOK {
		t.Fatalf("lease: %d", code)
	}
	e.probe = nil
	if _, err := e.store.RecordPresence(t.Context(), id, space.Presence{Connected: true, Version: 1, At: e.now}); err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(space.PresenceFallback)
	if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", c, lease); code != http.StatusOK || len(e.probe) != 0 {
		t.Fatalf("a connected agent's fallback renewal: %d, checks %v", code, e.probe)
	}
	if _, err := e.store.RecordPresence(t.Context(), id, space.Presence{Version: 1, At: e.now, Reason: "CONNECTION_LOST"}); err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(5 * time.Minute)
	if code, _ := e.do("PUT", "/agent/spaces/"+id+"/lease", "", c, lease); code != http.StatusOK || len(e.probe) != 1 {
		t.Fatalf("a renewal 5 minutes after a disconnect: %d, checks %v", code, e.probe)
	}
}
