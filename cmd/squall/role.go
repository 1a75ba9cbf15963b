package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/internal/kafkaclient"
	"github.com/squallhq/squall/internal/tracing"
)

// roleOptions are the flags every long-running role (squall master,
// satellite, engine) has: its log level, CPU profile and tracing.
type roleOptions struct {
	logLevel   string
	cpuProfile string
	tracing    tracingOptions
}

// define defines the flags, with service as the default tracing service
// name.
func (o *roleOptions) define(f *pflag.FlagSet, service string) {
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	tracingFlags(f, &o.tracing, service)
	cpuProfileFlag(f, &o.cpuProfile)
}

// preRun reads the environment into the flags not given, checks that the
// required flags are set (by flag or variable, not empty) and completes
// the tracing settings.
func (o *roleOptions) preRun(cmd *cobra.Command, required ...string) error {
	if err := bindEnv(cmd, os.LookupEnv); err != nil {
		return err
	}
	if err := requireFlags(cmd, required...); err != nil {
		return err
	}
	return o.tracing.complete(cmd.Flags(), os.LookupEnv)
}

// requireFlags returns an error naming the first flag of names that was
// not set, and its environment variable.
func requireFlags(cmd *cobra.Command, names ...string) error {
	for _, name := range names {
		if f := cmd.Flags().Lookup(name); !f.Changed || f.Value.String() == "" {
			return fmt.Errorf("--%s (or %s) is required", name, envName(name))
		}
	}
	return nil
}

// start starts what the role runs under: its logger, its CPU profile and
// its tracing. stop, called once the role stopped, exports the spans left
// and then ends the profile.
func (o *roleOptions) start(cmd *cobra.Command) (logger *slog.Logger, tr *tracing.Tracing, stop func() error, err error) {
	logger, err = newLogger(cmd.ErrOrStderr(), o.logLevel)
	if err != nil {
		return nil, nil, nil, err
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return nil, nil, nil, err
	}
	tr, err = o.tracing.start(cmd.Context(), "", logger)
	if err != nil {
		return nil, nil, nil, errors.Join(err, stopProfile())
	}
	stop = func() error { return errors.Join(stopTracing(cmd.Context(), tr), stopProfile()) }
	return logger, tr, stop, nil
}

// kafkaClientFlags defines the flags of TLS and SASL to the brokers
// (squall engine, satellite, master and bench).
func kafkaClientFlags(f *pflag.FlagSet, t *kafkaclient.TLS, s *kafkaclient.SASL, saslPasswordFile *string) {
	f.BoolVar(&t.Enable, "kafka-tls", false, "connect to Kafka with TLS")
	f.StringVar(&t.CAFile, "kafka-tls-ca", "", "PEM CA of the brokers (default: the system's)")
	f.StringVar(&t.CertFile, "kafka-tls-cert", "", "PEM client certificate for mutual TLS")
	f.StringVar(&t.KeyFile, "kafka-tls-key", "", "PEM key of --kafka-tls-cert")
	f.StringVar(&s.Mechanism, "kafka-sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&s.Username, "kafka-sasl-username", "", "SASL user")
	f.StringVar(saslPasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password")
}

// readSASLPassword sets s's password from the file at path, if any.
func readSASLPassword(s *kafkaclient.SASL, path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--kafka-sasl-password-file: %w", err)
	}
	s.Password = strings.TrimSpace(string(b))
	return nil
}
