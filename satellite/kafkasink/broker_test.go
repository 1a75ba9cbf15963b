package kafkasink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/squallhq/squall/internal/kafkatest"
)

// keysByPartition returns one key per partition of 0 to n-1, by the sink's
// partitioner.
func keysByPartition(t *testing.T, n int) [][]byte {
	t.Helper()
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	keys := make([][]byte, n)
	var b kafka.Murmur2Balancer
	for i, found := 0, 0; found < n; i++ {
		k := fmt.Appendf(nil, "tenant-%d", i)
		if p := b.Balance(kafka.Message{Key: k}, parts...); keys[p] == nil {
			keys[p] = k
			found++
		}
		if i > 10000 {
			t.Fatal("no key for some partition")
		}
	}
	return keys
}

// waitFor waits until cond holds, 10 s at most.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// requestLog records the partitions of each produce request the broker
// gets; the first one after hold is held until release is closed.
type requestLog struct {
	mu       sync.Mutex
	requests [][]int32 // partitions of each request, in order
	holding  atomic.Bool
	armed    atomic.Bool
	held     chan struct{}
	release  chan struct{}
}

// watchProduce installs a requestLog on b's produce requests; edit, when
// not nil, may change a request before the broker handles it.
func watchProduce(b *kafkatest.Broker, edit func(*kmsg.ProduceRequest)) *requestLog {
	l := &requestLog{held: make(chan struct{}), release: make(chan struct{})}
	b.Cluster().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.ProduceRequest)
		var parts []int32
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, p.Partition)
			}
		}
		l.mu.Lock()
		l.requests = append(l.requests, parts)
		l.mu.Unlock()
		if l.armed.Load() && l.holding.CompareAndSwap(false, true) {
			close(l.held)
			b.Cluster().SleepControl(func() { <-l.release })
		}
		if edit != nil {
			edit(r)
		}
		return nil, nil, false
	})
	return l
}

// hold holds the next produce request and returns once the broker holds it.
func (l *requestLog) hold(t *testing.T, send func()) {
	t.Helper()
	l.armed.Store(true)
	send()
	<-l.held
}

// largest returns the most partitions one request carried.
func (l *requestLog) largest() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.requests {
		n = max(n, len(r))
	}
	return n
}

// TestSink_OneRequestPerBroker checks that the writes of several partitions
// waiting for one broker go in one produce request, and that the records of
// each key keep their order, within a write and across a writer's writes.
func TestSink_OneRequestPerBroker(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	s := newTestSink(t, b.Addr, nil)
	keys := keysByPartition(t, 3)
	if err := s.Write(t.Context(), Message{Key: keys[0], Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	log := watchProduce(b, nil)
	first := make(chan error, 1)
	log.hold(t, func() {
		go func() { first <- s.Write(context.Background(), Message{Key: keys[0], Value: []byte("held")}) }()
	})
	// While it is held: one writer per partition, each waiting for its
	// writes in turn, and one write of all partitions' records.
	errs := make(chan error, 4)
	for _, k := range keys {
		go func() {
			for i := range 5 {
				if err := s.WriteWithin(context.Background(), 10*time.Second, Message{Key: k, Value: fmt.Appendf(nil, "%s/w%d", k, i)}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() {
		var msgs []Message
		for i := range 12 {
			k := keys[i%3]
			msgs = append(msgs, Message{Key: k, Value: fmt.Appendf(nil, "%s/m%d", k, i/3)})
		}
		errs <- s.Write(context.Background(), msgs...)
	}()
	// Wait until the three writers' first writes and the write of all
	// partitions wait behind the request held.
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		q := s.queues[0]
		return q != nil && q.records == 3+12
	})
	close(log.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := log.largest(); n != 3 {
		t.Errorf("the largest produce request carried %d partitions, want 3", n)
	}
	// Per key: the held record first, then each writer's records in order,
	// and the write's records in order.
	recs := b.Records(t, topic)
	if len(recs) != 2+15+12 {
		t.Fatalf("%d records, want %d", len(recs), 2+15+12)
	}
	next := map[string]int{}
	for _, r := range recs {
		v := string(r.Value)
		if v == "warm" || v == "held" {
			continue
		}
		k, seq, _ := bytes.Cut(r.Value, []byte("/"))
		if !bytes.Equal(k, keys[r.Partition]) {
			t.Fatalf("record %s in partition %d", v, r.Partition)
		}
		var i int
		fmt.Sscanf(string(seq[1:]), "%d", &i)
		series := string(k) + string(seq[:1])
		if i != next[series] {
			t.Fatalf("record %s after %s%d", v, series, next[series]-1)
		}
		next[series]++
	}
}

// TestSink_PartialFailure checks a produce request whose partitions do not
// all succeed: the writes of the partitions acknowledged succeed once; a
// partition refused for good fails its writes (and only them) with
// ErrRejected; a partition not answered is tried again alone.
func TestSink_PartialFailure(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3, Opts: []kfake.Opt{
			kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4096"}),
		}})
		s := newTestSink(t, b.Addr, nil)
		keys := keysByPartition(t, 3)
		if err := s.Write(t.Context(), Message{Key: keys[0], Value: []byte("warm")}); err != nil {
			t.Fatal(err)
		}
		log := watchProduce(b, nil)
		first := make(chan error, 1)
		log.hold(t, func() {
			go func() { first <- s.Write(context.Background(), Message{Key: keys[0], Value: []byte("held")}) }()
		})
		// Partition 1 gets a record over the broker's limit (not the
		// sink's), partitions 0 and 2 small ones.
		results := make([]chan error, 3)
		for p, k := range keys {
			results[p] = make(chan error, 1)
			v := fmt.Appendf(nil, "small-%d", p)
			if p == 1 {
				v = bytes.Repeat([]byte("x"), 5000)
			}
			go func() { results[p] <- s.WriteWithin(context.Background(), 10*time.Second, Message{Key: k, Value: v}) }()
		}
		waitFor(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.queues[0].records == 3
		})
		close(log.release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		for p := range 3 {
			err := <-results[p]
			if p == 1 {
				if !errors.Is(err, ErrRejected) {
					t.Errorf("partition 1: %v, want ErrRejected", err)
				}
			} else if err != nil {
				t.Errorf("partition %d: %v", p, err)
			}
		}
		if n := log.largest(); n != 3 {
			t.Errorf("the largest produce request carried %d partitions, want 3", n)
		}
		var got []string
		for _, r := range b.Records(t, topic) {
			got = append(got, string(r.Value))
		}
		slices.Sort(got)
		if want := []string{"held", "small-0", "small-2", "warm"}; !slices.Equal(got, want) {
			t.Fatalf("records %q, want %q", got, want)
		}
	})
	t.Run("not answered", func(t *testing.T) {
		t.Parallel()
		b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
		s := newTestSink(t, b.Addr, nil)
		keys := keysByPartition(t, 3)
		if err := s.Write(t.Context(), Message{Key: keys[0], Value: []byte("warm")}); err != nil {
			t.Fatal(err)
		}
		// The first request carrying several partitions loses
		// partition 1 before the broker sees it: the broker stores the
		// others and answers for them only.
		var dropped atomic.Bool
		log := watchProduce(b, func(r *kmsg.ProduceRequest) {
			for i := range r.Topics {
				ps := r.Topics[i].Partitions
				if len(ps) > 1 && dropped.CompareAndSwap(false, true) {
					r.Topics[i].Partitions = slices.DeleteFunc(ps, func(p kmsg.ProduceRequestTopicPartition) bool { return p.Partition == 1 })
				}
			}
		})
		first := make(chan error, 1)
		log.hold(t, func() {
			go func() { first <- s.Write(context.Background(), Message{Key: keys[0], Value: []byte("held")}) }()
		})
		results := make(chan error, 3)
		for p, k := range keys {
			go func() {
				results <- s.WriteWithin(context.Background(), 10*time.Second, Message{Key: k, Value: fmt.Appendf(nil, "r-%d", p)})
			}()
		}
		waitFor(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.queues[0].records == 3
		})
		close(log.release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := <-results; err != nil {
				t.Fatal(err)
			}
		}
		if !dropped.Load() {
			t.Fatal("no produce request carried several partitions")
		}
		log.mu.Lock()
		last := log.requests[len(log.requests)-1]
		log.mu.Unlock()
		if !slices.Equal(last, []int32{1}) {
			t.Errorf("the last produce request carried partitions %v, want [1] alone", last)
		}
		var got []string
		for _, r := range b.Records(t, topic) {
			got = append(got, string(r.Value))
		}
		slices.Sort(got)
		if want := []string{"held", "r-0", "r-1", "r-2", "warm"}; !slices.Equal(got, want) {
			t.Fatalf("records %q, want %q (each once)", got, want)
		}
	})
}

// TestSink_SecondFlusherStops checks that a request alongside one in flight
// is sent only while parallelBatch records wait: once its request is
// acknowledged, the second flush goroutine leaves fewer waiting records to
// the first, which sends them in its next request.
func TestSink_SecondFlusherStops(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 1})
	s := newTestSink(t, b.Addr, nil)
	if err := s.Write(t.Context(), Message{Key: []byte("t"), Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	// Hold the next two produce requests, each until its own release.
	held := []chan struct{}{make(chan struct{}), make(chan struct{})}
	release := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var requests atomic.Int32
	var sizes sync.Map // request number → records
	b.Cluster().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		n := requests.Add(1)
		records := 0
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			for _, p := range t.Partitions {
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(p.Records); err == nil {
					records += int(batch.NumRecords)
				}
			}
		}
		sizes.Store(n, records)
		if n <= 2 {
			close(held[n-1])
			b.Cluster().SleepControl(func() { <-release[n-1] })
		}
		return nil, nil, false
	})
	errs := make(chan error, 1+parallelBatch+5)
	write := func(v string) {
		go func() { errs <- s.Write(context.Background(), Message{Key: []byte("t"), Value: []byte(v)}) }()
	}
	state := func() (records, flushers int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		q := s.queues[0]
		return q.records, q.flushers
	}
	write("first")
	<-held[0]
	for i := range parallelBatch {
		write(fmt.Sprint("second-", i))
	}
	<-held[1] // sent alongside
	for i := range 5 {
		write(fmt.Sprint("third-", i))
	}
	waitFor(t, func() bool { r, _ := state(); return r == 5 })
	// The second request is acknowledged: its goroutine leaves the 5
	// waiting records to the first request's.
	close(release[1])
	waitFor(t, func() bool { _, f := state(); return f == 1 })
	if r, _ := state(); r != 5 {
		t.Fatalf("%d records waiting, want 5", r)
	}
	close(release[0])
	for range 1 + parallelBatch + 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := requests.Load(); n != 3 {
		t.Fatalf("%d produce requests, want 3", n)
	}
	if got, _ := sizes.Load(int32(3)); got != 5 {
		t.Fatalf("the third request carried %v records, want 5", got)
	}
}
