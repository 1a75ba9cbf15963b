package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// ErrClosed is returned by the operations of a closed Source or Writer.
var ErrClosed = errors.New("kafka client closed")

// Source consumes one topic in a consumer group. Fetch is meant for one
// goroutine; Commit, Assignment and Close are safe to call from others.
type Source struct {
	cfg SourceConfig
	r   *kafka.Reader
	log *slog.Logger

	// done is closed by Close: it ends commits in flight, which kafka-go
	// would otherwise leave waiting forever.
	done chan struct{}

	mu     sync.Mutex
	assign Assignment
	closed bool

	lastErr atomic.Pointer[sourceError]
}

// kafka-go v0.4.51's log lines that mark a generation's start and end
// (reader.go: Reader.subscribe and Reader.commitLoop).
const (
	lineSubscribed  = "subscribed to topics and partitions: %+v"
	lineStoppedLoop = "stopped commit for group %s\n"
)

// Open validates cfg and starts consuming: kafka-go joins the group and
// fetches in its own goroutines until Close.
func Open(cfg SourceConfig) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka source config: %w", err)
	}
	cfg = cfg.withDefaults()
	tlsCfg, err := cfg.TLS.build()
	if err != nil {
		return nil, fmt.Errorf("kafka source config: %w", err)
	}
	mech, _ := cfg.SASL.mechanism()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{cfg: cfg, log: log.With("component", "kafkasource"), done: make(chan struct{})}
	rc := kafka.ReaderConfig{
		Brokers: cfg.Brokers,
		GroupID: cfg.Group,
		Topic:   cfg.Topic,
		Dialer: &kafka.Dialer{
			ClientID:      cfg.ClientID,
			Timeout:       cfg.Timeout,
			DualStack:     true,
			TLS:           tlsCfg,
			SASLMechanism: mech,
		},
		QueueCapacity:     cfg.QueueCapacity,
		MinBytes:          1,
		MaxBytes:          cfg.MaxBytes,
		MaxWait:           cfg.MaxWait,
		ReadBatchTimeout:  cfg.MaxWait + cfg.Timeout,
		HeartbeatInterval: cfg.HeartbeatInterval,
		SessionTimeout:    cfg.SessionTimeout,
		RebalanceTimeout:  cfg.RebalanceTimeout,
		// Synchronous commits of what the caller asks, nothing automatic.
		CommitInterval:        0,
		StartOffset:           kafkaStartOffset(cfg.StartOffset),
		WatchPartitionChanges: true,
		Logger:                kafka.LoggerFunc(s.logInfo),
		ErrorLogger:           kafka.LoggerFunc(s.logError),
	}
	if err := rc.Validate(); err != nil {
		return nil, fmt.Errorf("kafka source config: %w", err)
	}
	s.r = kafka.NewReader(rc)
	return s, nil
}

// Fetch returns the next message of the partitions assigned to this member,
// waiting for one until ctx ends. It commits nothing. After a rebalance,
// messages fetched but not committed come again. It returns [ErrClosed]
// once the Source is closed.
func (s *Source) Fetch(ctx context.Context) (Message, error) {
	m, err := s.r.FetchMessage(ctx)
	if err != nil {
		if s.isClosed() {
			return Message{}, ErrClosed
		}
		return Message{}, fmt.Errorf("kafka fetch: %w", err)
	}
	return Message{m}, nil
}

// Commit commits the positions, synchronously, in the member's current
// generation; it waits for one during a rebalance. A position commits
// every record before it in its partition.
func (s *Source) Commit(ctx context.Context, ps ...Position) error {
	if len(ps) == 0 {
		return nil
	}
	if s.isClosed() {
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	msgs := make([]kafka.Message, len(ps))
	for i, p := range ps {
		msgs[i] = kafka.Message{Topic: s.cfg.Topic, Partition: p.Partition, Offset: p.Next - 1}
	}
	if err := s.r.CommitMessages(ctx, msgs...); err != nil {
		if s.isClosed() {
			return ErrClosed
		}
		return fmt.Errorf("kafka commit: %w", err)
	}
	return nil
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
	err := s.r.Close()
	s.setAssignment(false, nil)
	if err != nil {
		return fmt.Errorf("kafka source close: %w", err)
	}
	return nil
}

func (s *Source) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// setAssignment records a generation's start (joined) or end.
func (s *Source) setAssignment(joined bool, parts []int) {
	s.mu.Lock()
	if joined {
		s.assign.Generation++
	} else if !s.assign.Joined {
		s.mu.Unlock()
		return
	}
	s.assign.Joined, s.assign.Partitions = joined, parts
	a := s.assign
	a.Partitions = slices.Clone(parts)
	s.mu.Unlock()
	s.log.Info("consumer group assignment", slog.Bool("joined", a.Joined),
		slog.Uint64("generation", a.Generation), slog.Any("partitions", a.Partitions))
	if s.cfg.OnAssignment != nil {
		s.cfg.OnAssignment(a)
	}
}

// logInfo receives kafka-go's informational lines; two of them mark the
// generations.
func (s *Source) logInfo(format string, args ...any) {
	switch format {
	case lineSubscribed:
		if len(args) == 1 {
			if parts, ok := partitionsOf(args[0], s.cfg.Topic); ok {
				s.setAssignment(true, parts)
				break
			}
		}
		s.log.Error("kafka-go logged an assignment this version cannot read: readiness will stay false",
			slog.String("line", fmt.Sprintf(format, args...)))
	case lineStoppedLoop:
		s.setAssignment(false, nil)
	}
	s.log.Debug("kafka-go", slog.Any("line", lazyLine{format, args}))
}

// logError receives kafka-go's error lines.
func (s *Source) logError(format string, args ...any) {
	s.log.Warn("kafka-go", slog.Any("line", lazyLine{format, args}))
	s.lastErr.Store(&sourceError{text: fmt.Sprintf(format, args...), at: time.Now()})
}

// sourceError is an error line of kafka-go and when it came.
type sourceError struct {
	text string
	at   time.Time
}

// LastError returns kafka-go's last error line (a failed connection, a
// failed join) and when it was logged; "" when there was none.
func (s *Source) LastError() (string, time.Time) {
	if e := s.lastErr.Load(); e != nil {
		return e.text, e.at
	}
	return "", time.Time{}
}

// partitionsOf reads the partitions of topic from the argument of the
// "subscribed" line: a map whose keys are structs {topic string; partition
// int32} (kafka-go's unexported topicPartition).
func partitionsOf(arg any, topic string) ([]int, bool) {
	v := reflect.ValueOf(arg)
	if v.Kind() != reflect.Map || v.Type().Key().Kind() != reflect.Struct {
		return nil, false
	}
	kt := v.Type().Key()
	tf, ok1 := kt.FieldByName("topic")
	pf, ok2 := kt.FieldByName("partition")
	if !ok1 || !ok2 || tf.Type.Kind() != reflect.String || !pf.Type.ConvertibleTo(reflect.TypeFor[int64]()) {
		return nil, false
	}
	parts := []int{}
	for _, k := range v.MapKeys() {
		if k.FieldByIndex(tf.Index).String() == topic {
			parts = append(parts, int(k.FieldByIndex(pf.Index).Int()))
		}
	}
	slices.Sort(parts)
	return parts, true
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
