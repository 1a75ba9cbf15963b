package kafkasource

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Writer writes records to one topic with acks=all. It is safe for
// concurrent use: concurrent writes share batches.
type Writer struct {
	w         *kafka.Writer
	transport *kafka.Transport
}

// NewWriter validates cfg and builds a Writer. It reads the TLS files but
// connects only on the first write.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka writer config: %w", err)
	}
	cfg = cfg.withDefaults()
	tlsCfg, err := cfg.TLS.build()
	if err != nil {
		return nil, fmt.Errorf("kafka writer config: %w", err)
	}
	mech, _ := cfg.SASL.mechanism()
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
		w: &kafka.Writer{
			Addr:                   kafka.TCP(cfg.Brokers...),
			Topic:                  cfg.Topic,
			Balancer:               kafka.Murmur2Balancer{},
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
func (w *Writer) Topic() string { return w.w.Topic }

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
		msgs[i] = kafka.Message{Key: r.Key, Value: r.Value, Headers: hs, Time: r.Time}
	}
	if err := w.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("kafka write %s: %w", w.w.Topic, err)
	}
	return nil
}

// Close flushes pending batches and closes the connections.
func (w *Writer) Close() error {
	err := w.w.Close()
	w.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("kafka writer close: %w", err)
	}
	return nil
}
