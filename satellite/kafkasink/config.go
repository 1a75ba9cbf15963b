package kafkasink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
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

// SASL mechanisms of [SASLConfig].
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
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

// TLSConfig configures TLS to the brokers. TLS is on when Enable is true or
// any file is given.
type TLSConfig struct {
	// Enable turns TLS on with the system's roots.
	Enable bool
	// CAFile is a PEM file of the roots that verify the brokers, instead
	// of the system's.
	CAFile string
	// CertFile is a PEM client certificate, for brokers that
	// authenticate clients with TLS; KeyFile is required with it.
	CertFile string
	// KeyFile is the PEM private key of CertFile.
	KeyFile string
	// ServerName overrides the name checked in the brokers' certificates.
	ServerName string
	// InsecureSkipVerify disables the verification of the brokers'
	// certificates. For tests only.
	InsecureSkipVerify bool
}

// enabled reports whether TLS is on.
func (c TLSConfig) enabled() bool {
	return c.Enable || c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
}

// SASLConfig configures SASL authentication to the brokers.
type SASLConfig struct {
	// Mechanism is "" (no SASL), "PLAIN", "SCRAM-SHA-256" or
	// "SCRAM-SHA-512" (in any letter case).
	Mechanism string
	// Username is the SASL user.
	Username string
	// Password is the user's password. It is never printed or logged.
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
	if len(c.Brokers) == 0 {
		add("brokers: at least one broker is required")
	}
	for _, b := range c.Brokers {
		if b == "" || strings.ContainsAny(b, " ,") || !strings.Contains(b, ":") {
			add("brokers: %q is not host:port", b)
		}
	}
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
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		add("tls: cert_file and key_file go together")
	}
	if _, err := c.SASL.mechanism(); err != nil {
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
			return nil, fmt.Errorf("tls: read ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca_file %s holds no PEM certificate", c.CAFile)
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
