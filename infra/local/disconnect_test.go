package local

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"spaces/infra/testwait"
	"spaces/shared/space"
)

// TestDeregistrationEndsThePresenceConnection: an agent space's MQTT
// connection to the local IoT Core, accepted by the stack's authorizer,
// is closed by the space's deregistration cascade (IoT Core's
// DeleteConnection) with no policy refresh due, and the credential it
// presented connects no more.
func TestDeregistrationEndsThePresenceConnection(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes",
		"cloud_account_id": c.account("aws"), "config": configFor("aws", "private-dc"), "connectivity": "agent"}))
	id := reg["id"].(string)
	boot := reg["agent_bootstrap"].(map[string]any)["token"].(string)

	// The agent's exchange, as agent/client makes it: the answer names
	// the presence channel.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, st.AgentURL+"/agent/exchange", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+boot)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ex agentCredential
	if err := json.Unmarshal(body, &ex); err != nil || resp.StatusCode != http.StatusOK || ex.Presence == nil {
		t.Fatalf("exchange: %d %s", resp.StatusCode, body)
	}

	lost := make(chan error, 1)
	dial := func() (paho.Client, error) {
		host, _, _ := net.SplitHostPort(ex.Presence.Endpoint)
		opts := paho.NewClientOptions().AddBroker("tls://" + ex.Presence.Endpoint).
			SetClientID(ex.Presence.ClientID).
			SetUsername(agentUsername(ex.Presence, ex.Credential, ex.TokenSignature)).
			SetPassword(ex.Credential).
			SetTLSConfig(&tls.Config{RootCAs: st.MQTTRoots, ServerName: host, MinVersion: tls.VersionTLS12}).
			SetProtocolVersion(4).SetKeepAlive(space.PresenceKeepAlive).
			SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(5 * time.Second).
			SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err })
		m := paho.NewClient(opts)
		tok := m.Connect()
		if !tok.WaitTimeout(testwait.Timeout) {
			t.Fatal("CONNECT timed out")
		}
		return m, tok.Error()
	}
	m, err := dial()
	if err != nil {
		t.Fatalf("the agent's connection was refused: %v", err)
	}
	defer m.Disconnect(0)

	// Deregistered: the cascade ends the connection now, an hour before
	// the authorizer's refresh would have refused it.
	c.deregister(id)
	select {
	case err := <-lost:
		t.Logf("connection lost: %v", err)
	case <-time.After(testwait.Timeout):
		t.Fatalf("the deregistered space's connection is still open after %s", testwait.Timeout)
	}
	if m2, err := dial(); err == nil {
		m2.Disconnect(0)
		t.Fatal("the deregistered space's credential connects again")
	}
}

// TestCredentialReuseEndsThePresenceConnection: a superseded credential
// presented (someone holds a copy) revokes every credential of its space,
// and the space's MQTT connection, accepted with the earlier credential,
// is ended at once (IoT Core's DeleteConnection from the agent function),
// not at the authorizer's next refresh; the revoked credentials connect
// no more.
func TestCredentialReuseEndsThePresenceConnection(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes",
		"cloud_account_id": c.account("aws"), "config": configFor("aws", "private-dc"), "connectivity": "agent"}))
	id := reg["id"].(string)
	boot := reg["agent_bootstrap"].(map[string]any)["token"].(string)

	call := func(method, path, bearer string, body any) (int, []byte) {
		t.Helper()
		return agentCall(t, st, method, path, bearer, body)
	}
	var ex agentCredential
	code, body := call(http.MethodPost, "/agent/exchange", boot, nil)
	if err := json.Unmarshal(body, &ex); err != nil || code != http.StatusOK || ex.Presence == nil {
		t.Fatalf("exchange: %d %s", code, body)
	}
	first := ex.Credential

	lost := make(chan error, 1)
	dial := func(cred, sig string) (paho.Client, error) {
		host, _, _ := net.SplitHostPort(ex.Presence.Endpoint)
		opts := paho.NewClientOptions().AddBroker("tls://" + ex.Presence.Endpoint).
			SetClientID(ex.Presence.ClientID).
			SetUsername(agentUsername(ex.Presence, cred, sig)).
			SetPassword(cred).
			SetTLSConfig(&tls.Config{RootCAs: st.MQTTRoots, ServerName: host, MinVersion: tls.VersionTLS12}).
			SetProtocolVersion(4).SetKeepAlive(space.PresenceKeepAlive).
			SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(5 * time.Second).
			SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err })
		m := paho.NewClient(opts)
		tok := m.Connect()
		if !tok.WaitTimeout(testwait.Timeout) {
			t.Fatal("CONNECT timed out")
		}
		return m, tok.Error()
	}
	m, err := dial(first, ex.TokenSignature)
	if err != nil {
		t.Fatalf("the agent's connection was refused: %v", err)
	}
	defer m.Disconnect(0)

	// Renewed, and the renewed credential used: the first is superseded.
	code, body = call(http.MethodPost, "/agent/credential", first, nil)
	var renewed agentCredential
	if err := json.Unmarshal(body, &renewed); err != nil || code != http.StatusOK {
		t.Fatalf("renewal: %d %s", code, body)
	}
	lease := map[string]any{"agent_version": "0.1.0", "server_version": map[string]any{"gitVersion": "v1.34.2", "platform": "linux/amd64"}}
	if code, body := call(http.MethodPut, "/agent/spaces/"+id+"/lease", renewed.Credential, lease); code != http.StatusOK {
		t.Fatalf("lease with the renewed credential: %d %s", code, body)
	}
	select {
	case err := <-lost:
		t.Fatalf("the connection ended before any reuse: %v", err)
	default:
	}

	// The first credential again: a copy. 401, and the connection ends.
	if code, body := call(http.MethodPut, "/agent/spaces/"+id+"/lease", first, lease); code != http.StatusUnauthorized {
		t.Fatalf("the superseded credential: %d %s, want 401", code, body)
	}
	select {
	case err := <-lost:
		t.Logf("connection lost: %v", err)
	case <-time.After(testwait.Timeout):
		t.Fatalf("the revoked space's connection is still open after %s", testwait.Timeout)
	}
	for cred, sig := range map[string]string{first: ex.TokenSignature, renewed.Credential: renewed.TokenSignature} {
		if m2, err := dial(cred, sig); err == nil {
			m2.Disconnect(0)
			t.Fatal("a revoked credential connects again")
		}
	}
}
