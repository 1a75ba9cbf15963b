package kafkasource

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/squallhq/squall/internal/kafkaclient"
)

// Defaults of the configurations. DefaultSessionTimeout is the smallest a
// Kafka broker accepts by default (group.min.session.timeout.ms): a member
// that dies is evicted 6s after its last heartbeat at most, and the others,
// which learn it at their next heartbeat (every second), take its
// partitions over within 10s.
const (
	DefaultClientID          = "squall-engine"
	DefaultDialTimeout       = 5 * time.Second
	DefaultMaxWait           = 500 * time.Millisecond
	DefaultMaxBytes          = 10 << 20
	DefaultQueueCapacity     = 1000
	DefaultHeartbeatInterval = time.Second
	DefaultSessionTimeout    = 6 * time.Second
	DefaultRebalanceTimeout  = 30 * time.Second
	DefaultJoinBackoff       = time.Second
	DefaultBatchTimeout      = 2 * time.Millisecond
	DefaultBatchSize         = 100
	DefaultWriteTimeout      = 10 * time.Second
)

// Dial says how to reach the brokers; [SourceConfig] and [WriterConfig]
// share it.
type Dial struct {
	// Brokers are the bootstrap brokers, host:port. Required.
	Brokers []string
	// ClientID names the client to the brokers (default "squall-engine").
	ClientID string
	// TLS configures TLS to the brokers.
	TLS TLSConfig
	// SASL configures SASL authentication.
	SASL SASLConfig
	// Timeout bounds connecting to a broker (default 5s).
	Timeout time.Duration
}

// TLSConfig configures TLS to the brokers (see [kafkaclient.TLS]).
type TLSConfig = kafkaclient.TLS

// SASLConfig configures SASL authentication (see [kafkaclient.SASL]).
type SASLConfig = kafkaclient.SASL

// SourceConfig configures a [Source].
type SourceConfig struct {
	Dial
	// Topic is the topic to consume. Required.
	Topic string
	// Group is the consumer group. Required.
	Group string
	// MaxWait is the longest a fetch waits for new records (default 500ms).
	MaxWait time.Duration
	// MaxBytes bounds the bytes of one fetch, and must exceed the largest
	// record (default 10 MiB).
	MaxBytes int
	// QueueCapacity is the number of fetched messages buffered ahead of
	// Fetch, rounded up to whole batches of MaxBatchMessages (default
	// 1000).
	QueueCapacity int
	// HeartbeatInterval is how often the member tells the coordinator it is
	// alive, and so how soon it notices a rebalance (default 1s).
	HeartbeatInterval time.Duration
	// SessionTimeout is how long the coordinator waits for a heartbeat
	// before it evicts a silent member (default 6s). Brokers bound it
	// (Kafka: 6s to 5m by default).
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the coordinator waits for the members
	// to rejoin during a rebalance (default 30s).
	RebalanceTimeout time.Duration
	// JoinBackoff is the wait between two failed attempts to join the
	// group, as while the brokers are down: the member joins again within
	// about this much of their return (default 1s).
	JoinBackoff time.Duration
	// StartOffset is where the group starts reading a partition for which
	// it has committed nothing yet: a new group, or a new partition
	// (default [StartEarliest]). Once the group has committed, it goes on
	// from there whatever this says.
	StartOffset StartOffset
	// Logger receives kafka-go's logs: its informational lines at debug
	// level, its errors (and the Source's failed fetches) at warn. Nil
	// discards them.
	Logger *slog.Logger
	// OnAssignment, when set, is called from a Source goroutine each
	// time the member's assignment changes: a generation starts (Joined,
	// with its partitions) or ends (not Joined). It must not block.
	OnAssignment func(Assignment)

	// netDial opens the TCP connections to the brokers (nil: a
	// net.Dialer); the tests kill a member through it.
	netDial dialFunc
}

// dialFunc opens a connection, as net.Dialer.DialContext does.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// StartOffset is where a consumer group starts in a partition it has no
// committed offset for.
type StartOffset string

// The start offsets.
const (
	// StartEarliest reads the partition from its oldest record still
	// kept: nothing written before the first engine started is skipped.
	StartEarliest StartOffset = "earliest"
	// StartLatest reads only the records written after the group joined.
	StartLatest StartOffset = "latest"
)

// ParseStartOffset reads "earliest" or "latest".
func ParseStartOffset(s string) (StartOffset, error) {
	switch o := StartOffset(s); o {
	case StartEarliest, StartLatest:
		return o, nil
	}
	return "", fmt.Errorf("start offset: %q is neither %q nor %q", s, StartEarliest, StartLatest)
}

// WriterConfig configures a [Writer].
type WriterConfig struct {
	Dial
	// Topic receives the records. Required.
	Topic string
	// BatchTimeout is how long a batch waits for more records before it
	// leaves (default 2ms).
	BatchTimeout time.Duration
	// BatchSize is the most records of one batch (default 100).
	BatchSize int
	// WriteTimeout bounds one produce request (default 10s).
	WriteTimeout time.Duration
	// AllowAutoTopicCreation lets the first write create the topic, where
	// the brokers allow it.
	AllowAutoTopicCreation bool
}

// withDefaults fills the zero fields of d.
func (d Dial) withDefaults() Dial {
	if d.ClientID == "" {
		d.ClientID = DefaultClientID
	}
	if d.Timeout == 0 {
		d.Timeout = DefaultDialTimeout
	}
	return d
}

// security reads the TLS files of d, validated, and returns its TLS
// configuration (nil: plaintext) and SASL mechanism (nil: none).
func (d Dial) security() (*tls.Config, sasl.Mechanism, error) {
	tlsCfg, err := d.TLS.Config()
	if err != nil {
		return nil, nil, err
	}
	mech, _ := d.SASL.Build() // validate checked it
	return tlsCfg, mech, nil
}

// validate checks d; the errors name the field.
func (d Dial) validate() []error {
	errs := kafkaclient.ValidateBrokers(d.Brokers)
	if d.Timeout < 0 {
		errs = append(errs, fmt.Errorf("dial timeout: %s is negative", d.Timeout))
	}
	if err := d.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := d.SASL.Build(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Validate checks c after filling in the defaults; it reports every
// problem, each naming its field.
func (c SourceConfig) Validate() error {
	c = c.withDefaults()
	errs := c.Dial.validate()
	if c.Topic == "" {
		errs = append(errs, errors.New("topic: required"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("group: required"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"max wait", c.MaxWait}, {"heartbeat interval", c.HeartbeatInterval},
		{"session timeout", c.SessionTimeout}, {"rebalance timeout", c.RebalanceTimeout},
		{"join backoff", c.JoinBackoff},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: %s must be positive", d.name, d.v))
		}
	}
	if c.MaxBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("max bytes: %d is less than 1 KiB", c.MaxBytes))
	}
	if c.QueueCapacity < 1 {
		errs = append(errs, fmt.Errorf("queue capacity: %d is less than 1", c.QueueCapacity))
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		errs = append(errs, fmt.Errorf("heartbeat interval: %s must be shorter than the session timeout %s", c.HeartbeatInterval, c.SessionTimeout))
	}
	if _, err := ParseStartOffset(string(c.StartOffset)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c SourceConfig) withDefaults() SourceConfig {
	c.Dial = c.Dial.withDefaults()
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.QueueCapacity == 0 {
		c.QueueCapacity = DefaultQueueCapacity
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if c.JoinBackoff == 0 {
		c.JoinBackoff = DefaultJoinBackoff
	}
	if c.StartOffset == "" {
		c.StartOffset = StartEarliest
	}
	return c
}

// Validate checks c after filling in the defaults; it reports every
// problem, each naming its field.
func (c WriterConfig) Validate() error {
	c = c.withDefaults()
	errs := c.Dial.validate()
	if c.Topic == "" {
		errs = append(errs, errors.New("topic: required"))
	}
	if c.BatchTimeout <= 0 || c.BatchTimeout > time.Second {
		errs = append(errs, fmt.Errorf("batch timeout: %s is not in (0, 1s]", c.BatchTimeout))
	}
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch size: %d is less than 1", c.BatchSize))
	}
	if c.WriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("write timeout: %s must be positive", c.WriteTimeout))
	}
	return errors.Join(errs...)
}

func (c WriterConfig) withDefaults() WriterConfig {
	c.Dial = c.Dial.withDefaults()
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}
