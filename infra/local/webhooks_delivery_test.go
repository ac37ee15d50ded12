package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"spaces/shared/space"
)

// hookReceiver is a loopback HTTPS receiver: it answers with status (204
// unless set) and keeps every request.
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	status int
	got    []hookRequest
}

type hookRequest struct {
	header http.Header
	body   []byte
	at     time.Time // when it arrived
}

func newHookReceiver(t testing.TB) *hookReceiver {
	rc := &hookReceiver{status: 204}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, hookRequest{r.Header.Clone(), b, time.Now()})
		status := rc.status
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) setStatus(s int) { rc.mu.Lock(); rc.status = s; rc.mu.Unlock() }

func (rc *hookReceiver) requests() []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hookRequest(nil), rc.got...)
}

// webhookStack starts a stack whose webhook deliveries trust rc's CA.
func webhookStack(t testing.TB, rc *hookReceiver) *Stack {
	t.Helper()
	prefix := fmt.Sprintf("t%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log:      slog.New(slog.DiscardHandler),
		Probing:  ProbingConfig{Disabled: true},
		Names:    func(id string) string { return prefix + id },
		Webhooks: WebhooksConfig{Roots: rc.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone(), Wait: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

type hookBody struct {
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

// TestWebhookDeliveredFromTheStream: registering a space reaches a real
// HTTPS receiver as space.registered, from the table's stream, signed so
// that the Standard Webhooks reference library verifies it with the
// endpoint's secret; a receiver that is down (503) gets the deregistration
// once it is back, by the schedule's retry, with the same webhook-id, and
// the endpoint's log shows every attempt, in the store and through
// GET /webhook-endpoints/{id}/deliveries (newest first, paged).
func TestWebhookDeliveredFromTheStream(t *testing.T) {
	rc := newHookReceiver(t)
	st := webhookStack(t, rc)
	c := newClient(t, st, "acme")
	created := c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{
		"url": rc.srv.URL + "/hooks", "event_types": []string{"space.registered", "space.deregistered"}}))
	endpointID, secret := created["id"].(string), created["secret"].(string)
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}

	acct := c.account("aws")
	spaceID := c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "hooked")))["id"].(string)
	eventually(t, "space.registered at the receiver", func() bool { return len(rc.requests()) >= 1 })
	first := rc.requests()[0]
	if err := verifier.Verify(first.body, first.header); err != nil {
		t.Fatalf("the reference library refuses the delivery: %v\n%s", err, first.body)
	}
	var b hookBody
	if err := json.Unmarshal(first.body, &b); err != nil || b.Type != "space.registered" || b.Data["space_id"] != spaceID || b.Data["provider"] != "aws" {
		t.Fatalf("delivered %s (%v)", first.body, err)
	}

	// Down: the deregistration's first attempt gets 503.
	rc.setStatus(503)
	c.deregister(spaceID)
	eventually(t, "the deregistration's first attempt", func() bool { return len(rc.requests()) >= 2 })
	failedID := rc.requests()[1].header.Get("webhook-id")
	rc.setStatus(204)
	eventually(t, "the deregistration's retry", func() bool { return len(rc.requests()) >= 3 })
	retry := rc.requests()[2]
	if err := verifier.Verify(retry.body, retry.header); err != nil {
		t.Fatalf("the retry does not verify: %v", err)
	}
	if retry.header.Get("webhook-id") != failedID || failedID == first.header.Get("webhook-id") {
		t.Fatalf("webhook-ids: first %q, failed %q, retry %q", first.header.Get("webhook-id"), failedID, retry.header.Get("webhook-id"))
	}
	if err := json.Unmarshal(retry.body, &b); err != nil || b.Type != "space.deregistered" || b.Data["space_id"] != spaceID {
		t.Fatalf("retried %s (%v)", retry.body, err)
	}

	var log []space.DeliveryAttempt
	eventually(t, "three attempts in the endpoint's log", func() bool {
		log, _, err = st.webhookStore().Attempts(t.Context(), "acme", endpointID, space.Page{Limit: 10})
		return err == nil && len(log) == 3
	})
	// Newest first: delivered, the 503 (with its next attempt), delivered.
	if log[0].Verdict != space.Delivered || log[0].Attempt != 2 || log[1].Status != 503 || log[1].Verdict != space.RetryLater ||
		log[1].NextAt == nil || log[1].Attempt != 1 || log[2].Type != space.EventSpaceRegistered || log[2].Status != 204 {
		t.Errorf("log: %+v", log)
	}
	// The API answers the same log, newest first, paged.
	page := c.must(200, c.do("GET", "/webhook-endpoints/"+endpointID+"/deliveries?limit=2", nil))
	items, _ := page["items"].([]any)
	cursor, _ := page["next_cursor"].(string)
	if len(items) != 2 || cursor == "" {
		t.Fatalf("first page: %v", page)
	}
	newest, second := items[0].(map[string]any), items[1].(map[string]any)
	if newest["verdict"] != "delivered" || newest["attempt"] != 2.0 || newest["webhook_id"] != failedID ||
		second["status"] != 503.0 || second["verdict"] != "retry" || second["next_at"] == nil || second["latency_ms"] == nil {
		t.Errorf("first page: %v", items)
	}
	rest := c.must(200, c.do("GET", "/webhook-endpoints/"+endpointID+"/deliveries?limit=2&cursor="+cursor, nil))
	if items, _ := rest["items"].([]any); len(items) != 1 || items[0].(map[string]any)["type"] != "space.registered" || rest["next_cursor"] != nil {
		t.Errorf("second page: %v", rest)
	}
	// Each delivered body is what openapi.yaml's webhooks section says.
	for _, r := range rc.requests() {
		var h hookBody
		_ = json.Unmarshal(r.body, &h)
		if bad := validator.Webhook(h.Type, r.body); bad != nil {
			t.Errorf("%s does not follow openapi.yaml: %v\n%s", h.Type, bad, r.body)
		}
	}
	// Exactly once each, as far as this receiver is concerned.
	if n := len(rc.requests()); n != 3 {
		t.Errorf("%d requests; want 3", n)
	}
}

// TestWebhookTestEvent: POST /webhook-endpoints/{id}/test answers 202 with
// a webhook-id, and the receiver gets webhook.test with that id, signed so
// that the reference library verifies it, logged like any attempt; a
// paused endpoint is 409 and another org's 404, and neither sends one.
func TestWebhookTestEvent(t *testing.T) {
	rc := newHookReceiver(t)
	st := webhookStack(t, rc)
	c := newClient(t, st, "acme")
	created := c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{
		"url": rc.srv.URL + "/hooks", "event_types": []string{"space.registered"}}))
	endpointID, secret := created["id"].(string), created["secret"].(string)
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	newClient(t, st, "globex").must(404, newClient(t, st, "globex").do("POST", "/webhook-endpoints/"+endpointID+"/test", nil))
	c.must(404, c.do("POST", "/webhook-endpoints/0b6f3c1e-2d4a-4f8b-9c1d-7e5a3b2c1d0f/test", nil))
	c.must(200, c.do("POST", "/webhook-endpoints/"+endpointID+"/pause", nil))
	c.must(409, c.do("POST", "/webhook-endpoints/"+endpointID+"/test", nil))
	c.must(200, c.do("POST", "/webhook-endpoints/"+endpointID+"/resume", nil))

	id, _ := c.must(202, c.do("POST", "/webhook-endpoints/"+endpointID+"/test", nil))["webhook_id"].(string)
	if id == "" {
		t.Fatal("no webhook_id answered")
	}
	eventually(t, "webhook.test at the receiver", func() bool { return len(rc.requests()) >= 1 })
	got := rc.requests()[0]
	if err := verifier.Verify(got.body, got.header); err != nil {
		t.Fatalf("the reference library refuses the test event: %v\n%s", err, got.body)
	}
	var b hookBody
	if err := json.Unmarshal(got.body, &b); err != nil || b.Type != "webhook.test" || b.Data["endpoint_id"] != endpointID || got.header.Get("webhook-id") != id {
		t.Fatalf("delivered %s with id %q (%v); want webhook.test with id %q", got.body, got.header.Get("webhook-id"), err, id)
	}
	if bad := validator.Webhook(b.Type, got.body); bad != nil {
		t.Errorf("webhook.test does not follow openapi.yaml: %v\n%s", bad, got.body)
	}
	eventually(t, "the test event in the log", func() bool {
		log := c.must(200, c.do("GET", "/webhook-endpoints/"+endpointID+"/deliveries", nil))["items"].([]any)
		return len(log) == 1 && log[0].(map[string]any)["webhook_id"] == id && log[0].(map[string]any)["verdict"] == "delivered"
	})
	// Only the one request: the refused ones sent nothing.
	if n := len(rc.requests()); n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
}
