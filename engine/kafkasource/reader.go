package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// Reader reads ranges of a topic's partitions by offset, outside any
// consumer group: it never joins a group nor commits, so reading moves no
// group's offsets. Each call connects to the partition's leader and
// closes the connection before it returns. It is for occasional reads
// (the masters' dead-letter API), not for consuming.
type Reader struct {
	cfg    Dial
	dialer *kafka.Dialer
}

// PartitionRange is the range of offsets a partition holds.
type PartitionRange struct {
	Partition int
	// First is the offset of its first record; End the offset after its
	// last (First == End: empty).
	First, End int64
}

// NewReader validates d and builds a Reader. It reads the TLS files but
// connects only when asked to read.
func NewReader(d Dial) (*Reader, error) {
	if errs := d.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("kafka reader config: %w", errors.Join(errs...))
	}
	d = d.withDefaults()
	tlsCfg, mech, err := d.security()
	if err != nil {
		return nil, fmt.Errorf("kafka reader config: %w", err)
	}
	return &Reader{cfg: d, dialer: &kafka.Dialer{
		ClientID:      d.ClientID,
		Timeout:       d.Timeout,
		DualStack:     true,
		TLS:           tlsCfg,
		SASLMechanism: mech,
	}}, nil
}

// Partitions returns the ranges of the topic's partitions, by partition.
func (r *Reader) Partitions(ctx context.Context, topic string) ([]PartitionRange, error) {
	var parts []kafka.Partition
	var errs []error
	for _, b := range r.cfg.Brokers {
		ps, err := r.dialer.LookupPartitions(ctx, "tcp", b, topic)
		if err == nil {
			parts = ps
			errs = nil
			break
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("partitions of %s: %w", topic, errors.Join(errs...))
	}
	out := make([]PartitionRange, 0, len(parts))
	for _, p := range parts {
		pr, err := r.rangeOf(ctx, topic, p.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b PartitionRange) int { return a.Partition - b.Partition })
	return out, nil
}

// rangeOf returns the range of one partition.
func (r *Reader) rangeOf(ctx context.Context, topic string, part int) (PartitionRange, error) {
	conn, err := r.dial(ctx, topic, part)
	if err != nil {
		return PartitionRange{}, err
	}
	defer conn.Close()
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return PartitionRange{}, fmt.Errorf("offsets of %s/%d: %w", topic, part, err)
	}
	return PartitionRange{Partition: part, First: first, End: last}, nil
}

// OffsetAt returns the first offset of the partition whose record's
// timestamp is at or after t (the partition's end when there is none).
func (r *Reader) OffsetAt(ctx context.Context, topic string, part int, t time.Time) (int64, error) {
	conn, err := r.dial(ctx, topic, part)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	off, err := conn.ReadOffset(t)
	if err != nil {
		return 0, fmt.Errorf("offset of %s/%d at %s: %w", topic, part, t.Format(time.RFC3339), err)
	}
	if off < 0 { // no record at or after t
		if _, off, err = conn.ReadOffsets(); err != nil {
			return 0, fmt.Errorf("offsets of %s/%d: %w", topic, part, err)
		}
	}
	return off, nil
}

// Read calls fn with the records of the partition from offset from up to
// end (excluded; the caller got it from Partitions), in order, until fn
// returns false, the records given to fn hold maxBytes (keys and values),
// or ctx ends. It
// returns the offset after the last record given to fn (from, when
// none). A from below the partition's first offset starts at its first.
func (r *Reader) Read(ctx context.Context, topic string, part int, from, end int64, maxBytes int, fn func(*Message) bool) (int64, error) {
	if from >= end {
		return from, nil
	}
	conn, err := r.dial(ctx, topic, part)
	if err != nil {
		return from, err
	}
	defer conn.Close()
	first, _, err := conn.ReadOffsets()
	if err != nil {
		return from, fmt.Errorf("offsets of %s/%d: %w", topic, part, err)
	}
	from = max(from, first)
	if _, err := conn.Seek(from, kafka.SeekAbsolute); err != nil {
		return from, fmt.Errorf("seek %s/%d to %d: %w", topic, part, from, err)
	}
	next, fetched := from, 0
	for next < end && fetched < maxBytes {
		if err := ctx.Err(); err != nil {
			return next, err
		}
		b := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: min(maxBytes-fetched+1<<10, DefaultMaxBytes)})
		n := 0
		for next < end {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			n++
			fetched += len(m.Key) + len(m.Value)
			next = m.Offset + 1
			msg := Message{m}
			if !fn(&msg) || fetched >= maxBytes {
				_ = b.Close()
				return next, nil
			}
		}
		if err := b.Close(); err != nil && !errors.Is(err, io.EOF) {
			return next, fmt.Errorf("read %s/%d at %d: %w", topic, part, next, err)
		}
		if n == 0 {
			return next, fmt.Errorf("read %s/%d at %d: no record before the end %d", topic, part, next, end)
		}
	}
	return next, nil
}

// dial connects to the leader of the partition, with ctx's deadline (or
// the dial timeout) on the connection.
func (r *Reader) dial(ctx context.Context, topic string, part int) (*kafka.Conn, error) {
	var errs []error
	for _, b := range r.cfg.Brokers {
		conn, err := r.dialer.DialLeader(ctx, "tcp", b, topic, part)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(r.cfg.Timeout)
		}
		_ = conn.SetDeadline(deadline)
		return conn, nil
	}
	return nil, fmt.Errorf("connect to the leader of %s/%d: %w", topic, part, errors.Join(errs...))
}
