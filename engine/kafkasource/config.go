package kafkasource

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// Defaults of the configurations.
const (
	DefaultClientID          = "squall-engine"
	DefaultDialTimeout       = 5 * time.Second
	DefaultMaxWait           = 500 * time.Millisecond
	DefaultMaxBytes          = 10 << 20
	DefaultQueueCapacity     = 1000
	DefaultHeartbeatInterval = 3 * time.Second
	DefaultSessionTimeout    = 30 * time.Second
	DefaultRebalanceTimeout  = 30 * time.Second
	DefaultBatchTimeout      = 2 * time.Millisecond
	DefaultBatchSize         = 100
	DefaultWriteTimeout      = 10 * time.Second
)

// SASL mechanisms of [SASLConfig].
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
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

// TLSConfig configures TLS to the brokers. TLS is on when Enable is true or
// any file is given.
type TLSConfig struct {
	// Enable turns TLS on with the system's roots.
	Enable bool
	// CAFile is a PEM file of the roots that verify the brokers, instead
	// of the system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// brokers that authenticate clients with TLS.
	CertFile string
	KeyFile  string
	// ServerName overrides the name checked in the brokers' certificates.
	ServerName string
	// InsecureSkipVerify disables the verification of the brokers'
	// certificates. For tests only.
	InsecureSkipVerify bool
}

// SASLConfig configures SASL authentication to the brokers.
type SASLConfig struct {
	// Mechanism is "" (no SASL), "PLAIN", "SCRAM-SHA-256" or
	// "SCRAM-SHA-512" (in any letter case).
	Mechanism string
	// Username and Password are the credentials. Password is never
	// printed or logged.
	Username string
	Password string
}

// String describes c without the password.
func (c SASLConfig) String() string {
	if c.Mechanism == "" {
		return "none"
	}
	return fmt.Sprintf("%s user=%s password=[redacted]", c.Mechanism, c.Username)
}

// Format implements fmt.Formatter so that no verb prints the password.
func (c SASLConfig) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// LogValue implements slog.LogValuer without the password.
func (c SASLConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", c.Mechanism), slog.String("username", c.Username))
}

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
	// alive, and so how soon it notices a rebalance (default 3s).
	HeartbeatInterval time.Duration
	// SessionTimeout is how long the coordinator waits for a heartbeat
	// before it evicts a silent member (default 30s). Brokers bound it
	// (Kafka: 6s to 5m by default).
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the coordinator waits for the members
	// to rejoin during a rebalance (default 30s).
	RebalanceTimeout time.Duration
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
}

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

// validate checks d; the errors name the field.
func (d Dial) validate() []error {
	var errs []error
	if len(d.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: at least one broker is required"))
	}
	for _, b := range d.Brokers {
		if b == "" || strings.ContainsAny(b, " ,") || !strings.Contains(b, ":") {
			errs = append(errs, fmt.Errorf("brokers: %q is not host:port", b))
		}
	}
	if d.Timeout < 0 {
		errs = append(errs, fmt.Errorf("dial timeout: %s is negative", d.Timeout))
	}
	if (d.TLS.CertFile == "") != (d.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls: cert file and key file go together"))
	}
	if _, err := d.SASL.mechanism(); err != nil {
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

// enabled reports whether TLS is on.
func (c TLSConfig) enabled() bool {
	return c.Enable || c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
}

// build loads the certificate files; nil when TLS is off.
func (c TLSConfig) build() (*tls.Config, error) {
	if !c.enabled() {
		return nil, nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // documented test-only option
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: read ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca file %s holds no PEM certificate", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// mechanism builds the SASL mechanism, nil for none.
func (c SASLConfig) mechanism() (sasl.Mechanism, error) {
	if c.Mechanism == "" {
		return nil, nil
	}
	if c.Username == "" {
		return nil, errors.New("sasl: username required")
	}
	switch strings.ToUpper(c.Mechanism) {
	case MechanismPlain:
		return plain.Mechanism{Username: c.Username, Password: c.Password}, nil
	case MechanismSCRAMSHA256:
		m, err := scram.Mechanism(scram.SHA256, c.Username, c.Password)
		if err != nil {
			return nil, fmt.Errorf("sasl: %w", err)
		}
		return m, nil
	case MechanismSCRAMSHA512:
		m, err := scram.Mechanism(scram.SHA512, c.Username, c.Password)
		if err != nil {
			return nil, fmt.Errorf("sasl: %w", err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("sasl: mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.Mechanism)
}
