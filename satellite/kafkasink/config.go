package kafkasink

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/squallhq/squall/internal/kafkaclient"
)

// Defaults of [Config].
const (
	DefaultTopic           = "squall.events"
	DefaultClientID        = "squall-satellite"
	DefaultBatchSize       = 500
	DefaultMaxMessageBytes = 1 << 20
	DefaultWriteTimeout    = 10 * time.Second
	DefaultDialTimeout     = 5 * time.Second
	DefaultMaxAttempts     = 3
	DefaultMetadataTTL     = 2 * time.Second
	DefaultMaxInFlight     = 5
)

// Compression codecs of [Config].
const (
	CompressionNone   = "none"
	CompressionGzip   = "gzip"
	CompressionSnappy = "snappy"
	CompressionLz4    = "lz4"
	CompressionZstd   = "zstd"
)

// Config configures a [Sink].
type Config struct {
	// Brokers are the bootstrap brokers, host:port. Required.
	Brokers []string
	// Topic receives the events (default DefaultTopic, "squall.events").
	Topic string
	// ClientID names the producer to the brokers (default
	// DefaultClientID).
	ClientID string
	// TLS configures TLS to the brokers.
	TLS TLSConfig
	// SASL configures SASL authentication.
	SASL SASLConfig
	// Compression is "none" (the default), "gzip", "snappy", "lz4" or
	// "zstd".
	Compression string
	// BatchSize is the most records of one produce request, all its
	// partitions together (default 500). There is no batch timeout, only
	// a short self-clocked wait after an acknowledgement: see the package
	// documentation.
	BatchSize int
	// MaxMessageBytes bounds one record batch (the records of one
	// partition in a produce request), and so one record (default
	// 1 MiB, under Kafka's default message.max.bytes). Larger events are
	// refused with [ErrRejected].
	MaxMessageBytes int64
	// WriteTimeout bounds one produce request (default 10 s).
	WriteTimeout time.Duration
	// DialTimeout bounds connecting to a broker (default 5 s).
	DialTimeout time.Duration
	// MaxAttempts is how many times kafka-go tries a batch before it
	// gives up (default 3); the satellite then spools the records.
	MaxAttempts int
	// MaxInFlight is the most produce requests in flight per broker
	// (default 5, as Kafka's max.in.flight.requests.per.connection); a
	// request carries the records of every partition the broker leads. A
	// request goes alongside one in flight only when 32 records (or a
	// record batch's MaxMessageBytes) wait: smaller batches wait for the
	// next acknowledgement, which costs far less CPU than many small
	// requests.
	MaxInFlight int
	// MetadataTTL is the longest time between two refreshes of the
	// topic's metadata (default 2 s): how soon a new partition leader, or
	// a broker back after an outage, is seen.
	MetadataTTL time.Duration
	// AllowAutoTopicCreation lets the first write create the topic, where
	// the brokers allow it.
	AllowAutoTopicCreation bool
}

// TLSConfig configures TLS to the brokers (see [kafkaclient.TLS]).
type TLSConfig = kafkaclient.TLS

// SASLConfig configures SASL authentication (see [kafkaclient.SASL]).
type SASLConfig = kafkaclient.SASL

// DefaultConfig returns the defaults, without brokers.
func DefaultConfig() Config {
	return Config{
		Topic:           DefaultTopic,
		ClientID:        DefaultClientID,
		Compression:     CompressionNone,
		BatchSize:       DefaultBatchSize,
		MaxMessageBytes: DefaultMaxMessageBytes,
		WriteTimeout:    DefaultWriteTimeout,
		DialTimeout:     DefaultDialTimeout,
		MaxAttempts:     DefaultMaxAttempts,
		MetadataTTL:     DefaultMetadataTTL,
		MaxInFlight:     DefaultMaxInFlight,
	}
}

// Validate checks c; the errors name the field.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	errs = append(errs, kafkaclient.ValidateBrokers(c.Brokers)...)
	if c.Topic == "" {
		add("topic: required")
	}
	if _, err := compression(c.Compression); err != nil {
		errs = append(errs, err)
	}
	if c.BatchSize < 1 {
		add("batch_size: %d is less than 1", c.BatchSize)
	}
	if c.MaxMessageBytes < 1<<10 {
		add("max_message_bytes: %d is less than 1 KiB", c.MaxMessageBytes)
	}
	if c.WriteTimeout <= 0 {
		add("write_timeout: %s must be positive", c.WriteTimeout)
	}
	if c.DialTimeout <= 0 {
		add("dial_timeout: %s must be positive", c.DialTimeout)
	}
	if c.MaxInFlight < 1 {
		add("max_in_flight: %d is less than 1", c.MaxInFlight)
	}
	if c.MetadataTTL <= 0 {
		add("metadata_ttl: %s must be positive", c.MetadataTTL)
	}
	if c.MaxAttempts < 1 {
		add("max_attempts: %d is less than 1", c.MaxAttempts)
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.SASL.Build(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// compression maps a codec name to kafka-go's.
func compression(name string) (kafka.Compression, error) {
	switch strings.ToLower(name) {
	case "", CompressionNone:
		return 0, nil
	case CompressionGzip:
		return kafka.Gzip, nil
	case CompressionSnappy:
		return kafka.Snappy, nil
	case CompressionLz4:
		return kafka.Lz4, nil
	case CompressionZstd:
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("compression: %q is not none, gzip, snappy, lz4 or zstd", name)
}
