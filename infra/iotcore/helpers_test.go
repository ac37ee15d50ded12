package iotcore

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"spaces/infra/testclock"
	"spaces/infra/testcluster"
	"spaces/infra/testwait"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/smithy-go/encoding/httpbinding"
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"
)

const (
	authName = "spaces-agent"
	username = "agent?x-amz-customauthorizer-name=" + authName
)

// testTLS is a server certificate for 127.0.0.1 from a test CA
// (infra/testcluster), and a client config trusting it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	server, roots, err := ca.LoopbackTLS()
	if err != nil {
		t.Fatal(err)
	}
	return server, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// newClock is Config.Now under the test's control.
func newClock() *testclock.Clock { return testclock.New(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)) }

// agentPolicy is what Spaces' authorizer grants an agent: connect as itself,
// subscribe to and receive its wake topic.
func agentPolicy(clientID string) []*events.IAMPolicyDocument {
	wake := "spaces/" + clientID + "/wake"
	return []*events.IAMPolicyDocument{{
		Version: "2012-10-17",
		Statement: []events.IAMPolicyStatement{
			{Effect: "Allow", Action: []string{"iot:Connect"}, Resource: []string{"arn:aws:iot:*:*:client/" + clientID}},
			{Effect: "Allow", Action: []string{"iot:Subscribe"}, Resource: []string{"arn:aws:iot:*:*:topicfilter/" + wake}},
			{Effect: "Allow", Action: []string{"iot:Receive"}, Resource: []string{"arn:aws:iot:*:*:topic/" + wake}},
		},
	}}
}

// fixture is a running broker whose presence rule collects lifecycle events.
type fixture struct {
	b      *Broker
	clock  *testclock.Clock
	client *tls.Config
	events chan lifecycle // connected and disconnected, by the presence rule
	failed chan lifecycle // connect_failed, by a rule of its own

	mu       sync.Mutex
	requests []events.IoTCoreCustomAuthorizerRequest
	answer   func(req events.IoTCoreCustomAuthorizerRequest, call int) (events.IoTCoreCustomAuthorizerResponse, error)
}

// goodAnswer accepts a password "ok", granting agentPolicy for the client id.
func goodAnswer(req events.IoTCoreCustomAuthorizerRequest, _ int) (events.IoTCoreCustomAuthorizerResponse, error) {
	if string(req.ProtocolData.MQTT.Password) != "ok" {
		return events.IoTCoreCustomAuthorizerResponse{IsAuthenticated: false}, nil
	}
	return events.IoTCoreCustomAuthorizerResponse{
		IsAuthenticated: true, PrincipalID: "agent1",
		DisconnectAfterInSeconds: 3600, RefreshAfterInSeconds: 600,
		PolicyDocuments: agentPolicy(req.ProtocolData.MQTT.ClientID),
	}, nil
}

func start(t *testing.T, rules ...Rule) *fixture {
	t.Helper()
	return startWith(t, nil, rules...)
}

// startWith is start with the broker's Config changed by with (nil: as
// start).
func startWith(t *testing.T, with func(*Config), rules ...Rule) *fixture {
	t.Helper()
	server, client := testTLS(t)
	f := &fixture{clock: newClock(), client: client, events: make(chan lifecycle, 100), failed: make(chan lifecycle, 100), answer: goodAnswer}
	collect := func(to chan lifecycle) func(context.Context, []byte) error {
		return func(_ context.Context, payload []byte) error {
			var ev lifecycle
			if err := json.Unmarshal(payload, &ev); err != nil {
				t.Errorf("lifecycle event %s: %v", payload, err)
			}
			to <- ev
			return nil
		}
	}
	rules = append(rules, Rule{
		Name:   "presence", // as template.yaml's AgentPresenceRule
		SQL:    "SELECT * FROM '$aws/events/presence/+/+' WHERE startswith(clientId, 'spaces-') AND eventType <> 'connect_failed'",
		Action: collect(f.events),
	}, Rule{
		Name:   "failed",
		SQL:    "SELECT * FROM '$aws/events/presence/connect_failed/+'",
		Action: collect(f.failed),
	})
	cfg := Config{
		TLS: server,
		Authorizers: map[string]Authorizer{authName: func(_ context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
			f.mu.Lock()
			f.requests = append(f.requests, req)
			n := len(f.requests)
			answer := f.answer
			f.mu.Unlock()
			return answer(req, n)
		}},
		Rules: rules,
		Now:   f.clock.Now,
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if with != nil {
		with(&cfg)
	}
	b, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.b = b
	t.Cleanup(b.Close)
	return f
}

func (f *fixture) setAnswer(a func(events.IoTCoreCustomAuthorizerRequest, int) (events.IoTCoreCustomAuthorizerResponse, error)) {
	f.mu.Lock()
	f.answer = a
	f.mu.Unlock()
}

func (f *fixture) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// dial connects a paho client over MQTT 3.1.1 (paho.mqtt.golang speaks 3.1
// and 3.1.1 only) and returns it with the CONNECT's error.
func (f *fixture) dial(t *testing.T, clientID, password string, keepAlive time.Duration) (paho.Client, error) {
	t.Helper()
	opts := paho.NewClientOptions().
		AddBroker("tls://" + f.b.MQTTAddr()).
		SetClientID(clientID).
		SetUsername(username).
		SetPassword(password).
		SetTLSConfig(f.client).
		SetKeepAlive(keepAlive).
		SetProtocolVersion(4).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(5 * time.Second)
	c := paho.NewClient(opts)
	tok := c.Connect()
	if !tok.WaitTimeout(5 * time.Second) {
		t.Fatal("CONNECT timed out")
	}
	if tok.Error() == nil {
		t.Cleanup(func() { c.Disconnect(0) })
	}
	return c, tok.Error()
}

func (f *fixture) mustDial(t *testing.T, clientID string) paho.Client {
	t.Helper()
	c, err := f.dial(t, clientID, "ok", 30*time.Second)
	if err != nil {
		t.Fatalf("connect %s: %v", clientID, err)
	}
	return c
}

// next waits for the next lifecycle event.
func (f *fixture) next(t *testing.T) lifecycle {
	t.Helper()
	select {
	case ev := <-f.events:
		return ev
	case <-time.After(testwait.Timeout):
		t.Fatalf("no lifecycle event within %s", testwait.Timeout)
	}
	return lifecycle{}
}

// nextFailed waits for the next connect_failed event.
func (f *fixture) nextFailed(t *testing.T) lifecycle {
	t.Helper()
	select {
	case ev := <-f.failed:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no connect_failed event within 5 s")
	}
	return lifecycle{}
}

// version is an event's versionNumber (-1 when absent).
func version(ev lifecycle) int64 {
	if ev.VersionNumber == nil {
		return -1
	}
	return *ev.VersionNumber
}

// quiet asserts no lifecycle event arrives within a short real-time wait
// (several sweeps of the broker).
func (f *fixture) quiet(t *testing.T) {
	t.Helper()
	select {
	case ev := <-f.events:
		t.Fatalf("unexpected lifecycle event %+v", ev)
	case <-time.After(5 * sweepEvery):
	}
}

// rawConnect sends a CONNECT over a raw TLS connection (so the test can drop
// the TCP connection without a DISCONNECT) and reads the CONNACK's code.
func (f *fixture) rawConnect(t *testing.T, clientID string) (net.Conn, byte) {
	t.Helper()
	return f.rawConnectV(t, clientID, 4)
}

// rawConnectV is rawConnect in protocol version 4 (3.1.1) or 5.
func (f *fixture) rawConnectV(t *testing.T, clientID string, version byte) (net.Conn, byte) {
	t.Helper()
	conn, err := tls.Dial("tcp", f.b.MQTTAddr(), f.client)
	if err != nil {
		t.Fatal(err)
	}
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: version,
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30,
			ClientIdentifier: clientID,
			UsernameFlag:     true, Username: []byte(username),
			PasswordFlag: true, Password: []byte("ok"),
		},
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	ack := readPacket(t, conn)
	if ack[0]>>4 != packets.Connack || len(ack) < 4 {
		t.Fatalf("CONNACK %x", ack)
	}
	return conn, ack[3] // fixed header, length, flags, return code (3.1.1) or reason (5)
}

// readPacket reads one MQTT packet (remaining length under 128 bytes).
func readPacket(t *testing.T, conn net.Conn) []byte {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(testwait.Timeout))
	head := make([]byte, 2)
	if _, err := io.ReadFull(conn, head); err != nil {
		t.Fatalf("read packet: %v", err)
	}
	if head[1] >= 128 {
		t.Fatalf("packet %x longer than the helper reads", head)
	}
	body := make([]byte, head[1])
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatalf("read packet: %v", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return append(head, body...)
}

// publishHTTP posts to the data plane as iotdataplane.Publish does. The
// module github.com/aws/aws-sdk-go-v2/service/iotdataplane is not on this
// machine's module proxy, so the request is built the way its serializer
// (awsRestjson1_serializeOpPublish) builds it, with the same smithy-go
// encoder: POST /topics/{topic} with the topic as a URI label (so '/' is
// %2F), qos as a query parameter only when not 0, retain only when true, and
// the payload as an application/octet-stream body.
func (f *fixture) publishHTTP(t *testing.T, topic string, qos int32, retain bool, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.b.DataURL(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	path, query := httpbinding.SplitURI("/topics/{topic}")
	enc, err := httpbinding.NewEncoder(path, query, req.Header)
	if err != nil {
		t.Fatal(err)
	}
	if qos != 0 {
		enc.SetQuery("qos").Integer(qos)
	}
	if retain {
		enc.SetQuery("retain").Boolean(retain)
	}
	if err := enc.SetURI("topic").String(topic); err != nil {
		t.Fatal(err)
	}
	enc.SetHeader("Content-Type").String("application/octet-stream")
	if req, err = enc.Encode(req); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: f.client}, Timeout: 5 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor waits for cond (testwait.Eventually).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, testwait.Timeout, what, cond)
}
