package local

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"spaces/infra/testwait"
	"spaces/shared/space"
)

// TestPresenceWhileAgentURLSaturated: with AgentFunction's function URL
// saturated (a flood of anonymous requests over its rate, answered 429
// before, during and after), an agent's MQTT
// CONNECT is still authorized and its connected lifecycle event is still
// stored: the authorizer and the presence queue are PresenceFunction's,
// whose executions the public URL cannot take.
func TestPresenceWhileAgentURLSaturated(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "acme")
	reg := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes",
		"cloud_account_id": c.account("aws"), "config": configFor("aws", "private-dc"), "connectivity": "agent"}))
	id := reg["id"].(string)
	boot := reg["agent_bootstrap"].(map[string]any)["token"].(string)

	// The exchange, before the flood: it is on the URL.
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

	// Saturate the URL: anonymous requests, as fast as a few clients
	// can send them, until the test is done; beyond its rate (10 times
	// its reserved concurrency a second) the URL answers 429.
	if st.Functions.Get("AgentFunction").ReservedConcurrency == 0 {
		t.Fatal("AgentFunction has no reserved concurrency: its URL has no throttle to saturate")
	}
	var throttled atomic.Int64
	stop := make(chan struct{})
	var flood sync.WaitGroup
	defer func() { close(stop); flood.Wait() }()
	for range 6 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(st.AgentURL + "/agent/lease")
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					throttled.Add(1)
				}
			}
		}()
	}
	testwait.Eventually(t, testwait.Timeout, "the agent URL answers 429", func() bool { return throttled.Load() > 0 })

	// The agent's CONNECT is authorized all the same.
	host, _, _ := net.SplitHostPort(ex.Presence.Endpoint)
	opts := paho.NewClientOptions().AddBroker("tls://" + ex.Presence.Endpoint).
		SetClientID(ex.Presence.ClientID).
		SetUsername(agentUsername(ex.Presence, ex.Credential, ex.TokenSignature)).
		SetPassword(ex.Credential).
		SetTLSConfig(&tls.Config{RootCAs: st.MQTTRoots, ServerName: host, MinVersion: tls.VersionTLS12}).
		SetProtocolVersion(4).SetKeepAlive(space.PresenceKeepAlive).
		SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(5 * time.Second)
	m := paho.NewClient(opts)
	tok := m.Connect()
	if !tok.WaitTimeout(testwait.Timeout) {
		t.Fatal("CONNECT timed out")
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("the agent's connection was refused while the URL is saturated: %v", err)
	}
	defer m.Disconnect(0)

	// Its connected event is consumed and stored on the space's AGENT
	// item, the URL still saturated.
	testwait.Eventually(t, testwait.Timeout, "the connected event stored", func() bool {
		for _, it := range scanTable(t, st.AWS, st.EmulatorURL, st.Table) {
			if it["space_id"] == id && it["presence_connected"] == true {
				return true
			}
		}
		return false
	})
	before := throttled.Load()
	testwait.Eventually(t, testwait.Timeout, "the agent URL still answers 429", func() bool { return throttled.Load() > before })
}
