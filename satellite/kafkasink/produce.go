package kafkasink

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

// parallelBatch is the fewest waiting records worth a produce request
// alongside one already in flight to the same broker.
const parallelBatch = 32

// After an acknowledgement, a broker's next request waits at most the
// produce round trip over holdDivisor, and never more than maxHold, for
// as many records as were just acknowledged (Sink.hold).
const (
	holdDivisor = 2
	maxHold     = time.Millisecond
)

// holdBound is the longest hold after an acknowledgement, for a produce
// round trip of rtt.
func holdBound(rtt time.Duration) time.Duration { return min(rtt/holdDivisor, maxHold) }

// brokerQueue holds the writes waiting for the partitions one broker leads.
// Up to Config.MaxInFlight produce requests per broker are in flight, each
// carrying whole writes, of any of those partitions; the writes that arrive
// meanwhile form the next request. There is no batch timer: an idle broker
// gets a request at once, a busy one gets everything that waited as soon as
// a request is acknowledged, and another request alongside only once
// parallelBatch records (or a full record batch's bytes) wait.
//
// The requests are self-clocked: once a request of n records is
// acknowledged, the next one waits until about n records wait (the callers
// just answered, whose next records are on their way), for a fraction of
// the produce round trip at most (Sink.hold). Otherwise the first record
// back would go alone at once and the others in the request after it. A
// lone record at low load follows a request of one record: it goes at once.
//
// The records of one write are sent in order, one request after the other.
// Two writes in flight at once may land in either order: they come from
// concurrent calls, which have no order between them.
type brokerQueue struct {
	leader   int32
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

	// The hold after an acknowledgement (Sink.hold): rtt is a moving
	// average of the produce round trip (nanoseconds); while holding,
	// a flush goroutine waits for want records (0: woken already),
	// woken through wake. Guarded by Sink.mu.
	rtt     int64
	holding bool
	want    int
	wake    chan struct{} // buffered; one wake per hold
}

// pendingWrite is one Write call's records for one partition.
type pendingWrite struct {
	partition int
	msgs      []Message
	one       [1]Message // msgs of a WriteWithin
	size      int64      // Message.Size of msgs
	deadline  int64      // unix nanoseconds; 0: none (Write)
	done      chan error // receives the outcome once (finish); buffered
	finished  atomic.Bool
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

// enqueue adds w to the queue of the broker leading its partition, by
// layout l, and starts a flush goroutine if none runs. The flush goroutines
// share the sink's flush context (Sink.flushCtx), which the first write's
// ctx gives its values to (not its cancellation) and Shutdown cancels.
func (s *Sink) enqueue(ctx context.Context, l *layout, w *pendingWrite) error {
	leader := l.leader(w.partition)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errSinkClosed
	}
	q := s.queues[leader]
	if q == nil {
		q = &brokerQueue{leader: leader}
		s.queues[leader] = q
	}
	q.pending = append(q.pending, w)
	q.records += len(w.msgs)
	q.bytes += w.size
	if w.deadline != 0 {
		s.watch(q, w)
	}
	if q.holding {
		// The flush goroutine holding takes them.
		if q.want > 0 && (q.records >= q.want || q.bytes >= s.cfg.MaxMessageBytes) {
			q.want = 0
			select {
			case q.wake <- struct{}{}: // one per hold: there is room
			default:
			}
		}
		return nil
	}
	// An idle broker gets a request at once. A busy one gets another
	// request alongside those in flight only for a batch worth it: below
	// that, the writes wait for the first request in flight to be
	// acknowledged and go in the next one (a group commit). Fewer, larger
	// requests cost far less CPU, here and in the brokers.
	if q.flushers == 0 || q.flushers < s.cfg.MaxInFlight && s.worthAlongside(q) {
		q.flushers++
		s.flushers.Add(1)
		if s.flushCtx == nil {
			s.flushCtx, s.cancelFlush = context.WithCancel(context.WithoutCancel(ctx))
		}
		go s.flush(s.flushCtx, q)
	}
	return nil
}

// worthAlongside reports whether the writes waiting in q are worth a
// request alongside one in flight. Sink.mu is held.
func (s *Sink) worthAlongside(q *brokerQueue) bool {
	return q.records >= min(parallelBatch, s.cfg.BatchSize) || q.bytes >= s.cfg.MaxMessageBytes
}

// watch arms q's timer for w's deadline, unless it is armed for sooner.
// Under a steady load the timer fires about once per timeout, finds the
// writes it was armed for acknowledged, and is armed again for the oldest
// write still waiting. Sink.mu is held.
func (s *Sink) watch(q *brokerQueue, w *pendingWrite) {
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
func (s *Sink) expire(q *brokerQueue) {
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

// room tracks the records and bytes a produce request has taken: at most
// Config.BatchSize records in all, and Config.MaxMessageBytes per partition
// (one record batch each).
type room struct {
	records int
	bytes   [8]partitionBytes // most requests touch a few partitions
	more    []partitionBytes
}

type partitionBytes struct {
	partition int
	bytes     int64
}

// at returns the bytes taken for partition p.
func (r *room) at(p int) *partitionBytes {
	for i := range r.bytes {
		b := &r.bytes[i]
		if b.partition == p && b.bytes > 0 {
			return b
		}
		if b.bytes == 0 {
			b.partition = p
			return b
		}
	}
	for i := range r.more {
		if r.more[i].partition == p {
			return &r.more[i]
		}
	}
	r.more = append(r.more, partitionBytes{partition: p})
	return &r.more[len(r.more)-1]
}

// hold waits, after a request of acked records was acknowledged in took,
// until as many records wait for q as were acknowledged (the callers just
// answered send their next ones), or a share of the produce round trip
// passed, or the sink closes. It does not wait for a request of one record
// (at low load a lone record goes at once), nor beside another flush
// goroutine. Sink.mu is held; hold releases it while it waits.
func (s *Sink) hold(q *brokerQueue, acked int, took time.Duration, timer **time.Timer) {
	if q.rtt == 0 {
		q.rtt = int64(took)
	} else {
		q.rtt += (int64(took) - q.rtt) / 8
	}
	want := min(acked, parallelBatch, s.cfg.BatchSize)
	if want <= 1 || q.flushers > 1 || s.closed || q.records >= want || q.bytes >= s.cfg.MaxMessageBytes {
		return
	}
	d := s.holdBound(time.Duration(q.rtt))
	if d <= 0 {
		return
	}
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
	}
	q.holding, q.want = true, want
	wake := q.wake
	s.mu.Unlock()
	if *timer == nil {
		*timer = time.NewTimer(d)
	} else {
		(*timer).Reset(d)
	}
	select {
	case <-wake:
	case <-(*timer).C:
	case <-s.closing:
	}
	s.mu.Lock()
	q.holding, q.want = false, 0
	select {
	case <-wake: // sent after the timer fired
	default:
	}
}

// flush sends q's pending writes, request after request, until none is
// left.
func (s *Sink) flush(ctx context.Context, q *brokerQueue) {
	defer s.flushers.Done()
	var taken []*pendingWrite
	var timer *time.Timer // of hold
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	acked, took := 0, time.Duration(0) // the last request's records, round trip
	for {
		s.mu.Lock()
		if acked > 0 {
			s.hold(q, acked, took, &timer)
		}
		// A flush goroutine beside another goes on only while the
		// writes waiting are worth a request of their own: otherwise
		// it would send the few that came since the other took its
		// batch, and the two would share the load in small requests.
		// The other takes them once acknowledged.
		if len(q.pending) == 0 || q.flushers > 1 && !s.worthAlongside(q) {
			q.flushers--
			s.mu.Unlock()
			return
		}
		// Take every write that fits in one request (at least one),
		// leaving out those nobody waits for any more.
		taken = taken[:0]
		var r room
		used := 0
		for _, w := range q.pending {
			if w.abandoned.Load() {
				used++
				q.records -= len(w.msgs)
				q.bytes -= w.size
				w.finish(context.Canceled)
				continue
			}
			pb := r.at(w.partition)
			if len(taken) > 0 && (r.records+len(w.msgs) > s.cfg.BatchSize || pb.bytes+w.size > s.cfg.MaxMessageBytes) {
				break
			}
			taken = append(taken, w)
			used++
			r.records += len(w.msgs)
			pb.bytes += w.size
			q.records -= len(w.msgs)
			q.bytes -= w.size
		}
		clear(q.pending[:used])
		q.pending = q.pending[used:]
		s.mu.Unlock()
		acked = r.records
		start := time.Now()
		switch {
		case len(taken) == 0:
		case len(taken) == 1 && (len(taken[0].msgs) > s.cfg.BatchSize || taken[0].size > s.cfg.MaxMessageBytes):
			// One write too large for a request: in order, one
			// request after the other.
			w := taken[0]
			w.finish(s.produceInOrder(ctx, w.partition, w.msgs))
		default:
			s.produceWrites(ctx, taken)
		}
		took = time.Since(start)
		clear(taken)
	}
}

// produceInOrder writes msgs to partition p, in requests of at most
// BatchSize records and MaxMessageBytes bytes sent one after the other. It
// stops at the first request that fails for good.
func (s *Sink) produceInOrder(ctx context.Context, p int, msgs []Message) error {
	for len(msgs) > 0 {
		n, size := 0, int64(0)
		for n < len(msgs) && n < s.cfg.BatchSize {
			if n > 0 && size+msgs[n].Size() > s.cfg.MaxMessageBytes {
				break
			}
			size += msgs[n].Size()
			n++
		}
		w := &pendingWrite{partition: p, msgs: msgs[:n], done: make(chan error, 1)}
		s.produceWrites(ctx, []*pendingWrite{w})
		if err := <-w.done; err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

// partitionBatch is the records of one partition in a produce request, and
// the writes they come from.
type partitionBatch struct {
	partition int
	records   int
	writes    []*pendingWrite
	err       error // outcome of the last attempt
}

// produceWrites sends writes in one produce request, which fit in one, and
// finishes each with its partition's outcome. A partition the broker refuses
// with a temporary error (leader change, network) is tried again, up to
// MaxAttempts times, without the partitions already acknowledged.
func (s *Sink) produceWrites(ctx context.Context, writes []*pendingWrite) {
	start := time.Now()
	batches := make([]partitionBatch, 0, 8)
	records := 0
	for _, w := range writes {
		i := 0
		for i < len(batches) && batches[i].partition != w.partition {
			i++
		}
		if i == len(batches) {
			batches = append(batches, partitionBatch{partition: w.partition})
		}
		batches[i].writes = append(batches[i].writes, w)
		batches[i].records += len(w.msgs)
		records += len(w.msgs)
	}
	s.m.batch.Observe(float64(records))
	defer func() { s.m.duration.Observe(time.Since(start).Seconds()) }()
	backoff := 50 * time.Millisecond
	for attempt := 0; len(batches) > 0; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.closing:
				t.Stop()
				for _, b := range batches {
					for _, w := range b.writes {
						w.finish(fmt.Errorf("%w (last error: %w)", errSinkClosed, b.err))
					}
				}
				return
			}
			backoff = min(2*backoff, 500*time.Millisecond)
		}
		if attempt > 0 && len(batches) > 1 {
			// Partitions may have changed leaders: one request each,
			// which kafka-go sends to each one's leader.
			for i := range batches {
				s.produceOnce(ctx, batches[i:i+1])
			}
		} else {
			s.produceOnce(ctx, batches)
			if len(batches) > 1 && routingError(batches[0].err) {
				// Not sent: kafka-go's view of the leaders is not
				// ours. One request each, in this attempt.
				for i := range batches {
					s.produceOnce(ctx, batches[i:i+1])
				}
			}
		}
		// Finish the writes acknowledged or failed for good; keep the
		// others for the next attempt.
		kept := batches[:0]
		for _, b := range batches {
			if b.err != nil && retriable(b.err) && attempt+1 < s.cfg.MaxAttempts {
				s.logger.Debug("kafka produce failed; retrying", "partition", b.partition, "attempt", attempt+1, "error", b.err)
				kept = append(kept, b)
				continue
			}
			for _, w := range b.writes {
				w.finish(b.err)
			}
		}
		clear(batches[len(kept):])
		batches = kept
	}
}

// produceOnce sends one produce request carrying batches, which belong to
// partitions of one leader, and sets the outcome of each.
func (s *Sink) produceOnce(ctx context.Context, batches []partitionBatch) {
	setAll := func(err error) {
		for i := range batches {
			batches[i].err = err
		}
	}
	var req protocol.Message
	if s.codec == 0 {
		req = s.rawRequest(batches)
	} else {
		req = s.recordsRequest(batches)
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	res, err := s.transport.RoundTrip(rctx, s.addr, req)
	if err != nil {
		setAll(fmt.Errorf("kafka produce: %w", err))
		return
	}
	resp, ok := res.(*produceapi.Response)
	if !ok {
		setAll(fmt.Errorf("kafka produce: unexpected response %T", res))
		return
	}
	setAll(errNotAnswered) // unless answered below
	for _, t := range resp.Topics {
		if t.Topic != s.cfg.Topic {
			continue
		}
		for _, p := range t.Partitions {
			for i := range batches {
				if int32(batches[i].partition) == p.Partition {
					batches[i].err = partitionError(p)
				}
			}
		}
	}
}

// errNotAnswered is the error of a partition the produce response does not
// name. One value for all: no error is made per request while all is well.
var errNotAnswered = fmt.Errorf("kafka produce: %w", protocol.ErrNoPartition)

// rawRequest builds an uncompressed produce request whose record batches
// are encoded here (appendRecordBatch), in one buffer: kafka-go encodes a
// record at a time through readers and interfaces, which cost the satellite
// more than the rest of the produce path.
func (s *Sink) rawRequest(batches []partitionBatch) *rawproduce.Request {
	size := 0
	for _, b := range batches {
		size += 4
		for _, w := range b.writes {
			size += int(w.size)
		}
	}
	buf := make([]byte, 0, size)
	ends := make([]int, len(batches))
	now := time.Now().UnixMilli()
	for i, b := range batches {
		// The records field: its length (int32), then the batch.
		at := len(buf)
		buf = appendRecordBatch(append(buf, 0, 0, 0, 0), b.writes, b.records, now)
		binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
		ends[i] = len(buf)
	}
	readers := make([]bytes.Reader, len(batches))
	partitions := make([]rawproduce.RequestPartition, len(batches))
	from := 0
	for i, b := range batches {
		readers[i].Reset(buf[from:ends[i]])
		from = ends[i]
		partitions[i] = rawproduce.RequestPartition{Partition: int32(b.partition), RecordSet: protocol.RawRecordSet{Reader: &readers[i]}}
	}
	return &rawproduce.Request{
		Acks:    int16(kafka.RequireAll),
		Timeout: int32(s.cfg.WriteTimeout.Milliseconds()),
		Topics:  []rawproduce.RequestTopic{{Topic: s.cfg.Topic, Partitions: partitions}},
	}
}

// recordsRequest builds a produce request that kafka-go encodes and
// compresses.
func (s *Sink) recordsRequest(batches []partitionBatch) *produceapi.Request {
	// A few allocations per request rather than a few per record.
	n, nh := 0, 0
	for _, b := range batches {
		n += b.records
		for _, w := range b.writes {
			for _, m := range w.msgs {
				nh += len(m.Headers)
			}
		}
	}
	records := make([]kafka.Record, n)
	readers := make([]byteReader, 2*n)
	headers := make([]kafka.Header, nh)
	partitions := make([]produceapi.RequestPartition, len(batches))
	now := time.Time{}
	r := 0
	for i, b := range batches {
		first := r
		for _, w := range b.writes {
			for _, m := range w.msgs {
				hs := headers[:len(m.Headers):len(m.Headers)]
				headers = headers[len(m.Headers):]
				for j, h := range m.Headers {
					hs[j] = kafka.Header{Key: h.Key, Value: h.Value}
				}
				t := m.Time
				if t.IsZero() {
					if now.IsZero() {
						now = time.Now()
					}
					t = now
				}
				records[r] = kafka.Record{Time: t, Key: readers[2*r].of(m.Key), Value: readers[2*r+1].of(m.Value), Headers: hs}
				r++
			}
		}
		partitions[i] = produceapi.RequestPartition{
			Partition: int32(b.partition),
			RecordSet: protocol.RecordSet{
				Attributes: protocol.Attributes(s.codec) & 0x7,
				Records:    kafka.NewRecordReader(records[first:r]...),
			},
		}
	}
	return &produceapi.Request{
		Acks:    int16(kafka.RequireAll),
		Timeout: int32(s.cfg.WriteTimeout.Milliseconds()),
		Topics:  []produceapi.RequestTopic{{Topic: s.cfg.Topic, Partitions: partitions}},
	}
}

// partitionError returns the error of one partition of a produce response,
// nil when its records were acknowledged.
func partitionError(p produceapi.ResponsePartition) error {
	if p.ErrorCode != 0 {
		if p.ErrorMessage != "" {
			return fmt.Errorf("%w: %s", kafka.Error(p.ErrorCode), p.ErrorMessage)
		}
		return kafka.Error(p.ErrorCode)
	}
	for _, rerr := range p.RecordErrors {
		return fmt.Errorf("%w: record %d: %s", kafka.InvalidRecord, rerr.BatchIndex, rerr.BatchIndexErrorMessage)
	}
	return nil
}

// routingError reports whether err is kafka-go's refusal to send a produce
// request whose partitions have different leaders, or none, in its view of
// the cluster: nothing was sent.
func routingError(err error) bool {
	var p *produceapi.Error
	var r *rawproduce.Error
	return errors.As(err, &p) || errors.As(err, &r)
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
