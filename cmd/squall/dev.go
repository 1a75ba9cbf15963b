package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/dev"
	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/satellite"
)

// devOptions are the settings of squall dev.
type devOptions struct {
	httpAddr  string
	dataDir   string
	logLevel  string
	kafkaAddr string
	// trace configures tracing; each part exports under its own service
	// name (squall-master, squall-satellite, squall-engine).
	trace tracingOptions
	// intake holds the intake's settings that dev takes from flags:
	// TrustedProxies, TrustedProxyHeader, MaxCalls and MaxPendingBytes.
	intake satellite.Config
	fleet  fleet.Config
}

func newDevCommand() *cobra.Command {
	o := devOptions{httpAddr: dev.DefaultHTTPAddr, dataDir: dev.DefaultDataDir, logLevel: "info", kafkaAddr: dev.DefaultKafkaAddr, intake: satellite.Default(), fleet: fleet.Default()}
	cmd := &cobra.Command{
		Use:   "dev [--http ADDR] [--data-dir DIR]",
		Short: "Run the whole system in one process, for development and a first look",
		Example: `  squall dev
  squall dev --http 127.0.0.1:0 --data-dir /tmp/squall-trial --kafka-addr 127.0.0.1:0`,
		Long: `Dev runs, on one address (--http, default 127.0.0.1:8080): a single-node
master (configuration, test-event and findings APIs), the webhook intake, the
engine, and an in-process Kafka-protocol broker. Everything lives under
--data-dir (default ./squall-data): the replicated state, the broker's topics,
the intake's spool, the webhook files (webhooks/, watched), the executors'
settings (actions.json), the archive (archive/) and the engine's cached tree
(engine/).

The first start seeds an example: a webhook (webhooks/disk_alerts.json), a
deployed tree that filters tenant master and archives disk alerts with the
usage extracted from their message, an HS256 key (token.key) and an admin
token (admin.token). Later starts keep whatever you changed. It prints the
URLs, the admin token and three curl commands to try. Rules may use the
finding action: unless actions.json configures it, it inserts into this
process's findings API as tenant master (token in finding.token).

The example webhook's token is random per data dir, in webhook.token.

Dev mode also accepts unsigned tokens (squall token --unsigned): never expose
its address. It answers only requests whose Host header names its --http
address, localhost or a loopback IP (421 otherwise), so that a web page cannot
reach it through DNS rebinding. Ctrl-C stops it cleanly; a restart keeps
everything.

Every flag can also be set with an environment variable: SQUALL_ and the flag
name in upper case with underscores, e.g. SQUALL_DATA_DIR. A flag given on the
command line wins; empty variables are ignored.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, os.LookupEnv); err != nil {
				return err
			}
			return o.trace.complete(cmd.Flags(), os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.httpAddr, "http", o.httpAddr, "listen address of every endpoint (port 0 picks a free port, logged at start)")
	f.StringVar(&o.dataDir, "data-dir", o.dataDir, "directory of all the state; delete it to start over")
	f.StringVar(&o.kafkaAddr, "kafka-addr", o.kafkaAddr, "listen address of the in-process Kafka broker, for satellites and engines attached to squall dev (port 0 picks a free port)")
	fleetListFlags(f, &o.fleet)
	f.StringVar(&o.logLevel, "log-level", o.logLevel, "log level: debug, info, warn or error")
	tracingFlags(f, &o.trace, "")
	trustedProxyFlags(f, &o.intake)
	intakeBoundFlags(f, &o.intake)
	documentEnv(f)
	return cmd
}

// runDev runs squall dev until ctx ends.
func runDev(ctx context.Context, o devOptions, stdout, stderr io.Writer) (err error) {
	logger, err := newLogger(stderr, o.logLevel)
	if err != nil {
		return err
	}
	// One tracer provider per part, each with its service name.
	var tracers []*tracing.Tracing
	defer func() { err = errors.Join(err, stopTracing(ctx, tracers...)) }()
	for _, service := range []string{tracing.ServiceMaster, tracing.ServiceSatellite, tracing.ServiceEngine} {
		tr, err := o.trace.start(ctx, service, logger)
		if err != nil {
			return err
		}
		tracers = append(tracers, tr)
	}
	// squall engine's default backtest flags.
	bt := engineBacktestFlags{maxRunning: 1, cpu: defaultBacktestCPU, maxLag: defaultBacktestMaxLag}
	cfg := dev.Config{HTTPAddr: o.httpAddr, DataDir: o.dataDir, KafkaAddr: o.kafkaAddr, Logger: logger,
		Intake: o.intake, Fleet: o.fleet, Version: versionString(), BacktestWorker: bt.worker}
	cfg.Tracers.Master = tracers[0].TracerProvider()
	cfg.Tracers.Satellite = tracers[1].TracerProvider()
	cfg.Tracers.Engine = tracers[2].TracerProvider()
	return dev.Run(ctx, cfg, stdout)
}
