package kubeprobe

import (
	"net/http"
	"sync"

	"spaces/shared/space"
)

// ServingCertificate is what an API server's TLS handshake showed of its
// leaf certificate: when it stops being valid (UTC) and who issued it, the
// domain's space.Certificate. It comes free with the probe's GET /version;
// no extra connection is made for it.
type ServingCertificate = space.Certificate

// certCapture sits under client-go's wrappers for one probe and keeps the
// leaf certificate of the connection that answered. A kept-alive
// connection reports the certificate of its original handshake, which is
// still the one the server serves on that connection.
type certCapture struct {
	rt http.RoundTripper

	mu   sync.Mutex
	cert *ServingCertificate
}

// WrappedRoundTripper lets client-go's wrappers reach the transport below.
func (c *certCapture) WrappedRoundTripper() http.RoundTripper { return c.rt }

func (c *certCapture) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err == nil && resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		leaf := resp.TLS.PeerCertificates[0]
		c.mu.Lock()
		c.cert = &ServingCertificate{NotAfter: leaf.NotAfter.UTC(), Issuer: leaf.Issuer.String()}
		c.mu.Unlock()
	}
	return resp, err
}

func (c *certCapture) get() *ServingCertificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert
}
