package kafkasink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// parallelBatch is the fewest waiting records worth a produce request
// alongside one already in flight to the same partition.
const parallelBatch = 32

// partitionQueue holds the writes waiting for one partition. Up to
// Config.MaxInFlight produce requests per partition are in flight, each
// carrying whole writes; the writes that arrive meanwhile form the next
// batch. There is no batch timer: an idle partition sends at once, a busy one
// sends everything that waited as soon as a request is acknowledged, and
// sends another request alongside only once parallelBatch records (or a full
// request's bytes) wait.
//
// The records of one write are sent in order, one request after the other.
// Two writes in flight at once may land in either order: they come from
// concurrent calls, which have no order between them.
type partitionQueue struct {
	id       int
	pending  []*pendingWrite // guarded by Sink.mu
	records  int             // records in pending; guarded by Sink.mu
	bytes    int64           // Message.Size of the records in pending; guarded by Sink.mu
	flushers int             // running flush goroutines; guarded by Sink.mu

	// waiting holds the writes with a deadline (WriteWithin) not known
	// to be finished, in the order they came; timer expires them, and is
	// armed for timerAt (unix nanoseconds; 0: not armed) while some wait.
	// Guarded by Sink.mu.
	waiting []*pendingWrite
	timer   *time.Timer
	timerAt int64
}

// pendingWrite is one Write call's records for one partition.
type pendingWrite struct {
	msgs     []Message
	one      [1]Message // msgs of a WriteWithin
	size     int64      // Message.Size of msgs
	deadline int64      // unix nanoseconds; 0: none (Write)
	done     chan error // receives the outcome once (finish); buffered
	finished atomic.Bool
	// abandoned is set when the caller stopped waiting: a write not yet
	// sent is then dropped, since the caller keeps the records elsewhere
	// (the spool) and sending them too would only duplicate them.
	abandoned atomic.Bool
}

// finish delivers the outcome of w, unless it has one already.
func (w *pendingWrite) finish(err error) {
	if w.finished.CompareAndSwap(false, true) {
		w.done <- err
	}
}

// enqueue adds w to partition p's queue and starts its flush goroutine if
// none runs. ctx's values (not its cancellation) go to the flush.
func (s *Sink) enqueue(ctx context.Context, p int, w *pendingWrite) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errSinkClosed
	}
	q := s.queues[p]
	if q == nil {
		q = &partitionQueue{id: p}
		s.queues[p] = q
	}
	q.pending = append(q.pending, w)
	q.records += len(w.msgs)
	q.bytes += w.size
	if w.deadline != 0 {
		s.watch(q, w)
	}
	// An idle partition sends at once. A busy one sends another request
	// alongside those in flight only for a batch worth it: below that, the
	// writes wait for the first request in flight to be acknowledged and
	// go in the next one (a group commit). Fewer, larger requests cost far
	// less CPU, here and in the brokers.
	if q.flushers == 0 || q.flushers < s.cfg.MaxInFlight &&
		(q.records >= min(parallelBatch, s.cfg.BatchSize) || q.bytes >= s.cfg.MaxMessageBytes) {
		q.flushers++
		s.flushers.Add(1)
		go s.flush(context.WithoutCancel(ctx), q)
	}
	return nil
}

// watch arms q's timer for w's deadline, unless it is armed for sooner.
// Under a steady load the timer fires about once per timeout, finds the
// writes it was armed for acknowledged, and is armed again for the oldest
// write still waiting. Sink.mu is held.
func (s *Sink) watch(q *partitionQueue, w *pendingWrite) {
	// Forget the writes finished at the head (most finish in order).
	for len(q.waiting) > 0 && q.waiting[0].finished.Load() {
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
	}
	q.waiting = append(q.waiting, w)
	if q.timerAt != 0 && q.timerAt <= w.deadline {
		return
	}
	q.timerAt = w.deadline
	d := time.Until(time.Unix(0, w.deadline))
	if q.timer == nil {
		q.timer = time.AfterFunc(d, func() { s.expire(q) })
	} else {
		q.timer.Reset(d)
	}
}

// expire ends the writes of q whose deadline passed with ErrAckTimeout, and
// arms the timer for the next deadline.
func (s *Sink) expire(q *partitionQueue) {
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	next := int64(0)
	kept := q.waiting[:0]
	for _, w := range q.waiting {
		if w.finished.Load() {
			continue
		}
		if w.deadline <= now {
			w.abandoned.Store(true) // dropped if not yet sent
			w.finish(ErrAckTimeout)
			continue
		}
		kept = append(kept, w)
		if next == 0 || w.deadline < next {
			next = w.deadline
		}
	}
	clear(q.waiting[len(kept):])
	q.waiting = kept
	q.timerAt = next
	if next != 0 && !s.closed {
		q.timer.Reset(time.Duration(next - now))
	}
}

// flush sends q's pending writes, batch after batch, until none is left.
func (s *Sink) flush(ctx context.Context, q *partitionQueue) {
	defer s.flushers.Done()
	for {
		s.mu.Lock()
		if len(q.pending) == 0 {
			q.flushers--
			s.mu.Unlock()
			return
		}
		// Take every write that fits in one request (at least one),
		// leaving out those nobody waits for any more.
		var taken []*pendingWrite
		records, bytes, used := 0, int64(0), 0
		for _, w := range q.pending {
			if w.abandoned.Load() {
				used++
				q.records -= len(w.msgs)
				q.bytes -= w.size
				w.finish(context.Canceled)
				continue
			}
			size := w.size
			if len(taken) > 0 && (records+len(w.msgs) > s.cfg.BatchSize || bytes+size > s.cfg.MaxMessageBytes) {
				break
			}
			taken = append(taken, w)
			used++
			records += len(w.msgs)
			bytes += size
		}
		q.pending = q.pending[used:]
		for _, w := range taken {
			q.records -= len(w.msgs)
			q.bytes -= w.size
		}
		s.mu.Unlock()
		if len(taken) == 0 {
			continue
		}

		msgs := taken[0].msgs
		if len(taken) > 1 {
			msgs = make([]Message, 0, records)
			for _, w := range taken {
				msgs = append(msgs, w.msgs...)
			}
		}
		err := s.produce(ctx, q.id, msgs)
		for _, w := range taken {
			w.finish(err)
		}
	}
}

// produce writes msgs to partition p, in requests of at most BatchSize
// records and MaxMessageBytes bytes, each tried up to MaxAttempts times. It
// stops at the first request that fails for good.
func (s *Sink) produce(ctx context.Context, p int, msgs []Message) error {
	for len(msgs) > 0 {
		n, size := 0, int64(0)
		for n < len(msgs) && n < s.cfg.BatchSize {
			if n > 0 && size+msgs[n].Size() > s.cfg.MaxMessageBytes {
				break
			}
			size += msgs[n].Size()
			n++
		}
		if err := s.produceBatch(ctx, p, msgs[:n]); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

// produceBatch sends one produce request with retries.
func (s *Sink) produceBatch(ctx context.Context, p int, msgs []Message) error {
	start := time.Now()
	defer func() { s.m.batch.Observe(float64(len(msgs))) }()
	backoff := 50 * time.Millisecond
	var err error
	for attempt := range s.cfg.MaxAttempts {
		if attempt > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.closing:
				t.Stop()
				return fmt.Errorf("%w (last error: %w)", errSinkClosed, err)
			}
			backoff = min(2*backoff, 500*time.Millisecond)
		}
		err = s.produceOnce(ctx, p, msgs)
		if err == nil || !retriable(err) {
			break
		}
		s.logger.Debug("kafka produce failed; retrying", "partition", p, "attempt", attempt+1, "error", err)
	}
	s.m.duration.Observe(time.Since(start).Seconds())
	return err
}

// produceOnce sends one produce request to the partition's leader.
func (s *Sink) produceOnce(ctx context.Context, p int, msgs []Message) error {
	// A few allocations per request rather than a few per record.
	records := make([]kafka.Record, len(msgs))
	readers := make([]byteReader, 2*len(msgs))
	n := 0
	for _, m := range msgs {
		n += len(m.Headers)
	}
	headers := make([]kafka.Header, n)
	for i, m := range msgs {
		hs := headers[:len(m.Headers):len(m.Headers)]
		headers = headers[len(m.Headers):]
		for j, h := range m.Headers {
			hs[j] = kafka.Header{Key: h.Key, Value: h.Value}
		}
		t := m.Time
		if t.IsZero() {
			t = time.Now()
		}
		records[i] = kafka.Record{Time: t, Key: readers[2*i].of(m.Key), Value: readers[2*i+1].of(m.Value), Headers: hs}
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	res, err := s.client.Produce(rctx, &kafka.ProduceRequest{
		Topic:        s.cfg.Topic,
		Partition:    p,
		RequiredAcks: kafka.RequireAll,
		Records:      kafka.NewRecordReader(records...),
		Compression:  s.codec,
	})
	if err != nil {
		return err
	}
	if res.Error != nil {
		return res.Error
	}
	for _, rerr := range res.RecordErrors {
		return fmt.Errorf("%w: %w", kafka.InvalidRecord, rerr)
	}
	return nil
}

// retriable reports whether a failed produce request may succeed if sent
// again: broker errors that Kafka marks temporary, and network errors.
func retriable(err error) bool {
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		return kerr.Temporary()
	}
	return !errors.Is(err, context.Canceled)
}

// byteReader is a record key or value for kafka-go, as kafka.NewBytes makes
// one, but allocated with the others of a request.
type byteReader struct{ bytes.Reader }

// of returns r reading b, or nil (a null key or value) when b is nil.
func (r *byteReader) of(b []byte) kafka.Bytes {
	if b == nil {
		return nil
	}
	r.Reset(b)
	return r
}

// Close implements kafka.Bytes.
func (*byteReader) Close() error { return nil }
