package local

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"spaces/infra/iotcore"
	"spaces/infra/testwait"
	"spaces/shared/space"
)

// agentCredential is an exchange's or renewal's answer, as an agent reads
// it.
type agentCredential struct {
	Credential     string                  `json:"credential"`
	TokenSignature string                  `json:"token_signature"`
	Presence       *space.PresenceEndpoint `json:"presence"`
}

// agentCall makes one request to the stack's agent URL with bearer.
func agentCall(t *testing.T, st *Stack, method, path, bearer string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, st.AgentURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// agentUsername is the MQTT username an agent presents (agent/client's
// presence.credentials): the authorizer's name and, when it signs, the
// credential's token and the given signature, URL-encoded.
func agentUsername(ep *space.PresenceEndpoint, cred, sig string) string {
	q := url.Values{"x-amz-customauthorizer-name": {ep.Authorizer}}
	if ep.TokenKeyName != "" {
		q.Set(ep.TokenKeyName, space.PresenceToken(cred))
		q.Set(iotcore.SignatureParam, sig)
	}
	return "?" + q.Encode()
}

// dialAgent opens one MQTT connection as ep's client with username and
// password, without retries; lost receives its loss.
func dialAgent(t *testing.T, st *Stack, ep *space.PresenceEndpoint, username, password string, lost chan<- error) (paho.Client, error) {
	t.Helper()
	host, _, _ := net.SplitHostPort(ep.Endpoint)
	opts := paho.NewClientOptions().AddBroker("tls://" + ep.Endpoint).
		SetClientID(ep.ClientID).SetUsername(username).SetPassword(password).
		SetTLSConfig(&tls.Config{RootCAs: st.MQTTRoots, ServerName: host, MinVersion: tls.VersionTLS12}).
		SetProtocolVersion(4).SetKeepAlive(space.PresenceKeepAlive).
		SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(5 * time.Second)
	if lost != nil {
		opts.SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err })
	}
	m := paho.NewClient(opts)
	tok := m.Connect()
	if !tok.WaitTimeout(testwait.Timeout) {
		t.Fatal("CONNECT timed out")
	}
	return m, tok.Error()
}

// TestPresenceTokenSigning: the local stack runs AgentAuthorizer with
// token signing on, as deployed: the exchange answers a credential with
// the signature, made with the template's AgentTokenKey, of its token;
// CONNECTs with no signature, a signature of another key, a signature not
// in base64, or the signature of another credential are refused without
// invoking PresenceFunction (its authorizer invocations are counted);
// the leased credential with its signature connects, with one
// invocation; after a renewal the renewed credential connects with its
// own new signature, and not with the old one's.
func TestPresenceTokenSigning(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes",
		"cloud_account_id": c.account("aws"), "config": configFor("aws", "private-dc"), "connectivity": "agent"}))
	boot := reg["agent_bootstrap"].(map[string]any)["token"].(string)

	var first agentCredential
	code, body := agentCall(t, st, http.MethodPost, "/agent/exchange", boot, nil)
	if err := json.Unmarshal(body, &first); err != nil || code != http.StatusOK || first.Presence == nil ||
		first.Presence.TokenKeyName != agentTokenKeyName || first.TokenSignature == "" {
		t.Fatalf("exchange: %d %s, want a presence block naming the token key and a signature", code, body)
	}
	ep := first.Presence

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(space.PresenceToken(first.Credential)))
	forged, err := rsa.SignPKCS1v15(rand.Reader, other, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	before := st.authorizerInvocations.Load()
	junk := map[string]string{
		"no token nor signature":    "?x-amz-customauthorizer-name=" + url.QueryEscape(ep.Authorizer),
		"another key's signature":   agentUsername(ep, first.Credential, base64.StdEncoding.EncodeToString(forged)),
		"a signature not in base64": agentUsername(ep, first.Credential, "%%junk"),
		"no signature":              agentUsername(ep, first.Credential, ""),
	}
	for what, u := range junk {
		if m, err := dialAgent(t, st, ep, u, first.Credential, nil); err == nil {
			m.Disconnect(0)
			t.Errorf("%s: connected", what)
		}
	}
	if n := st.authorizerInvocations.Load() - before; n != 0 {
		t.Fatalf("%d junk CONNECTs invoked PresenceFunction %d times, want none", len(junk), n)
	}

	m, err := dialAgent(t, st, ep, agentUsername(ep, first.Credential, first.TokenSignature), first.Credential, nil)
	if err != nil {
		t.Fatalf("the leased credential with its signature: %v", err)
	}
	if n := st.authorizerInvocations.Load() - before; n != 1 {
		t.Fatalf("a signed CONNECT invoked PresenceFunction %d times, want once", n)
	}
	m.Disconnect(0)

	// Renewed: the answer carries the new credential's own signature.
	var renewed agentCredential
	code, body = agentCall(t, st, http.MethodPost, "/agent/credential", first.Credential, nil)
	if err := json.Unmarshal(body, &renewed); err != nil || code != http.StatusOK || renewed.TokenSignature == "" ||
		renewed.TokenSignature == first.TokenSignature {
		t.Fatalf("renewal: %d %s, want a new signature", code, body)
	}
	before = st.authorizerInvocations.Load()
	if m, err := dialAgent(t, st, ep, agentUsername(ep, renewed.Credential, first.TokenSignature), renewed.Credential, nil); err == nil {
		m.Disconnect(0)
		t.Fatal("the renewed credential connected with the old credential's signature")
	}
	if n := st.authorizerInvocations.Load() - before; n != 0 {
		t.Fatalf("the old signature with the renewed credential invoked PresenceFunction %d times, want none", n)
	}
	m, err = dialAgent(t, st, ep, agentUsername(ep, renewed.Credential, renewed.TokenSignature), renewed.Credential, nil)
	if err != nil {
		t.Fatalf("the renewed credential with its new signature: %v", err)
	}
	defer m.Disconnect(0)
	if n := st.authorizerInvocations.Load() - before; n != 1 {
		t.Fatalf("the renewed credential's CONNECT invoked PresenceFunction %d times, want once", n)
	}
}
