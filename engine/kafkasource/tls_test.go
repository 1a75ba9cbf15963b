package kafkasource

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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/squallhq/squall/internal/kafkatest"
)

// selfSigned returns a certificate for 127.0.0.1 and the PEM file of it,
// its own CA.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kfake"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile
}

func TestSource_TLS(t *testing.T) {
	t.Parallel()
	cert, caFile := selfSigned(t)
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 1,
		Opts: []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})}})
	d := testDial(b.Addr)
	d.TLS = TLSConfig{CAFile: caFile}
	if err := newWriter(t, d).Write(t.Context(), records(2)...); err != nil {
		t.Fatal(err)
	}
	cfg := testSourceConfig(b.Addr, "g-tls")
	cfg.Dial = d
	s := openSource(t, cfg)
	for range 2 {
		if _, err := s.Fetch(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	// Without the CA the broker's certificate is refused.
	plain := testDial(b.Addr)
	plain.TLS = TLSConfig{Enable: true}
	plain.Timeout = 500 * time.Millisecond
	w, err := NewWriter(WriterConfig{Dial: plain, Topic: testTopic, WriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(t.Context(), records(1)...); err == nil {
		t.Error("a write trusted an unknown certificate")
	}
	if _, err := NewWriter(WriterConfig{Dial: Dial{Brokers: []string{b.Addr}, TLS: TLSConfig{CAFile: "/nonexistent.pem"}}, Topic: testTopic}); err == nil {
		t.Error("a missing CA file was accepted")
	}
}
