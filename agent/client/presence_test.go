package client

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"spaces/infra/iotcore"
	"spaces/infra/testclock"
	"spaces/infra/testcluster"
	"spaces/shared/space"
)

// authorizerLog is a custom authorizer over a set of valid passwords that
// records every password it is asked about, in order.
type authorizerLog struct {
	mu    sync.Mutex
	valid map[string]bool
	seen  []string
}

func (a *authorizerLog) authorize(_ context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
	m := req.ProtocolData.MQTT
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, string(m.Password))
	if !a.valid[string(m.Password)] {
		return events.IoTCoreCustomAuthorizerResponse{IsAuthenticated: false}, nil
	}
	allow := func(action, resource string) events.IAMPolicyStatement {
		return events.IAMPolicyStatement{Effect: "Allow", Action: []string{action}, Resource: []string{"arn:aws:iot:*:*:" + resource}}
	}
	return events.IoTCoreCustomAuthorizerResponse{
		IsAuthenticated: true, PrincipalID: "agent", DisconnectAfterInSeconds: 86400, RefreshAfterInSeconds: 600,
		PolicyDocuments: []*events.IAMPolicyDocument{{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
			allow("iot:Connect", "client/"+m.ClientID),
			allow("iot:Subscribe", "topicfilter/spaces/"+m.ClientID+"/wake"),
			allow("iot:Receive", "topic/spaces/"+m.ClientID+"/wake"),
		}}},
	}, nil
}

func (a *authorizerLog) set(password string, valid bool) {
	a.mu.Lock()
	a.valid[password] = valid
	a.mu.Unlock()
}

func (a *authorizerLog) passwords() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// TestPresenceReconnectsWithTheNewestCredential: after a renewal the
// connection lives on until IoT Core's refresh re-asks the authorizer with
// the connection's original password; once that is refused, the reconnect
// presents the renewed credential and is let in.
func TestPresenceReconnectsWithTheNewestCredential(t *testing.T) {
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	server, roots, err := ca.LoopbackTLS()
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC))
	auth := &authorizerLog{valid: map[string]bool{"first": true}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := iotcore.Start(context.Background(), iotcore.Config{
		TLS:         server,
		Authorizers: map[string]iotcore.Authorizer{"spaces-agent": auth.authorize},
		Now:         clk.Now, Log: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	ep := space.PresenceEndpoint{Endpoint: b.MQTTAddr(), Authorizer: "spaces-agent", ClientID: "spaces-agent1",
		WakeTopic: "spaces/spaces-agent1/wake", KeepAliveSeconds: 1200, FallbackSeconds: 600}
	p := dialPresence(ep, "first", "", roots, DefaultMQTTRetry, quiet)
	defer p.close()
	waitUntil(t, "the first connection", p.up)

	// The renewal: the agent stores the new credential, and the old one
	// is revoked (its overlap ends).
	p.use("second", "")
	auth.set("second", true)
	auth.set("first", false)
	if !p.up() {
		t.Fatal("a renewal alone dropped the connection")
	}
	// The refresh re-asks with "first", is refused and drops the
	// connection; paho reconnects.
	clk.Advance(10 * time.Minute)
	waitUntil(t, "a reconnect with the renewed credential", func() bool {
		return slices.Contains(auth.passwords(), "second") && p.up()
	})
	got := auth.passwords()
	if got[0] != "first" || got[1] != "first" {
		t.Fatalf("authorizer asked %q, want the connect and the refresh with the original password first", got)
	}
	if i := slices.Index(got, "second"); slices.Contains(got[i:], "first") {
		t.Fatalf("authorizer asked %q: the old credential presented after the new one", got)
	}
}

// TestPresenceSignsEachReconnect: with the authorizer's token signing on,
// every CONNECT carries the current credential's token and its
// signature, so IoT Core lets it reach the authorizer: the first
// connection with the first credential's, and after a renewal and the
// refresh's refusal of the old one, the reconnect with the renewed
// credential's token and signature. The authorizer is never asked with a
// token other than its password's, nor with one unverified.
func TestPresenceSignsEachReconnect(t *testing.T) {
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	server, roots, err := ca.LoopbackTLS()
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(cred string) string {
		sum := sha256.Sum256([]byte(space.PresenceToken(cred)))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(sig)
	}
	clk := testclock.New(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC))
	auth := &authorizerLog{valid: map[string]bool{"first": true}}
	var mu sync.Mutex
	var mismatched int
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := iotcore.Start(context.Background(), iotcore.Config{
		TLS: server,
		Authorizers: map[string]iotcore.Authorizer{"spaces-agent": func(ctx context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
			if !req.SignatureVerified || req.Token != space.PresenceToken(string(req.ProtocolData.MQTT.Password)) {
				mu.Lock()
				mismatched++
				mu.Unlock()
			}
			return auth.authorize(ctx, req)
		}},
		Signing: map[string]iotcore.Signing{"spaces-agent": {TokenKeyName: "spaces-token",
			PublicKeys: map[string]*rsa.PublicKey{"current": &key.PublicKey}}},
		Now: clk.Now, Log: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	ep := space.PresenceEndpoint{Endpoint: b.MQTTAddr(), Authorizer: "spaces-agent", ClientID: "spaces-agent1",
		WakeTopic: "spaces/spaces-agent1/wake", KeepAliveSeconds: 1200, FallbackSeconds: 600, TokenKeyName: "spaces-token"}
	p := dialPresence(ep, "first", sign("first"), roots, DefaultMQTTRetry, quiet)
	defer p.close()
	waitUntil(t, "the first signed connection", p.up)

	p.use("second", sign("second"))
	auth.set("second", true)
	auth.set("first", false)
	clk.Advance(10 * time.Minute) // the refresh refuses "first"
	waitUntil(t, "a reconnect with the renewed credential and its signature", func() bool {
		return slices.Contains(auth.passwords(), "second") && p.up()
	})
	mu.Lock()
	defer mu.Unlock()
	if mismatched != 0 {
		t.Fatalf("the authorizer was asked %d times with a token not its password's, or unverified", mismatched)
	}
	if u := b.Usage(); u.AuthorizerCalls != int64(len(auth.passwords())) {
		t.Fatalf("metered %d authorizer calls, the authorizer saw %d", u.AuthorizerCalls, len(auth.passwords()))
	}
}

// TestUnsignedCredentialRenewedBeforeConnecting: an agent whose stored
// credential has no token signature (stored before the authorizer signed)
// and whose lease answer names a signing authorizer renews its credential
// for a signed one before it connects: it never sends a CONNECT IoT Core
// would refuse (no connect_failed event), and the authorizer's first
// request is a renewed credential with its verified token.
func TestUnsignedCredentialRenewedBeforeConnecting(t *testing.T) {
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	server, roots, err := ca.LoopbackTLS()
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clk := &jumpClock{now: start}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	var asked []events.IoTCoreCustomAuthorizerRequest
	var failed int
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	accept := &authorizerLog{valid: map[string]bool{}}
	b, err := iotcore.Start(context.Background(), iotcore.Config{
		TLS: server,
		Authorizers: map[string]iotcore.Authorizer{"spaces-agent": func(ctx context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
			mu.Lock()
			asked = append(asked, req)
			mu.Unlock()
			cancel() // the agent's first CONNECT that IoT Core let through ends the run
			accept.set(string(req.ProtocolData.MQTT.Password), true)
			return accept.authorize(ctx, req)
		}},
		Signing: map[string]iotcore.Signing{"spaces-agent": {TokenKeyName: "spaces-token",
			PublicKeys: map[string]*rsa.PublicKey{"current": &key.PublicKey}}},
		Rules: []iotcore.Rule{{Name: "failed", SQL: "SELECT * FROM '$aws/events/presence/connect_failed/+'",
			Action: func(context.Context, []byte) error { mu.Lock(); failed++; mu.Unlock(); return nil }}},
		Log: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	spaces := &fakeSpaces{clock: clk, interval: 600, stopAt: start.Add(30 * 24 * time.Hour), stop: cancel,
		valid: map[string]time.Time{"cred-0": start.Add(space.AgentCredentialTTL)}, renewedTo: map[string]string{}, used: map[string]bool{},
		presence: &space.PresenceEndpoint{Endpoint: b.MQTTAddr(), Authorizer: "spaces-agent", ClientID: "spaces_" + presenceSpaceID,
			WakeTopic: "spaces/spaces_" + presenceSpaceID + "/wake", KeepAliveSeconds: 1200, FallbackSeconds: 600, TokenKeyName: "spaces-token"},
		sign: func(cred string) string {
			sum := sha256.Sum256([]byte(space.PresenceToken(cred)))
			sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
			if err != nil {
				t.Error(err)
			}
			return base64.StdEncoding.EncodeToString(sig)
		}}
	srv := httptest.NewServer(spaces)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	boot := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(boot, []byte("boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kube := fakeKube(t)
	// The state an older agent stored: a credential, no signature.
	if err := (stateSecret{kube: kube, namespace: "agent", name: "state"}).save(ctx,
		state{Credential: "cred-0", ExpiresAt: start.Add(space.AgentCredentialTTL), SpaceID: presenceSpaceID, BootstrapSHA256: hashToken("boot")}); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, Config{AgentURL: base, BootstrapFile: boot, Kube: kube, Namespace: "agent", StateSecret: "state",
		Clock: clk, MQTTRoots: roots, Log: quiet}); err != nil {
		t.Fatalf("Run: %v (refused: %q)", err, spaces.refused)
	}
	mu.Lock()
	defer mu.Unlock()
	spaces.mu.Lock()
	defer spaces.mu.Unlock()
	if len(asked) == 0 {
		t.Fatalf("the agent never reached the authorizer in 30 simulated days (%d renewals, %d connects refused)", spaces.renewals, failed)
	}
	first := asked[0]
	pw := string(first.ProtocolData.MQTT.Password)
	if pw == "cred-0" || spaces.renewals == 0 || !first.SignatureVerified || first.Token != space.PresenceToken(pw) {
		t.Errorf("first authorizer request with %q (verified %v, its token %v) after %d renewals; want a renewed credential, signed",
			pw, first.SignatureVerified, first.Token == space.PresenceToken(pw), spaces.renewals)
	}
	if failed != 0 {
		t.Errorf("%d CONNECTs refused before the authorizer (unsigned or badly signed), want none", failed)
	}
}

// waitUntil polls cond for up to 15 s of real time (paho's reconnect waits
// a second or more).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
