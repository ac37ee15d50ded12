package iotcore

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Authorizer is a custom authorizer's Lambda function, called in process.
type Authorizer func(ctx context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error)

// Config configures the broker.
type Config struct {
	TLS         *tls.Config           // server certificate (the caller's)
	Authorizers map[string]Authorizer // by authorizer name
	Rules       []Rule
	Now         func() time.Time // default time.Now; keep-alive, authorizer TTLs, events and metering read it
	Log         *slog.Logger     // default slog.Default()
	// Region and Account of the policy resources' ARNs; default the
	// emulator's us-east-1 and 000000000000.
	Region, Account string
	// VersionResetAfter is how long a client id stays disconnected before
	// its lifecycle versionNumber starts again at 0 (default
	// DefaultVersionReset), read from Now.
	VersionResetAfter time.Duration
	// Signing holds the token signing of the authorizers that have it on
	// (by authorizer name); an authorizer not named here has signing
	// disabled (SigningDisabled: true), and every CONNECT naming it
	// invokes its function.
	Signing map[string]Signing
	// ManualSweep turns off the real-time sweep of the deadlines read from
	// Now: the caller runs Sweep after moving its clock, so that a
	// simulation of days decides when deadlines are checked (and never
	// between moving the clock and the keep-alives of the new instant).
	ManualSweep bool
}

// Signing is a custom authorizer's token signing
// (https://docs.aws.amazon.com/iot/latest/developerguide/config-custom-auth.html):
// "Token key name: The key name used to extract the token from the HTTP
// headers, query parameters, or MQTT CONNECT user name in order to perform
// signature validation", and "Token signing public key: The public key
// that AWS IoT Core uses to validate the token signature. Its minimum
// length is 2,048 bits"; an authorizer may hold several
// (TokenSigningPublicKeys, by name), any of which may verify.
type Signing struct {
	TokenKeyName string
	PublicKeys   map[string]*rsa.PublicKey
}

// SigningFromPEM is an authorizer's signing as the template declares it:
// its TokenKeyName and TokenSigningPublicKeys, PEM public keys by name.
func SigningFromPEM(tokenKeyName string, keys map[string]string) (Signing, error) {
	sg := Signing{TokenKeyName: tokenKeyName, PublicKeys: map[string]*rsa.PublicKey{}}
	for name, text := range keys {
		block, _ := pem.Decode([]byte(text))
		if block == nil {
			return Signing{}, fmt.Errorf("token signing key %s: no PEM block", name)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return Signing{}, fmt.Errorf("token signing key %s: %w", name, err)
		}
		k, ok := pub.(*rsa.PublicKey)
		if !ok {
			return Signing{}, fmt.Errorf("token signing key %s is a %T, want RSA", name, pub)
		}
		sg.PublicKeys[name] = k
	}
	return sg, nil
}

// SignatureParam is where an MQTT CONNECT's username carries the token's
// signature, beside the token under the authorizer's TokenKeyName:
// "username?x-amz-customauthorizer-name=authorizer-name&x-amz-customauthorizer-signature=token-signature&token-key-name=token-value"
// (https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth.html#custom-auth-mqtt).
const SignatureParam = "x-amz-customauthorizer-signature"

// minSigningKeyBits: the public key's "minimum length is 2,048 bits"
// (config-custom-auth.html).
const minSigningKeyBits = 2048

// errSignature refuses a CONNECT to a signing authorizer whose token is
// missing or whose signature does not verify: IoT Core checks it before
// the authorizer's function, which is not invoked.
var errSignature = errors.New("the token signature is missing or does not verify")

// verifyToken checks the username's token and signature against s: the
// signature is the base64 (standard alphabet, URL-encoded in the query) of
// an RSA PKCS #1 v1.5 signature of the token's SHA-256, as the "Signing
// the token" section makes it (openssl dgst -sha256 -sign, then base64:
// https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth.html#custom-auth-token-signature).
// It answers the token.
func verifyToken(s Signing, username string) (string, error) {
	_, query, ok := strings.Cut(username, "?")
	if !ok {
		return "", errSignature
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", errSignature
	}
	token, sig64 := q.Get(s.TokenKeyName), q.Get(SignatureParam)
	if token == "" || sig64 == "" {
		return "", errSignature
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil {
		return "", errSignature
	}
	sum := sha256.Sum256([]byte(token))
	for _, k := range s.PublicKeys {
		if k != nil && k.N.BitLen() >= minSigningKeyBits && rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) == nil {
			return token, nil
		}
	}
	return "", errSignature
}

// DefaultVersionReset: "If a client is not connected for approximately one
// hour, the version number is reset to 0"
// (https://docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html).
const DefaultVersionReset = time.Hour

// Disconnect reasons of lifecycle events
// (https://docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html).
const (
	ReasonClientInitiated  = "CLIENT_INITIATED_DISCONNECT"
	ReasonConnectionLost   = "CONNECTION_LOST"
	ReasonKeepAliveTimeout = "MQTT_KEEP_ALIVE_TIMEOUT"
	ReasonDuplicateClient  = "DUPLICATE_CLIENTID"
	ReasonAuthError        = "AUTH_ERROR" // the page's value for "failed to authenticate or authorization failed"
	ReasonClientError      = "CLIENT_ERROR"
	ReasonServerInitiated  = "SERVER_INITIATED_DISCONNECT"
	ReasonCustomAuthTTL    = "CUSTOMAUTH_TTL_EXPIRATION"
	ReasonAPIInitiated     = "API_INITIATED_DISCONNECT" // "disconnected using the DeleteConnection API"
)

// Limits of the message broker
// (https://docs.aws.amazon.com/general/latest/gr/iot-core.html#message-broker-limits):
// client id 128 bytes, topic 256 bytes UTF-8, at most 7 forward slashes in a
// topic or filter, payload 128 KB.
const (
	MaxClientIDBytes = 128
	MaxTopicBytes    = 256
	MaxTopicSlashes  = 7
	MaxPayloadBytes  = 128 * 1024
)

// Keep-alive bounds: IoT Core treats a keep-alive under 30 s as 30 s (the
// quotas page, https://docs.aws.amazon.com/general/latest/gr/iot-core.html#message-broker-limits)
// and 1200 s is its maximum and its value for 0; those two are not quoted
// from the page's own wording but follow awslabs/aws-c-mqtt's note "AWS IoT maxes out at (and defaults to)
// 1200 seconds". A client silent for 1.5 x keep-alive is disconnected with
// MQTT_KEEP_ALIVE_TIMEOUT (life-cycle-events.html).
const (
	minKeepAlive = 30 * time.Second
	maxKeepAlive = 1200 * time.Second
)

// authTimeout: "the timeout limit for the custom authorizer's Lambda function
// is 5 seconds" (https://docs.aws.amazon.com/iot/latest/developerguide/config-custom-auth.html).
const authTimeout = 5 * time.Second

// sweepEvery is how often, in real time, deadlines read from Config.Now are
// checked.
const sweepEvery = 50 * time.Millisecond

// Broker is a running local IoT Core: MQTT over TLS and the HTTPS data plane.
type Broker struct {
	cfg    Config
	log    *slog.Logger
	srv    *mqtt.Server
	mqttLn *listeners.TCP
	data   *dataPlane
	rules  []compiledRule

	ctx     context.Context // actions run under it, detached from Start's cancellation
	stop    chan struct{}
	swept   sync.WaitGroup
	actions sync.WaitGroup
	closed  atomic.Bool

	mu       sync.Mutex
	pending  map[*mqtt.Client]*conn // authorized, CONNACK not sent yet
	conns    map[*mqtt.Client]*conn // established
	live     map[string]*conn       // the established connection of each client id
	versions map[string]int64       // the next versionNumber of each client id
	idle     map[string]time.Time   // since when a client id with no connection has had none

	usage usage
}

// conn is one authorized MQTT connection.
type conn struct {
	cl         *mqtt.Client
	clientID   string
	principal  string
	session    string
	ip         string
	version    int64
	keepAlive  time.Duration
	authorizer string
	request    events.IoTCoreCustomAuthorizerRequest // re-sent at refresh

	// guarded by Broker.mu
	policy       policy
	since        time.Time
	lastSeen     time.Time
	disconnectAt time.Time
	refreshAt    time.Time
	refreshing   bool
	reason       string         // why the broker closed it; "" until then
	subscribing  map[string]int // filters of SUBSCRIBE packets being checked
}

// Start listens on 127.0.0.1:0 for MQTT over TLS and for the data plane.
// Authorizers and rule actions get ctx's values but not its cancellation:
// Close stops the broker.
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	if cfg.TLS == nil {
		return nil, errors.New("iotcore: Config.TLS is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Account == "" {
		cfg.Account = "000000000000"
	}
	if cfg.VersionResetAfter <= 0 {
		cfg.VersionResetAfter = DefaultVersionReset
	}
	b := &Broker{
		cfg:      cfg,
		log:      cfg.Log.With("component", "iotcore"),
		ctx:      context.WithoutCancel(ctx),
		stop:     make(chan struct{}),
		pending:  map[*mqtt.Client]*conn{},
		conns:    map[*mqtt.Client]*conn{},
		live:     map[string]*conn{},
		versions: map[string]int64{},
		idle:     map[string]time.Time{},
	}
	for _, r := range cfg.Rules {
		cr, err := compileRule(r)
		if err != nil {
			return nil, err
		}
		b.rules = append(b.rules, cr)
	}

	caps := mqtt.NewDefaultServerCapabilities()
	// IoT Core supports QoS 0 and 1 only
	// (https://docs.aws.amazon.com/iot/latest/developerguide/mqtt.html).
	caps.MaximumQos = 1
	b.srv = mqtt.New(&mqtt.Options{
		InlineClient: true, // lifecycle events and the data plane publish through it
		Capabilities: caps,
		Logger:       b.log.With("part", "mochi"),
	})
	if err := b.srv.AddHook(&hook{b: b}, nil); err != nil {
		return nil, err
	}
	tlsCfg := cfg.TLS.Clone()
	b.mqttLn = listeners.NewTCP(listeners.Config{ID: "mqtts", Address: "127.0.0.1:0", TLSConfig: tlsCfg})
	if err := b.srv.AddListener(b.mqttLn); err != nil {
		return nil, fmt.Errorf("iotcore: listen: %w", err)
	}
	if err := b.srv.Serve(); err != nil {
		return nil, fmt.Errorf("iotcore: serve: %w", err)
	}
	data, err := startDataPlane(b, tlsCfg)
	if err != nil {
		_ = b.srv.Close()
		return nil, err
	}
	b.data = data
	if !cfg.ManualSweep {
		b.swept.Add(1)
		go b.sweep()
	}
	return b, nil
}

// MQTTAddr is the host:port of MQTT over TLS.
func (b *Broker) MQTTAddr() string { return b.mqttLn.Address() }

// DataURL is the https://host:port of the data plane.
func (b *Broker) DataURL() string { return "https://" + b.data.ln.Addr().String() }

// Close disconnects every client (SERVER_INITIATED_DISCONNECT), publishes
// their disconnected events, waits for rule actions and stops listening.
func (b *Broker) Close() {
	if !b.closed.CompareAndSwap(false, true) {
		return
	}
	close(b.stop)
	b.swept.Wait()
	b.mu.Lock()
	for _, c := range b.conns {
		if c.reason == "" {
			c.reason = ReasonServerInitiated
		}
	}
	b.mu.Unlock()
	b.data.close()
	_ = b.srv.Close()
	b.srv.Listeners.ClientsWg.Wait() // every OnDisconnect has run
	b.actions.Wait()
}

func (b *Broker) now() time.Time { return b.cfg.Now() }

func (b *Broker) arn(kind, name string) string {
	return "arn:aws:iot:" + b.cfg.Region + ":" + b.cfg.Account + ":" + kind + "/" + name
}

// authorizerName reads the MQTT username's query form:
// "username?x-amz-customauthorizer-name=NAME&..."; the part before '?' and
// other parameters are ignored by the model
// (https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth.html).
func authorizerName(username string) string {
	_, query, ok := strings.Cut(username, "?")
	if !ok {
		return ""
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return ""
	}
	return q.Get("x-amz-customauthorizer-name")
}

// effectiveKeepAlive applies IoT Core's keep-alive bounds (see minKeepAlive).
func effectiveKeepAlive(seconds uint16) time.Duration {
	d := time.Duration(seconds) * time.Second
	switch {
	case seconds == 0 || d > maxKeepAlive:
		return maxKeepAlive
	case d < minKeepAlive:
		return minKeepAlive
	}
	return d
}

// authorize runs a connection's authorizer and validates its answer.
func (b *Broker) authorize(name string, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
	auth, ok := b.cfg.Authorizers[name]
	if !ok {
		return events.IoTCoreCustomAuthorizerResponse{}, fmt.Errorf("no authorizer %q", name)
	}
	b.usage.authorizerCalls.Add(1)
	ctx, cancel := context.WithTimeout(b.ctx, authTimeout)
	defer cancel()
	resp, err := auth(ctx, req)
	if err != nil {
		return resp, fmt.Errorf("authorizer %s: %w", name, err)
	}
	if err := validateAuthResponse(resp); err != nil {
		return resp, fmt.Errorf("authorizer %s: %w", name, err)
	}
	return resp, nil
}

// errClientID refuses a CONNECT whose client id is over the limit: a
// malformed request, not an authorization failure.
var errClientID = errors.New("client id over the limit")

// connect authenticates and authorizes a CONNECT; an error refuses it.
// principal is the authorizer's principalId when it accepted the password
// and the policy refused the client id.
func (b *Broker) connect(cl *mqtt.Client, pk packets.Packet) (c *conn, principal string, err error) {
	id := cl.ID
	if len(id) > MaxClientIDBytes {
		return nil, "", fmt.Errorf("%w: %d bytes, over %d", errClientID, len(id), MaxClientIDBytes)
	}
	name := authorizerName(string(pk.Connect.Username))
	if name == "" {
		return nil, "", errors.New("no ?x-amz-customauthorizer-name= in the username (certificate and SigV4 authentication are not modelled)")
	}
	var token string
	if sg, ok := b.cfg.Signing[name]; ok {
		if token, err = verifyToken(sg, string(pk.Connect.Username)); err != nil {
			return nil, "", err
		}
	}
	req := events.IoTCoreCustomAuthorizerRequest{
		Token: token, SignatureVerified: token != "",
		Protocols: []string{"mqtt"},
		ProtocolData: &events.IoTCoreProtocolData{
			MQTT: &events.IoTCoreMQTTContext{
				ClientID: id,
				Username: string(pk.Connect.Username),
				Password: append([]byte(nil), pk.Connect.Password...),
			},
		},
		ConnectionMetadata: &events.IoTCoreConnectionMetadata{ID: uuid.NewString()},
	}
	resp, err := b.authorize(name, req)
	if err != nil {
		return nil, "", err
	}
	pol := policy(resp.PolicyDocuments)
	if !pol.allows(actConnect, b.arn("client", id)) {
		return nil, resp.PrincipalID, fmt.Errorf("the policy does not allow iot:Connect for client %s", id)
	}
	now := b.now()
	host, _, _ := net.SplitHostPort(cl.Net.Remote)
	return &conn{
		cl:           cl,
		clientID:     id,
		principal:    resp.PrincipalID,
		session:      uuid.NewString(),
		ip:           host,
		keepAlive:    effectiveKeepAlive(pk.Connect.Keepalive),
		authorizer:   name,
		request:      req,
		policy:       pol,
		since:        now,
		lastSeen:     now,
		disconnectAt: now.Add(time.Duration(resp.DisconnectAfterInSeconds) * time.Second),
		refreshAt:    now.Add(time.Duration(resp.RefreshAfterInSeconds) * time.Second),
		subscribing:  map[string]int{},
	}, resp.PrincipalID, nil
}

// kick closes a connection for reason (the first reason given sticks). An
// MQTT 5 client gets a DISCONNECT with the reason code first; MQTT 3.1.1 has
// no server DISCONNECT, so its connection is just closed.
func (b *Broker) kick(c *conn, reason string, code packets.Code) {
	b.mu.Lock()
	if c.reason == "" {
		c.reason = reason
	}
	b.mu.Unlock()
	if c.cl.Properties.ProtocolVersion < 5 {
		c.cl.Stop(code)
		return
	}
	_ = b.srv.DisconnectClient(c.cl, code)
}

// sweep enforces the deadlines read from Config.Now every sweepEvery of
// real time.
func (b *Broker) sweep() {
	defer b.swept.Done()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		_, refresh := b.due()
		for _, c := range refresh {
			b.actions.Add(1)
			go func() {
				defer b.actions.Done()
				b.refresh(c)
			}()
		}
	}
}

// Swept is what one Sweep did.
type Swept struct {
	Kicked    int // connections closed (keep-alive, disconnectAfterInSeconds)
	Refreshed int // policy refreshes run (each an authorizer invocation)
}

// Sweep checks the deadlines read from Config.Now once, at once: the
// connections due are closed and the refreshes due run before it returns
// (the closed connections' disconnected events follow asynchronously, as
// mochi notices each close). For Config.ManualSweep.
func (b *Broker) Sweep() Swept {
	kicks, refresh := b.due()
	for _, c := range refresh {
		b.refresh(c)
	}
	return Swept{Kicked: kicks, Refreshed: len(refresh)}
}

// due enforces the deadlines read from Config.Now: keep-alive and the
// authorizer's disconnectAfterInSeconds close connections (at once); the
// connections whose refreshAfterInSeconds has passed are answered, marked
// as refreshing, for the caller to refresh.
func (b *Broker) due() (kicked int, refresh []*conn) {
	now := b.now()
	type due struct {
		c      *conn
		reason string
		code   packets.Code
	}
	var kicks []due
	b.mu.Lock()
	for _, c := range b.conns {
		if c.reason != "" {
			continue
		}
		switch {
		case now.Sub(c.lastSeen) >= c.keepAlive*3/2:
			kicks = append(kicks, due{c, ReasonKeepAliveTimeout, packets.ErrKeepAliveTimeout})
		case !now.Before(c.disconnectAt):
			kicks = append(kicks, due{c, ReasonCustomAuthTTL, packets.ErrAdministrativeAction})
		case !now.Before(c.refreshAt) && !c.refreshing:
			c.refreshing = true
			refresh = append(refresh, c)
		}
	}
	b.mu.Unlock()
	for _, k := range kicks {
		b.log.Debug("disconnecting", "client", k.c.clientID, "reason", k.reason)
		b.kick(k.c, k.reason, k.code)
	}
	return len(kicks), refresh
}

// Connected reports whether clientID has an established connection the
// broker has not begun to close.
func (b *Broker) Connected(clientID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.live[clientID]
	return c != nil && c.reason == ""
}

// Connections is how many connections are established (closing ones
// included until mochi has closed them).
func (b *Broker) Connections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

// refresh re-invokes the authorizer at refreshAfterInSeconds ("When this
// interval passes, AWS IoT Core invokes the Lambda function to allow for
// policy refreshes":
// https://docs.aws.amazon.com/iot/latest/developerguide/custom-authorizer.html)
// with the request of the CONNECT, the connection's original password: a
// client cannot present another on a live connection. A refusal disconnects
// the client (AUTH_ERROR), an answer replaces its policy. The connection
// keeps the deadline its first answer set ("disconnectAfterInSeconds is for
// the lifetime of a connection and doesn't get refreshed").
func (b *Broker) refresh(c *conn) {
	resp, err := b.authorize(c.authorizer, c.request)
	if err != nil {
		b.log.Info("policy refresh refused", "client", c.clientID, "error", err)
		b.kick(c, ReasonAuthError, packets.ErrNotAuthorized)
		return
	}
	b.mu.Lock()
	c.policy = policy(resp.PolicyDocuments)
	c.refreshAt = b.now().Add(time.Duration(resp.RefreshAfterInSeconds) * time.Second)
	c.refreshing = false
	b.mu.Unlock()
}

// lifecycle is the JSON of a presence event
// (https://docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html):
// connected and disconnected carry versionNumber; connect_failed carries
// connectFailureReason instead.
type lifecycle struct {
	ClientID                  string `json:"clientId"`
	Timestamp                 int64  `json:"timestamp"`
	EventType                 string `json:"eventType"`
	SessionIdentifier         string `json:"sessionIdentifier"`
	PrincipalIdentifier       string `json:"principalIdentifier"`
	IPAddress                 string `json:"ipAddress,omitempty"`
	ClientInitiatedDisconnect *bool  `json:"clientInitiatedDisconnect,omitempty"`
	DisconnectReason          string `json:"disconnectReason,omitempty"`
	ConnectFailureReason      string `json:"connectFailureReason,omitempty"`
	VersionNumber             *int64 `json:"versionNumber,omitempty"`
}

// EventConnectFailed is the eventType IoT Core publishes on
// $aws/events/presence/connect_failed/<clientId> "when a client is not
// authorized to connect", with connectFailureReason AUTHORIZATION_FAILED
// (life-cycle-events.html, "Connect attempt failure event").
const (
	EventConnectFailed         = "connect_failed"
	FailureAuthorizationFailed = "AUTHORIZATION_FAILED"
)

// publishEvent publishes a lifecycle event on
// $aws/events/presence/<eventType>/<clientId>. "Client IDs that contain #
// or + do not receive lifecycle events" (life-cycle-events.html).
func (b *Broker) publishEvent(ev lifecycle) {
	if strings.ContainsAny(ev.ClientID, "#+") {
		return
	}
	payload, _ := json.Marshal(ev) // plain struct: cannot fail
	topic := "$aws/events/presence/" + ev.EventType + "/" + ev.ClientID
	if err := b.srv.Publish(topic, payload, false, 0); err != nil {
		b.log.Error("lifecycle event not published", "topic", topic, "error", err)
	}
}

// runRules runs the action of every rule selecting the message. Actions run
// concurrently with the broker; an error is logged (IoT's error action is
// not modelled).
func (b *Broker) runRules(topic string, payload []byte) {
	for _, r := range b.rules {
		if !r.selects(topic, payload) {
			continue
		}
		b.usage.rulesTriggered.Add(1)
		b.usage.ruleActions.Add(1)
		body := append([]byte(nil), payload...)
		b.actions.Add(1)
		go func(r compiledRule) {
			defer b.actions.Done()
			if err := r.Action(b.ctx, body); err != nil {
				b.log.Error("topic rule action failed", "rule", r.Name, "topic", topic, "error", err)
			}
		}(r)
	}
}

// checkTopic applies the topic limits to a topic name or filter.
func checkTopic(topic string) error {
	if len(topic) > MaxTopicBytes {
		return fmt.Errorf("topic of %d bytes is over %d", len(topic), MaxTopicBytes)
	}
	if n := strings.Count(topic, "/"); n > MaxTopicSlashes {
		return fmt.Errorf("topic has %d slashes, over %d", n, MaxTopicSlashes)
	}
	return nil
}
