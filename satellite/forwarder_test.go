package satellite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/satellite/kafkasink"
	"github.com/squallhq/squall/satellite/spool"
)

// stubProducer is a producer with function fields, for the timing of the
// forwarder's retries under a fake clock. The real Kafka path is tested
// against kfake in satellite_test.go.
type stubProducer struct {
	write func(ctx context.Context, msgs ...kafkasink.Message) error
	ping  func(ctx context.Context) error
}

var _ producer = (*stubProducer)(nil)

func (p *stubProducer) Write(ctx context.Context, msgs ...kafkasink.Message) error {
	return p.write(ctx, msgs...)
}
func (p *stubProducer) WriteWithinFrom(ctx context.Context, _ time.Time, timeout time.Duration, msg kafkasink.Message) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return p.write(ctx, msg)
}
func (p *stubProducer) Ping(ctx context.Context) error { return p.ping(ctx) }
func (p *stubProducer) MaxMessageBytes() int64         { return 1 << 20 }

// kafkaState is what the stub's Kafka does: up or down, and what it got.
type kafkaState struct {
	mu        sync.Mutex
	up        bool
	reject    string // a value Kafka refuses
	delivered []string
	attempts  []time.Time // writes and pings while down
}

func (k *kafkaState) producer() *stubProducer {
	return &stubProducer{
		write: func(ctx context.Context, msgs ...kafkasink.Message) error {
			k.mu.Lock()
			defer k.mu.Unlock()
			if !k.up {
				k.attempts = append(k.attempts, time.Now())
				return errors.New("connection refused")
			}
			for _, m := range msgs {
				if string(m.Value) == k.reject {
					return fmt.Errorf("%w: too large", kafkasink.ErrRejected)
				}
			}
			for _, m := range msgs {
				k.delivered = append(k.delivered, string(m.Value))
			}
			return nil
		},
		ping: func(ctx context.Context) error {
			k.mu.Lock()
			defer k.mu.Unlock()
			if !k.up {
				k.attempts = append(k.attempts, time.Now())
				return errors.New("connection refused")
			}
			return nil
		},
	}
}

func (k *kafkaState) set(up bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.up = up
}

func (k *kafkaState) snapshot() (delivered []string, attempts []time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.delivered...), append([]time.Time(nil), k.attempts...)
}

func newTestForwarder(t *testing.T, k *kafkaState) (*forwarder, *spool.Spool) {
	t.Helper()
	sp, err := spool.New(spool.Config{Dir: t.TempDir(), MaxBytes: 1 << 20, SegmentBytes: 64 << 10}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	m, _ := newMetrics(nil)
	f := newForwarder(forwarderConfig{
		ackTimeout:     time.Second,
		drainTimeout:   time.Second,
		backoffMin:     100 * time.Millisecond,
		backoffMax:     time.Second,
		healthInterval: 10 * time.Second,
	}, k.producer(), sp, slog.New(slog.DiscardHandler), m, nil)
	return f, sp
}

func event(i int) intake.Record {
	return intake.Record{Key: "t", Value: fmt.Appendf(nil, "e%d", i), Time: time.UnixMilli(1)}
}

// TestForwarder_Retry checks the drain loop's backoff while Kafka is down,
// the delivery in order once it is back, and the return to direct writes.
func TestForwarder_Retry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &kafkaState{}
		f, sp := newTestForwarder(t, k)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { f.run(ctx); close(done) }()
		synctest.Wait()

		for i := range 5 {
			if err := f.Publish(ctx, event(i)); err != nil {
				t.Fatal(err)
			}
		}
		if !f.spooling.Load() || sp.Stats().Records != 5 {
			t.Fatalf("spooling %v, spool %+v", f.spooling.Load(), sp.Stats())
		}
		synctest.Wait()
		_, before := k.snapshot()
		start := time.Now()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		_, attempts := k.snapshot()
		attempts = attempts[len(before):]
		// Checks (pings) at 100, 300, 700, 1500, 2500 ms: the wait doubles
		// from 100 ms up to the 1 s cap.
		var got []time.Duration
		for _, a := range attempts {
			got = append(got, a.Sub(start))
		}
		want := []time.Duration{100, 300, 700, 1500, 2500}
		if len(got) != len(want) {
			t.Fatalf("attempts at %v, want %v ms", got, want)
		}
		for i := range want {
			if got[i] != want[i]*time.Millisecond {
				t.Fatalf("attempts at %v, want %v ms", got, want)
			}
		}

		// While spooling, new events go to the spool behind the others.
		if err := f.Publish(ctx, event(5)); err != nil {
			t.Fatal(err)
		}
		k.set(true)
		time.Sleep(time.Second)
		synctest.Wait()
		delivered, _ := k.snapshot()
		want6 := []string{"e0", "e1", "e2", "e3", "e4", "e5"}
		if fmt.Sprint(delivered) != fmt.Sprint(want6) {
			t.Fatalf("delivered %v, want %v", delivered, want6)
		}
		if f.spooling.Load() || sp.Stats().Records != 0 {
			t.Fatalf("after the drain: spooling %v, spool %+v", f.spooling.Load(), sp.Stats())
		}
		// Direct again.
		if err := f.Publish(ctx, event(6)); err != nil {
			t.Fatal(err)
		}
		if delivered, _ := k.snapshot(); delivered[len(delivered)-1] != "e6" {
			t.Fatalf("direct write: %v", delivered)
		}
		cancel()
		<-done
	})
}

// TestForwarder_Rejected checks that a spooled record Kafka refuses goes to
// rejected.log and does not hold the others back.
func TestForwarder_Rejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &kafkaState{reject: "e2"}
		f, sp := newTestForwarder(t, k)
		ctx, cancel := context.WithCancel(t.Context())
		for i := range 5 {
			if err := f.Publish(ctx, event(i)); err != nil {
				t.Fatal(err)
			}
		}
		k.set(true)
		done := make(chan struct{})
		go func() { f.run(ctx); close(done) }()
		time.Sleep(time.Second)
		synctest.Wait()
		delivered, _ := k.snapshot()
		if fmt.Sprint(delivered) != "[e0 e1 e3 e4]" {
			t.Fatalf("delivered %v", delivered)
		}
		if sp.Stats().Records != 0 || f.spooling.Load() {
			t.Fatalf("spool %+v", sp.Stats())
		}
		// In direct mode the refused event is a 413.
		if err := f.Publish(ctx, event(2)); !errors.Is(err, intake.ErrTooLarge) {
			t.Fatalf("direct refused write: %v", err)
		}
		cancel()
		<-done
	})
}

func TestRecord_Codec(t *testing.T) {
	t.Parallel()
	for _, m := range []kafkasink.Message{
		{Key: []byte("tenant"), Value: []byte(`{"type":"x"}`), Time: time.UnixMilli(1_700_000_000_123),
			Headers: []kafkasink.Header{{Key: "squall-event-id", Value: []byte("id")}, {Key: "empty", Value: []byte{}}}},
		{Key: []byte{}, Value: []byte{}, Time: time.UnixMilli(0), Headers: []kafkasink.Header{}},
		{Key: bytes.Repeat([]byte("k"), 300), Value: bytes.Repeat([]byte("v"), 70000), Time: time.UnixMilli(-5)},
	} {
		got, err := decodeRecord(encodeRecord(m))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Key, m.Key) || !bytes.Equal(got.Value, m.Value) || !got.Time.Equal(m.Time) || len(got.Headers) != len(m.Headers) {
			t.Fatalf("round trip: %+v", got)
		}
		for i := range m.Headers {
			if got.Headers[i].Key != m.Headers[i].Key || !bytes.Equal(got.Headers[i].Value, m.Headers[i].Value) {
				t.Fatalf("header %d: %+v", i, got.Headers[i])
			}
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1}, {1, 0, 5, 'a'}, {1, 0, 0, 9}, {1, 0, 0, 1, 3, 'a'}} {
		if _, err := decodeRecord(bad); !errors.Is(err, errBadRecord) {
			t.Errorf("decode %v: %v", bad, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(kafkasink.Message{Key: []byte("t"), Value: []byte(`{}`), Time: time.UnixMilli(5),
		Headers: []kafkasink.Header{{Key: "a", Value: []byte("b")}}}))
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeRecord(b)
		if err != nil {
			return
		}
		again, err := decodeRecord(encodeRecord(m))
		if err != nil || !bytes.Equal(again.Value, m.Value) || !bytes.Equal(again.Key, m.Key) || len(again.Headers) != len(m.Headers) {
			t.Fatalf("re-encoding %x: %v", b, err)
		}
	})
}
