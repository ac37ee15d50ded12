package kubecred_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"testing"
	"time"

	"spaces/shared/kubecred"
)

const token = "k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbQ"

func good(t *testing.T) kubecred.Credentials {
	return kubecred.Credentials{
		Server:    "https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
		CAData:    selfSigned(t),
		Token:     token,
		ExpiresAt: time.Date(2026, 3, 1, 12, 15, 0, 0, time.UTC),
	}
}

func TestValidate(t *testing.T) {
	c := good(t)
	if err := c.Validate(); err != nil {
		t.Fatalf("good credentials: %v", err)
	}
	noCA := c
	noCA.CAData = nil
	if err := noCA.Validate(); err != nil {
		t.Fatalf("no CA data means system roots: %v", err)
	}
	withPath := c
	withPath.Server = "https://rancher.example.com/k8s/clusters/c-m-4x7"
	if err := withPath.Validate(); err != nil {
		t.Fatalf("a server URL with a path prefix: %v", err)
	}

	for _, tc := range []struct {
		mutate func(*kubecred.Credentials)
		want   []string
	}{
		{func(c *kubecred.Credentials) { c.Server = "" }, []string{"server URL is empty"}},
		{func(c *kubecred.Credentials) { c.Server = "http://10.0.0.1" }, []string{`scheme is "http", want https`}},
		{func(c *kubecred.Credentials) { c.Server = "10.0.0.1:443" }, []string{"does not parse"}},
		{func(c *kubecred.Credentials) { c.Server = "https:///version" }, []string{"no host"}},
		{func(c *kubecred.Credentials) { c.Server = "https://u:p@host" }, []string{"user info"}},
		{func(c *kubecred.Credentials) { c.Server = "https://host?x=1" }, []string{"query"}},
		{func(c *kubecred.Credentials) { c.CAData = []byte("not pem") }, []string{"CA data holds no PEM certificate"}},
		{func(c *kubecred.Credentials) { c.Token = "  " }, []string{"token is empty"}},
		{func(c *kubecred.Credentials) { *c = kubecred.Credentials{CAData: []byte("x")} },
			[]string{"server URL is empty", "CA data", "token is empty"}},
	} {
		bad := c
		tc.mutate(&bad)
		before := bad
		err := bad.Validate()
		if err == nil {
			t.Errorf("%+v: no error", bad)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: lacks %q", err, w)
			}
		}
		if bad.Server != before.Server || !bytes.Equal(bad.CAData, before.CAData) || bad.Token != before.Token {
			t.Errorf("Validate changed the credentials")
		}
	}
}

func TestExpired(t *testing.T) {
	c := good(t)
	if c.Expired(c.ExpiresAt.Add(-time.Nanosecond)) {
		t.Error("expired before ExpiresAt")
	}
	if !c.Expired(c.ExpiresAt) || !c.Expired(c.ExpiresAt.Add(time.Minute)) {
		t.Error("not expired at or after ExpiresAt")
	}
	c.ExpiresAt = time.Time{}
	if c.Expired(time.Now().Add(100 * 365 * 24 * time.Hour)) {
		t.Error("an unknown expiry expired")
	}
}

func TestTokenIsNeverPrinted(t *testing.T) {
	c := good(t)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("minted", "creds", c)
	for _, s := range []string{
		//lint:ignore S1025 each formatting verb is what is tested.
		fmt.Sprint(c), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%s", c),
		fmt.Sprint(&c), logged.String(),
	} {
		if strings.Contains(s, token) || strings.Contains(s, "aHR0cHM6") {
			t.Errorf("token printed: %s", s)
		}
		if !strings.Contains(s, "eks.amazonaws.com") || !strings.Contains(s, "redacted") {
			t.Errorf("the server or the redaction marker is missing: %s", s)
		}
	}
}

// selfSigned makes a CA certificate PEM.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cluster CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
