package iotcore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	paho "github.com/eclipse/paho.mqtt.golang"
	pahopackets "github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/mochi-mqtt/server/v2/packets"

	"spaces/infra/testwait"
)

// Rule 1: the username names the authorizer, which gets the request IoT
// sends; unknown authorizer, an error or isAuthenticated:false refuse.
func TestConnectRunsTheNamedAuthorizer(t *testing.T) {
	f := start(t)
	f.mustDial(t, "spaces-a")
	ev := f.next(t)
	if ev.EventType != "connected" || ev.ClientID != "spaces-a" {
		t.Fatalf("first event %+v", ev)
	}
	f.mu.Lock()
	req := f.requests[0]
	f.mu.Unlock()
	m := req.ProtocolData.MQTT
	if m.ClientID != "spaces-a" || m.Username != username || string(m.Password) != "ok" ||
		len(req.Protocols) != 1 || req.Protocols[0] != "mqtt" || req.ConnectionMetadata == nil || req.ConnectionMetadata.ID == "" {
		t.Fatalf("authorizer request %+v / %+v", req, m)
	}

	refused := map[string]func(*fixture) (paho.Client, error){
		"wrong password": func(f *fixture) (paho.Client, error) { return f.dial(t, "spaces-b", "bad", 30*time.Second) },
		"authorizer error": func(f *fixture) (paho.Client, error) {
			f.setAnswer(func(events.IoTCoreCustomAuthorizerRequest, int) (events.IoTCoreCustomAuthorizerResponse, error) {
				return events.IoTCoreCustomAuthorizerResponse{}, errors.New("boom")
			})
			defer f.setAnswer(goodAnswer)
			return f.dial(t, "spaces-b", "ok", 30*time.Second)
		},
		"unknown authorizer": func(f *fixture) (paho.Client, error) {
			opts := paho.NewClientOptions().AddBroker("tls://" + f.b.MQTTAddr()).SetClientID("spaces-b").
				SetUsername("agent?x-amz-customauthorizer-name=other").SetPassword("ok").SetTLSConfig(f.client).
				SetAutoReconnect(false).SetProtocolVersion(4)
			c := paho.NewClient(opts)
			tok := c.Connect()
			tok.WaitTimeout(5 * time.Second)
			return c, tok.Error()
		},
	}
	for name, dial := range refused {
		before := f.calls()
		_, err := dial(f)
		if !errors.Is(err, pahopackets.ErrorRefusedNotAuthorised) {
			t.Errorf("%s: CONNECT answered %v, want not authorized", name, err)
		}
		if name == "unknown authorizer" && f.calls() != before {
			t.Errorf("%s: an authorizer was called", name)
		}
		// A refused CONNECT publishes connect_failed, in the page's shape.
		ev := f.nextFailed(t)
		if ev.ClientID != "spaces-b" || ev.EventType != EventConnectFailed || ev.ConnectFailureReason != FailureAuthorizationFailed ||
			ev.SessionIdentifier == "" || ev.IPAddress != "127.0.0.1" || ev.VersionNumber != nil || ev.DisconnectReason != "" ||
			ev.Timestamp != f.clock.Now().UnixMilli() {
			t.Errorf("%s: connect_failed event %+v", name, ev)
		}
	}
	f.quiet(t) // and no connected or disconnected event
}

// Rule 2: the response is validated; an invalid one refuses the connection.
func TestInvalidAuthorizerResponseRefuses(t *testing.T) {
	f := start(t)
	cases := map[string]func(*events.IoTCoreCustomAuthorizerResponse){
		"valid":                  func(*events.IoTCoreCustomAuthorizerResponse) {},
		"principal with a dash":  func(r *events.IoTCoreCustomAuthorizerResponse) { r.PrincipalID = "agent-1" },
		"principal of 129 chars": func(r *events.IoTCoreCustomAuthorizerResponse) { r.PrincipalID = strings.Repeat("a", 129) },
		"empty principal":        func(r *events.IoTCoreCustomAuthorizerResponse) { r.PrincipalID = "" },
		"disconnectAfter 299":    func(r *events.IoTCoreCustomAuthorizerResponse) { r.DisconnectAfterInSeconds = 299 },
		"disconnectAfter 86401":  func(r *events.IoTCoreCustomAuthorizerResponse) { r.DisconnectAfterInSeconds = 86401 },
		"refreshAfter 299":       func(r *events.IoTCoreCustomAuthorizerResponse) { r.RefreshAfterInSeconds = 299 },
		"refreshAfter 86401":     func(r *events.IoTCoreCustomAuthorizerResponse) { r.RefreshAfterInSeconds = 86401 },
		"no policy documents":    func(r *events.IoTCoreCustomAuthorizerResponse) { r.PolicyDocuments = nil },
	}
	for name, mutate := range cases {
		f.setAnswer(func(req events.IoTCoreCustomAuthorizerRequest, n int) (events.IoTCoreCustomAuthorizerResponse, error) {
			r, err := goodAnswer(req, n)
			mutate(&r)
			return r, err
		})
		c, err := f.dial(t, "spaces-v", "ok", 30*time.Second)
		if name == "valid" {
			if err != nil {
				t.Errorf("%s: refused: %v", name, err)
			} else {
				c.Disconnect(0)
			}
			continue
		}
		if !errors.Is(err, pahopackets.ErrorRefusedNotAuthorised) {
			t.Errorf("%s: CONNECT answered %v, want not authorized", name, err)
		}
	}
}

// Rule 2: disconnect at disconnectAfterInSeconds, re-invoke at
// refreshAfterInSeconds and disconnect when the refresh is refused.
func TestAuthorizerDeadlines(t *testing.T) {
	t.Run("disconnectAfter", func(t *testing.T) {
		f := start(t)
		f.setAnswer(func(req events.IoTCoreCustomAuthorizerRequest, n int) (events.IoTCoreCustomAuthorizerResponse, error) {
			r, err := goodAnswer(req, n)
			r.DisconnectAfterInSeconds, r.RefreshAfterInSeconds = 300, 600
			return r, err
		})
		if _, err := f.dial(t, "spaces-ttl", "ok", 1200*time.Second); err != nil {
			t.Fatal(err)
		}
		f.next(t)
		f.clock.Advance(299 * time.Second)
		f.quiet(t)
		f.clock.Advance(time.Second)
		if ev := f.next(t); ev.EventType != "disconnected" || ev.DisconnectReason != ReasonCustomAuthTTL {
			t.Fatalf("event %+v, want disconnected %s", ev, ReasonCustomAuthTTL)
		}
	})
	t.Run("refresh", func(t *testing.T) {
		f := start(t)
		f.setAnswer(func(req events.IoTCoreCustomAuthorizerRequest, n int) (events.IoTCoreCustomAuthorizerResponse, error) {
			r, err := goodAnswer(req, n)
			r.RefreshAfterInSeconds = 300
			if n == 3 { // the second refresh is refused
				r.IsAuthenticated = false
			}
			return r, err
		})
		if _, err := f.dial(t, "spaces-refresh", "ok", 1200*time.Second); err != nil {
			t.Fatal(err)
		}
		f.next(t)
		f.clock.Advance(300 * time.Second)
		waitFor(t, "the first refresh", func() bool { return f.calls() == 2 })
		f.quiet(t) // accepted: still connected
		f.clock.Advance(300 * time.Second)
		if ev := f.next(t); ev.EventType != "disconnected" || ev.DisconnectReason != ReasonAuthError {
			t.Fatalf("event %+v, want disconnected %s", ev, ReasonAuthError)
		}
		if n := f.calls(); n != 3 {
			t.Fatalf("authorizer called %d times, want 3", n)
		}
	})
}

// Rule 3: policy evaluation of the four actions.
func TestPolicyAllows(t *testing.T) {
	p := policy{{Statement: []events.IAMPolicyStatement{
		{Effect: "Allow", Action: []string{"iot:*"}, Resource: []string{"arn:aws:iot:*:*:topic/spaces/*"}},
		{Effect: "Deny", Action: []string{"iot:Publish"}, Resource: []string{"arn:aws:iot:*:*:topic/spaces/locked"}},
		{Effect: "Allow", Action: []string{"IOT:CONNECT"}, Resource: []string{"arn:aws:iot:us-east-1:000000000000:client/c?"}},
	}}}
	arn := "arn:aws:iot:us-east-1:000000000000:"
	for _, c := range []struct {
		action, resource string
		want             bool
	}{
		{actPublish, arn + "topic/spaces/x/wake", true},
		{actReceive, arn + "topic/spaces/x", true},
		{actPublish, arn + "topic/spaces/locked", false}, // explicit deny wins
		{actReceive, arn + "topic/spaces/locked", true},  // the deny names Publish only
		{actPublish, arn + "topic/other", false},         // default deny
		{actConnect, arn + "client/c1", true},            // case-insensitive action, '?' wildcard
		{actConnect, arn + "client/c12", false},
		{actSubscribe, arn + "topicfilter/spaces/x", false}, // topicfilter is not topic
	} {
		if got := p.allows(c.action, c.resource); got != c.want {
			t.Errorf("allows(%s, %s) = %v, want %v", c.action, c.resource, got, c.want)
		}
	}
}

// Rule 3 over MQTT: connect, subscribe, receive and publish follow the policy.
func TestPolicyOverMQTT(t *testing.T) {
	f := start(t)
	f.setAnswer(func(req events.IoTCoreCustomAuthorizerRequest, n int) (events.IoTCoreCustomAuthorizerResponse, error) {
		r, err := goodAnswer(req, n)
		r.PolicyDocuments = agentPolicy("spaces-p") // whoever connects gets spaces-p's policy
		return r, err
	})
	if _, err := f.dial(t, "spaces-q", "ok", 30*time.Second); !errors.Is(err, pahopackets.ErrorRefusedNotAuthorised) {
		t.Fatalf("CONNECT as a client id the policy does not allow: %v", err)
	}
	c := f.mustDial(t, "spaces-p")
	f.next(t)

	got := make(chan string, 10)
	tok := c.SubscribeMultiple(map[string]byte{"spaces/spaces-p/wake": 1, "spaces/spaces-other/wake": 1}, func(_ paho.Client, m paho.Message) {
		got <- m.Topic() + " " + string(m.Payload())
	})
	tok.WaitTimeout(5 * time.Second)
	res := tok.(*paho.SubscribeToken).Result()
	if res["spaces/spaces-p/wake"] != 1 || res["spaces/spaces-other/wake"] != 0x80 {
		t.Fatalf("SUBACK codes %v, want 1 for its wake topic and 0x80 for another", res)
	}
	if code, body := f.publishHTTP(t, "spaces/spaces-p/wake", 1, false, []byte("wake")); code != 200 {
		t.Fatalf("data plane publish: %d %s", code, body)
	}
	select {
	case m := <-got:
		if m != "spaces/spaces-p/wake wake" {
			t.Fatalf("received %q", m)
		}
	case <-time.After(testwait.Timeout):
		t.Fatal("the wake message did not arrive")
	}

	// A PUBLISH the policy does not allow disconnects an MQTT 3.1.1 client.
	c.Publish("spaces/spaces-p/wake", 0, false, "self")
	ev := f.next(t)
	if ev.EventType != "disconnected" || ev.DisconnectReason != ReasonAuthError || *ev.ClientInitiatedDisconnect {
		t.Fatalf("event %+v, want disconnected %s", ev, ReasonAuthError)
	}
	select {
	case m := <-got:
		t.Fatalf("the refused publish was delivered: %q", m)
	case <-time.After(5 * sweepEvery):
	}
}

// Rule 4: keep-alive is raised to 30 s and a client silent for 1.5 x is
// disconnected; a PINGREQ keeps it alive.
func TestKeepAlive(t *testing.T) {
	for _, asked := range []time.Duration{5 * time.Second, 30 * time.Second} {
		t.Run(asked.String(), func(t *testing.T) {
			f := start(t)
			if _, err := f.dial(t, "spaces-k", "ok", asked); err != nil {
				t.Fatal(err)
			}
			f.next(t)
			f.clock.Advance(44 * time.Second) // under 1.5 x 30 s, whatever was asked below 30
			f.quiet(t)
			f.clock.Advance(time.Second)
			ev := f.next(t)
			if ev.EventType != "disconnected" || ev.DisconnectReason != ReasonKeepAliveTimeout || *ev.ClientInitiatedDisconnect {
				t.Fatalf("event %+v, want disconnected %s", ev, ReasonKeepAliveTimeout)
			}
			if want := f.clock.Now().UnixMilli(); ev.Timestamp != want {
				t.Fatalf("timestamp %d, want the clock's %d", ev.Timestamp, want)
			}
		})
	}
	t.Run("ping keeps it", func(t *testing.T) {
		f := start(t)
		conn, code := f.rawConnect(t, "spaces-ping")
		defer conn.Close()
		if code != 0 {
			t.Fatalf("CONNACK %d", code)
		}
		f.next(t)
		for i := 0; i < 3; i++ {
			f.clock.Advance(40 * time.Second)
			if _, err := conn.Write([]byte{0xC0, 0}); err != nil { // PINGREQ
				t.Fatal(err)
			}
			resp := make([]byte, 2)
			if _, err := conn.Read(resp); err != nil || resp[0] != 0xD0 {
				t.Fatalf("PINGRESP %x %v", resp, err)
			}
		}
		f.quiet(t) // 120 s of clock, never 45 s silent
	})
	if effectiveKeepAlive(0) != maxKeepAlive || effectiveKeepAlive(5000) != maxKeepAlive || effectiveKeepAlive(60) != time.Minute {
		t.Fatal("keep-alive bounds")
	}
}

// Rules 5 and 6: a second CONNECT with the same client id disconnects the
// first (DUPLICATE_CLIENTID); versionNumber counts connections from 0 and a
// disconnected event carries its connection's number, so a consumer can
// order events that arrive out of order.
func TestTakeoverAndVersions(t *testing.T) {
	f := start(t)
	f.mustDial(t, "spaces-t")
	first := f.next(t)
	if first.EventType != "connected" || version(first) != 0 || first.IPAddress != "127.0.0.1" ||
		first.PrincipalIdentifier != "agent1" || first.SessionIdentifier == "" || first.ClientInitiatedDisconnect != nil {
		t.Fatalf("first connected %+v", first)
	}
	second := f.mustDial(t, "spaces-t")
	byType := map[string]lifecycle{}
	for i := 0; i < 2; i++ {
		ev := f.next(t)
		byType[ev.EventType] = ev
	}
	d, c := byType["disconnected"], byType["connected"]
	if d.DisconnectReason != ReasonDuplicateClient || version(d) != 0 || d.SessionIdentifier != first.SessionIdentifier {
		t.Fatalf("taken-over connection's event %+v", d)
	}
	if version(c) != 1 || c.SessionIdentifier == first.SessionIdentifier {
		t.Fatalf("new connection's event %+v", c)
	}
	if !second.IsConnected() {
		t.Fatal("the new connection did not proceed")
	}

	// Rule 6: a clean DISCONNECT is client-initiated.
	second.Disconnect(100)
	ev := f.next(t)
	if ev.EventType != "disconnected" || ev.DisconnectReason != ReasonClientInitiated || !*ev.ClientInitiatedDisconnect || version(ev) != 1 {
		t.Fatalf("clean disconnect event %+v", ev)
	}
}

// Rule 6: a dropped TCP connection is CONNECTION_LOST.
func TestDroppedConnectionIsLost(t *testing.T) {
	f := start(t)
	conn, code := f.rawConnect(t, "spaces-drop")
	if code != 0 {
		t.Fatalf("CONNACK %d", code)
	}
	f.next(t)
	conn.Close()
	ev := f.next(t)
	if ev.EventType != "disconnected" || ev.DisconnectReason != ReasonConnectionLost || *ev.ClientInitiatedDisconnect {
		t.Fatalf("event %+v", ev)
	}
}

// Rule 7: a rule runs on matching topics only, its WHERE reads the payload,
// and SQL outside the subset fails Start.
func TestRules(t *testing.T) {
	hits := make(chan string, 10)
	f := start(t, Rule{Name: "all", SQL: "select * from 'things/#'", Action: func(_ context.Context, p []byte) error {
		hits <- string(p)
		return errors.New("logged, not retried")
	}})
	f.mustDial(t, "other-1") // outside the presence rule's WHERE
	f.quiet(t)
	f.publishHTTP(t, "things/a/b", 0, false, []byte("x"))
	f.publishHTTP(t, "nothing/a", 0, false, []byte("y"))
	select {
	case p := <-hits:
		if p != "x" {
			t.Fatalf("rule got %q", p)
		}
	case <-time.After(testwait.Timeout):
		t.Fatal("rule did not run")
	}
	select {
	case p := <-hits:
		t.Fatalf("rule ran for another topic: %q", p)
	case <-time.After(5 * sweepEvery):
	}

	server, _ := testTLS(t)
	for _, sql := range []string{
		"SELECT clientId FROM 'a'",
		"SELECT * FROM 'a' WHERE clientId > 'x'",
		"SELECT * FROM 'a' WHERE clientId = 'x' OR eventType = 'y'",
		"SELECT * FROM 'a' WHERE clientId = 'x' AND",
		"SELECT * FROM 'a' WHERE",
		"SELECT * FROM 'a' WHERE clientId = x",
		"SELECT * FROM 'a/#/b'",
		"SELECT * FROM a",
	} {
		b, err := Start(context.Background(), Config{TLS: server, Rules: []Rule{{Name: "r", SQL: sql, Action: func(context.Context, []byte) error { return nil }}}})
		if err == nil {
			b.Close()
			t.Errorf("Start accepted SQL %q", sql)
		}
	}
}

// Rule 7: WHERE conditions read top-level string attributes; all must
// hold, and an absent attribute holds none (undefined is not true).
func TestRuleWhere(t *testing.T) {
	r, err := compileRule(Rule{Name: "r", Action: func(context.Context, []byte) error { return nil },
		SQL: "SELECT * FROM '$aws/events/presence/+/+' where startswith(clientId, 'spaces-') and eventType <> 'connect_failed'"})
	if err != nil {
		t.Fatal(err)
	}
	eq, err := compileRule(Rule{Name: "eq", Action: func(context.Context, []byte) error { return nil },
		SQL: "SELECT * FROM 'a/where/+' WHERE eventType = 'connected'"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r       compiledRule
		topic   string
		payload string
		want    bool
	}{
		{r, "$aws/events/presence/connected/spaces-1", `{"clientId":"spaces-1","eventType":"connected"}`, true},
		{r, "$aws/events/presence/disconnected/spaces-1", `{"clientId":"spaces-1","eventType":"disconnected"}`, true},
		{r, "$aws/events/presence/connect_failed/spaces-1", `{"clientId":"spaces-1","eventType":"connect_failed"}`, false},
		{r, "$aws/events/presence/connected/other-1", `{"clientId":"other-1","eventType":"connected"}`, false},
		{r, "$aws/events/presence/connected/spaces-1", `{"clientId":"spaces-1"}`, false}, // undefined <> 'x' is undefined
		{r, "$aws/events/presence/connected/spaces-1", `not json`, false},
		{eq, "a/where/b", `{"eventType":"connected"}`, true},
		{eq, "a/where/b", `{"eventType":"connected2"}`, false},
		{eq, "a/where/b", `{"eventType":1}`, false},
	} {
		if got := c.r.selects(c.topic, []byte(c.payload)); got != c.want {
			t.Errorf("%s selects %s %s = %v, want %v", c.r.Name, c.topic, c.payload, got, c.want)
		}
	}
}

func TestMatchFilter(t *testing.T) {
	for _, c := range []struct {
		filter, topic string
		want          bool
	}{
		{"$aws/events/presence/+/+", "$aws/events/presence/connected/spaces-1", true},
		{"$aws/events/presence/+/+", "$aws/events/presence/connected", false},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"#", "$aws/events/x", false},
		{"+/x", "$aws/x", false},
		{"a/+", "a/b/c", false},
	} {
		if got := matchFilter(c.filter, c.topic); got != c.want {
			t.Errorf("matchFilter(%q, %q) = %v", c.filter, c.topic, got)
		}
	}
}

// Rule 8: the data plane's POST /topics/{topic}?qos=N and its refusals.
func TestDataPlane(t *testing.T) {
	f := start(t)
	for _, c := range []struct {
		topic string
		qos   int32
		body  []byte
		want  int
	}{
		{"spaces/x/wake", 1, []byte("{}"), 200},
		{"spaces/x/wake", 0, nil, 200},
		{"spaces/x/wake", 2, []byte("{}"), 400},
		{"a/b/c/d/e/f/g/h/i", 0, []byte("{}"), 400}, // 8 slashes
		{"a/b/c/d/e/f/g/h", 0, []byte("{}"), 200},   // 7
		{strings.Repeat("t", 257), 0, []byte("{}"), 400},
		{"spaces/+/wake", 0, []byte("{}"), 400},
		{"spaces/x/wake", 0, make([]byte, MaxPayloadBytes+1), 413},
		{"spaces/x/wake", 0, make([]byte, MaxPayloadBytes), 200},
	} {
		if code, body := f.publishHTTP(t, c.topic, c.qos, false, c.body); code != c.want {
			t.Errorf("POST %s qos %d (%d bytes): %d %s, want %d", c.topic, c.qos, len(c.body), code, body, c.want)
		}
	}

	// A subscriber gets the message with the topic intact and the QoS asked.
	sub, err := f.dial(t, "spaces-dp2", "ok", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan paho.Message, 1)
	sub.Subscribe("spaces/spaces-dp2/wake", 1, func(_ paho.Client, m paho.Message) { got <- m }).WaitTimeout(5 * time.Second)
	if code, body := f.publishHTTP(t, "spaces/spaces-dp2/wake", 1, false, []byte(`{"wake":true}`)); code != 200 {
		t.Fatalf("publish: %d %s", code, body)
	}
	select {
	case m := <-got:
		if m.Topic() != "spaces/spaces-dp2/wake" || string(m.Payload()) != `{"wake":true}` || m.Qos() != 1 {
			t.Fatalf("delivered %s %q qos %d", m.Topic(), m.Payload(), m.Qos())
		}
	case <-time.After(testwait.Timeout):
		t.Fatal("not delivered")
	}
}

// Rule 9: limits on client ids, topics and payloads over MQTT.
func TestLimits(t *testing.T) {
	f := start(t)
	if _, err := f.dial(t, "spaces-"+strings.Repeat("x", MaxClientIDBytes-6), "ok", 30*time.Second); !errors.Is(err, pahopackets.ErrorRefusedIDRejected) {
		t.Fatalf("client id of 129 bytes: %v", err)
	}
	f.setAnswer(func(req events.IoTCoreCustomAuthorizerRequest, n int) (events.IoTCoreCustomAuthorizerResponse, error) {
		r, err := goodAnswer(req, n)
		r.PolicyDocuments[0].Statement = append(r.PolicyDocuments[0].Statement, events.IAMPolicyStatement{
			Effect: "Allow", Action: []string{"iot:*"}, Resource: []string{"*"},
		})
		return r, err
	})
	c := f.mustDial(t, "spaces-"+strings.Repeat("x", MaxClientIDBytes-7)) // 128 bytes: accepted
	f.next(t)
	tok := c.SubscribeMultiple(map[string]byte{"a/b/c/d/e/f/g/h/i": 0, "a/b/c/d/e/f/g/#": 0}, nil)
	tok.WaitTimeout(5 * time.Second)
	if res := tok.(*paho.SubscribeToken).Result(); res["a/b/c/d/e/f/g/h/i"] != 0x80 || res["a/b/c/d/e/f/g/#"] != 0 {
		t.Fatalf("SUBACK %v: want a failure for 8 slashes and success for 7", res)
	}
	c.Publish("spaces/ok", 0, false, make([]byte, MaxPayloadBytes+1))
	ev := f.next(t)
	if ev.EventType != "disconnected" || ev.DisconnectReason != ReasonClientError {
		t.Fatalf("over-size publish: event %+v", ev)
	}
}

// Rule 10: metering.
func TestUsage(t *testing.T) {
	f := start(t)
	c, err := f.dial(t, "spaces-u", "ok", 1200*time.Second) // CONNECT: 1 message, 1 authorizer call; connected event: 1 rule
	if err != nil {
		t.Fatal(err)
	}
	f.next(t)
	got := make(chan struct{}, 1)
	c.Subscribe("spaces/spaces-u/wake", 1, func(paho.Client, paho.Message) { got <- struct{}{} }).WaitTimeout(5 * time.Second) // 1
	f.publishHTTP(t, "spaces/spaces-u/wake", 0, false, make([]byte, 6*1024))                                                   // 6 KB: 2 in, 2 out
	<-got
	f.clock.Advance(90 * time.Second) // billed as 2 minutes
	c.Disconnect(100)                 // not metered; disconnected event: 1 rule
	f.next(t)

	conn, _ := f.rawConnect(t, "spaces-u2") // 1 message, 1 authorizer call, 1 rule; open 0 s: billed 1 minute
	defer conn.Close()
	f.next(t)
	for i := 0; i < 2; i++ { // PINGREQ and PINGRESP are not metered
		if _, err := conn.Write([]byte{0xC0, 0}); err != nil {
			t.Fatal(err)
		}
		resp := make([]byte, 2)
		if _, err := conn.Read(resp); err != nil || resp[0] != 0xD0 {
			t.Fatalf("PINGRESP %x %v", resp, err)
		}
	}
	want := Usage{ConnectionMinutes: 2 + 1, Messages: 1 + 1 + 2 + 2 + 1, AuthorizerCalls: 2, RulesTriggered: 3, RuleActions: 3}
	if u := f.b.Usage(); u != want {
		t.Fatalf("usage %+v, want %+v", u, want)
	}
}

func TestAuthorizerName(t *testing.T) {
	for in, want := range map[string]string{
		"?x-amz-customauthorizer-name=a":            "a",
		"user?x-amz-customauthorizer-name=a&x=y":    "a",
		"user?x=y&x-amz-customauthorizer-name=b%2B": "b+",
		"user":         "",
		"user?other=a": "",
	} {
		if got := authorizerName(in); got != want {
			t.Errorf("authorizerName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Rule 6: "Client IDs that contain # or + do not receive lifecycle events";
// and closing the broker disconnects clients with SERVER_INITIATED_DISCONNECT.
func TestLifecycleEdges(t *testing.T) {
	f := start(t)
	f.mustDial(t, "spaces-a+b")
	f.quiet(t)
	f.mustDial(t, "spaces-c")
	f.next(t)
	f.b.Close()
	select {
	case ev := <-f.events:
		if ev.ClientID != "spaces-c" || ev.EventType != "disconnected" || ev.DisconnectReason != ReasonServerInitiated {
			t.Fatalf("event at Close %+v", ev)
		}
	default:
		t.Fatal("Close returned before the disconnected event's rule ran")
	}
}

// Rule 3: iot:Receive is checked apart from iot:Subscribe: a subscription
// the policy grants delivers nothing the policy does not let it receive.
func TestReceiveNeedsItsOwnPermission(t *testing.T) {
	f := start(t)
	f.setAnswer(func(req events.IoTCoreCustomAuthorizerRequest, n int) (events.IoTCoreCustomAuthorizerResponse, error) {
		r, err := goodAnswer(req, n)
		r.PolicyDocuments[0].Statement = append(r.PolicyDocuments[0].Statement, events.IAMPolicyStatement{
			Effect: "Allow", Action: []string{"iot:Subscribe"}, Resource: []string{"arn:aws:iot:*:*:topicfilter/news/*"},
		})
		return r, err
	})
	c := f.mustDial(t, "spaces-r")
	f.next(t)
	got := make(chan string, 2)
	tok := c.Subscribe("news/+", 1, func(_ paho.Client, m paho.Message) { got <- m.Topic() })
	tok.WaitTimeout(5 * time.Second)
	if res := tok.(*paho.SubscribeToken).Result(); res["news/+"] != 1 {
		t.Fatalf("SUBACK %v", res)
	}
	f.publishHTTP(t, "news/a", 1, false, []byte("x"))
	select {
	case topic := <-got:
		t.Fatalf("delivered %s without iot:Receive", topic)
	case <-time.After(5 * sweepEvery):
	}
}

// MQTT 5 (raw packets; paho.mqtt.golang speaks 3.1.1): a refused CONNECT is
// answered 0x87 "not authorized"; a PUBLISH the policy denies gets PUBACK
// 0x87 and the connection stays.
func TestMQTT5(t *testing.T) {
	f := start(t)
	f.setAnswer(func(req events.IoTCoreCustomAuthorizerRequest, n int) (events.IoTCoreCustomAuthorizerResponse, error) {
		r, err := goodAnswer(req, n)
		if req.ProtocolData.MQTT.ClientID == "spaces-5-refused" {
			r.IsAuthenticated = false
		}
		return r, err
	})
	if _, code := f.rawConnectV(t, "spaces-5-refused", 5); code != 0x87 {
		t.Fatalf("refused MQTT 5 CONNACK reason %#x, want 0x87", code)
	}
	conn, code := f.rawConnectV(t, "spaces-5", 5)
	defer conn.Close()
	if code != 0 {
		t.Fatalf("CONNACK reason %#x", code)
	}
	f.next(t)
	pub := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Publish, Qos: 1},
		ProtocolVersion: 5, TopicName: "spaces/denied", PacketID: 7, Payload: []byte("x"),
	}
	var buf bytes.Buffer
	if err := pub.PublishEncode(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	ack := readPacket(t, conn)
	if ack[0]>>4 != packets.Puback || len(ack) < 5 || ack[4] != 0x87 {
		t.Fatalf("PUBACK %x, want reason 0x87", ack)
	}
	f.quiet(t) // still connected
}

// Rule 6: a client id disconnected for VersionResetAfter (by the broker's
// clock) starts again at versionNumber 0; one back sooner counts on; a
// connection that is up never resets its client id.
func TestVersionReset(t *testing.T) {
	f := start(t)
	dialAndDrop := func(id string) (con, dis lifecycle) {
		t.Helper()
		c := f.mustDial(t, id)
		con = f.next(t)
		c.Disconnect(0)
		dis = f.next(t)
		return con, dis
	}
	for i := int64(0); i < 3; i++ {
		if con, dis := dialAndDrop("spaces-reset"); version(con) != i || version(dis) != i {
			t.Fatalf("connection %d: versions %d and %d", i, version(con), version(dis))
		}
	}
	f.clock.Advance(DefaultVersionReset - time.Second)
	if con, _ := dialAndDrop("spaces-reset"); version(con) != 3 {
		t.Fatalf("back after just under an hour: version %d, want 3", version(con))
	}
	f.clock.Advance(DefaultVersionReset)
	con, _ := dialAndDrop("spaces-reset")
	if version(con) != 0 {
		t.Fatalf("back after an hour: version %d, want 0", version(con))
	}

	// Up for two hours: no reset, whatever the clock says.
	f.mustDial(t, "spaces-up")
	f.next(t)
	f.clock.Advance(2 * DefaultVersionReset)
	f.mustDial(t, "spaces-up") // takes over
	byType := map[string]lifecycle{}
	for i := 0; i < 2; i++ {
		ev := f.next(t)
		byType[ev.EventType] = ev
	}
	if version(byType["connected"]) != 1 {
		t.Fatalf("takeover after two hours up: version %d, want 1", version(byType["connected"]))
	}

	// The hour is a field.
	server, client := testTLS(t)
	short := make(chan lifecycle, 10)
	b, err := Start(context.Background(), Config{TLS: server, Now: f.clock.Now, VersionResetAfter: time.Minute,
		Authorizers: map[string]Authorizer{authName: func(_ context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
			return goodAnswer(req, 0)
		}},
		Rules: []Rule{{Name: "p", SQL: "SELECT * FROM '$aws/events/presence/+/+'", Action: func(_ context.Context, p []byte) error {
			var ev lifecycle
			_ = json.Unmarshal(p, &ev)
			short <- ev
			return nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g := &fixture{b: b, clock: f.clock, client: client}
	for i, wait := range []time.Duration{0, 59 * time.Second, time.Minute} {
		f.clock.Advance(wait)
		g.events = short
		c := g.mustDial(t, "spaces-short")
		ev := g.next(t)
		c.Disconnect(0)
		if dis := g.next(t); dis.EventType != "disconnected" {
			t.Fatalf("event %+v", dis)
		}
		if want := []int64{0, 1, 0}[i]; version(ev) != want {
			t.Fatalf("after %s away: version %d, want %d", wait, version(ev), want)
		}
	}
}

// Rule 2: a refresh presents the CONNECT's own password and connection id;
// a refusal disconnects with AUTH_ERROR, and the next CONNECT of the client
// id is let in with a password the authorizer accepts.
func TestRefreshUsesTheOriginalPassword(t *testing.T) {
	f := start(t)
	f.setAnswer(func(req events.IoTCoreCustomAuthorizerRequest, n int) (events.IoTCoreCustomAuthorizerResponse, error) {
		r := events.IoTCoreCustomAuthorizerResponse{IsAuthenticated: true, PrincipalID: "agent1",
			DisconnectAfterInSeconds: 86400, RefreshAfterInSeconds: 300, PolicyDocuments: agentPolicy(req.ProtocolData.MQTT.ClientID)}
		// "old" is valid for the CONNECT only: revoked before the refresh.
		r.IsAuthenticated = string(req.ProtocolData.MQTT.Password) == "new" || (n == 1 && string(req.ProtocolData.MQTT.Password) == "old")
		return r, nil
	})
	if _, err := f.dial(t, "spaces-orig", "old", 1200*time.Second); err != nil {
		t.Fatal(err)
	}
	f.next(t)
	f.clock.Advance(300 * time.Second)
	if ev := f.next(t); ev.EventType != "disconnected" || ev.DisconnectReason != ReasonAuthError {
		t.Fatalf("event %+v, want disconnected %s", ev, ReasonAuthError)
	}
	f.mu.Lock()
	reqs := append([]events.IoTCoreCustomAuthorizerRequest(nil), f.requests...)
	f.mu.Unlock()
	if len(reqs) != 2 || string(reqs[1].ProtocolData.MQTT.Password) != "old" ||
		reqs[1].ConnectionMetadata.ID != reqs[0].ConnectionMetadata.ID || reqs[1].ProtocolData.MQTT.ClientID != "spaces-orig" {
		t.Fatalf("refresh request %+v", reqs)
	}
	if _, err := f.dial(t, "spaces-orig", "new", 1200*time.Second); err != nil {
		t.Fatalf("reconnect with the new password: %v", err)
	}
}

// deleteConnection sends the data plane's DeleteConnection: DELETE
// /connections/{clientId} with the client id escaped as a path label.
func (f *fixture) deleteConnection(t *testing.T, clientID, query string) (int, string) {
	t.Helper()
	u := f.b.DataURL() + "/connections/" + url.PathEscape(clientID)
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(http.MethodDelete, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: f.client}, Timeout: 5 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Amzn-Errortype") + " " + string(b)
}

// DeleteConnection closes a client's connection at once, with no clock
// advanced (no keep-alive, TTL or refresh due): an MQTT 5 client first gets
// a DISCONNECT (administrative action), and the disconnected event carries
// API_INITIATED_DISCONNECT and the connection's principal. A client id with
// no connection is ResourceNotFoundException; a malformed request is
// InvalidRequestException.
func TestDeleteConnection(t *testing.T) {
	f := start(t)
	conn, code := f.rawConnectV(t, "spaces-del5", 5)
	defer conn.Close()
	if code != 0 {
		t.Fatalf("CONNACK reason %#x", code)
	}
	connected := f.next(t)
	if status, body := f.deleteConnection(t, "spaces-del5", "cleanSession=true"); status != http.StatusOK {
		t.Fatalf("DeleteConnection: %d %s", status, body)
	}
	if p := readPacket(t, conn); p[0]>>4 != packets.Disconnect || len(p) < 3 || p[2] != packets.ErrAdministrativeAction.Code {
		t.Fatalf("packet %x, want DISCONNECT with reason %#x", p, packets.ErrAdministrativeAction.Code)
	}
	ev := f.next(t)
	if ev.EventType != "disconnected" || ev.DisconnectReason != ReasonAPIInitiated ||
		ev.ClientInitiatedDisconnect == nil || *ev.ClientInitiatedDisconnect ||
		ev.PrincipalIdentifier != "agent1" || version(ev) != version(connected) {
		t.Fatalf("event %+v, want disconnected %s of principal agent1 at version %d", ev, ReasonAPIInitiated, version(connected))
	}
	if status, body := f.deleteConnection(t, "spaces-del5", ""); status != http.StatusNotFound || !strings.HasPrefix(body, "ResourceNotFoundException") {
		t.Errorf("a second DeleteConnection: %d %s, want 404 ResourceNotFoundException", status, body)
	}

	// MQTT 3.1.1 has no server DISCONNECT: the connection is just closed.
	c := f.mustDial(t, "spaces-del4")
	f.next(t)
	if status, body := f.deleteConnection(t, "spaces-del4", "preventWillMessage=false"); status != http.StatusOK {
		t.Fatalf("DeleteConnection: %d %s", status, body)
	}
	if ev := f.next(t); ev.EventType != "disconnected" || ev.ClientID != "spaces-del4" || ev.DisconnectReason != ReasonAPIInitiated {
		t.Fatalf("event %+v, want disconnected %s", ev, ReasonAPIInitiated)
	}
	waitFor(t, "the 3.1.1 client to see its connection closed", func() bool { return !c.IsConnectionOpen() })

	for _, bad := range []struct{ client, query string }{
		{"$aws", ""},
		{strings.Repeat("x", MaxClientIDBytes+1), ""},
		{"spaces-del4", "cleanSession=maybe"},
		{"spaces-del4", "preventWillMessage=2"},
	} {
		if status, body := f.deleteConnection(t, bad.client, bad.query); status != http.StatusBadRequest || !strings.HasPrefix(body, "InvalidRequestException") {
			t.Errorf("DeleteConnection %.20q?%s: %d %s, want 400 InvalidRequestException", bad.client, bad.query, status, body)
		}
	}
	if status, _ := f.deleteConnection(t, "spaces-never", ""); status != http.StatusNotFound {
		t.Errorf("a client never connected: %d, want 404", status)
	}
	f.quiet(t)
}
