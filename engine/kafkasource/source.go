package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/squallhq/squall/internal/sleep"
)

// ErrClosed is returned by the operations of a closed Source or Writer.
var ErrClosed = errors.New("kafka client closed")

// MaxBatchMessages is the most messages of one [Batch].
const MaxBatchMessages = 256

// Source consumes one topic in a consumer group. Fetch and FetchBatch are
// meant for one goroutine; Commit, Assignment and Close are safe to call
// from others.
type Source struct {
	cfg    SourceConfig
	cg     *kafka.ConsumerGroup
	dialer *kafka.Dialer
	log    *slog.Logger

	// batches carries what the partition readers fetched to FetchBatch.
	batches chan *Batch
	// pending is the rest of the batch Fetch is handing out.
	pending *Batch

	// done is closed by Close: it ends the partition readers, the group
	// loop and the commits in flight.
	done    chan struct{}
	stopped chan struct{} // closed when the group loop returned

	// live is the number of the running generation (the Generation of its
	// Assignment), 0 between generations: batches of an ended generation
	// are dropped.
	live atomic.Uint64

	mu      sync.Mutex
	assign  Assignment
	gen     *kafka.Generation // the running generation, nil between them
	owned   map[int]bool      // its partitions
	changed chan struct{}     // closed and replaced when gen changes
	closed  bool

	// stalls keeps the connections to the brokers, to close those that
	// stopped answering.
	stalls stallWatch
	// transport sends the requests kafka-go's group does not (leaveGhost).
	transport *kafka.Transport
	// member is the member id of the last generation (run's goroutine
	// only).
	member string

	lastErr atomic.Pointer[sourceError]
	// topicParts is the topic's partition count, read from the brokers
	// at the start of each generation; 0 before the first read.
	topicParts atomic.Int64
	// quiet is set while the member fails to join again after a first
	// failure: kafka-go's error lines go to debug.
	quiet atomic.Bool
}

// Batch is a run of consecutive messages of one partition, in offset
// order, from one fetch.
type Batch struct {
	// Partition is the messages' partition.
	Partition int
	// HighWaterMark is the offset after the partition's last record when
	// the batch was fetched.
	HighWaterMark int64
	// Messages are the batch's messages, at least one.
	Messages []Message

	gen uint64
}

// Open validates cfg and starts consuming: the Source joins the group and
// fetches the partitions assigned to it in its own goroutines until Close.
func Open(cfg SourceConfig) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka source config: %w", err)
	}
	cfg = cfg.withDefaults()
	tlsCfg, mech, err := cfg.security()
	if err != nil {
		return nil, fmt.Errorf("kafka source config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		cfg: cfg,
		dialer: &kafka.Dialer{
			ClientID:      cfg.ClientID,
			Timeout:       cfg.Timeout,
			TLS:           tlsCfg,
			SASLMechanism: mech,
		},
		log:     log.With("component", "kafkasource"),
		batches: make(chan *Batch, max(1, (cfg.QueueCapacity+MaxBatchMessages-1)/MaxBatchMessages)),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		changed: make(chan struct{}),
	}
	netDial := cfg.netDial
	if netDial == nil {
		netDial = (&net.Dialer{}).DialContext
	}
	s.dialer.DialFunc = s.stalls.dial(netDial)
	s.transport = &kafka.Transport{
		Dial:        netDial,
		DialTimeout: cfg.Timeout,
		ClientID:    cfg.ClientID,
		TLS:         tlsCfg,
		SASL:        mech,
	}
	s.cg, err = kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                    cfg.Group,
		Brokers:               cfg.Brokers,
		Dialer:                s.dialer,
		Topics:                []string{cfg.Topic},
		HeartbeatInterval:     cfg.HeartbeatInterval,
		SessionTimeout:        cfg.SessionTimeout,
		RebalanceTimeout:      cfg.RebalanceTimeout,
		JoinGroupBackoff:      cfg.JoinBackoff,
		WatchPartitionChanges: true,
		StartOffset:           kafkaStartOffset(cfg.StartOffset),
		Timeout:               coordinatorTimeout(cfg),
		Logger:                kafka.LoggerFunc(s.logInfo),
		ErrorLogger:           kafka.LoggerFunc(s.logError),
	})
	if err != nil {
		return nil, fmt.Errorf("kafka source config: %w", err)
	}
	go s.run()
	return s, nil
}

// coordinatorTimeout is kafka-go's deadline of a request to the group
// coordinator (a join or a sync gets the rebalance or session timeout on
// top): no longer than the session timeout less a heartbeat, so that an
// unanswered heartbeat fails when the coordinator would have evicted the
// member. kafka-go moves that deadline at each request on the connection,
// though; watchStalls bounds the wait whatever the requests.
func coordinatorTimeout(cfg SourceConfig) time.Duration {
	return min(cfg.Timeout, cfg.SessionTimeout-cfg.HeartbeatInterval)
}

// run follows the group's generations until Close. kafka-go joins again
// by itself after a failure, JoinBackoff later; the first failure of an
// outage is logged as a warning, the next ones at debug, and the return
// with how long the member was out of the group and how many attempts
// failed.
func (s *Source) run() {
	defer close(s.stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.done
		cancel()
	}()
	go s.watchStalls(ctx)
	var (
		out        outage
		stopLeave  = func() {}
		leaving    sync.WaitGroup
		leaveStart bool
	)
	defer func() {
		stopLeave()
		leaving.Wait()
	}()
	for {
		gen, err := s.cg.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			out.fail(time.Now())
			s.logError("consumer group: %v", err)
			s.quiet.Store(true)
			// kafka-go keeps its member id through a rebalance in
			// progress, and forgets it after any other failure.
			if !leaveStart && s.member != "" && !errors.Is(err, kafka.RebalanceInProgress) {
				leaveStart = true
				lctx, cancel := context.WithCancel(ctx)
				stopLeave = cancel
				id := s.member
				leaving.Go(func() { s.leaveGhost(lctx, id) })
			}
			continue
		}
		stopLeave()
		leaving.Wait()
		stopLeave, leaveStart = func() {}, false
		if out.failures > 0 {
			s.log.Info("consumer group joined again", slog.Duration("after", time.Since(out.since).Round(time.Millisecond)),
				slog.Int("failed_attempts", out.failures))
		}
		out = outage{}
		s.quiet.Store(false)
		s.member = gen.MemberID
		s.startGeneration(gen)
		s.readTopicPartitions(ctx)
	}
}

// readTopicPartitions asks the brokers for the topic's partition count
// (while the generation's readers start), bounded by the dial timeout; a
// failure keeps the count known before.
func (s *Source) readTopicPartitions(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	for _, b := range s.cfg.Brokers {
		ps, err := s.dialer.LookupPartitions(ctx, "tcp", b, s.cfg.Topic)
		if err == nil && len(ps) > 0 {
			s.topicParts.Store(int64(len(ps)))
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// stallCheck is how often the connections are checked for stalls: a
// sixtieth of the session timeout, between 10 ms and 100 ms.
func (c SourceConfig) stallCheck() time.Duration {
	return min(max(c.SessionTimeout/60, 10*time.Millisecond), 100*time.Millisecond)
}

// stallLimit is how long a request may wait for its answer during a
// generation. A heartbeat leaves HeartbeatInterval after the last answered
// one at the latest; unanswered for this long, and seen by a check, it
// has left the member silent for less than the session timeout, after
// which the coordinator would evict it anyway. A fetch waits up to
// MaxWait by design.
func (c SourceConfig) stallLimit() time.Duration {
	return max(c.SessionTimeout-c.HeartbeatInterval-2*c.stallCheck(), 2*c.MaxWait)
}

// watchStalls closes, while the member is in a generation, the broker
// connections whose request waits longer than the stall limit, until ctx
// ends: kafka-go then sees its heartbeat fail and ends the generation.
func (s *Source) watchStalls(ctx context.Context) {
	limit := s.cfg.stallLimit()
	t := time.NewTicker(s.cfg.stallCheck())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if s.live.Load() == 0 {
				continue
			}
			if addrs, longest := s.stalls.closeStalled(now, limit); len(addrs) > 0 {
				s.logError("no answer from the broker for %s: closing the connections to %s", longest.Round(time.Millisecond), strings.Join(addrs, ", "))
			}
		}
	}
}

// TopicPartitions returns the topic's partition count as the Source last
// read it (at the start of a generation); false before it read one.
func (s *Source) TopicPartitions() (int, bool) {
	n := s.topicParts.Load()
	return int(n), n > 0
}

// outage counts the failed attempts to join the group since the last
// generation.
type outage struct {
	since    time.Time // the first failure
	failures int
}

func (o *outage) fail(now time.Time) {
	if o.failures == 0 {
		o.since = now
	}
	o.failures++
}

// startGeneration records gen's assignment and starts a reader for each of
// its partitions; the readers end with the generation.
func (s *Source) startGeneration(gen *kafka.Generation) {
	var parts []int
	offsets := map[int]int64{}
	for _, pa := range gen.Assignments[s.cfg.Topic] {
		parts = append(parts, pa.ID)
		offsets[pa.ID] = pa.Offset
	}
	slices.Sort(parts)
	n := s.setGeneration(gen, parts)
	// The first function to return ends the generation: this one returns
	// only when it ends anyway (a failed heartbeat, a rebalance, Close).
	gen.Start(func(ctx context.Context) {
		<-ctx.Done()
		s.setGeneration(nil, nil)
	})
	for _, p := range parts {
		gen.Start(func(ctx context.Context) { s.readPartition(ctx, n, p, offsets[p]) })
	}
}

// setGeneration records a generation's start (gen not nil) or end, and
// returns the generation's number.
func (s *Source) setGeneration(gen *kafka.Generation, parts []int) uint64 {
	s.mu.Lock()
	if gen == nil && s.gen == nil {
		s.mu.Unlock()
		return 0
	}
	s.gen = gen
	s.owned = make(map[int]bool, len(parts))
	for _, p := range parts {
		s.owned[p] = true
	}
	if gen != nil {
		s.assign.Generation++
		s.live.Store(s.assign.Generation)
	} else {
		s.live.Store(0)
	}
	s.assign.Joined, s.assign.Partitions = gen != nil, parts
	close(s.changed)
	s.changed = make(chan struct{})
	a := s.assign
	a.Partitions = slices.Clone(parts)
	s.mu.Unlock()
	s.log.Info("consumer group assignment", slog.Bool("joined", a.Joined),
		slog.Uint64("generation", a.Generation), slog.Any("partitions", a.Partitions))
	if s.cfg.OnAssignment != nil {
		s.cfg.OnAssignment(a)
	}
	return a.Generation
}

// readPartition fetches one partition from offset (a committed offset, or
// kafka-go's FirstOffset or LastOffset) until ctx ends, reconnecting after
// failures. It must not return before ctx ends: that would end the
// generation.
func (s *Source) readPartition(ctx context.Context, gen uint64, part int, offset int64) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !sleep.For(ctx, backoff(attempt)) {
			return
		}
		conn, err := s.dialPartition(ctx, part, &offset)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.logError("partition %d of %s: connect: %v", part, s.cfg.Topic, err)
			continue
		}
		err = s.fetchLoop(ctx, conn, gen, part, &offset)
		_ = conn.Close()
		if ctx.Err() != nil {
			return
		}
		s.logError("partition %d of %s at offset %d: %v", part, s.cfg.Topic, offset, err)
		if errors.Is(err, kafka.NotLeaderForPartition) || errors.Is(err, kafka.UnknownTopicOrPartition) {
			attempt = 0 // reconnect at once, to the new leader
		}
	}
}

// dialPartition connects to the leader of part and resolves *offset to an
// absolute offset inside the partition.
func (s *Source) dialPartition(ctx context.Context, part int, offset *int64) (*kafka.Conn, error) {
	var errs []error
	for _, b := range s.cfg.Brokers {
		conn, err := s.dialer.DialLeader(ctx, "tcp", b, s.cfg.Topic, part)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(s.cfg.Timeout))
		first, last, err := conn.ReadOffsets()
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("read offsets: %w", err)
		}
		switch {
		case *offset == kafka.FirstOffset || (*offset >= 0 && *offset < first):
			*offset = first // the start, or records deleted by retention
		case *offset == kafka.LastOffset:
			*offset = last
		}
		if _, err := conn.Seek(*offset, kafka.SeekAbsolute); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("seek %d: %w", *offset, err)
		}
		_ = conn.SetDeadline(time.Time{})
		return conn, nil
	}
	return nil, errors.Join(errs...)
}

// fetchLoop fetches from conn and hands the messages over in batches, until
// ctx ends or a fetch fails; *offset follows the next message to read.
func (s *Source) fetchLoop(ctx context.Context, conn *kafka.Conn, gen uint64, part int, offset *int64) error {
	bodyTimeout := s.cfg.MaxWait + s.cfg.Timeout
	for ctx.Err() == nil {
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.MaxWait))
		kb := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: s.cfg.MaxBytes})
		_ = conn.SetReadDeadline(time.Now().Add(bodyTimeout))
		b := &Batch{Partition: part, HighWaterMark: kb.HighWaterMark(), gen: gen}
		var err error
		for {
			var m kafka.Message
			if m, err = kb.ReadMessage(); err != nil {
				break
			}
			if b.Messages == nil {
				b.Messages = make([]Message, 0, MaxBatchMessages)
			}
			b.Messages = append(b.Messages, Message{m})
			*offset = m.Offset + 1
			if len(b.Messages) == MaxBatchMessages {
				if !s.send(ctx, b) {
					_ = kb.Close()
					return ctx.Err()
				}
				// The wait for room may have been long: the rest of the
				// fetch gets its own time.
				_ = conn.SetReadDeadline(time.Now().Add(bodyTimeout))
				b = &Batch{Partition: part, HighWaterMark: b.HighWaterMark, gen: gen}
			}
		}
		_ = kb.Close()
		if len(b.Messages) > 0 && !s.send(ctx, b) {
			return ctx.Err()
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, kafka.RequestTimedOut):
			// The end of the fetch, or no record within MaxWait.
		case errors.Is(err, kafka.OffsetOutOfRange):
			_ = conn.SetDeadline(time.Now().Add(s.cfg.Timeout))
			first, last, oerr := conn.ReadOffsets()
			_ = conn.SetDeadline(time.Time{})
			switch {
			case oerr != nil:
				return fmt.Errorf("read offsets: %w", oerr)
			case *offset < first:
				s.logError("partition %d of %s: offset %d is gone, skipping to %d", part, s.cfg.Topic, *offset, first)
				*offset = first
			case *offset > last:
				return fmt.Errorf("offset %d is past the end %d: %w", *offset, last, err)
			}
			if _, err := conn.Seek(*offset, kafka.SeekAbsolute); err != nil {
				return fmt.Errorf("seek %d: %w", *offset, err)
			}
		default:
			return err
		}
	}
	return ctx.Err()
}

// send hands b to FetchBatch, waiting for room until ctx ends.
func (s *Source) send(ctx context.Context, b *Batch) bool {
	select {
	case s.batches <- b:
		return true
	case <-ctx.Done():
		return false
	}
}

// FetchBatch returns the next batch of the partitions assigned to this
// member, waiting for one until ctx ends. It commits nothing. After a
// rebalance, messages fetched but not committed come again; batches
// fetched in a generation that ended are dropped. It returns [ErrClosed]
// once the Source is closed.
func (s *Source) FetchBatch(ctx context.Context) (*Batch, error) {
	for {
		select {
		case <-s.done:
			return nil, ErrClosed
		default:
		}
		select {
		case b := <-s.batches:
			if b.gen != s.live.Load() {
				continue
			}
			return b, nil
		case <-s.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("kafka fetch: %w", ctx.Err())
		}
	}
}

// Fetch returns the next message, as FetchBatch does, one at a time. It
// does not mix with FetchBatch.
func (s *Source) Fetch(ctx context.Context) (Message, error) {
	for s.pending == nil || len(s.pending.Messages) == 0 || s.pending.gen != s.live.Load() {
		b, err := s.FetchBatch(ctx)
		if err != nil {
			return Message{}, err
		}
		s.pending = b
	}
	m := s.pending.Messages[0]
	s.pending.Messages = s.pending.Messages[1:]
	return m, nil
}

// Commit commits the positions, synchronously, in the member's current
// generation; it waits for one during a rebalance. A position commits
// every record before it in its partition; positions of partitions the
// member does not own in the generation are left out.
func (s *Source) Commit(ctx context.Context, ps ...Position) error {
	if len(ps) == 0 {
		return nil
	}
	for {
		s.mu.Lock()
		gen, owned, changed, closed := s.gen, s.owned, s.changed, s.closed
		s.mu.Unlock()
		if closed {
			return ErrClosed
		}
		if gen != nil {
			offsets := make(map[int]int64, len(ps))
			for _, p := range ps {
				if owned[p.Partition] {
					offsets[p.Partition] = p.Next
				}
			}
			if len(offsets) == 0 {
				return nil
			}
			return s.commit(ctx, gen, offsets)
		}
		select {
		case <-changed:
		case <-s.done:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("kafka commit: %w", ctx.Err())
		}
	}
}

// commit sends one offset commit, returning early when ctx ends or the
// Source closes (kafka-go's commit has only the connection's timeouts).
func (s *Source) commit(ctx context.Context, gen *kafka.Generation, offsets map[int]int64) error {
	res := make(chan error, 1)
	go func() { res <- gen.CommitOffsets(map[string]map[int]int64{s.cfg.Topic: offsets}) }()
	select {
	case err := <-res:
		if err != nil {
			return fmt.Errorf("kafka commit: %w", err)
		}
		return nil
	case <-s.done:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("kafka commit: %w", ctx.Err())
	}
}

// Assignment returns the member's current assignment.
func (s *Source) Assignment() Assignment {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.assign
	a.Partitions = slices.Clone(a.Partitions)
	return a
}

// Close leaves the group and stops fetching. Offsets not committed are
// not committed by Close.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	err := s.cg.Close()
	<-s.stopped
	s.transport.CloseIdleConnections()
	s.setGeneration(nil, nil)
	if err != nil {
		return fmt.Errorf("kafka source close: %w", err)
	}
	return nil
}

// logInfo receives kafka-go's informational lines.
func (s *Source) logInfo(format string, args ...any) {
	s.log.Debug("kafka-go", slog.Any("line", lazyLine{format, args}))
}

// logError receives kafka-go's error lines, and the Source's own: at
// warn, or at debug while the member fails to join again (the first
// failure was a warning).
func (s *Source) logError(format string, args ...any) {
	if s.quiet.Load() {
		s.log.Debug("kafka-go", slog.Any("line", lazyLine{format, args}))
	} else {
		s.log.Warn("kafka-go", slog.Any("line", lazyLine{format, args}))
	}
	s.lastErr.Store(&sourceError{text: fmt.Sprintf(format, args...), at: time.Now()})
}

// sourceError is an error line of kafka-go and when it came.
type sourceError struct {
	text string
	at   time.Time
}

// LastError returns the last error logged (a failed connection, a failed
// join) and when; "" when there was none.
func (s *Source) LastError() (string, time.Time) {
	if e := s.lastErr.Load(); e != nil {
		return e.text, e.at
	}
	return "", time.Time{}
}

// lazyLine formats a kafka-go log line only when a handler wants it.
type lazyLine struct {
	format string
	args   []any
}

func (l lazyLine) LogValue() slog.Value {
	return slog.StringValue(strings.TrimSpace(fmt.Sprintf(l.format, l.args...)))
}

// kafkaStartOffset is kafka-go's name for o.
func kafkaStartOffset(o StartOffset) int64 {
	if o == StartLatest {
		return kafka.LastOffset
	}
	return kafka.FirstOffset
}

// backoff is the wait before the attempt-th retry: 100 ms doubling, at
// most 2 s.
func backoff(attempt int) time.Duration {
	return min(100*time.Millisecond<<min(attempt-1, 5), 2*time.Second)
}
