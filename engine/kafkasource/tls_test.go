package kafkasource

import (
	"crypto/tls"
	"testing"
	"time"

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
