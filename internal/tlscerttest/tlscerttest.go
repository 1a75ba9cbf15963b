// Package tlscerttest makes certificates for tests: a throwaway CA whose
// server certificates are valid for 127.0.0.1 and localhost, and an HTTP
// client that trusts it.
package tlscerttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for tests.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA returns a new CA, valid from an hour ago for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, der := issue(t, &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "squall test CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key}
}

// issue makes a new P-256 key and the DER of a certificate of tmpl for
// it, valid from an hour ago for a day, signed by ca (nil: self-signed).
func issue(t testing.TB, tmpl *x509.Certificate, ca *CA) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.Cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

// Pool returns a certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Leaf returns the PEM of a new server certificate signed by the CA, with
// serial number serial, valid for 127.0.0.1, ::1 and localhost, and the PEM
// of its key.
func (ca *CA) Leaf(t testing.TB, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, der := issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "squall test server"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}, ca)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// WriteLeaf writes a new leaf (see [CA.Leaf]) to certFile and keyFile, key
// first.
func (ca *CA) WriteLeaf(t testing.TB, certFile, keyFile string, serial int64) {
	t.Helper()
	certPEM, keyPEM := ca.Leaf(t, serial)
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Client returns an HTTP client that trusts only the CA and speaks
// HTTP/2 when the server offers it. Its idle connections are closed at the
// end of the test.
func (ca *CA) Client(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// ServerCert returns a new server certificate signed by the CA (see
// [CA.Leaf]), ready for a tls.Config.
func (ca *CA) ServerCert(t testing.TB, serial int64) tls.Certificate {
	t.Helper()
	cert, err := tls.X509KeyPair(ca.Leaf(t, serial))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// WriteCA writes the CA's certificate, PEM, to a new file in a temporary
// directory of the test and returns its path.
func (ca *CA) WriteCA(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
