package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/satellite"
	"github.com/squallhq/squall/satellite/tlscert"
)

func newSatelliteCommand() *cobra.Command {
	cfg := satellite.Default()
	var brokers []string
	var logLevel, saslPasswordFile, tlsCertFile, tlsKeyFile string
	cmd := &cobra.Command{
		Use:   "satellite --webhooks-dir DIR --kafka-brokers HOST:PORT[,...] --spool-dir DIR",
		Short: "Run a satellite: webhook endpoints that forward events to Kafka",
		Long: `Satellite serves one endpoint per webhook file of --webhooks-dir
(POST /engine/webhook/event/{id}?token=...), turns each call into an event and
forwards it to Kafka. A call is answered 200 only once Kafka acknowledged the
event or it is safely written to the local spool (--spool-dir), which drains
to Kafka in order when the brokers are back: no accepted event is lost.

The folder is watched: adding, changing or removing a file changes the
endpoints within a second, and a broken file never takes the others down.
/healthz, /readyz and /metrics are served on the same address.

With --tls-cert-file and --tls-key-file that address serves HTTPS (TLS 1.2
or later, HTTP/2) instead of plain HTTP. The files are checked every ten
seconds: a rotated pair is served from the next handshake on, and a pair
that does not load leaves the previous one in place (logged).

Every flag can also be set with an environment variable: SQUALL_ and the flag
name in upper case with underscores, e.g. SQUALL_KAFKA_BROKERS. A flag given
on the command line wins; empty variables are ignored.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(cmd.ErrOrStderr(), logLevel)
			if err != nil {
				return err
			}
			tuneGC(logger)
			if (tlsCertFile == "") != (tlsKeyFile == "") {
				return fmt.Errorf("--tls-cert-file and --tls-key-file (or SQUALL_TLS_CERT_FILE and SQUALL_TLS_KEY_FILE) go together: set both or neither")
			}
			if tlsCertFile != "" {
				certs, err := tlscert.Load(tlsCertFile, tlsKeyFile, tlscert.Options{CheckInterval: tlscert.DefaultCheckInterval, Logger: logger})
				if err != nil {
					return err
				}
				cfg.TLS = certs.TLSConfig()
			}
			cfg.Kafka.Brokers = splitList(brokers)
			if err := readSASLPassword(&cfg, saslPasswordFile); err != nil {
				return err
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			s, err := satellite.New(cfg, logger, reg)
			if err != nil {
				return err
			}
			return s.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Webhooks.Dir, "webhooks-dir", "", "folder of webhook JSON files, watched for changes (required)")
	f.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "HTTP listen address of the webhook endpoints and the probes (HTTPS with --tls-cert-file)")
	f.StringVar(&tlsCertFile, "tls-cert-file", "", "PEM certificate (chain) to serve HTTPS with; reloaded when the file changes")
	f.StringVar(&tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file; reloaded with it")
	f.StringSliceVar(&brokers, "kafka-brokers", nil, "Kafka bootstrap brokers, host:port (repeatable or comma-separated; required)")
	f.StringVar(&cfg.Kafka.Topic, "topic", cfg.Kafka.Topic, "Kafka topic of the events")
	f.StringVar(&cfg.TenantID, "tenant-id", cfg.TenantID, "tenant of events whose webhook file names none")
	f.StringVar(&cfg.Name, "name", "", "this satellite's name in the squall-source header (default: the host name)")
	f.StringVar(&cfg.Spool.Dir, "spool-dir", "", "folder of the durable local spool (required)")
	intakeFlags(f, &cfg, &saslPasswordFile)
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	documentEnv(f)
	return cmd
}

// intakeFlags defines the flags of the webhook intake's spool and Kafka
// connection, shared by squall satellite and squall master.
func intakeFlags(f *pflag.FlagSet, cfg *satellite.Config, saslPasswordFile *string) {
	f.Int64Var(&cfg.Spool.MaxBytes, "spool-max-bytes", cfg.Spool.MaxBytes, "spool size above which calls are answered 503")
	f.DurationVar(&cfg.AckTimeout, "ack-timeout", cfg.AckTimeout, "how long a call waits for Kafka before its event is spooled instead")
	f.StringVar(&cfg.Kafka.Compression, "kafka-compression", cfg.Kafka.Compression, "none, gzip, snappy, lz4 or zstd")
	f.BoolVar(&cfg.Kafka.TLS.Enable, "kafka-tls", false, "connect to Kafka with TLS")
	f.StringVar(&cfg.Kafka.TLS.CAFile, "kafka-tls-ca", "", "PEM CA of the brokers (default: the system's)")
	f.StringVar(&cfg.Kafka.TLS.CertFile, "kafka-tls-cert", "", "PEM client certificate for mutual TLS")
	f.StringVar(&cfg.Kafka.TLS.KeyFile, "kafka-tls-key", "", "PEM key of --kafka-tls-cert")
	f.StringVar(&cfg.Kafka.SASL.Mechanism, "kafka-sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&cfg.Kafka.SASL.Username, "kafka-sasl-username", "", "SASL user")
	f.StringVar(saslPasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password")
}

// readSASLPassword reads --kafka-sasl-password-file into cfg.
func readSASLPassword(cfg *satellite.Config, path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--kafka-sasl-password-file: %w", err)
	}
	cfg.Kafka.SASL.Password = strings.TrimSpace(string(b))
	return nil
}

// splitList trims the values of a list flag and drops empty ones.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
