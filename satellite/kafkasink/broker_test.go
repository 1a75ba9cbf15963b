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
// gets.
type requestLog struct {
	mu       sync.Mutex
	requests [][]int32 // partitions of each request, in order
}

// watchProduce installs a requestLog on b's produce requests; edit, when
// not nil, may change a request before the broker handles it.
func watchProduce(b *kafkatest.Broker, edit func(*kmsg.ProduceRequest)) *requestLog {
	l := &requestLog{}
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
		if edit != nil {
			edit(r)
		}
		return nil, nil, false
	})
	return l
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

// heldSink is a sink writing to a broker of three partitions that holds the
// produce request of its write "held" to partition 0: the writes made
// meanwhile wait behind it.
type heldSink struct {
	*Sink
	b       *kafkatest.Broker
	keys    [][]byte // keys[p] goes to partition p
	log     *requestLog
	held    chan error // the held write's result
	release func()
}

// startHeld starts a broker of cfg (three partitions), watched by
// watchProduce with edit, and a sink whose write "held" it holds.
func startHeld(t *testing.T, cfg kafkatest.Config, edit func(*kmsg.ProduceRequest)) *heldSink {
	t.Helper()
	b := kafkatest.Start(t, cfg)
	h := &heldSink{Sink: newTestSink(t, b.Addr, nil), b: b, keys: keysByPartition(t, 3), held: make(chan error, 1)}
	if err := h.Write(t.Context(), Message{Key: h.keys[0], Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	h.log = watchProduce(b, edit)
	var held <-chan struct{}
	held, h.release = b.HoldProduce(t)
	go func() { h.held <- h.Write(context.Background(), Message{Key: h.keys[0], Value: []byte("held")}) }()
	<-held
	return h
}

// waitQueued waits until n records wait behind the held request.
func (h *heldSink) waitQueued(t *testing.T, n int) {
	t.Helper()
	waitFor(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		q := h.queues[0]
		return q != nil && q.records == n
	})
}

// releaseHeld lets the broker answer the held request, and checks that the
// held write succeeded.
func (h *heldSink) releaseHeld(t *testing.T) {
	t.Helper()
	h.release()
	if err := <-h.held; err != nil {
		t.Fatal(err)
	}
}

// sortedValues returns the values of the topic's records, sorted.
func (h *heldSink) sortedValues(t *testing.T) []string {
	t.Helper()
	values := topicValues(t, h.b)
	slices.Sort(values)
	return values
}

// TestSink_OneRequestPerBroker checks that the writes of several partitions
// waiting for one broker go in one produce request, and that the records of
// each key keep their order, within a write and across a writer's writes.
func TestSink_OneRequestPerBroker(t *testing.T) {
	t.Parallel()
	s := startHeld(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3}, nil)
	keys := s.keys
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
	s.waitQueued(t, 3+12)
	s.releaseHeld(t)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := s.log.largest(); n != 3 {
		t.Errorf("the largest produce request carried %d partitions, want 3", n)
	}
	// Per key: the held record first, then each writer's records in order,
	// and the write's records in order.
	recs := s.b.Records(t, topic)
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
		s := startHeld(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3, Opts: []kfake.Opt{
			kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4096"}),
		}}, nil)
		// Partition 1 gets a record over the broker's limit (not the
		// sink's), partitions 0 and 2 small ones.
		results := make([]chan error, 3)
		for p, k := range s.keys {
			results[p] = make(chan error, 1)
			v := fmt.Appendf(nil, "small-%d", p)
			if p == 1 {
				v = bytes.Repeat([]byte("x"), 5000)
			}
			go func() { results[p] <- s.WriteWithin(context.Background(), 10*time.Second, Message{Key: k, Value: v}) }()
		}
		s.waitQueued(t, 3)
		s.releaseHeld(t)
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
		if n := s.log.largest(); n != 3 {
			t.Errorf("the largest produce request carried %d partitions, want 3", n)
		}
		if got, want := s.sortedValues(t), []string{"held", "small-0", "small-2", "warm"}; !slices.Equal(got, want) {
			t.Fatalf("records %q, want %q", got, want)
		}
	})
	t.Run("not answered", func(t *testing.T) {
		t.Parallel()
		// The first request carrying several partitions loses
		// partition 1 before the broker sees it: the broker stores the
		// others and answers for them only.
		var dropped atomic.Bool
		s := startHeld(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3}, func(r *kmsg.ProduceRequest) {
			for i := range r.Topics {
				ps := r.Topics[i].Partitions
				if len(ps) > 1 && dropped.CompareAndSwap(false, true) {
					r.Topics[i].Partitions = slices.DeleteFunc(ps, func(p kmsg.ProduceRequestTopicPartition) bool { return p.Partition == 1 })
				}
			}
		})
		results := make(chan error, 3)
		for p, k := range s.keys {
			go func() {
				results <- s.WriteWithin(context.Background(), 10*time.Second, Message{Key: k, Value: fmt.Appendf(nil, "r-%d", p)})
			}()
		}
		s.waitQueued(t, 3)
		s.releaseHeld(t)
		for range 3 {
			if err := <-results; err != nil {
				t.Fatal(err)
			}
		}
		if !dropped.Load() {
			t.Fatal("no produce request carried several partitions")
		}
		s.log.mu.Lock()
		last := s.log.requests[len(s.log.requests)-1]
		s.log.mu.Unlock()
		if !slices.Equal(last, []int32{1}) {
			t.Errorf("the last produce request carried partitions %v, want [1] alone", last)
		}
		if got, want := s.sortedValues(t), []string{"held", "r-0", "r-1", "r-2", "warm"}; !slices.Equal(got, want) {
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
	b, s := startWarm(t, 1, nil)
	// Hold the next two produce requests, each until its own release.
	sizes := watchSizes(b)
	held0, release0 := b.HoldProduce(t)
	held1, release1 := b.HoldProduce(t)
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
	<-held0
	for i := range parallelBatch {
		write(fmt.Sprint("second-", i))
	}
	<-held1 // sent alongside
	for i := range 5 {
		write(fmt.Sprint("third-", i))
	}
	waitFor(t, func() bool { r, _ := state(); return r == 5 })
	// The second request is acknowledged: its goroutine leaves the 5
	// waiting records to the first request's.
	release1()
	waitFor(t, func() bool { _, f := state(); return f == 1 })
	if r, _ := state(); r != 5 {
		t.Fatalf("%d records waiting, want 5", r)
	}
	release0()
	for range 1 + parallelBatch + 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := sizes.get()
	if len(got) != 3 {
		t.Fatalf("%d produce requests, want 3", len(got))
	}
	if got[2] != 5 {
		t.Fatalf("the third request carried %d records, want 5", got[2])
	}
}
