package agents_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/kmssign"
	"spaces/shared/space"
	"spaces/shared/wiring/agents"
	"spaces/shared/wiring/parts"
)

const prefix = "stack-"

// presenceEnv is the agent function on the emulator, called as the
// Lambda runtime calls it (JSON in, JSON out), with a settable clock and
// its log captured.
type presenceEnv struct {
	t      *testing.T
	h      *agents.Handlers
	handle func(context.Context, json.RawMessage) (any, error)
	store  *dynamostore.Store
	sqs    *sqs.Client
	probes string // the probe queue's URL
	aws    parts.AWS
	now    time.Time
	mu     sync.Mutex
	logs   bytes.Buffer
}

func (e *presenceEnv) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.Write(p)
}

func newPresenceEnv(t *testing.T, table string) *presenceEnv {
	return newPresenceEnvWith(t, table, nil)
}

// newPresenceEnvWith is newPresenceEnv with its settings changed by set,
// which also sees the emulator's resources.
func newPresenceEnvWith(t *testing.T, table string, set func(*agents.Settings, *emulatortest.Env)) *presenceEnv {
	env := emulatortest.Start(t)
	a := parts.AWS{Config: env.Config, Endpoint: env.Endpoint}
	e := &presenceEnv{t: t, now: time.Now().UTC().Truncate(time.Second), store: a.Store(env.Name(t, "SpacesTable")),
		sqs: awsclient.SQS(env.Config, env.Endpoint), probes: env.Resources["ProbeQueue"].URL, aws: a}
	if table == "" {
		table = env.Name(t, "SpacesTable")
	}
	s := agents.Settings{Common: parts.Common{Table: table, StaleAfter: space.DefaultStaleAfter},
		ProbeQueue: env.Resources["ProbeQueue"].URL,
		Presence:   space.PresenceConfig{Endpoint: "iot.example:443", Authorizer: "stack-agent", ClientPrefix: prefix}}
	if set != nil {
		set(&s, env)
	}
	e.h = agents.NewHandlers(a, s, agents.Options{Now: func() time.Time { return e.now },
		Log: slog.New(slog.NewJSONHandler(e, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	e.handle = agents.Lambda{HTTP: nil, Authorize: e.h.Authorize, Presence: e.h.Presence}.Handle
	return e
}

// agentSpace registers an agent space and exchanges its bootstrap.
func (e *presenceEnv) agentSpace() (space.Space, space.AgentToken) {
	s, b := e.bootstrapped()
	cred := space.NewAgentCredential(s.ID)
	if _, err := e.store.ExchangeBootstrap(e.t.Context(), s.ID, b.Hash(), cred.Hash(), "", e.now.Add(space.AgentCredentialTTL), e.now); err != nil {
		e.t.Fatal(err)
	}
	return s, cred
}

// bootstrapped registers an agent space with a bootstrap.
func (e *presenceEnv) bootstrapped() (space.Space, space.AgentToken) {
	t := e.t
	org := uuid.NewString()
	acct := space.CloudAccount{ID: uuid.NewString(), OrgID: org, Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"},
		Status:     space.AccountReady, CreatedAt: e.now, Version: 1}
	if err := e.store.CreateAccount(t.Context(), acct); err != nil {
		t.Fatal(err)
	}
	s := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
		CloudAccountID: acct.ID, Connectivity: space.ViaAgent,
		Config: space.Config{"clusterName": "c-" + strconv.FormatInt(time.Now().UnixNano(), 36), "region": "us-east-1"}}, e.now)
	if err := e.store.Register(t.Context(), s, space.Idempotency{}); err != nil {
		t.Fatal(err)
	}
	b := space.NewBootstrapToken(s.ID)
	if err := e.store.PutBootstrap(t.Context(), s, b.Hash(), e.now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return s, b
}

// TestCredentialAnswerCarriesPresence: with the presence channel
// configured, the exchange's answer (through the function's HTTP handler)
// tells the agent where and as whom to connect, and the credential it
// carries is what the authorizer accepts for that client id.
func TestCredentialAnswerCarriesPresence(t *testing.T) {
	e := newPresenceEnv(t, "")
	s, b := e.bootstrapped()
	req := httptest.NewRequest("POST", "/agent/exchange", nil)
	req.Header.Set("Authorization", "Bearer "+b.Raw)
	rec := httptest.NewRecorder()
	e.h.HTTP.ServeHTTP(rec, req)
	var c space.AgentCredential
	if err := json.Unmarshal(rec.Body.Bytes(), &c); rec.Code != 200 || err != nil || c.Presence == nil {
		t.Fatalf("exchange: %d %s", rec.Code, rec.Body)
	}
	want := space.PresenceEndpoint{Endpoint: "iot.example:443", Authorizer: "stack-agent", ClientID: prefix + s.ID,
		WakeTopic: "spaces/" + prefix + s.ID + "/wake", KeepAliveSeconds: 30, FallbackSeconds: 600}
	if *c.Presence != want {
		t.Errorf("presence %+v, want %+v", *c.Presence, want)
	}
	if res := e.authorize(c.Presence.ClientID, []byte(c.Credential)); !res.IsAuthenticated {
		t.Errorf("the answered credential and client id are refused: %+v", res)
	}
}

// authorize sends an authorizer request as IoT Core does (the password
// base64 in the JSON).
func (e *presenceEnv) authorize(clientID string, password []byte) events.IoTCoreCustomAuthorizerResponse {
	e.t.Helper()
	return e.authorizeToken(clientID, password, "", false)
}

// authorizeToken is authorize with the token IoT Core passes and whether
// it verified its signature.
func (e *presenceEnv) authorizeToken(clientID string, password []byte, token string, verified bool) events.IoTCoreCustomAuthorizerResponse {
	e.t.Helper()
	raw := `{"token":"` + token + `","signatureVerified":` + strconv.FormatBool(verified) + `,"protocols":["mqtt"],"protocolData":{"mqtt":{"username":"?x-amz-customauthorizer-name=stack-agent",` +
		`"password":"` + base64.StdEncoding.EncodeToString(password) + `","clientId":"` + clientID + `"}},"connectionMetadata":{"id":"` + uuid.NewString() + `"}}`
	out, err := e.handle(e.t.Context(), json.RawMessage(raw))
	if err != nil {
		e.t.Fatalf("authorize: a Lambda error %v (IoT would count the authorizer failing)", err)
	}
	var res events.IoTCoreCustomAuthorizerResponse
	b, _ := json.Marshal(out)
	if err := json.Unmarshal(b, &res); err != nil {
		e.t.Fatal(err)
	}
	return res
}

func TestAuthorize(t *testing.T) {
	e := newPresenceEnv(t, "")
	s, cred := e.agentSpace()
	client := space.AgentClientID(prefix, s.ID)
	res := e.authorize(client, []byte(cred.Raw))
	if !res.IsAuthenticated || res.PrincipalID != strings.ReplaceAll(s.ID, "-", "") {
		t.Fatalf("a valid credential: %+v", res)
	}
	if res.DisconnectAfterInSeconds != 86400 || res.RefreshAfterInSeconds != 3600 {
		t.Errorf("disconnect after %d, refresh after %d; want the credential's 86400 s and an hour",
			res.DisconnectAfterInSeconds, res.RefreshAfterInSeconds)
	}
	wake := "spaces/" + prefix + s.ID + "/wake"
	want := []events.IAMPolicyStatement{
		{Action: []string{"iot:Connect"}, Effect: "Allow", Resource: []string{"arn:aws:iot:*:*:client/" + client}},
		{Action: []string{"iot:Subscribe"}, Effect: "Allow", Resource: []string{"arn:aws:iot:*:*:topicfilter/" + wake}},
		{Action: []string{"iot:Receive"}, Effect: "Allow", Resource: []string{"arn:aws:iot:*:*:topic/" + wake}},
	}
	if len(res.PolicyDocuments) != 1 {
		t.Fatalf("policies %+v", res.PolicyDocuments)
	}
	got, _ := json.Marshal(res.PolicyDocuments[0].Statement)
	if w, _ := json.Marshal(want); string(got) != string(w) {
		t.Errorf("policy\n%s\nwant\n%s", got, w)
	}
	// Later in the credential's life: the seconds left.
	e.now = e.now.Add(23 * time.Hour)
	if res := e.authorize(client, []byte(cred.Raw)); !res.IsAuthenticated || res.DisconnectAfterInSeconds != 3600 {
		t.Errorf("an hour before expiry: %+v", res)
	}
	e.now = e.now.Add(56 * time.Minute) // 4 minutes left: below IoT's 300 s
	if res := e.authorize(client, []byte(cred.Raw)); res.IsAuthenticated {
		t.Errorf("4 minutes before expiry: accepted %+v", res)
	}
	e.now = e.now.Add(-23*time.Hour - 56*time.Minute)

	other, otherCred := e.agentSpace()
	for name, c := range map[string]struct {
		client   string
		password string
	}{
		"another space's credential":       {client, otherCred.Raw},
		"its credential, another's client": {space.AgentClientID(prefix, other.ID), cred.Raw},
		"another stack's client id":        {"other-" + s.ID, cred.Raw},
		"the bare space id":                {s.ID, cred.Raw},
		"a forged secret":                  {client, space.NewAgentCredential(s.ID).Raw},
		"no password":                      {client, ""},
		"garbage":                          {client, "spa1.not-a-token"},
	} {
		if res := e.authorize(c.client, []byte(c.password)); res.IsAuthenticated || len(res.PolicyDocuments) != 0 {
			t.Errorf("%s: accepted %+v", name, res)
		}
	}
	// A password IoT would not send (not base64): refused, no Lambda error.
	if out, err := e.handle(t.Context(), json.RawMessage(`{"protocolData":{"mqtt":{"clientId":"`+client+`","password":"!!"}}}`)); err != nil ||
		out.(events.IoTCoreCustomAuthorizerResponse).IsAuthenticated {
		t.Errorf("an unreadable request: %+v %v", out, err)
	}
	// Not MQTT at all.
	if out, err := e.handle(t.Context(), json.RawMessage(`{"protocols":["http"],"protocolData":{"http":{}}}`)); err != nil ||
		out.(events.IoTCoreCustomAuthorizerResponse).IsAuthenticated {
		t.Errorf("an HTTP connection: %+v %v", out, err)
	}
	if strings.Contains(e.logs.String(), cred.Raw) || strings.Contains(e.logs.String(), otherCred.Raw) {
		t.Errorf("a credential reached the log:\n%s", e.logs.String())
	}
	if !strings.Contains(e.logs.String(), "the client id is not the credential's space's") {
		t.Errorf("the refusal's cause is not logged:\n%s", e.logs.String())
	}
}

// TestAuthorizeStoreDown: a store that cannot be read refuses the
// connection, without a Lambda error.
func TestAuthorizeStoreDown(t *testing.T) {
	e := newPresenceEnv(t, "no-such-table")
	id := uuid.NewString()
	if res := e.authorize(prefix+id, []byte(space.NewAgentCredential(id).Raw)); res.IsAuthenticated {
		t.Fatalf("accepted %+v", res)
	}
	if !strings.Contains(e.logs.String(), "cannot check the credential") {
		t.Errorf("the outage is not logged as such:\n%s", e.logs.String())
	}
}

// lifecycle is IoT Core's event for client, with the principal the
// authorizer gives the client's space.
func lifecycle(client, kind string, ms, version int64, reason string) string {
	return lifecycleAs(client, space.PrincipalOf(client[max(0, len(client)-36):]), kind, ms, version, reason)
}

func lifecycleAs(client, principal, kind string, ms, version int64, reason string) string {
	m := map[string]any{"clientId": client, "timestamp": ms, "eventType": kind, "sessionIdentifier": uuid.NewString(),
		"principalIdentifier": principal, "versionNumber": version}
	if kind == "connected" {
		m["ipAddress"] = "127.0.0.1"
	} else {
		m["clientInitiatedDisconnect"] = reason == "CLIENT_INITIATED_DISCONNECT"
		m["disconnectReason"] = reason
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// presence delivers one SQS batch as Lambda's event source mapping does
// and answers the ids reported failed.
func (e *presenceEnv) presence(bodies ...string) []string {
	e.t.Helper()
	ev := events.SQSEvent{}
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m" + strconv.Itoa(i), Body: b, EventSource: "aws:sqs"})
	}
	raw, _ := json.Marshal(ev)
	out, err := e.handle(e.t.Context(), raw)
	if err != nil {
		e.t.Fatalf("presence: %v", err)
	}
	var failed []string
	for _, f := range out.(events.SQSEventResponse).BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	return failed
}

func TestPresence(t *testing.T) {
	e := newPresenceEnv(t, "")
	s, cred := e.agentSpace()
	client := space.AgentClientID(prefix, s.ID)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	lease := func() space.Lease {
		l, err := e.store.GetLease(t.Context(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	gone, _ := e.agentSpace()
	// A batch: the connect (twice), a malformed body, another stack's
	// client, an unknown space's: none fails.
	if failed := e.presence(
		lifecycle(client, "connected", ms(e.now), 1, ""),
		"{not json",
		`{"clientId":"`+client+`","eventType":"subscribed","timestamp":1,"versionNumber":1}`,
		lifecycle("other-"+s.ID, "disconnected", ms(e.now), 9, "CONNECTION_LOST"),
		lifecycle(prefix+uuid.NewString(), "connected", ms(e.now), 1, ""),
		lifecycle(client, "connected", ms(e.now), 1, ""),
	); len(failed) != 0 {
		t.Fatalf("failed %v", failed)
	}
	l := lease()
	if l.Presence == nil || !l.Presence.Connected || l.Presence.Version != 1 || !l.Presence.At.Equal(e.now) {
		t.Fatalf("stored %+v", l.Presence)
	}
	// The first connect of a space never renewed asks for a check.
	if n := e.probeMessages(); n != 1 {
		t.Errorf("%d lease checks enqueued, want 1", n)
	}
	// Its disconnect, then the late duplicate of its connect: the
	// disconnect stays.
	at := e.now.Add(time.Minute)
	e.presence(lifecycle(client, "disconnected", ms(at), 1, "MQTT_KEEP_ALIVE_TIMEOUT"), lifecycle(client, "connected", ms(e.now), 1, ""))
	if l := lease(); l.Presence == nil || l.Presence.Connected || l.Presence.Reason != "MQTT_KEEP_ALIVE_TIMEOUT" {
		t.Fatalf("after the disconnect: %+v", l.Presence)
	}
	// A renewal over HTTP, then a reconnect of a lease still fresh: no check.
	e.now = e.now.Add(2 * time.Minute)
	if _, err := e.store.RenewLease(t.Context(), s.ID, cred.Hash(), space.LeaseReport{AgentVersion: "v1",
		ServerVersion: space.ServerVersion{GitVersion: "v1.31.0", Platform: "linux/amd64"}}, e.now); err != nil {
		t.Fatal(err)
	}
	e.presence(lifecycle(client, "connected", ms(e.now), 2, ""))
	if n := e.probeMessages(); n != 0 {
		t.Errorf("a fresh lease's reconnect enqueued %d checks", n)
	}
	// Gone for long, the lease lapsed: the reconnect asks for a check.
	e.presence(lifecycle(client, "disconnected", ms(e.now.Add(time.Second)), 2, "CONNECTION_LOST"))
	e.now = e.now.Add(time.Hour)
	e.presence(lifecycle(client, "connected", ms(e.now), 3, ""))
	if n := e.probeMessages(); n != 1 {
		t.Errorf("a lapsed lease's reconnect enqueued %d checks, want 1", n)
	}
	// A deregistered space's events are dropped, and make nothing.
	got, err := e.store.GetSpace(t.Context(), gone.OrgID, gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Deregister(t.Context(), gone.OrgID, gone.ID, got.Version, e.now, "test"); err != nil {
		t.Fatal(err)
	}
	if failed := e.presence(lifecycle(prefix+gone.ID, "connected", ms(e.now), 1, "")); len(failed) != 0 {
		t.Fatalf("a deregistered space's event failed: %v", failed)
	}
	if l, _ := e.store.GetLease(t.Context(), gone.ID); l.Presence != nil {
		t.Fatalf("a deregistered space's presence came back: %+v", l)
	}
	if !strings.Contains(e.logs.String(), "dropped a malformed lifecycle event") {
		t.Errorf("the malformed event is not logged:\n%s", e.logs.String())
	}
}

// TestPresenceChecksThePrincipal: an event whose principalIdentifier is
// not the principal the authorizer gives its client id's space (another
// space's, the id with its dashes, none) changes nothing and is logged;
// the right principal's events are stored as before.
func TestPresenceChecksThePrincipal(t *testing.T) {
	e := newPresenceEnv(t, "")
	s, _ := e.agentSpace()
	other, _ := e.agentSpace()
	client := space.AgentClientID(prefix, s.ID)
	ms := e.now.UnixMilli()
	presence := func() *space.Presence {
		l, err := e.store.GetLease(t.Context(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		return l.Presence
	}
	if f := e.presence(
		lifecycleAs(client, space.PrincipalOf(other.ID), "connected", ms, 1, ""),
		lifecycleAs(client, s.ID, "connected", ms, 2, ""),
		lifecycleAs(client, "", "connected", ms, 3, ""),
	); len(f) != 0 {
		t.Fatalf("failed %v", f)
	}
	if p := presence(); p != nil {
		t.Fatalf("a connect of another principal was stored: %+v", p)
	}
	if n := strings.Count(e.logs.String(), "dropped a lifecycle event whose principal is not its client"); n != 3 {
		t.Errorf("%d mismatched events logged, want 3:\n%s", n, e.logs.String())
	}
	// The agent's own connect is stored; a later disconnect of another
	// principal does not end it.
	e.presence(lifecycle(client, "connected", ms, 1, ""))
	e.presence(lifecycleAs(client, space.PrincipalOf(other.ID), "disconnected", ms+60_000, 1, "CLIENT_INITIATED_DISCONNECT"))
	if p := presence(); p == nil || !p.Connected || p.Version != 1 {
		t.Fatalf("after a foreign disconnect: %+v, want connected at version 1", p)
	}
	e.presence(lifecycle(client, "disconnected", ms+60_000, 1, "CLIENT_INITIATED_DISCONNECT"))
	if p := presence(); p == nil || p.Connected {
		t.Fatalf("after its own disconnect: %+v, want disconnected", p)
	}
}

// TestPresenceAfterAVersionReset: back after two hours away, the agent's
// connect carries versionNumber 0 again and is stored; a connect_failed
// event is dropped without a word of it being malformed.
func TestPresenceAfterAVersionReset(t *testing.T) {
	e := newPresenceEnv(t, "")
	s, _ := e.agentSpace()
	client := space.AgentClientID(prefix, s.ID)
	ms := e.now.UnixMilli()
	failed := `{"clientId":"` + client + `","timestamp":` + strconv.FormatInt(ms+1000, 10) +
		`,"eventType":"connect_failed","connectFailureReason":"AUTHORIZATION_FAILED","principalIdentifier":"","sessionIdentifier":"s"}`
	if f := e.presence(
		lifecycle(client, "connected", ms, 5, ""),
		lifecycle(client, "disconnected", ms+60_000, 5, "CONNECTION_LOST"),
		failed,
	); len(f) != 0 {
		t.Fatalf("failed %v", f)
	}
	e.presence(lifecycle(client, "connected", ms+2*3600_000, 0, ""))
	l, err := e.store.GetLease(t.Context(), s.ID)
	if err != nil || l.Presence == nil || !l.Presence.Connected || l.Presence.Version != 0 {
		t.Fatalf("after the reset: %+v %v, want connected at version 0", l.Presence, err)
	}
	if strings.Contains(e.logs.String(), "malformed") {
		t.Errorf("a connect_failed event was logged as malformed:\n%s", e.logs.String())
	}
}

// TestPresenceStoreDown: a store outage is the one retried failure.
func TestPresenceStoreDown(t *testing.T) {
	e := newPresenceEnv(t, "no-such-table")
	failed := e.presence("{not json", lifecycle(prefix+uuid.NewString(), "connected", time.Now().UnixMilli(), 1, ""))
	if len(failed) != 1 || failed[0] != "m1" {
		t.Fatalf("failed %v, want [m1]", failed)
	}
}

func TestLambdaShapes(t *testing.T) {
	e := newPresenceEnv(t, "")
	for _, raw := range []string{`[]`, `{}`, `{"foo":1}`, `"x"`} {
		if _, err := e.handle(t.Context(), json.RawMessage(raw)); err == nil {
			t.Errorf("%s: no error", raw)
		}
	}
}

// probeMessages receives (and deletes) what the probe queue holds.
func (e *presenceEnv) probeMessages() int {
	e.t.Helper()
	n := 0
	for {
		out, err := e.sqs.ReceiveMessage(e.t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.probes), MaxNumberOfMessages: 10})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return n
		}
		for _, m := range out.Messages {
			n++
			if _, err := e.sqs.DeleteMessage(e.t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.probes), ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// TestSignedCredentials: with the authorizer's token signing on, the
// exchange's and each renewal's answer carry the signature, made with the
// template's AgentTokenKey in KMS, of their own credential's token, which
// its public half verifies as IoT Core does; the authorizer accepts only a
// verified token that is the password's (a signature of the credential
// before, or of none, is refused); and a signer that fails fails the
// exchange, leaving the bootstrap unspent.
func TestSignedCredentials(t *testing.T) {
	var keyID string
	e := newPresenceEnvWith(t, "", func(s *agents.Settings, env *emulatortest.Env) {
		keyID = env.Resources["AgentTokenKey"].Name
		s.Presence.TokenKeyName = "spaces-token"
		s.TokenKey = keyID
	})
	kmsc := awsclient.KMS(e.aws.Config, e.aws.Endpoint)
	pemKey, err := kmssign.PublicKeyPEM(t.Context(), kmsc, keyID)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(pemKey))
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	verifies := func(c space.AgentCredential) bool {
		sig, err := base64.StdEncoding.DecodeString(c.TokenSignature)
		sum := sha256.Sum256([]byte(space.PresenceToken(c.Credential)))
		return err == nil && rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, sum[:], sig) == nil
	}
	call := func(path, bearer string) (int, space.AgentCredential) {
		req := httptest.NewRequest("POST", path, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		rec := httptest.NewRecorder()
		e.h.HTTP.ServeHTTP(rec, req)
		var c space.AgentCredential
		_ = json.Unmarshal(rec.Body.Bytes(), &c)
		return rec.Code, c
	}
	s, b := e.bootstrapped()
	code, first := call("/agent/exchange", b.Raw)
	if code != 200 || first.Presence == nil || first.Presence.TokenKeyName != "spaces-token" || !verifies(first) {
		t.Fatalf("exchange: %d %+v, want a presence block naming the token key and a signature of its credential's token", code, first)
	}
	code, renewed := call("/agent/credential", first.Credential)
	if code != 200 || !verifies(renewed) || renewed.TokenSignature == first.TokenSignature {
		t.Fatalf("renewal: %d %+v, want a signature of the new credential's token", code, renewed)
	}
	client := space.AgentClientID(prefix, s.ID)
	if res := e.authorizeToken(client, []byte(renewed.Credential), space.PresenceToken(renewed.Credential), true); !res.IsAuthenticated {
		t.Fatalf("the renewed credential with its verified token: refused %+v", res)
	}
	for name, c := range map[string]struct {
		token    string
		verified bool
	}{
		"the previous credential's token": {space.PresenceToken(first.Credential), true},
		"no token":                        {"", true},
		"a token IoT did not verify":      {space.PresenceToken(renewed.Credential), false},
	} {
		if res := e.authorizeToken(client, []byte(renewed.Credential), c.token, c.verified); res.IsAuthenticated {
			t.Errorf("%s: accepted %+v", name, res)
		}
	}

	// KMS refusing (the key disabled). The exchange is signed only once
	// its bootstrap is proven and spent, so it answers the credential
	// unsigned (the agent renews it for a signed one before it connects);
	// a renewal answers a server error and stores nothing the agent
	// cannot retry with the credential it presented.
	s2, b2 := e.bootstrapped()
	if _, err := kmsc.DisableKey(t.Context(), &kms.DisableKeyInput{KeyId: aws.String(keyID)}); err != nil {
		t.Fatal(err)
	}
	code, unsigned := call("/agent/exchange", b2.Raw)
	if code != 200 || unsigned.SpaceID != s2.ID || unsigned.TokenSignature != "" {
		t.Errorf("exchange with the key disabled: %d %+v, want the credential unsigned", code, unsigned)
	}
	if !strings.Contains(e.logs.String(), "did not sign an exchanged credential") {
		t.Errorf("the unsigned answer is not logged:\n%s", e.logs.String())
	}
	if code, _ := call("/agent/credential", unsigned.Credential); code < 500 {
		t.Errorf("renewal with the key disabled: %d, want a server error", code)
	}
	if _, err := kmsc.EnableKey(t.Context(), &kms.EnableKeyInput{KeyId: aws.String(keyID)}); err != nil {
		t.Fatal(err)
	}
	if code, c := call("/agent/credential", unsigned.Credential); code != 200 || !verifies(c) {
		t.Errorf("the unsigned credential renewed once the key is back: %d %+v, want a signed one", code, c)
	}
}
