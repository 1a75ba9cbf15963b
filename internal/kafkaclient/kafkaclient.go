// Package kafkaclient holds what a Kafka client needs to reach the brokers,
// whichever way it talks to them: the bootstrap addresses, TLS and SASL.
// Only the packages that own kafka-go (satellite/kafkasink and
// engine/kafkasource) import it; they embed its types in their configs.
package kafkaclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// SASL mechanisms of [SASL].
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// ValidateBrokers checks a list of bootstrap brokers: at least one, each
// host:port.
func ValidateBrokers(brokers []string) []error {
	var errs []error
	if len(brokers) == 0 {
		errs = append(errs, errors.New("brokers: at least one broker is required"))
	}
	for _, b := range brokers {
		if b == "" || strings.ContainsAny(b, " ,") || !strings.Contains(b, ":") {
			errs = append(errs, fmt.Errorf("brokers: %q is not host:port", b))
		}
	}
	return errs
}

// TLS configures TLS to the brokers. TLS is on when Enable is true or any
// file is given.
type TLS struct {
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

// Enabled reports whether TLS is on.
func (c TLS) Enabled() bool {
	return c.Enable || c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
}

// Validate checks c without reading the files.
func (c TLS) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("tls: cert_file and key_file go together")
	}
	return nil
}

// Config loads the certificate files; nil when TLS is off.
func (c TLS) Config() (*tls.Config, error) {
	if !c.Enabled() {
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

// SASL configures SASL authentication to the brokers.
type SASL struct {
	// Mechanism is "" (no SASL), "PLAIN", "SCRAM-SHA-256" or
	// "SCRAM-SHA-512" (in any letter case).
	Mechanism string
	// Username is the SASL user.
	Username string
	// Password is the user's password. It is never printed or logged.
	Password string
}

// String describes c without the password.
func (c SASL) String() string {
	if c.Mechanism == "" {
		return "none"
	}
	return fmt.Sprintf("%s user=%s password=[redacted]", c.Mechanism, c.Username)
}

// Format implements fmt.Formatter so that no verb prints the password.
func (c SASL) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// LogValue implements slog.LogValuer without the password.
func (c SASL) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", c.Mechanism), slog.String("username", c.Username))
}

// Build builds the SASL mechanism, nil for none.
func (c SASL) Build() (sasl.Mechanism, error) {
	if c.Mechanism == "" {
		return nil, nil
	}
	if c.Username == "" {
		return nil, errors.New("sasl: username required")
	}
	var algo scram.Algorithm
	switch strings.ToUpper(c.Mechanism) {
	case MechanismPlain:
		return plain.Mechanism{Username: c.Username, Password: c.Password}, nil
	case MechanismSCRAMSHA256:
		algo = scram.SHA256
	case MechanismSCRAMSHA512:
		algo = scram.SHA512
	default:
		return nil, fmt.Errorf("sasl: mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.Mechanism)
	}
	m, err := scram.Mechanism(algo, c.Username, c.Password)
	if err != nil {
		return nil, fmt.Errorf("sasl: %w", err)
	}
	return m, nil
}
