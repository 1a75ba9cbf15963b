package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
)

const testTopic = "squall.events"

func testDial(addr string) Dial {
	return Dial{Brokers: []string{addr}, Timeout: 2 * time.Second}
}

func testSourceConfig(addr, group string) SourceConfig {
	var logger *slog.Logger
	if os.Getenv("SQUALL_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return SourceConfig{
		Logger:            logger,
		Dial:              testDial(addr),
		Topic:             testTopic,
		Group:             group,
		MaxWait:           100 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond,
		SessionTimeout:    2 * time.Second,
		RebalanceTimeout:  2 * time.Second,
	}
}

func openSource(t testing.TB, cfg SourceConfig) *Source {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func newWriter(t testing.TB, d Dial) *Writer {
	t.Helper()
	w, err := NewWriter(WriterConfig{Dial: d, Topic: testTopic})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w
}

func records(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Key:     fmt.Appendf(nil, "tenant-%d", i%5),
			Value:   fmt.Appendf(nil, `{"n":%d}`, i),
			Headers: []Header{{"squall-event-id", fmt.Appendf(nil, "id-%d", i)}, {"squall-source", []byte("test")}},
		}
	}
	return recs
}

func TestSource_FetchCommit(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 3})
	w := newWriter(t, testDial(b.Addr))
	if err := w.Write(t.Context(), records(30)...); err != nil {
		t.Fatal(err)
	}

	var assignments []Assignment
	cfg := testSourceConfig(b.Addr, "g1")
	got := make(chan Assignment, 10)
	cfg.OnAssignment = func(a Assignment) { got <- a }
	s := openSource(t, cfg)

	seen := map[string]bool{}
	last := map[int]int64{}
	for len(seen) < 30 {
		m, err := s.Fetch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		id, ok := m.Header("squall-event-id")
		if !ok {
			t.Fatalf("no event id in %v", m.Headers())
		}
		if seen[string(id)] {
			t.Fatalf("%s fetched twice", id)
		}
		seen[string(id)] = true
		if m.Topic() != testTopic || !strings.HasPrefix(string(m.Key()), "tenant-") || len(m.Headers()) != 2 {
			t.Fatalf("message %s/%d/%d key %q headers %v", m.Topic(), m.Partition(), m.Offset(), m.Key(), m.Headers())
		}
		if prev, ok := last[m.Partition()]; ok && m.Offset() <= prev {
			t.Fatalf("partition %d: offset %d after %d", m.Partition(), m.Offset(), prev)
		}
		last[m.Partition()] = m.Offset()
	}
	a := s.Assignment()
	if !a.Joined || a.Generation != 1 || !slices.Equal(a.Partitions, []int{0, 1, 2}) {
		t.Fatalf("assignment %+v", a)
	}
	// The topic's partition count, read from the broker as the
	// generation started (for the fleet's partitions without an owner).
	polltest.Wait(t, "the topic's partition count", 10*time.Second, func() bool {
		n, ok := s.TopicPartitions()
		return ok && n == 3
	})
	assignments = append(assignments, <-got)
	if !assignments[0].Joined || len(assignments[0].Partitions) != 3 {
		t.Fatalf("OnAssignment got %+v", assignments[0])
	}

	var ps []Position
	for p, off := range last {
		ps = append(ps, Position{Partition: p, Next: off + 1})
	}
	if err := s.Commit(t.Context(), ps...); err != nil {
		t.Fatal(err)
	}
	committed := b.Committed(t, "g1", testTopic)
	ends := b.EndOffsets(t, testTopic)
	for p, end := range ends {
		if committed[p] != end {
			t.Errorf("partition %d: committed %d, end %d", p, committed[p], end)
		}
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if a := <-got; a.Joined {
		t.Errorf("after close: %+v", a)
	}
	if _, err := s.Fetch(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("fetch after close: %v", err)
	}
	if err := s.Commit(t.Context(), Position{0, 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("commit after close: %v", err)
	}
}

// TestSource_StartOffset: a new group starts at the oldest record with
// StartEarliest (the default) and after the records already written with
// StartLatest.
func TestSource_StartOffset(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 1})
	w := newWriter(t, testDial(b.Addr))
	if err := w.Write(t.Context(), records(10)...); err != nil {
		t.Fatal(err)
	}

	// The default: the first record fetched is the oldest.
	s := openSource(t, testSourceConfig(b.Addr, "from-earliest"))
	m, err := s.Fetch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := m.Header("squall-event-id"); string(id) != "id-0" || m.Offset() != 0 {
		t.Fatalf("earliest: first fetched %s at offset %d, want id-0 at 0", id, m.Offset())
	}

	// Latest: write probes until one is fetched (the reader resolves the end
	// of the partition some time after it joins); none of the records
	// written before it opened may come.
	cfg := testSourceConfig(b.Addr, "from-latest")
	cfg.StartOffset = StartLatest
	late := openSource(t, cfg)
	deadline := time.Now().Add(20 * time.Second)
	for probe := 0; ; probe++ {
		if time.Now().After(deadline) {
			t.Fatal("latest: no probe fetched in 20s")
		}
		rec := Record{Key: []byte("tenant-0"), Value: []byte(`{}`), Headers: []Header{{"squall-event-id", fmt.Appendf(nil, "probe-%d", probe)}}}
		if err := w.Write(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		m, err := late.Fetch(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if id, _ := m.Header("squall-event-id"); !strings.HasPrefix(string(id), "probe-") || m.Offset() < 10 {
			t.Fatalf("latest: fetched %s at offset %d, written before the group joined", id, m.Offset())
		}
		break
	}
}

func TestSource_TwoMembersSplitPartitions(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 4})
	s1 := openSource(t, testSourceConfig(b.Addr, "g2"))
	// The first member starts fetching (kafka-go joins on the first fetch
	// of a group reader as well as in the background).
	polltest.Wait(t, "member 1 to own every partition", 10*time.Second, func() bool {
		return len(s1.Assignment().Partitions) == 4
	})
	s2 := openSource(t, testSourceConfig(b.Addr, "g2"))
	polltest.Wait(t, "both members to share the partitions", 10*time.Second, func() bool {
		a1, a2 := s1.Assignment(), s2.Assignment()
		if !a1.Joined || !a2.Joined || len(a1.Partitions) != 2 || len(a2.Partitions) != 2 {
			return false
		}
		all := slices.Sorted(slices.Values(append(slices.Clone(a1.Partitions), a2.Partitions...)))
		return slices.Equal(all, []int{0, 1, 2, 3})
	})
	if g := s1.Assignment().Generation; g < 2 {
		t.Errorf("member 1 generation %d, want a second one after the rebalance", g)
	}
	// A commit for every partition commits only the member's own.
	var all []Position
	for p := range 4 {
		all = append(all, Position{Partition: p, Next: 0})
	}
	if err := s1.Commit(t.Context(), all...); err != nil {
		t.Fatal(err)
	}
	committed := b.Committed(t, "g2", testTopic)
	for p := range 4 {
		_, ok := committed[int32(p)]
		if own := slices.Contains(s1.Assignment().Partitions, p); ok != own {
			t.Errorf("partition %d: committed %v, owned by member 1 %v (committed %v)", p, ok, own, committed)
		}
	}
}

func TestSource_SASLPlain(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 1,
		Opts: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", "engine", "s3cr3t")}})
	d := testDial(b.Addr)
	d.SASL = SASLConfig{Mechanism: "plain", Username: "engine", Password: "s3cr3t"}
	writeAndFetch(t, d, "g3", 3)

	bad := testDial(b.Addr)
	bad.SASL = SASLConfig{Mechanism: "PLAIN", Username: "engine", Password: "wrong"}
	if err := writeOne(t, bad); err == nil {
		t.Error("write with a wrong password succeeded")
	}
}

// writeAndFetch writes n records through d and fetches them with a source
// of group that dials as d: the broker accepts d's TLS and SASL settings.
func writeAndFetch(t *testing.T, d Dial, group string, n int) {
	t.Helper()
	if err := newWriter(t, d).Write(t.Context(), records(n)...); err != nil {
		t.Fatal(err)
	}
	cfg := testSourceConfig(d.Brokers[0], group)
	cfg.Dial = d
	s := openSource(t, cfg)
	for range n {
		if _, err := s.Fetch(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// writeOne writes one record through d, with short timeouts, and returns
// the write's error: d's TLS or SASL settings refused by the broker.
func writeOne(t *testing.T, d Dial) error {
	t.Helper()
	d.Timeout = 500 * time.Millisecond
	w, err := NewWriter(WriterConfig{Dial: d, Topic: testTopic, WriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.Write(t.Context(), records(1)...)
}

func TestSASLConfig_neverPrintsPassword(t *testing.T) {
	t.Parallel()
	c := SASLConfig{Mechanism: "PLAIN", Username: "u", Password: "hunter2"}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%v", Dial{SASL: c})} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%q shows the password", s)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	ok := SourceConfig{Dial: Dial{Brokers: []string{"k:9092"}}, Topic: "t", Group: "g"}
	tests := []struct {
		name string
		cfg  func() error
		want string
	}{
		{"source ok", func() error { return ok.Validate() }, ""},
		{"no brokers", func() error { c := ok; c.Brokers = nil; return c.Validate() }, "brokers: at least one"},
		{"bad broker", func() error { c := ok; c.Brokers = []string{"k 9092"}; return c.Validate() }, `"k 9092" is not host:port`},
		{"no topic", func() error { c := ok; c.Topic = ""; return c.Validate() }, "topic: required"},
		{"no group", func() error { c := ok; c.Group = ""; return c.Validate() }, "group: required"},
		{"heartbeat", func() error { c := ok; c.HeartbeatInterval = time.Minute; return c.Validate() }, "heartbeat interval"},
		{"start offset", func() error { c := ok; c.StartOffset = "newest"; return c.Validate() }, `"newest" is neither`},
		{"latest", func() error { c := ok; c.StartOffset = StartLatest; return c.Validate() }, ""},
		{"tls pair", func() error { c := ok; c.TLS.CertFile = "c.pem"; return c.Validate() }, "cert_file and key_file"},
		{"sasl", func() error { c := ok; c.SASL = SASLConfig{Mechanism: "GSSAPI", Username: "u"}; return c.Validate() }, "GSSAPI"},
		{"sasl user", func() error { c := ok; c.SASL = SASLConfig{Mechanism: "PLAIN"}; return c.Validate() }, "username required"},
		{"writer ok", func() error { return WriterConfig{Dial: ok.Dial, Topic: "t"}.Validate() }, ""},
		{"writer batch", func() error {
			return WriterConfig{Dial: ok.Dial, Topic: "t", BatchTimeout: 2 * time.Second}.Validate()
		}, "batch timeout"},
		{"writer no topic", func() error { return WriterConfig{Dial: ok.Dial}.Validate() }, "topic: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestSource_FetchBatch: batches hold consecutive offsets of one
// partition, at most MaxBatchMessages, and together every record once.
func TestSource_FetchBatch(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 2})
	w := newWriter(t, testDial(b.Addr))
	const n = 1500
	if err := w.Write(t.Context(), records(n)...); err != nil {
		t.Fatal(err)
	}
	s := openSource(t, testSourceConfig(b.Addr, "batches"))
	next := map[int]int64{}
	got := 0
	for got < n {
		bt, err := s.FetchBatch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(bt.Messages) == 0 || len(bt.Messages) > MaxBatchMessages {
			t.Fatalf("batch of %d messages", len(bt.Messages))
		}
		for _, m := range bt.Messages {
			if m.Partition() != bt.Partition || m.Offset() != next[bt.Partition] {
				t.Fatalf("partition %d: message %d/%d, want offset %d", bt.Partition, m.Partition(), m.Offset(), next[bt.Partition])
			}
			if m.HighWaterMark() != bt.HighWaterMark || m.Offset() >= bt.HighWaterMark {
				t.Fatalf("message %d: high-water mark %d, batch %d", m.Offset(), m.HighWaterMark(), bt.HighWaterMark)
			}
			next[bt.Partition]++
			got++
		}
	}
	if ends := b.EndOffsets(t, testTopic); next[0] != ends[0] || next[1] != ends[1] {
		t.Fatalf("read up to %v, ends %v", next, ends)
	}
}
