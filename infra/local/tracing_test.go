package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"spaces/infra/minttest"
	"spaces/infra/simcloud"
	"spaces/infra/staticminter"
	"spaces/infra/testcluster"
	"spaces/infra/testwait"
	"spaces/shared/awsclient"
	"spaces/shared/cloudcall"
	"spaces/shared/dynamostore"
	"spaces/shared/kubecred"
	"spaces/shared/mint"
	"spaces/shared/space"
	"spaces/shared/tracing"
)

// span is one span as the stdout exporter writes it.
type span struct {
	Name        string
	SpanKind    int
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Links       []struct {
		SpanContext struct{ TraceID, SpanID string }
	}
	Attributes []struct {
		Key   string
		Value struct{ Value any }
	}
}

func (s span) attr(k string) any {
	for _, a := range s.Attributes {
		if a.Key == k {
			return a.Value.Value
		}
	}
	return nil
}

// readSpans reads the spans exported so far (a line still being written
// is left for the next read).
func readSpans(t *testing.T, path string) []span {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []span
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var s span
		if err := dec.Decode(&s); err != nil {
			return out
		}
		out = append(out, s)
	}
}

// lockedBuffer is a log sink written by the stack's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestTracesOfARegistrationAndAProbe runs the local stack with the stdout
// exporter writing to a file (OTEL_TRACES_EXPORTER=stdout,
// SPACES_TRACES_FILE), registers a space over HTTP and lets the scheduler
// tick, then reads the exported spans: the registration's request span
// and its DynamoDB transaction share one trace, and one probe's trace runs
// from the scheduler's tick through its SQS send, across the queue (the
// traceparent message attribute) to the prober's handling of the message,
// its mint and its GET /version, whose log line (at debug) carries that
// trace id;
// and a pushed revision's claim continues the push's trace.
func TestTracesOfARegistrationAProbeAndAClaim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spans.json")
	env := map[string]string{tracing.EnvExporter: "stdout", tracing.EnvFile: path}
	tr, err := tracing.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	cluster := testcluster.NewForTest(t)
	minter := &staticminter.Static{Lookup: func(space.Space) (kubecred.Credentials, bool) { return cluster.Credentials(), true }}
	logs := &lockedBuffer{}
	prefix := fmt.Sprintf("tr%s-", uuid.NewString()[:8])
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		// At debug: a probe that changes nothing has its own line only
		// there (its metrics go out with its batch's).
		Log:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Names:     func(id string) string { return prefix + id },
		Probing:   ProbingConfig{Interval: 2 * time.Second, Minter: minter},
		Revisions: RevisionsConfig{Minter: minter, Wait: time.Second},
		Tracing:   tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c := newClient(t, st, "acme")
	reg := c.must(201, c.do("POST", "/spaces", registerBody("aws", c.account("aws"), "traced")))
	id := reg["id"].(string)

	var regTrace, probeTrace string
	if err := testwait.UntilEvery(testwait.Timeout, 200*time.Millisecond, func() bool {
		spans := readSpans(t, path)
		byID := map[string]span{}
		for _, s := range spans {
			byID[s.SpanContext.SpanID] = s
		}
		parent := func(s span) span { return byID[s.Parent.SpanID] }
		for _, s := range spans {
			// The registration: its transaction under its request's span.
			if s.Name == "DynamoDB.TransactWriteItems" && parent(s).Name == "POST /spaces" &&
				parent(s).SpanContext.TraceID == s.SpanContext.TraceID {
				regTrace = s.SpanContext.TraceID
			}
			// A probe of the space: GET /version and the mint under the
			// message's span, itself under the scheduler's tick, beside the
			// tick's SQS send, and linked to the prober's invocation.
			if s.Name != "GET /version" {
				continue
			}
			msg := parent(s)
			tick := parent(msg)
			if msg.Name != "probe" || tick.Name != "scheduler" || len(msg.Links) != 1 || byID[msg.Links[0].SpanContext.SpanID].Name != "prober" {
				continue
			}
			minted, sent := false, false
			for _, o := range spans {
				minted = minted || (o.Name == "mint" && o.Parent.SpanID == msg.SpanContext.SpanID && o.attr("provider") == "aws")
				sent = sent || (o.Name == "SQS.SendMessageBatch" && o.Parent.SpanID == tick.SpanContext.SpanID)
			}
			if minted && sent && s.SpanContext.TraceID == tick.SpanContext.TraceID {
				probeTrace = s.SpanContext.TraceID
			}
		}
		return regTrace != "" && probeTrace != ""
	}); err != nil {
		t.Fatalf("%s: registration trace %q, probe trace %q; spans: %+v", err, regTrace, probeTrace, readSpans(t, path))
	}
	if regTrace == probeTrace {
		t.Errorf("the registration and the probe share trace %s", regTrace)
	}
	// The probe's own log line names its trace.
	found := false
	for _, l := range logs.lines(t) {
		if l["msg"] == "probe" && l["space_id"] == id && l["trace_id"] == probeTrace && l["span_id"] != nil {
			found = true
		}
	}
	if !found {
		t.Errorf("no probe log line of %s carries trace %s", id, probeTrace)
	}

	// A pushed revision's claim continues the push's trace across the
	// revisions queue.
	envID := c.must(201, c.do("POST", "/environments", map[string]any{"name": "web", "space_id": id}))["id"].(string)
	c.must(202, c.do("POST", "/environments/"+envID+"/revisions", map[string]any{"manifests": []map[string]any{
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "traced"}, "data": map[string]any{"a": "b"}}}}))
	claimed := false
	if err := testwait.UntilEvery(testwait.Timeout, 200*time.Millisecond, func() bool {
		spans := readSpans(t, path)
		byID := map[string]span{}
		for _, s := range spans {
			byID[s.SpanContext.SpanID] = s
		}
		for _, s := range spans {
			push := byID[s.Parent.SpanID]
			if s.Name == "claim" && push.Name == "POST /environments/{id}/revisions" && push.SpanContext.TraceID == s.SpanContext.TraceID &&
				len(s.Links) == 1 && byID[s.Links[0].SpanContext.SpanID].Name == "revisions" {
				claimed = true
			}
		}
		return claimed
	}); err != nil {
		t.Fatalf("no claim span under the push's span %s: %+v", err, readSpans(t, path))
	}
}

// TestCloudCallContinuesTheRequestTrace: a registration's cluster check is
// an SDK Invoke of the discovery function (shared/cloudcall). The Invoke is
// a client span under the request's span, and the discovery function's
// work on it continues that trace (the payload's traceparent), linked to
// the discovery invocation's own span.
func TestCloudCallContinuesTheRequestTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spans.json")
	env := map[string]string{tracing.EnvExporter: "stdout", tracing.EnvFile: path}
	tr, err := tracing.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	sc := simcloud.StartForTest(t, simcloud.Options{})
	minter := &mint.Minter{Providers: sc.Providers(), Trust: sc.Trust()}
	prefix := fmt.Sprintf("tc%s-", uuid.NewString()[:8])
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log:     slog.New(slog.DiscardHandler),
		Names:   func(id string) string { return prefix + id },
		Minter:  minter,
		Probing: ProbingConfig{Disabled: true},
		Tracing: tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	store := dynamostore.New(awsclient.DynamoDB(st.AWS, st.EmulatorURL), st.Table)
	minter.Grants, minter.Accounts = store, store

	c := newClient(t, st, "acme")
	acct := c.connect(sc, space.AWS, map[string]string{"roleArn": minttest.RoleARN})
	// No such cluster in the account: the discovery function's answer.
	r := c.do("POST", "/spaces", map[string]any{"provider": space.AWS, "space_type": "kubernetes",
		"cloud_account_id": acct, "config": map[string]string(minttest.Config(space.AWS, "nowhere"))})
	if r.status != 422 {
		t.Fatalf("registering a cluster that is not there: %d %s", r.status, r.body)
	}

	spans := readSpans(t, path)
	byID := map[string]span{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID] = s
	}
	var invoke, check span
	for _, s := range spans {
		switch s.Name {
		case "Lambda.Invoke":
			if p := byID[s.Parent.SpanID]; p.Name == "POST /spaces" && p.SpanContext.TraceID == s.SpanContext.TraceID {
				invoke = s
			}
		case cloudcall.OpCheckCluster:
			check = s
		}
	}
	if invoke.Name == "" {
		t.Fatalf("no Lambda.Invoke span under the POST /spaces span: %+v", spans)
	}
	request := byID[invoke.Parent.SpanID]
	if check.SpanContext.TraceID != request.SpanContext.TraceID || check.Parent.SpanID != request.SpanContext.SpanID {
		t.Errorf("the discovery function's check %+v does not continue the request's trace %+v", check, request)
	}
	if len(check.Links) != 1 || byID[check.Links[0].SpanContext.SpanID].Name != "discovery" {
		t.Errorf("the check is not linked to the discovery invocation's span: %+v", check.Links)
	}
}
