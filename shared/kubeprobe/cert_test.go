package kubeprobe_test

import (
	"fmt"
	"testing"
	"time"

	"spaces/infra/testcluster"
	"spaces/shared/space"
)

// TestProbeWithCertificate: the serving certificate comes from the TLS
// handshake of the probe's own GET /version against a real TLS server,
// over HTTP/1.1 and HTTP/2, again on a kept-alive connection, and with any
// answer (a 401 too); no answer means no certificate, including a server
// whose certificate the probe does not trust. Probe's outcome carries the
// same certificate (Outcome.Certificate).
func TestProbeWithCertificate(t *testing.T) {
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.ServerCertificate()
	if err != nil {
		t.Fatal(err)
	}
	wantNotAfter := serving.Leaf.NotAfter.UTC()
	const wantIssuer = "CN=testcluster CA"

	for _, http2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%t", http2), func(t *testing.T) {
			opts := []testcluster.Option{testcluster.WithCA(ca)}
			if http2 {
				opts = append(opts, testcluster.WithHTTP2())
			}
			c := testcluster.NewForTest(t, opts...)
			p := newProber(t, 5*time.Second)

			for i := range 2 { // the second probe reuses the connection
				o, cert := p.ProbeWithCertificate(t.Context(), c.Credentials())
				if !o.OK() || o.Version == nil || o.Version.GitVersion != "v1.31.4" {
					t.Fatalf("probe %d: outcome %+v", i, o)
				}
				if cert == nil || !cert.NotAfter.Equal(wantNotAfter) || cert.NotAfter.Location() != time.UTC || cert.Issuer != wantIssuer {
					t.Fatalf("probe %d: certificate %+v, want notAfter %s issuer %q", i, cert, wantNotAfter, wantIssuer)
				}
				// Probe answers the same certificate on its outcome,
				// which is what the prober stores.
				if o := p.Probe(t.Context(), c.Credentials()); o.Certificate == nil || *o.Certificate != *cert {
					t.Fatalf("probe %d: Probe's outcome certificate %+v, want %+v", i, o.Certificate, cert)
				}
			}

			c.SetMode(testcluster.Unauthorized())
			o, cert := p.ProbeWithCertificate(t.Context(), c.Credentials())
			if o.Reason != space.ReasonUnauthorized || cert == nil || !cert.NotAfter.Equal(wantNotAfter) {
				t.Fatalf("a 401: outcome %+v, certificate %+v", o, cert)
			}
		})
	}

	t.Run("down", func(t *testing.T) {
		c := testcluster.NewForTest(t, testcluster.WithCA(ca))
		c.SetMode(testcluster.Down())
		o, cert := newProber(t, short).ProbeWithCertificate(t.Context(), c.Credentials())
		if o.OK() || cert != nil || o.Certificate != nil {
			t.Fatalf("a cluster that is down: outcome %+v, certificate %+v", o, cert)
		}
	})

	t.Run("untrusted", func(t *testing.T) {
		other, err := testcluster.NewCA()
		if err != nil {
			t.Fatal(err)
		}
		c := testcluster.NewForTest(t, testcluster.WithCA(ca))
		creds := c.Credentials()
		creds.CAData = other.PEM()
		o, cert := newProber(t, 5*time.Second).ProbeWithCertificate(t.Context(), creds)
		if o.OK() || cert != nil {
			t.Fatalf("a server signed by another CA: outcome %+v, certificate %+v", o, cert)
		}
	})
}
