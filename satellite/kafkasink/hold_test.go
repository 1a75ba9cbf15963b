package kafkasink

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/squallhq/squall/internal/kafkatest"
)

// holdQueue is a sink (no broker: nothing is sent) whose broker 0 has a
// flush goroutine running, as if its request had just been acknowledged,
// and a layout of one partition led by broker 0.
func holdQueue(t *testing.T) (*Sink, *brokerQueue, *layout) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	s, err := New(cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	q := &brokerQueue{leader: 0, flushers: 1}
	s.queues[0] = q
	return s, q, &layout{partitions: []int{0}, leaders: []int32{0}}
}

// startHold runs hold for a request of acked records acknowledged in took,
// and returns a channel that receives how long it held.
func startHold(s *Sink, q *brokerQueue, acked int, took time.Duration) <-chan time.Duration {
	held := make(chan time.Duration, 1)
	go func() {
		var timer *time.Timer
		start := time.Now()
		s.mu.Lock()
		s.hold(q, acked, took, &timer)
		s.mu.Unlock()
		held <- time.Since(start)
		if timer != nil {
			timer.Stop()
		}
	}()
	return held
}

// TestSink_Hold checks the hold after an acknowledgement, in a bubble of
// fake time: it ends as soon as as many records wait as were acknowledged,
// or after half the produce round trip, at most maxHold; a request of one
// record (a lone event at low load) is followed by no hold at all.
func TestSink_Hold(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, s *Sink, l *layout) {
		t.Helper()
		w := &pendingWrite{partition: 0, msgs: []Message{{Value: []byte("v")}}, size: 100, done: make(chan error, 1)}
		if err := s.enqueue(context.Background(), l, w); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("as many records as acknowledged", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, q, l := holdQueue(t)
			held := startHold(s, q, 10, 400*time.Microsecond)
			synctest.Wait()
			for range 9 {
				write(t, s, l)
			}
			synctest.Wait()
			select {
			case d := <-held:
				t.Fatalf("held %v for 9 records of 10", d)
			default:
			}
			write(t, s, l)
			if d := <-held; d != 0 {
				t.Fatalf("held %v after the 10th record, want 0", d)
			}
			if q.flushers != 1 || q.records != 10 {
				t.Fatalf("%d flush goroutines, %d records waiting: the holding one sends them", q.flushers, q.records)
			}
		})
	})
	t.Run("bound: half the round trip", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, q, l := holdQueue(t)
			held := startHold(s, q, 10, 400*time.Microsecond)
			synctest.Wait()
			write(t, s, l)
			if d := <-held; d != 200*time.Microsecond {
				t.Fatalf("held %v, want 200µs", d)
			}
		})
	})
	t.Run("bound: maxHold", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, q, _ := holdQueue(t)
			if d := <-startHold(s, q, 10, time.Second); d != maxHold {
				t.Fatalf("held %v, want %v", d, maxHold)
			}
		})
	})
	t.Run("moving round trip", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, q, _ := holdQueue(t)
			<-startHold(s, q, 10, 800*time.Microsecond)
			// 800 + (0 - 800)/8 = 700µs
			if d := <-startHold(s, q, 10, 0); d != 350*time.Microsecond {
				t.Fatalf("held %v, want 350µs", d)
			}
		})
	})
	t.Run("lone record", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, q, _ := holdQueue(t)
			if d := <-startHold(s, q, 1, 400*time.Microsecond); d != 0 {
				t.Fatalf("held %v after a request of one record, want 0", d)
			}
		})
	})
	t.Run("beside another request", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, q, _ := holdQueue(t)
			q.flushers = 2
			if d := <-startHold(s, q, 10, 400*time.Microsecond); d != 0 {
				t.Fatalf("held %v beside another request, want 0", d)
			}
		})
	})
	t.Run("close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, q, _ := holdQueue(t)
			held := startHold(s, q, 10, time.Second)
			synctest.Wait()
			s.mu.Lock()
			s.closed = true
			close(s.closing)
			s.mu.Unlock()
			if d := <-held; d != 0 {
				t.Fatalf("held %v after close, want 0", d)
			}
		})
	})
}

// produceSizes counts the records of each produce request b gets.
// produceSizes records the number of records of each produce request the
// broker gets, in order.
type produceSizes struct {
	mu    sync.Mutex
	sizes []int
}

// watchSizes installs a produceSizes on b's produce requests.
func watchSizes(b *kafkatest.Broker) *produceSizes {
	p := &produceSizes{}
	b.Cluster().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		records := 0
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			for _, part := range t.Partitions {
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(part.Records); err == nil {
					records += int(batch.NumRecords)
				}
			}
		}
		p.mu.Lock()
		p.sizes = append(p.sizes, records)
		p.mu.Unlock()
		return nil, nil, false
	})
	return p
}

// get returns the sizes so far.
func (p *produceSizes) get() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.sizes...)
}

// TestSink_SelfClocked checks with a broker that the request after one of
// n records waits for n records, and that a lone record after a request of
// one is not held: the hold's bound is an hour here, so a held write would
// not finish.
func TestSink_SelfClocked(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 1})
	s := newTestSink(t, b.Addr, nil)
	s.holdBound = func(time.Duration) time.Duration { return time.Hour }
	sizes := watchSizes(b)
	// Lone records, one after the other.
	for i := range 5 {
		if err := s.Write(t.Context(), Message{Key: []byte("t"), Value: fmt.Appendf(nil, "lone-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A request of 10, then 10 writers of one record each: they go in one
	// request, whenever they come.
	ten := make([]Message, 10)
	for i := range ten {
		ten[i] = Message{Key: []byte("t"), Value: fmt.Appendf(nil, "ten-%d", i)}
	}
	if err := s.Write(t.Context(), ten...); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 10)
	for i := range 10 {
		go func() {
			errs <- s.Write(context.Background(), Message{Key: []byte("t"), Value: fmt.Appendf(nil, "next-%d", i)})
		}()
	}
	for range 10 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := sizes.get()
	want := []int{1, 1, 1, 1, 1, 10, 10}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records per produce request %v, want %v", got, want)
	}
}

// TestSink_HoldBound checks that a record held after a larger request
// goes once the bound passed, alone.
func TestSink_HoldBound(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 1})
	s := newTestSink(t, b.Addr, nil)
	s.holdBound = func(time.Duration) time.Duration { return 20 * time.Millisecond }
	sizes := watchSizes(b)
	ten := make([]Message, 10)
	for i := range ten {
		ten[i] = Message{Key: []byte("t"), Value: fmt.Appendf(nil, "ten-%d", i)}
	}
	if err := s.Write(t.Context(), ten...); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), Message{Key: []byte("t"), Value: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if got := sizes.get(); fmt.Sprint(got) != "[10 1]" {
		t.Fatalf("records per produce request %v, want [10 1]", got)
	}
}

// TestSink_SelfClockedOrder checks that concurrent writers of many keys,
// whose requests are held after each acknowledgement, have every record
// written once and in order per key.
func TestSink_SelfClockedOrder(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	s := newTestSink(t, b.Addr, nil)
	s.holdBound = func(time.Duration) time.Duration { return 5 * time.Millisecond }
	const writers, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.WriteWithin(context.Background(), 10*time.Second, Message{
					Key: fmt.Appendf(nil, "tenant-%d", w), Value: fmt.Appendf(nil, "%d", i),
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	recs := b.Records(t, topic)
	if len(recs) != writers*each {
		t.Fatalf("%d records, want %d", len(recs), writers*each)
	}
	next := map[string]int{}
	for _, r := range recs {
		k := r.Key
		if got := string(r.Value); got != fmt.Sprint(next[k]) {
			t.Fatalf("key %s: record %s, want %d", k, got, next[k])
		}
		next[k]++
	}
}
