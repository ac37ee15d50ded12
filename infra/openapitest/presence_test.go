package openapitest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"spaces"
	"spaces/infra/openapitest"
	"spaces/shared/space"
)

// TestCredentialPresenceFollowsTheDocument: a credential answer with the
// presence block (space.PresenceEndpoint), and one without it, follow
// openapi.yaml; a presence block missing a field does not.
func TestCredentialPresenceFollowsTheDocument(t *testing.T) {
	v := openapitest.New(t, spaces.OpenAPI)
	id := "11111111-1111-4111-8111-111111111111"
	c := space.AgentCredential{Credential: "spa1." + id + "." + strings.Repeat("A", 43), SpaceID: id,
		ExpiresAt: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), LeaseIntervalSeconds: 35}
	check := func(t testing.TB, body []byte) {
		req := httptest.NewRequest("POST", "/agent/exchange", nil)
		req.Header.Set("Authorization", "Bearer spb1."+id+"."+strings.Repeat("A", 43))
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"},
			"Cache-Control": {"no-store"}, "X-Request-Id": {"r"}}}
		v.Check(t, req, nil, resp, body)
	}
	without, _ := json.Marshal(c)
	check(t, without)
	c.Presence = &space.PresenceEndpoint{Endpoint: "abc-ats.iot.us-east-1.amazonaws.com:443", Authorizer: "spaces-agent",
		ClientID: space.AgentClientID("spaces-", id), WakeTopic: space.WakeTopic("spaces-", id),
		KeepAliveSeconds: int(space.PresenceKeepAlive / time.Second), FallbackSeconds: int(space.PresenceFallback / time.Second)}
	with, _ := json.Marshal(c)
	check(t, with)

	// The lease answer carries the same block (an agent restarted on a
	// stored credential learns the channel from it).
	lease, _ := json.Marshal(map[string]any{"lease_interval_seconds": 35, "presence": c.Presence,
		"work": space.AgentWork{NamespaceCreates: []space.NamespaceCreate{}, Revisions: []space.AgentRevision{}}})
	leaseReq := httptest.NewRequest("PUT", "/agent/spaces/"+id+"/lease", strings.NewReader(`{"agent_version":"0.1.0","server_version":{"gitVersion":"v1.37.2","platform":"linux/amd64"}}`))
	leaseReq.Header.Set("Authorization", "Bearer "+c.Credential)
	leaseReq.Header.Set("Content-Type", "application/json")
	v.Check(t, leaseReq, []byte(`{"agent_version":"0.1.0","server_version":{"gitVersion":"v1.37.2","platform":"linux/amd64"}}`),
		&http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r"}}}, lease)

	broken := bytes.Replace(with, []byte(`"wake_topic"`), []byte(`"wake"`), 1)
	rec := &recorder{TB: t}
	check(rec, broken)
	if len(rec.failures()) == 0 {
		t.Error("a presence block without wake_topic (and with an unknown field) passed")
	}
}
