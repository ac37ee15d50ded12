package iotcore

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// sign is the "Signing the token" recipe (openssl dgst -sha256 -sign, then
// base64).
func sign(t *testing.T, key *rsa.PrivateKey, token string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(token))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// TestSigningRefusesJunkBeforeTheAuthorizer: with token signing on, a
// CONNECT without a token, with a signature of another key, of another
// token, not in base64, or by a key under 2,048 bits is refused and never
// invokes the authorizer's function (nor counts as its invocation); one
// whose signature verifies with any of the authorizer's keys invokes it
// with the token and signatureVerified.
func TestSigningRefusesJunkBeforeTheAuthorizer(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	short, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	previous, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := startWith(t, func(c *Config) {
		c.Signing = map[string]Signing{authName: {TokenKeyName: "agent-token",
			PublicKeys: map[string]*rsa.PublicKey{"previous": &previous.PublicKey, "current": &key.PublicKey, "short": &short.PublicKey}}}
	})
	const token = "spaces-a1.1767225600"
	user := func(tok, sig string) string {
		q := url.Values{"x-amz-customauthorizer-name": {authName}}
		if tok != "" {
			q.Set("agent-token", tok)
		}
		if sig != "" {
			q.Set(SignatureParam, sig)
		}
		return "agent?" + q.Encode()
	}
	dial := func(username string) error {
		opts := paho.NewClientOptions().AddBroker("tls://" + f.b.MQTTAddr()).SetClientID("spaces-a1").
			SetUsername(username).SetPassword("ok").SetTLSConfig(f.client).SetProtocolVersion(4).
			SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(5 * time.Second)
		c := paho.NewClient(opts)
		tok := c.Connect()
		if !tok.WaitTimeout(5 * time.Second) {
			t.Fatal("CONNECT timed out")
		}
		if tok.Error() == nil {
			c.Disconnect(0)
		}
		return tok.Error()
	}
	junk := map[string]string{
		"no token or signature":   username,
		"a token, no signature":   user(token, ""),
		"a signature, no token":   user("", sign(t, key, token)),
		"another key's signature": user(token, sign(t, other, token)),
		"another token's":         user(token, sign(t, key, token+"0")),
		"not base64":              user(token, "%%%not-base64"),
		"a 1,024-bit key's":       user(token, sign(t, short, token)),
		"a '+' left unescaped":    strings.Replace(user(token, sign(t, key, token)), "%2B", "+", -1),
	}
	for what, u := range junk {
		if what == "a '+' left unescaped" && !strings.Contains(sign(t, key, token), "+") {
			continue
		}
		if err := dial(u); err == nil {
			t.Errorf("%s: connected", what)
		}
		if ev := f.nextFailed(t); ev.ClientID != "spaces-a1" || ev.ConnectFailureReason != FailureAuthorizationFailed {
			t.Errorf("%s: connect_failed %+v", what, ev)
		}
	}
	if n := f.calls(); n != 0 {
		t.Fatalf("junk CONNECTs invoked the authorizer %d times", n)
	}
	if u := f.b.Usage(); u.AuthorizerCalls != 0 {
		t.Fatalf("junk CONNECTs metered %d authorizer calls", u.AuthorizerCalls)
	}

	for _, k := range []*rsa.PrivateKey{key, previous} {
		if err := dial(user(token, sign(t, k, token))); err != nil {
			t.Fatalf("a signed token: %v", err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) != 2 {
		t.Fatalf("the authorizer was asked %d times, want once per signed CONNECT", len(f.requests))
	}
	for _, r := range f.requests {
		if r.Token != token || !r.SignatureVerified {
			t.Fatalf("the authorizer was asked token %q, signatureVerified %v; want the token, verified", r.Token, r.SignatureVerified)
		}
	}
}

// TestManualSweep: with Config.ManualSweep, deadlines read from the clock
// pass unenforced until Sweep, which closes the connections due at once
// and answers what it did.
func TestManualSweep(t *testing.T) {
	f := startWith(t, func(c *Config) { c.ManualSweep = true })
	f.mustDial(t, "spaces-a1")
	if ev := f.next(t); ev.EventType != "connected" {
		t.Fatalf("first event %+v", ev)
	}
	if !f.b.Connected("spaces-a1") {
		t.Fatal("not connected")
	}
	f.clock.Advance(46 * time.Second) // past 1.5 × the 30 s keep-alive
	time.Sleep(5 * sweepEvery)        // the real-time sweep, were it on
	if !f.b.Connected("spaces-a1") {
		t.Fatal("closed without a Sweep")
	}
	if got := f.b.Sweep(); got.Kicked != 1 {
		t.Fatalf("Sweep answered %+v, want one connection closed", got)
	}
	if f.b.Connected("spaces-a1") {
		t.Fatal("still connected after the Sweep")
	}
	if ev := f.next(t); ev.EventType != "disconnected" || ev.DisconnectReason != ReasonKeepAliveTimeout {
		t.Fatalf("event %+v, want a keep-alive disconnect", ev)
	}
}
