package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// ErrRejected reports records the brokers will never accept as they are (too
// large, invalid). Retrying them is useless. Match it with [errors.Is].
var ErrRejected = errors.New("kafka rejected the record")

// Message is one record to write.
type Message struct {
	// Key decides the partition (the satellite uses the tenant id).
	Key []byte
	// Value is the record value.
	Value []byte
	// Headers are the record headers, in order.
	Headers []Header
	// Time is the record timestamp; zero means now.
	Time time.Time
}

// Header is one record header.
type Header struct {
	// Key is the header name.
	Key string
	// Value is the header value.
	Value []byte
}

// Size returns an upper bound of the bytes m takes in a record batch, to be
// compared with Config.MaxMessageBytes.
func (m Message) Size() int64 {
	const batchOverhead = 61  // record batch header
	const recordOverhead = 21 // attributes, deltas and varint lengths
	n := int64(batchOverhead + recordOverhead + len(m.Key) + len(m.Value))
	for _, h := range m.Headers {
		n += 10 + int64(len(h.Key)+len(h.Value))
	}
	return n
}

// Sink writes records to one Kafka topic with acks from all in-sync
// replicas. It is safe for concurrent use: concurrent writes to a partition
// share produce requests.
type Sink struct {
	cfg       Config
	logger    *slog.Logger
	m         *metrics
	transport *kafka.Transport
	addr      net.Addr // the bootstrap brokers
	client    *kafka.Client
	codec     kafka.Compression
	balancer  kafka.Murmur2Balancer
	closing   chan struct{}
	// holdBound gives the longest hold after an acknowledgement for a
	// produce round trip (the function holdBound but in tests).
	holdBound func(rtt time.Duration) time.Duration

	mu       sync.Mutex
	closed   bool
	queues   map[int32]*brokerQueue // by leader
	flushers sync.WaitGroup
	// flushCtx is the context of the flush goroutines, made by the first
	// write (with its values, not its cancellation); cancelFlush, called
	// by Shutdown when its ctx ends, cancels their produce requests.
	// Guarded by mu.
	flushCtx    context.Context
	cancelFlush context.CancelFunc

	// dones recycles the channels of WriteWithin's writes (chan error,
	// buffered, empty): each gets one outcome, from the write's finish.
	dones sync.Pool

	// current is the layout in use until staleAt (unix nanoseconds);
	// metaMu orders its refreshes.
	current    atomic.Pointer[layout]
	staleAt    atomic.Int64
	metaMu     sync.Mutex
	layout     *layout
	metaAt     time.Time
	refreshing bool
}

// layout is the topic's partitions and their leaders.
type layout struct {
	partitions []int // sorted
	leaders    []int32
}

// leader returns the broker leading partition p.
func (l *layout) leader(p int) int32 {
	if p < len(l.partitions) && l.partitions[p] == p {
		return l.leaders[p] // partitions numbered 0 to n-1, as always
	}
	for i, id := range l.partitions {
		if id == p {
			return l.leaders[i]
		}
	}
	return -1
}

var errSinkClosed = errors.New("kafka sink closed")

// New validates cfg and builds a Sink whose metrics are registered with reg
// (nil registers nothing). It reads the TLS files but opens no connection
// and starts no goroutine: that happens on the first write.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka config: %w", err)
	}
	tlsCfg, err := cfg.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("kafka config: %w", err)
	}
	mech, err := cfg.SASL.Build()
	if err != nil {
		return nil, fmt.Errorf("kafka config: %w", err)
	}
	codec, _ := compression(cfg.Compression)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	transport := &kafka.Transport{
		DialTimeout:    cfg.DialTimeout,
		IdleTimeout:    time.Minute,
		MetadataTTL:    cfg.MetadataTTL,
		MetadataTopics: []string{cfg.Topic},
		ClientID:       cfg.ClientID,
		TLS:            tlsCfg,
		SASL:           mech,
	}
	addr := kafka.TCP(cfg.Brokers...)
	return &Sink{
		cfg:       cfg,
		logger:    logger.With("component", "kafkasink"),
		m:         m,
		transport: transport,
		addr:      addr,
		client:    &kafka.Client{Addr: addr, Transport: transport, Timeout: cfg.WriteTimeout},
		codec:     codec,
		closing:   make(chan struct{}),
		holdBound: holdBound,

		queues: make(map[int32]*brokerQueue),
	}, nil
}

// Topic returns the topic the sink writes to.
func (s *Sink) Topic() string { return s.cfg.Topic }

// MaxMessageBytes returns Config.MaxMessageBytes: a [Message] whose Size is
// larger is rejected.
func (s *Sink) MaxMessageBytes() int64 { return s.cfg.MaxMessageBytes }

// Write writes msgs and returns once the brokers acknowledged all of them
// (acks=all), or ctx ended, or a request failed Config.MaxAttempts times.
// Records of one key keep their order. On error, some of msgs may have been
// written, and a write abandoned when ctx ended may still complete: the
// caller that retries delivers them at least once. Records that can never be
// written give an error wrapping [ErrRejected].
func (s *Sink) Write(ctx context.Context, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	for _, m := range msgs {
		if m.Size() > s.cfg.MaxMessageBytes {
			s.m.messages.WithLabelValues(resultRejected).Add(float64(len(msgs)))
			return fmt.Errorf("%w: record of %d bytes is over the %d-byte limit", ErrRejected, m.Size(), s.cfg.MaxMessageBytes)
		}
	}
	l, err := s.partitionLayout(ctx, 0, time.Now().UnixNano())
	if err != nil {
		s.m.messages.WithLabelValues(resultError).Add(float64(len(msgs)))
		return fmt.Errorf("kafka write: %w", err)
	}
	// Group by partition, in order. Most writes go to one partition (the
	// satellite writes one record per call): they need no grouping.
	p := s.balancer.Balance(kafka.Message{Key: msgs[0].Key}, l.partitions...)
	one := true
	for _, m := range msgs[1:] {
		if s.balancer.Balance(kafka.Message{Key: m.Key}, l.partitions...) != p {
			one = false
			break
		}
	}
	var order []int
	var writes []*pendingWrite
	if one {
		var orderBuf [1]int
		var writesBuf [1]*pendingWrite
		order, writes = append(orderBuf[:0], p), writesBuf[:0]
		// A copy: the flush may still read an abandoned write's records
		// after Write returned.
		w := &pendingWrite{partition: p, msgs: slices.Clone(msgs), size: size(msgs), done: make(chan error, 1)}
		if err := s.enqueue(ctx, l, w); err != nil {
			return fmt.Errorf("kafka write: %w", err)
		}
		writes = append(writes, w)
	} else {
		groups := make(map[int][]Message)
		for _, m := range msgs {
			p := s.balancer.Balance(kafka.Message{Key: m.Key}, l.partitions...)
			if _, ok := groups[p]; !ok {
				order = append(order, p)
			}
			groups[p] = append(groups[p], m)
		}
		writes = make([]*pendingWrite, 0, len(order))
		for _, p := range order {
			w := &pendingWrite{partition: p, msgs: groups[p], size: size(groups[p]), done: make(chan error, 1)}
			if err := s.enqueue(ctx, l, w); err != nil {
				return fmt.Errorf("kafka write: %w", err)
			}
			writes = append(writes, w)
		}
	}
	var errs []error
	for i, w := range writes {
		select {
		case err := <-w.done:
			if err := s.outcome(order[i], w, err); err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			for _, w := range writes[i:] {
				w.abandoned.Store(true)
			}
			return fmt.Errorf("kafka write: %w", ctx.Err())
		}
	}
	return errors.Join(errs...)
}

// WriteWithin writes one record like Write, and waits at most timeout for
// its acknowledgement; after that it returns an error wrapping
// [ErrAckTimeout] (and context.DeadlineExceeded), and the record, if not yet
// sent, is dropped. The satellite writes each event with it: one timer per
// broker serves all the writes waiting, rather than one per call.
func (s *Sink) WriteWithin(ctx context.Context, timeout time.Duration, m Message) error {
	return s.WriteWithinFrom(ctx, time.Now(), timeout, m)
}

// WriteWithinFrom is WriteWithin with the timeout counted from start, a
// clock reading the caller made just before (the satellite's handler reads
// the clock once per call and passes that reading along).
func (s *Sink) WriteWithinFrom(ctx context.Context, start time.Time, timeout time.Duration, m Message) error {
	size := m.Size()
	if size > s.cfg.MaxMessageBytes {
		s.m.messages.WithLabelValues(resultRejected).Inc()
		return fmt.Errorf("%w: record of %d bytes is over the %d-byte limit", ErrRejected, size, s.cfg.MaxMessageBytes)
	}
	now := start.UnixNano()
	l, err := s.partitionLayout(ctx, timeout, now)
	if err != nil {
		s.m.messages.WithLabelValues(resultError).Inc()
		return fmt.Errorf("kafka write: %w", err)
	}
	p := s.balancer.Balance(kafka.Message{Key: m.Key}, l.partitions...)
	done, _ := s.dones.Get().(chan error)
	if done == nil {
		done = make(chan error, 1)
	}
	w := &pendingWrite{partition: p, size: size, done: done, deadline: now + int64(timeout)}
	w.one[0] = m
	w.msgs = w.one[:]
	if err := s.enqueue(ctx, l, w); err != nil {
		return fmt.Errorf("kafka write: %w", err)
	}
	ended := ctx.Done()
	if ended == nil { // a context that cannot end: a plain receive, no select
		err := <-w.done
		s.dones.Put(done)
		return s.outcome(p, w, err)
	}
	select {
	case err := <-w.done:
		// Empty again, and finish sends on it only once.
		s.dones.Put(done)
		return s.outcome(p, w, err)
	case <-ended:
		w.abandoned.Store(true)
		return fmt.Errorf("kafka write: %w", ctx.Err())
	}
}

// ErrAckTimeout reports a write of [Sink.WriteWithin] not acknowledged in
// time. It may still be written.
var ErrAckTimeout = fmt.Errorf("no acknowledgement in time: %w", context.DeadlineExceeded)

// outcome counts the outcome err of w, written to partition p, and returns
// the error of the write.
func (s *Sink) outcome(p int, w *pendingWrite, err error) error {
	n := float64(len(w.msgs))
	switch {
	case err == nil:
		s.m.ok.Add(n)
		return nil
	case errors.Is(err, ErrAckTimeout):
		// As a write whose context ended: not counted.
		return fmt.Errorf("kafka write: partition %d: %w", p, err)
	case rejected(err):
		s.m.messages.WithLabelValues(resultRejected).Add(n)
		return fmt.Errorf("%w: partition %d: %w", ErrRejected, p, err)
	}
	s.m.messages.WithLabelValues(resultError).Add(n)
	return fmt.Errorf("kafka write: partition %d: %w", p, err)
}

// size returns the sum of the Message.Size of msgs.
func size(msgs []Message) int64 {
	n := int64(0)
	for _, m := range msgs {
		n += m.Size()
	}
	return n
}

// partitionLayout returns the topic's partitions and their leaders, from
// kafka-go's metadata cache, refreshed at most every MetadataTTL by one
// caller while the others go on with the layout they have. A missing topic
// is created when AllowAutoTopicCreation is set. A fetch takes timeout at
// most, unless it is 0.
func (s *Sink) partitionLayout(ctx context.Context, timeout time.Duration, now int64) (*layout, error) {
	if l := s.current.Load(); l != nil && now < s.staleAt.Load() {
		return l, nil // no lock for most calls
	}
	s.metaMu.Lock()
	l := s.layout
	refresh := time.Since(s.metaAt) >= s.cfg.MetadataTTL && !s.refreshing
	if refresh {
		s.refreshing = true
	}
	s.metaMu.Unlock()
	if l != nil && !refresh {
		return l, nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	nl, err := s.fetchLayout(ctx)
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if refresh {
		s.refreshing = false
	}
	if err != nil {
		if l != nil {
			return l, nil // the produce request tells whether it is stale
		}
		return nil, err
	}
	s.layout, s.metaAt = nl, time.Now()
	s.current.Store(nl)
	s.staleAt.Store(s.metaAt.Add(s.cfg.MetadataTTL).UnixNano())
	return nl, nil
}

// fetchLayout reads the topic's partitions and leaders from kafka-go's
// metadata.
func (s *Sink) fetchLayout(ctx context.Context) (*layout, error) {
	for attempt := 0; ; attempt++ {
		resp, err := s.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.cfg.Topic}})
		if err != nil {
			return nil, err
		}
		var topic *kafka.Topic
		for i := range resp.Topics {
			if resp.Topics[i].Name == s.cfg.Topic {
				topic = &resp.Topics[i]
			}
		}
		if topic == nil {
			return nil, fmt.Errorf("topic %s: %w", s.cfg.Topic, kafka.UnknownTopicOrPartition)
		}
		if errors.Is(topic.Error, kafka.UnknownTopicOrPartition) && s.cfg.AllowAutoTopicCreation && attempt == 0 {
			_, err := s.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
				{Topic: s.cfg.Topic, NumPartitions: -1, ReplicationFactor: -1},
			}})
			if err != nil {
				return nil, fmt.Errorf("create topic %s: %w", s.cfg.Topic, err)
			}
			continue
		}
		if topic.Error != nil {
			return nil, fmt.Errorf("topic %s: %w", s.cfg.Topic, topic.Error)
		}
		if len(topic.Partitions) == 0 {
			return nil, fmt.Errorf("topic %s has no partitions", s.cfg.Topic)
		}
		parts := slices.Clone(topic.Partitions)
		slices.SortFunc(parts, func(a, b kafka.Partition) int { return a.ID - b.ID })
		l := &layout{partitions: make([]int, len(parts)), leaders: make([]int32, len(parts))}
		for i, p := range parts {
			l.partitions[i], l.leaders[i] = p.ID, int32(p.Leader.ID)
		}
		return l, nil
	}
}

// Ping checks that a broker answers (an ApiVersions request, which also goes
// through TLS and SASL) and that the topic exists, unless topics are created
// on demand.
func (s *Sink) Ping(ctx context.Context) error {
	av, err := s.client.ApiVersions(ctx, &kafka.ApiVersionsRequest{})
	if err == nil && av.Error != nil {
		err = av.Error
	}
	if err != nil {
		return fmt.Errorf("kafka ping: %w", err)
	}
	// Metadata comes from kafka-go's cache, refreshed every few seconds.
	resp, err := s.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.cfg.Topic}})
	if err != nil {
		return fmt.Errorf("kafka metadata: %w", err)
	}
	for _, t := range resp.Topics {
		if t.Name == s.cfg.Topic && t.Error != nil && !(s.cfg.AllowAutoTopicCreation && errors.Is(t.Error, kafka.UnknownTopicOrPartition)) {
			return fmt.Errorf("kafka topic %s: %w", s.cfg.Topic, t.Error)
		}
	}
	return nil
}

// Close waits for the produce requests in flight and closes the
// connections; retries still waiting are abandoned. Writes after Close
// fail. Each request in flight ends within Config.WriteTimeout; to bound
// the wait otherwise, use [Sink.Shutdown].
func (s *Sink) Close() error {
	s.shutdown(nil)
	return nil
}

// Shutdown is [Sink.Close] with a bound: once ctx ends, the produce
// requests still in flight are cancelled (their writes fail) and the
// flush goroutines return. It returns ctx's error when it had to cancel
// them.
func (s *Sink) Shutdown(ctx context.Context) error {
	if s.shutdown(ctx.Done()) {
		return fmt.Errorf("kafka sink shutdown: %w", ctx.Err())
	}
	return nil
}

// shutdown closes the sink and waits for the flush goroutines; once
// cancel is closed (nil: never), it cancels their produce requests, and
// reports that it did.
func (s *Sink) shutdown(cancel <-chan struct{}) (cancelled bool) {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	for _, q := range s.queues {
		if q.timer != nil {
			q.timer.Stop()
		}
	}
	cancelFlush := s.cancelFlush
	s.mu.Unlock()
	if cancelFlush == nil { // no write started a flush goroutine
		cancelFlush = func() {}
	}
	defer cancelFlush()
	flushed := make(chan struct{})
	go func() {
		s.flushers.Wait()
		close(flushed)
	}()
	select {
	case <-flushed:
	case <-cancel:
		cancelFlush()
		<-flushed
		cancelled = true
	}
	s.transport.CloseIdleConnections()
	return cancelled
}

// rejected reports whether err means that a record can never be written.
func rejected(err error) bool {
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		switch kerr {
		case kafka.MessageSizeTooLarge, kafka.RecordListTooLarge, kafka.InvalidRecord:
			return true
		}
	}
	return false
}
