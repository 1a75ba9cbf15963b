package kafkasource

import (
	"crypto/tls"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/tlscerttest"
)

func TestSource_TLS(t *testing.T) {
	t.Parallel()
	ca := tlscerttest.NewCA(t)
	cert, caFile := ca.ServerCert(t, 2), ca.WriteCA(t)
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 1,
		Opts: []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})}})
	d := testDial(b.Addr)
	d.TLS = TLSConfig{CAFile: caFile}
	writeAndFetch(t, d, "g-tls", 2)

	// Without the CA the broker's certificate is refused.
	plain := testDial(b.Addr)
	plain.TLS = TLSConfig{Enable: true}
	if err := writeOne(t, plain); err == nil {
		t.Error("a write trusted an unknown certificate")
	}
	if _, err := NewWriter(WriterConfig{Dial: Dial{Brokers: []string{b.Addr}, TLS: TLSConfig{CAFile: "/nonexistent.pem"}}, Topic: testTopic}); err == nil {
		t.Error("a missing CA file was accepted")
	}
}
