package kafkasource

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// Writer writes records with acks=all, to its topic or to the topic a
// record names. It is safe for concurrent use: concurrent writes share
// batches.
type Writer struct {
	w         *kafka.Writer
	topic     string
	transport *kafka.Transport
}

// NewWriter validates cfg and builds a Writer. It reads the TLS files but
// connects only on the first write.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka writer config: %w", err)
	}
	cfg = cfg.withDefaults()
	tlsCfg, mech, err := cfg.security()
	if err != nil {
		return nil, fmt.Errorf("kafka writer config: %w", err)
	}
	transport := &kafka.Transport{
		DialTimeout: cfg.Timeout,
		IdleTimeout: time.Minute,
		MetadataTTL: 5 * time.Second,
		ClientID:    cfg.ClientID,
		TLS:         tlsCfg,
		SASL:        mech,
	}
	return &Writer{
		transport: transport,
		topic:     cfg.Topic,
		// The topic is set on every message, so that a record may name
		// another one.
		w: &kafka.Writer{
			Addr:                   kafka.TCP(cfg.Brokers...),
			Balancer:               balancer{},
			BatchSize:              cfg.BatchSize,
			BatchTimeout:           cfg.BatchTimeout,
			WriteTimeout:           cfg.WriteTimeout,
			RequiredAcks:           kafka.RequireAll,
			AllowAutoTopicCreation: cfg.AllowAutoTopicCreation,
			Transport:              transport,
		},
	}, nil
}

// Topic returns the topic the writer writes to.
func (w *Writer) Topic() string { return w.topic }

// Write writes the records and returns once the brokers acknowledged all of
// them, or ctx ended, or kafka-go gave up. Records of one key keep their
// order. On error some records may have been written.
func (w *Writer) Write(ctx context.Context, recs ...Record) error {
	if len(recs) == 0 {
		return nil
	}
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		var hs []kafka.Header
		if len(r.Headers) > 0 {
			hs = make([]kafka.Header, len(r.Headers))
			for j, h := range r.Headers {
				hs[j] = kafka.Header{Key: h.Key, Value: h.Value}
			}
		}
		topic := r.Topic
		if topic == "" {
			topic = w.topic
		}
		msgs[i] = kafka.Message{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs, Time: r.Time}
		if r.ToPartition {
			// The balancer reads it back (see balancer); kafka-go sets
			// the field again once the record is written.
			msgs[i].Partition = r.Partition + 1
		}
	}
	if err := w.w.WriteMessages(ctx, msgs...); err != nil {
		if len(recs) == 1 {
			return fmt.Errorf("kafka write %s: %w", msgs[0].Topic, err)
		}
		return fmt.Errorf("kafka write: %w", err)
	}
	return nil
}

// balancer partitions by key with murmur2, as the satellite does, but
// for a record written ToPartition: its message carries the partition
// plus one (a message's Partition is 0 otherwise).
type balancer struct{ byKey kafka.Murmur2Balancer }

// Balance implements kafka.Balancer.
func (b balancer) Balance(msg kafka.Message, partitions ...int) int {
	if p := msg.Partition - 1; p >= 0 && slices.Contains(partitions, p) {
		return p
	}
	return b.byKey.Balance(msg, partitions...)
}

var _ kafka.Balancer = balancer{}

// Close flushes pending batches and closes the connections.
func (w *Writer) Close() error {
	err := w.w.Close()
	w.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("kafka writer close: %w", err)
	}
	return nil
}
