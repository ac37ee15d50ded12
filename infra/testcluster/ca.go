package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// CA signs the serving certificates of test clusters. One CA can serve any
// number of clusters: they all listen on loopback, so a single leaf
// certificate for 127.0.0.1, ::1 and localhost fits all of them, and
// thousands of clusters cost one key pair.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	leafOnce sync.Once
	leaf     tls.Certificate
	leafErr  error
}

// NewCA creates a self-signed CA valid for a day.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testcluster: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "testcluster CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testcluster: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testcluster: CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// PEM returns the CA certificate, what a client puts in its CA data.
func (ca *CA) PEM() []byte { return append([]byte(nil), ca.pem...) }

// ServerCertificate returns the serving certificate for loopback, created
// once and shared by every cluster of this CA.
func (ca *CA) ServerCertificate() (tls.Certificate, error) {
	ca.leafOnce.Do(func() {
		ca.leaf, ca.leafErr = ca.ServerCertificateUntil(time.Now().Add(24 * time.Hour))
	})
	return ca.leaf, ca.leafErr
}

// ServerCertificateUntil is a new serving certificate for loopback valid
// until notAfter: a renewed certificate (Cluster.SetServingCertificate),
// or one about to expire. notAfter may lie beyond the CA's own expiry;
// crypto/x509 signs it as a real CA would.
func (ca *CA) ServerCertificateUntil(notAfter time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("testcluster: server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("testcluster: server certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("testcluster: server certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(err)
	}
	return n
}

// LoopbackTLS is a server configuration serving ServerCertificate and the
// pool of roots a client trusts it with: what a local TLS server of the
// tests (the broker model, a cluster) and its clients are given.
func (ca *CA) LoopbackTLS() (server *tls.Config, roots *x509.CertPool, err error) {
	cert, err := ca.ServerCertificate()
	if err != nil {
		return nil, nil, err
	}
	roots = x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM())
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, roots, nil
}
