package client

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"spaces/shared/space"
)

// The presence channel (ARCHITECTURE.md, "Agent spaces"): where the lease
// answer names an MQTT endpoint, the agent holds one connection to AWS IoT
// Core, authenticated by Spaces' custom authorizer with the agent's
// credential as the password. While it is connected, IoT Core's lifecycle
// events keep the space's lease fresh, and the agent renews over HTTP only
// when it (re)connects, when Spaces wakes it (a message on its wake topic:
// work waits), and every fallback interval; until it is connected, and
// whenever it is not, it renews every lease interval as without the
// channel. MQTT keep-alives are free; a renewal is a request.
//
// The connection only ever calls out (MQTT over TLS, port 443 with the
// ALPN protocol "mqtt" on AWS), like the rest of the agent.

// presence is one MQTT connection to one endpoint. Each (re)connect
// presents the credential use last stored, with its token signature when
// the authorizer signs (paho asks credentials() before every CONNECT). A renewed credential needs no reconnect of its own: IoT
// Core's refresh re-invokes the authorizer with the password the
// connection was opened with, so the connection lasts while that
// credential is valid (space.RenewOverlap after a renewal), is then
// refused and dropped, and the reconnect presents the newest one.
type presence struct {
	ep        space.PresenceEndpoint
	cred      atomic.Pointer[signed]
	client    mqtt.Client
	connected atomic.Bool
	// poke asks the loop for a renewal now: connected, or woken.
	poke chan struct{}
	log  *slog.Logger
}

// dialPresence starts connecting in the background; paho retries the
// first connection and reconnects after a loss on its own.
// retry bounds the waits between connection attempts (Config.MQTTRetry):
// the first connection is retried every 5 s (or retry, if less), a lost
// one with paho's backoff from 1 s doubling up to retry.
func dialPresence(ep space.PresenceEndpoint, cred, sig string, roots *x509.CertPool, retry time.Duration, log *slog.Logger) *presence {
	p := &presence{ep: ep, poke: make(chan struct{}, 1), log: log}
	p.cred.Store(&signed{cred, sig})
	host, port, _ := net.SplitHostPort(ep.Endpoint)
	tc := &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12}
	if port == "443" {
		// MQTT with a custom authorizer on 443 needs ALPN "mqtt":
		// https://docs.aws.amazon.com/iot/latest/developerguide/protocols.html
		tc.NextProtos = []string{"mqtt"}
	}
	keepAlive := time.Duration(ep.KeepAliveSeconds) * time.Second
	if keepAlive <= 0 {
		keepAlive = space.PresenceKeepAlive
	}
	opts := mqtt.NewClientOptions().
		AddBroker("tls://" + ep.Endpoint).
		SetClientID(ep.ClientID).
		SetCredentialsProvider(p.credentials).
		SetTLSConfig(tc).
		SetProtocolVersion(4).
		SetKeepAlive(keepAlive).
		SetPingTimeout(10 * time.Second).
		SetCleanSession(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(min(5*time.Second, retry)).
		SetAutoReconnect(true).
		SetMaxReconnectInterval(retry).
		SetConnectTimeout(15 * time.Second).
		SetOnConnectHandler(p.onConnect).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			p.connected.Store(false)
			log.Warn("presence connection lost; reconnecting, and renewing over HTTP meanwhile", "error", err.Error())
			p.wake() // back to the lease interval at once

		})
	p.client = mqtt.NewClient(opts)
	p.client.Connect() // with ConnectRetry it keeps trying until close
	return p
}

// onConnect subscribes to the wake topic (a clean session holds no
// subscription) and asks for a renewal: work may have been queued while
// the agent was away, and the lease answer carries it.
func (p *presence) onConnect(c mqtt.Client) {
	p.connected.Store(true)
	p.log.Info("presence connected", "endpoint", p.ep.Endpoint, "client_id", p.ep.ClientID)
	t := c.Subscribe(p.ep.WakeTopic, 1, func(mqtt.Client, mqtt.Message) { p.wake() })
	go func() {
		if t.WaitTimeout(30*time.Second) && t.Error() != nil {
			p.log.Warn("cannot subscribe to the wake topic; work waits for the fallback renewal", "error", t.Error().Error())
		}
	}()
	p.wake()
}

func (p *presence) wake() {
	select {
	case p.poke <- struct{}{}:
	default: // one pending renewal is enough
	}
}

// up: connected now.
func (p *presence) up() bool { return p != nil && p.connected.Load() }

// pokes is the channel of renewal requests (nil, which never fires,
// without a connection).
func (p *presence) pokes() <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.poke
}

// same: already connecting to ep.
func (p *presence) same(ep *space.PresenceEndpoint) bool {
	return p != nil && ep != nil && p.ep == *ep
}

// signed is a credential and the signature of its token ("": none).
type signed struct{ cred, sig string }

// credentials is paho's CredentialsProvider: the authorizer is named in
// the username's query and, when it signs, the newest credential's token
// (space.PresenceToken) under its TokenKeyName and that token's signature
// beside it, all URL-encoded
// (https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth.html);
// the password is the newest credential.
func (p *presence) credentials() (username, password string) {
	c := p.cred.Load()
	q := url.Values{"x-amz-customauthorizer-name": {p.ep.Authorizer}}
	if p.ep.TokenKeyName != "" {
		q.Set(p.ep.TokenKeyName, space.PresenceToken(c.cred))
		q.Set("x-amz-customauthorizer-signature", c.sig)
	}
	return "?" + q.Encode(), c.cred
}

// use makes cred, with sig, the one the next (re)connect presents.
func (p *presence) use(cred, sig string) {
	if p != nil {
		p.cred.Store(&signed{cred, sig})
	}
}

// close disconnects cleanly (IoT Core then reports a client-initiated
// disconnect at once).
func (p *presence) close() {
	if p != nil {
		p.client.Disconnect(250)
	}
}

// fallback is how long a connected agent waits between HTTP renewals.
func (p *presence) fallback() time.Duration {
	if d := time.Duration(p.ep.FallbackSeconds) * time.Second; d >= MinLeaseInterval {
		return d
	}
	return space.PresenceFallback
}
