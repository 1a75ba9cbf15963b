package kafkasink

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/squallhq/squall/internal/kafkaclient"
	"github.com/squallhq/squall/internal/kafkatest"
)

const topic = "squall.events"

// startWarm starts a broker whose topic has partitions partitions (0: the
// default) and a sink for it, changed by edit, which has written one
// record, "warm": it is connected and has read the topic's metadata.
func startWarm(t *testing.T, partitions int32, edit func(*Config)) (*kafkatest.Broker, *Sink) {
	t.Helper()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: partitions})
	s := newTestSink(t, b.Addr, edit)
	if err := s.Write(t.Context(), Message{Key: []byte("t"), Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	return b, s
}

// topicValues returns the values of the records of topic, in partition and
// offset order.
func topicValues(t testing.TB, b *kafkatest.Broker) []string {
	t.Helper()
	var values []string
	for _, r := range b.Records(t, topic) {
		values = append(values, string(r.Value))
	}
	return values
}

// newTestSink builds a sink for addr, changed by edit, and closes it at the
// end of the test.
func newTestSink(t testing.TB, addr string, edit func(*Config)) *Sink {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Brokers = []string{addr}
	cfg.DialTimeout = 2 * time.Second
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close sink: %v", err)
		}
	})
	return s
}

func TestSink_Write(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	s := newTestSink(t, b.Addr, nil)
	created := time.UnixMilli(1_700_000_000_123)
	var msgs []Message
	for i := range 30 {
		msgs = append(msgs, Message{
			Key:   fmt.Appendf(nil, "tenant-%d", i%3),
			Value: fmt.Appendf(nil, `{"n":%d}`, i),
			Headers: []Header{
				{Key: "squall-event-id", Value: fmt.Appendf(nil, "id-%d", i)},
				{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
			},
			Time: created,
		})
	}
	// One call with many records, then concurrent calls of one record.
	if err := s.Write(t.Context(), msgs[:10]...); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error)
	for _, m := range msgs[10:] {
		go func() { errs <- s.Write(context.Background(), m) }()
	}
	for range msgs[10:] {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	recs := b.Records(t, topic)
	if len(recs) != len(msgs) {
		t.Fatalf("read %d records, want %d", len(recs), len(msgs))
	}
	partOf := make(map[string]int32)
	lastN := make(map[string]int)
	for _, r := range recs {
		if p, ok := partOf[r.Key]; ok && p != r.Partition {
			t.Errorf("key %s in partitions %d and %d", r.Key, p, r.Partition)
		}
		partOf[r.Key] = r.Partition
		var n int
		fmt.Sscanf(string(r.Value), `{"n":%d}`, &n)
		if id, _ := r.Header("squall-event-id"); id != fmt.Sprintf("id-%d", n) {
			t.Errorf("record %s: squall-event-id %q", r.Value, id)
		}
		if tp, _ := r.Header("traceparent"); !strings.HasPrefix(tp, "00-0af7") {
			t.Errorf("record %s: traceparent %q", r.Value, tp)
		}
		if !r.Timestamp.Equal(created) {
			t.Errorf("record %s: timestamp %v, want %v", r.Value, r.Timestamp, created)
		}
		// The first ten were written in one call: in order per key.
		if n < 10 {
			if prev, ok := lastN[r.Key]; ok && n < prev {
				t.Errorf("key %s: %d after %d", r.Key, n, prev)
			}
			lastN[r.Key] = n
		}
	}
	if len(partOf) != 3 {
		t.Logf("keys spread over partitions: %v", partOf)
	}
	if got := testutil.ToFloat64(s.m.messages.WithLabelValues(resultOK)); got != 30 {
		t.Errorf("squall_kafka_messages_total{result=ok} = %v", got)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("ping: %v", err)
	}
}

func TestSink_Compression(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Partitions: 1, Opts: []kfake.Opt{kfake.AllowAutoTopicCreation()}})
	for _, codec := range []string{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLz4, CompressionZstd} {
		t.Run(codec, func(t *testing.T) {
			t.Parallel()
			topic := "codec-" + codec
			s := newTestSink(t, b.Addr, func(c *Config) {
				c.Topic = topic
				c.Compression = codec
				c.AllowAutoTopicCreation = true
			})
			var msgs []Message
			for i := range 20 {
				msgs = append(msgs, Message{Key: []byte("k"), Value: bytes.Repeat(fmt.Appendf(nil, "%d ", i), 50)})
			}
			if err := s.Write(t.Context(), msgs...); err != nil {
				t.Fatal(err)
			}
			recs := b.Records(t, topic)
			if len(recs) != 20 {
				t.Fatalf("read %d records", len(recs))
			}
			for i, r := range recs {
				if !bytes.Equal(r.Value, msgs[i].Value) {
					t.Fatalf("record %d differs", i)
				}
			}
		})
	}
}

func TestSink_SASL(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{kafkaclient.MechanismPlain, kafkaclient.MechanismSCRAMSHA256, kafkaclient.MechanismSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Opts: []kfake.Opt{
				kfake.EnableSASL(), kfake.Superuser(mech, "satellite", "s3cr3t"),
			}})
			s := newTestSink(t, b.Addr, func(c *Config) {
				c.SASL = SASLConfig{Mechanism: strings.ToLower(mech), Username: "satellite", Password: "s3cr3t"}
			})
			if err := s.Write(t.Context(), Message{Key: []byte("t"), Value: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			var auth kgo.Opt
			switch mech {
			case kafkaclient.MechanismPlain:
				auth = kgo.SASL(plain.Auth{User: "satellite", Pass: "s3cr3t"}.AsMechanism())
			case kafkaclient.MechanismSCRAMSHA256:
				auth = kgo.SASL(scram.Auth{User: "satellite", Pass: "s3cr3t"}.AsSha256Mechanism())
			default:
				auth = kgo.SASL(scram.Auth{User: "satellite", Pass: "s3cr3t"}.AsSha512Mechanism())
			}
			if recs := b.Records(t, topic, auth); len(recs) != 1 {
				t.Fatalf("read %d records", len(recs))
			}

			bad := newTestSink(t, b.Addr, func(c *Config) {
				c.SASL = SASLConfig{Mechanism: mech, Username: "satellite", Password: "wrong"}
			})
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if err := bad.Write(ctx, Message{Key: []byte("t"), Value: []byte(`{}`)}); err == nil {
				t.Fatal("write with a wrong password succeeded")
			}
			if err := bad.Ping(ctx); err == nil {
				t.Fatal("ping with a wrong password succeeded")
			}
		})
	}
}

func TestSink_TLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCfg, caFile := testCertificates(t, dir)
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Opts: []kfake.Opt{kfake.TLS(serverCfg)}})
	s := newTestSink(t, b.Addr, func(c *Config) { c.TLS = TLSConfig{CAFile: caFile} })
	if err := s.Write(t.Context(), Message{Key: []byte("t"), Value: []byte(`{"tls":true}`)}); err != nil {
		t.Fatal(err)
	}
	if recs := b.Records(t, topic, kgo.DialTLSConfig(&tls.Config{RootCAs: serverCfg.ClientCAs})); len(recs) != 1 {
		t.Fatalf("read %d records", len(recs))
	}
	// Without the CA the broker's certificate is refused.
	untrusted := newTestSink(t, b.Addr, func(c *Config) { c.TLS = TLSConfig{Enable: true} })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := untrusted.Ping(ctx); err == nil {
		t.Fatal("ping trusted an unknown certificate authority")
	}
}

func TestSink_Rejected(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Opts: []kfake.Opt{
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4096"}),
	}})
	t.Run("over MaxMessageBytes", func(t *testing.T) {
		s := newTestSink(t, b.Addr, func(c *Config) { c.MaxMessageBytes = 2048 })
		err := s.Write(t.Context(), Message{Key: []byte("t"), Value: make([]byte, 4096)})
		if !errors.Is(err, ErrRejected) {
			t.Fatalf("got %v, want ErrRejected", err)
		}
	})
	t.Run("refused by the broker", func(t *testing.T) {
		s := newTestSink(t, b.Addr, func(c *Config) { c.MaxMessageBytes = 64 << 10 })
		err := s.Write(t.Context(), Message{Key: []byte("t"), Value: bytes.Repeat([]byte("abcdefgh"), 2048)})
		if !errors.Is(err, ErrRejected) {
			t.Fatalf("got %v, want ErrRejected", err)
		}
		if got := testutil.ToFloat64(s.m.messages.WithLabelValues(resultRejected)); got != 1 {
			t.Errorf("squall_kafka_messages_total{result=rejected} = %v", got)
		}
	})
}

func TestSink_Unreachable(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	s := newTestSink(t, b.Addr, nil)
	if err := s.Write(t.Context(), Message{Key: []byte("t"), Value: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := s.Write(ctx, Message{Key: []byte("t"), Value: []byte(`2`)})
	if err == nil || errors.Is(err, ErrRejected) || ctx.Err() != nil {
		t.Fatalf("write to a stopped broker: %v (ctx %v)", err, ctx.Err())
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("ping of a stopped broker succeeded")
	}
	// Back again, the same sink writes.
	b.Restart()
	if err := s.Write(ctx, Message{Key: []byte("t"), Value: []byte(`3`)}); err != nil {
		t.Fatalf("write after restart: %v", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	good := DefaultConfig()
	good.Brokers = []string{"127.0.0.1:9092"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "brokers: at least one"},
		{"broker without port", func(c *Config) { c.Brokers = []string{"kafka"} }, `"kafka" is not host:port`},
		{"comma list", func(c *Config) { c.Brokers = []string{"a:1,b:2"} }, "is not host:port"},
		{"no topic", func(c *Config) { c.Topic = "" }, "topic: required"},
		{"codec", func(c *Config) { c.Compression = "brotli" }, `compression: "brotli"`},
		{"in flight", func(c *Config) { c.MaxInFlight = 0 }, "max_in_flight"},
		{"metadata ttl", func(c *Config) { c.MetadataTTL = 0 }, "metadata_ttl"},
		{"batch size", func(c *Config) { c.BatchSize = 0 }, "batch_size"},
		{"max message", func(c *Config) { c.MaxMessageBytes = 10 }, "max_message_bytes"},
		{"attempts", func(c *Config) { c.MaxAttempts = 0 }, "max_attempts"},
		{"cert without key", func(c *Config) { c.TLS.CertFile = "x.pem" }, "cert_file and key_file"},
		{"mechanism", func(c *Config) { c.SASL = SASLConfig{Mechanism: "GSSAPI", Username: "u"} }, `mechanism "GSSAPI"`},
		{"user", func(c *Config) { c.SASL = SASLConfig{Mechanism: "PLAIN"} }, "username required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := good
			c.Brokers = []string{"127.0.0.1:9092"}
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("password never printed", func(t *testing.T) {
		c := SASLConfig{Mechanism: "PLAIN", Username: "u", Password: "hunter2"}
		for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v %#v %s", c, c, c)} {
			if strings.Contains(s, "hunter2") {
				t.Fatalf("password printed: %s", s)
			}
		}
	})
	t.Run("tls files", func(t *testing.T) {
		c := good
		c.TLS.CAFile = filepath.Join(t.TempDir(), "missing.pem")
		if _, err := New(c, nil, nil); err == nil || !strings.Contains(err.Error(), "ca_file") {
			t.Fatalf("got %v", err)
		}
	})
}

// testCertificates writes a CA certificate to dir and returns a server TLS
// configuration for 127.0.0.1 signed by it (with the CA in ClientCAs, for
// the test's reader) and the CA file's path.
func testCertificates(t *testing.T, dir string) (*tls.Config, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "squall test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}},
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, caFile
}

func TestSink_Batching(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	s := newTestSink(t, b.Addr, func(c *Config) { c.BatchSize = 7 })

	// One write larger than a batch keeps its order.
	var msgs []Message
	for i := range 50 {
		msgs = append(msgs, Message{Key: []byte("one"), Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := s.Write(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	// Many concurrent writers share requests.
	errs := make(chan error)
	for w := range 64 {
		go func() {
			for i := range 10 {
				if err := s.Write(context.Background(), Message{Key: fmt.Appendf(nil, "w%d", w), Value: fmt.Appendf(nil, "w%d-%d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	recs := b.Records(t, topic)
	if len(recs) != 50+640 {
		t.Fatalf("%d records", len(recs))
	}
	next := 0
	lastOf := map[string]int{}
	for _, r := range recs {
		if r.Key == "one" {
			if string(r.Value) != fmt.Sprint(next) {
				t.Fatalf("record %s after %d", r.Value, next-1)
			}
			next++
			continue
		}
		// Each writer waited for its write: its records are in order.
		var w, i int
		fmt.Sscanf(string(r.Value), "w%d-%d", &w, &i)
		if last, ok := lastOf[r.Key]; ok && i <= last {
			t.Fatalf("writer %s: %d after %d", r.Key, i, last)
		}
		lastOf[r.Key] = i
	}
	var batches dto.Metric
	s.m.batch.Write(&batches)
	h := batches.GetHistogram()
	if h.GetSampleCount() >= 50+640 {
		t.Errorf("%d produce requests for %d records: no batching", h.GetSampleCount(), 690)
	}
	for _, bk := range h.GetBucket() {
		if bk.GetUpperBound() < 7 {
			continue
		}
		if bk.GetCumulativeCount() != h.GetSampleCount() {
			t.Errorf("a produce request carried more than BatchSize records")
		}
		break
	}
}

func TestSink_Retry(t *testing.T) {
	t.Parallel()
	b, s := startWarm(t, 0, nil)
	// The next produce request fails as after a leader change. (kfake
	// drops a control function once it handled a request.)
	var failed atomic.Int32
	b.Cluster().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		failed.Add(1)
		r := req.(*kmsg.ProduceRequest)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	if err := s.Write(t.Context(), Message{Key: []byte("t"), Value: []byte("retried")}); err != nil {
		t.Fatalf("write after a temporary error: %v", err)
	}
	if failed.Load() != 1 {
		t.Fatalf("the broker refused %d produce requests, want 1", failed.Load())
	}
	if recs := b.Records(t, topic); len(recs) != 2 || string(recs[1].Value) != "retried" {
		t.Fatalf("records %v", recs)
	}
}

func TestSink_Abandoned(t *testing.T) {
	t.Parallel()
	b, s := startWarm(t, 1, func(c *Config) { c.MaxInFlight = 1 })
	held, release := b.HoldProduce(t)
	first := make(chan error, 1)
	go func() { first <- s.Write(context.Background(), Message{Key: []byte("t"), Value: []byte("in flight")}) }()
	<-held
	// A write queued behind it whose caller gives up is never sent.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := s.Write(ctx, Message{Key: []byte("t"), Value: []byte("abandoned")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned write: %v", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), Message{Key: []byte("t"), Value: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if got := topicValues(t, b); fmt.Sprint(got) != "[warm in flight after]" {
		t.Fatalf("records %q", got)
	}
}

// TestSink_WriteWithin checks the writes with a deadline: one that is not
// acknowledged in time returns ErrAckTimeout, and is dropped if not yet sent,
// even when it waits behind a write with a later deadline.
func TestSink_WriteWithin(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 1})
	s := newTestSink(t, b.Addr, func(c *Config) { c.MaxInFlight = 1 })
	if err := s.WriteWithin(t.Context(), time.Minute, Message{Key: []byte("t"), Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	held, release := b.HoldProduce(t)
	first := make(chan error, 1)
	go func() {
		first <- s.WriteWithin(context.Background(), time.Minute, Message{Key: []byte("t"), Value: []byte("in flight")})
	}()
	<-held
	// Queued behind a write with a later deadline, a write times out on
	// its own deadline, and is never sent; twice, for the timer armed
	// again.
	for _, v := range []string{"expired 1", "expired 2"} {
		err := s.WriteWithin(context.Background(), 20*time.Millisecond, Message{Key: []byte("t"), Value: []byte(v)})
		if !errors.Is(err, ErrAckTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v", v, err)
		}
		select {
		case err := <-first:
			t.Fatalf("the write in flight ended with the expired one: %v", err)
		default:
		}
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := s.WriteWithin(t.Context(), time.Minute, Message{Key: []byte("t"), Value: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if got := topicValues(t, b); fmt.Sprint(got) != "[warm in flight after]" {
		t.Fatalf("records %q", got)
	}
	// The acknowledged writes are forgotten by the next one.
	s.mu.Lock()
	waiting := len(s.queues[0].waiting)
	s.mu.Unlock()
	if waiting > 1 {
		t.Fatalf("%d writes still watched", waiting)
	}
}

// TestSink_GroupCommit checks when a partition sends a request alongside
// one in flight: only once parallelBatch records wait.
func TestSink_GroupCommit(t *testing.T) {
	t.Parallel()
	b, s := startWarm(t, 1, nil)
	// Hold the next two produce requests in the broker (kafka-go sends
	// them on two connections).
	held0, release0 := b.HoldProduce(t)
	held1, release1 := b.HoldProduce(t)
	errs := make(chan error, 1+parallelBatch)
	write := func(v string) {
		go func() { errs <- s.Write(context.Background(), Message{Key: []byte("t"), Value: []byte(v)}) }()
	}
	write("held")
	<-held0
	// state waits until the partition holds want waiting records and
	// returns its running requests.
	state := func(want int) int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s.mu.Lock()
			q := s.queues[0]
			records, flushers := q.records, q.flushers
			s.mu.Unlock()
			if records == want {
				return flushers
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d records waiting, want %d", records, want)
			}
			runtime.Gosched()
		}
	}
	for i := range parallelBatch - 1 {
		write(fmt.Sprint(i))
	}
	if n := state(parallelBatch - 1); n != 1 {
		t.Fatalf("%d requests for %d waiting records, want 1 (the one held)", n, parallelBatch-1)
	}
	write("last")
	// The batch is worth a request of its own: it goes alongside.
	<-held1
	if n := state(0); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	release0()
	release1()
	for range 1 + parallelBatch {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if recs := b.Records(t, topic); len(recs) != 2+parallelBatch {
		t.Fatalf("%d records", len(recs))
	}
}

// TestSink_Shutdown: Shutdown waits for a produce request in flight until
// its ctx ends, then cancels it: the write fails, the flush goroutine
// returns (main_test checks that none is left), and Shutdown returns
// ctx's error long before the request's WriteTimeout.
func TestSink_Shutdown(t *testing.T) {
	t.Parallel()
	b, s := startWarm(t, 1, func(c *Config) { c.WriteTimeout = time.Minute })
	// The broker holds the next produce request until the end of the test.
	held, _ := b.HoldProduce(t)
	written := make(chan error, 1)
	go func() {
		written <- s.Write(context.Background(), Message{Key: []byte("t"), Value: []byte("in flight")})
	}()
	<-held
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown with a request held: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shutdown took %s", took)
	}
	if err := <-written; err == nil {
		t.Fatal("the cancelled write succeeded")
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
}
