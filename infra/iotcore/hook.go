package iotcore

import (
	"errors"
	"net"
	"strings"

	"github.com/google/uuid"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// hook plugs the model's rules into mochi's connection life cycle.
type hook struct {
	mqtt.HookBase
	b *Broker
}

func (h *hook) ID() string { return "iotcore" }

func (h *hook) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnSessionEstablish, mqtt.OnSessionEstablished,
		mqtt.OnDisconnect, mqtt.OnPacketRead, mqtt.OnPacketSent, mqtt.OnACLCheck,
		mqtt.OnSubscribe, mqtt.OnSubscribed, mqtt.OnPublish, mqtt.OnPublished:
		return true
	}
	return false
}

// OnConnect runs the custom authorizer. A refusal answers CONNACK "not
// authorized" and publishes a connect_failed event (none for a client id
// over the limit, a malformed CONNECT).
func (h *hook) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	b := h.b
	b.usage.messages.Add(units(len(pk.Connect.ClientIdentifier) + len(pk.Connect.Username) +
		len(pk.Connect.Password) + len(pk.Connect.WillTopic) + len(pk.Connect.WillPayload)))
	c, principal, err := b.connect(cl, pk)
	if err != nil {
		b.log.Info("CONNECT refused", "client", cl.ID, "error", err)
		if !errors.Is(err, errClientID) {
			host, _, _ := net.SplitHostPort(cl.Net.Remote)
			b.publishEvent(lifecycle{
				ClientID: cl.ID, Timestamp: b.now().UnixMilli(), EventType: EventConnectFailed,
				SessionIdentifier: uuid.NewString(), PrincipalIdentifier: principal, IPAddress: host,
				ConnectFailureReason: FailureAuthorizationFailed,
			})
		}
		code := packets.ErrNotAuthorized
		if cl.Properties.ProtocolVersion < 5 {
			code = packets.ErrBadUsernameOrPassword // mochi sends it as 3.1.1's 5, "not authorized"
		}
		if len(cl.ID) > MaxClientIDBytes {
			code = packets.ErrClientIdentifierNotValid
		}
		_ = b.srv.SendConnack(cl, code, false, nil)
		return err
	}
	// Keep-alive is enforced by Broker.sweep on Config.Now, not by mochi's
	// real-time read deadline.
	cl.State.Keepalive = 0
	b.mu.Lock()
	b.pending[cl] = c
	b.mu.Unlock()
	return nil
}

func (h *hook) OnConnectAuthenticate(cl *mqtt.Client, _ packets.Packet) bool {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	return h.b.pending[cl] != nil
}

// OnSessionEstablish runs before mochi takes over an existing session of the
// same client id: "If a new connection is established with a client ID that
// is already in use, the AWS IoT message broker drops the existing
// connection" (security-best-practices.html,
// https://docs.aws.amazon.com/iot/latest/developerguide/security-best-practices.html),
// with reason DUPLICATE_CLIENTID (life-cycle-events.html). versionNumber
// counts the connections of a client id from 0, and starts again at 0 once
// the client id has had no connection for Config.VersionResetAfter ("If a
// client is not connected for approximately one hour, the version number is
// reset to 0", life-cycle-events.html; persistent sessions, whose reset
// waits for their TTL, are not modelled).
func (h *hook) OnSessionEstablish(cl *mqtt.Client, _ packets.Packet) {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.pending[cl]
	delete(b.pending, cl)
	if c == nil {
		return
	}
	if old := b.live[c.clientID]; old != nil && old.reason == "" {
		old.reason = ReasonDuplicateClient
	}
	now := b.now()
	if since, ok := b.idle[c.clientID]; ok && now.Sub(since) >= b.cfg.VersionResetAfter {
		delete(b.versions, c.clientID)
	}
	delete(b.idle, c.clientID)
	c.version = b.versions[c.clientID]
	b.versions[c.clientID] = c.version + 1
	c.since, c.lastSeen = now, now
	b.conns[cl] = c
	b.live[c.clientID] = c
}

func (h *hook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	b := h.b
	b.mu.Lock()
	c := b.conns[cl]
	b.mu.Unlock()
	if c == nil {
		return
	}
	b.publishEvent(lifecycle{
		ClientID: c.clientID, Timestamp: b.now().UnixMilli(), EventType: "connected",
		SessionIdentifier: c.session, PrincipalIdentifier: c.principal, IPAddress: c.ip,
		VersionNumber: &c.version,
	})
}

// OnDisconnect publishes the disconnected event, carrying its connection's
// versionNumber: a DISCONNECT packet is CLIENT_INITIATED_DISCONNECT, a
// connection the broker closed carries its reason, anything else (the TCP
// connection dropped) is CONNECTION_LOST.
func (h *hook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	b := h.b
	now := b.now()
	b.mu.Lock()
	delete(b.pending, cl)
	c := b.conns[cl]
	if c == nil {
		b.mu.Unlock()
		return
	}
	delete(b.conns, cl)
	if b.live[c.clientID] == c {
		delete(b.live, c.clientID)
		b.idle[c.clientID] = now
	}
	b.usage.closedMinutes += billedMinutes(now.Sub(c.since))
	reason := c.reason
	b.mu.Unlock()

	byClient := false
	if reason == "" {
		cause := cl.StopCause()
		if errors.Is(cause, packets.CodeDisconnect) || errors.Is(cause, packets.CodeDisconnectWillMessage) {
			reason, byClient = ReasonClientInitiated, true
		} else {
			reason = ReasonConnectionLost
		}
	}
	b.publishEvent(lifecycle{
		ClientID: c.clientID, Timestamp: now.UnixMilli(), EventType: "disconnected",
		SessionIdentifier: c.session, PrincipalIdentifier: c.principal,
		ClientInitiatedDisconnect: &byClient, DisconnectReason: reason, VersionNumber: &c.version,
	})
}

// OnPacketRead keeps the connection alive: "if there is no client-server
// communication for 1.5x of the client's keep-alive time, the client is
// disconnected" (life-cycle-events.html). A PUBACK from the device is
// metered as one 5 KB message (pricing additional details,
// https://aws.amazon.com/iot-core/pricing/additional-details/).
func (h *hook) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	b := h.b
	b.mu.Lock()
	if c := b.conns[cl]; c != nil {
		c.lastSeen = b.now()
	}
	b.mu.Unlock()
	if pk.FixedHeader.Type == packets.Puback {
		b.usage.messages.Add(1)
	}
	return pk, nil
}

// OnPacketSent meters PUBLISH sent by the service on payload and topic size.
func (h *hook) OnPacketSent(cl *mqtt.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type == packets.Publish && !cl.Net.Inline {
		h.b.usage.messages.Add(units(len(pk.TopicName) + len(pk.Payload)))
	}
}

// OnSubscribe meters SUBSCRIBE on its filters' size and notes the filters,
// so OnACLCheck knows the next checks of them are iot:Subscribe.
func (h *hook) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	b := h.b
	n := 0
	b.mu.Lock()
	c := b.conns[cl]
	for _, f := range pk.Filters {
		n += len(f.Filter)
		if c != nil {
			c.subscribing[f.Filter]++
		}
	}
	b.mu.Unlock()
	b.usage.messages.Add(units(n))
	return pk
}

func (h *hook) OnSubscribed(cl *mqtt.Client, pk packets.Packet, _ []byte) {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.conns[cl]; c != nil {
		for _, f := range pk.Filters {
			delete(c.subscribing, f.Filter)
		}
	}
}

// OnACLCheck evaluates the connection's policy. mochi asks with write=false
// both for a SUBSCRIBE's filter (iot:Subscribe on topicfilter/...) and for
// delivering a message (iot:Receive on topic/...): a filter with wildcards,
// or one OnSubscribe noted, is a subscription (so a message delivered at
// that very moment on a topic spelled like a pending wildcard-free filter is
// judged by iot:Subscribe: a known edge of the model). A denied filter gets SUBACK's
// failure code. A denied PUBLISH from an MQTT 3.1.1 client disconnects it
// with AUTH_ERROR ("the client failed to authenticate or authorization
// failed", life-cycle-events.html); mochi answers an MQTT 5 client's QoS 1
// PUBLISH with PUBACK "not authorized" and drops a QoS 0 one. A topic over
// the limits disconnects with CLIENT_ERROR.
func (h *hook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	b := h.b
	b.mu.Lock()
	c := b.conns[cl]
	if c == nil {
		b.mu.Unlock()
		return false
	}
	var ok bool
	kick := ""
	switch {
	case write:
		if err := checkTopic(topic); err != nil {
			kick = ReasonClientError
		} else if ok = c.policy.allows(actPublish, b.arn("topic", topic)); !ok && cl.Properties.ProtocolVersion < 5 {
			kick = ReasonAuthError
		}
	case strings.ContainsAny(topic, "+#") || c.subscribing[topic] > 0:
		if c.subscribing[topic] > 0 {
			c.subscribing[topic]--
		}
		ok = checkTopic(topic) == nil && c.policy.allows(actSubscribe, b.arn("topicfilter", topic))
	default:
		ok = c.policy.allows(actReceive, b.arn("topic", topic))
	}
	b.mu.Unlock()
	if kick != "" {
		b.log.Info("PUBLISH refused; disconnecting", "client", c.clientID, "topic", topic, "reason", kick)
		b.kick(c, kick, packets.ErrNotAuthorized)
	}
	return ok
}

// OnPublish meters a device's PUBLISH on payload and topic size and applies
// the payload limit: "If a message size limit exceeds the service quotas, it
// will result in a CLIENT_ERROR with reason PAYLOAD_LIMIT_EXCEEDED"
// (https://docs.aws.amazon.com/iot/latest/developerguide/topicdata.html).
func (h *hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline {
		return pk, nil
	}
	b := h.b
	b.usage.messages.Add(units(len(pk.TopicName) + len(pk.Payload)))
	if len(pk.Payload) > MaxPayloadBytes {
		b.mu.Lock()
		c := b.conns[cl]
		b.mu.Unlock()
		if c != nil {
			b.kick(c, ReasonClientError, packets.ErrPacketTooLarge)
		}
		return pk, packets.ErrRejectPacket
	}
	return pk, nil
}

// OnPublished runs the topic rules on every message, device, data plane and
// lifecycle events alike.
func (h *hook) OnPublished(_ *mqtt.Client, pk packets.Packet) {
	h.b.runRules(pk.TopicName, pk.Payload)
}
