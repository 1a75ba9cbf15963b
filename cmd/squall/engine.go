package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/squallhq/squall/engine"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/metricset"
	"github.com/squallhq/squall/internal/sighup"
	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/fleet/heartbeat"
)

func newEngineCommand() *cobra.Command {
	cfg := engine.Default()
	var masters, brokers []string
	var tokenFile, masterCAFile, saslPasswordFile string
	var fl fleetFlags
	var bt engineBacktestFlags
	var role roleOptions
	cmd := &cobra.Command{
		Use:   "engine --master URL[,URL...] --token-file F --kafka-brokers HOST:PORT[,...] [flags]",
		Short: "Run an engine: consume events from Kafka, evaluate the active tree, run the actions",
		Example: `  squall engine --master http://m1:8080,http://m2:8080,http://m3:8080 --token-file /etc/squall/engine.token --kafka-brokers kafka-1:9092
  squall engine --master http://127.0.0.1:8080 --token-file engine.token --kafka-brokers 127.0.0.1:9093 --http 127.0.0.1:8082 --data-dir engine-data`,
		Long: `Engine follows the active processing tree of the masters (--master, one or
more; it moves to the next when one fails) and, once a tree is deployed,
consumes the events of --topic in the consumer group --group: each event is
evaluated against the tree and the actions of the matching rules run through
the executors configured by --actions-config (without it: logger and foreach
only), which is reloaded when it changes and on SIGHUP. Events that cannot be decoded, or whose actions fail past their
retries, go to --dlq-topic with the reason in their headers. Offsets are committed once an event's actions ran: delivery is
at least once, and events seen again (same squall-event-id) are skipped.
Several engines share the partitions of the topic.

The token (--token-file) needs view on the root of the tree, and fleet_report
for the heartbeat: every --fleet-interval the engine tells the masters its id
(--name), --site, version, readiness and consumer lag, shown in their fleet
list (GET /squall/v1/fleet, the console's Fleet tab). The heartbeat runs on
its own: a master that fails is skipped, and failures only delay the next
heartbeat (logged once, then once a minute). /healthz, /readyz (ready once a
tree is installed and the group joined) and /metrics are served on --http.

The engine also runs the backtests the masters hand out (POST
/squall/v1/backtests; --backtest-max-running at once, one by default, 0:
none): it reads their range of --topic outside its consumer group (no
offset of the group moves), at most --backtest-rate events per second and
--backtest-cpu of one core, held while its consumer lag grew more than
--backtest-max-lag, reports the progress every second and posts the result
(docs/operations.md, "Backtest").

With --data-dir, the engine keeps the last tree it installed there
(tree.json, written atomically); started while no master answers, it runs
that tree until one does (/readyz warns meanwhile), and never a tree older
than the one it runs. Without it, an engine waits for a master to start.

Every flag can also be set with an environment variable: SQUALL_ and the flag
name in upper case with underscores, e.g. SQUALL_KAFKA_BROKERS. A flag given
on the command line wins; empty variables are ignored.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return role.preRun(cmd, "master", "token-file", "kafka-brokers")
		},
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			logger, tr, stopRole, err := role.start(cmd)
			if err != nil {
				return err
			}
			// The spans left are exported once the role stopped.
			defer func() { err = errors.Join(err, stopRole()) }()
			cfg.Logger = logger
			tuneGC(logger)
			cfg.MasterURLs = splitList(masters)
			cfg.Brokers = splitList(brokers)
			tok, err := readTokenFile("token-file", tokenFile)
			if err != nil {
				return err
			}
			cfg.Token = tok
			if masterCAFile != "" {
				if cfg.MasterClient, err = clientWithCA(masterCAFile); err != nil {
					return fmt.Errorf("--master-ca-file: %w", err)
				}
			}
			if err := readSASLPassword(&cfg.SASL, saslPasswordFile); err != nil {
				return err
			}
			switch {
			case cfg.RulesetMetrics < 0:
				return fmt.Errorf("--ruleset-metrics %d: want 0 or more", cfg.RulesetMetrics)
			case cfg.RulesetMetrics == 0:
				cfg.RulesetMetrics = -1 // every ruleset is "other"
			}
			reg := metricset.NewRegistry()
			cfg.Registerer = reg
			cfg.TracerProvider = tr.TracerProvider()
			id, err := fl.id()
			if err != nil {
				return err
			}
			cfg.Name = id // in its dead letters' squall-engine header
			s, err := engine.New(cfg)
			if err != nil {
				return err
			}
			reporter, err := fl.reporter(cfg.MasterURLs, cfg.Token, cfg.MasterClient, logger, reg,
				func() fleet.Report { return heartbeat.Engine(id, fl.site, versionString(), s) })
			if err != nil {
				return err
			}
			worker, err := bt.worker(cfg, id, s.ConsumerLag, logger)
			if err != nil {
				return err
			}
			// Run watches --actions-config; SIGHUP reloads it too.
			hangups := sighup.Reloader(logger, s.ReloadActions)
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			g, ctx := errgroup.WithContext(ctx)
			g.Go(func() error { defer stop(); return s.Run(ctx) })
			g.Go(func() error { return hangups(ctx) })
			g.Go(func() error { return runReporter(ctx, reporter) })
			g.Go(func() error { return runWorker(ctx, worker) })
			return g.Wait()
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&masters, "master", nil, "base URL of a master, http://host:port (repeatable or comma-separated; required)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the API token, with view and fleet_report on the root (required)")
	f.StringVar(&masterCAFile, "master-ca-file", "", "PEM CA of the masters' HTTPS certificates (default: the system's)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory of the engine's own (one per engine) where it keeps the last tree installed, to run when it starts while no master answers (default: none, an engine waits for a master)")
	f.StringSliceVar(&brokers, "kafka-brokers", nil, "Kafka bootstrap brokers, host:port (repeatable or comma-separated; required)")
	f.StringVar(&cfg.Topic, "topic", cfg.Topic, "Kafka topic of the events")
	f.StringVar(&cfg.DLQTopic, "dlq-topic", cfg.DLQTopic, "Kafka topic of the events that cannot be processed")
	f.StringVar(&cfg.Group, "group", cfg.Group, "Kafka consumer group the engines share")
	f.DurationVar(&cfg.Kafka.SessionTimeout, "kafka-session-timeout", kafkasource.DefaultSessionTimeout,
		"how long the group coordinator waits for an engine's heartbeat before it gives the engine's partitions to the others (within the brokers' group.min/max.session.timeout.ms)")
	f.DurationVar(&cfg.Kafka.HeartbeatInterval, "kafka-heartbeat-interval", kafkasource.DefaultHeartbeatInterval,
		"how often an engine tells the group coordinator it is alive; shorter than --kafka-session-timeout, usually a third of it")
	f.DurationVar(&cfg.Kafka.RebalanceTimeout, "kafka-rebalance-timeout", kafkasource.DefaultRebalanceTimeout,
		"how long the group coordinator waits for the engines to rejoin when the group changes (an engine starts or stops, a broker restarts); the events wait meanwhile")
	f.StringVar((*string)(&cfg.Kafka.StartOffset), "kafka-start-offset", string(kafkasource.StartEarliest),
		"where a consumer group that has committed nothing yet starts reading: earliest (every event the topic still holds runs through the actions) or latest (only events written after the engine joined); a group that has committed goes on from there")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "events processed in parallel (the events of one key stay in order)")
	f.IntVar(&cfg.QueueSize, "queue-size", cfg.QueueSize, "events waiting for each worker; shorter queues repeat fewer events after a crash, at some cost in throughput")
	f.IntVar(&cfg.RulesetMetrics, "ruleset-metrics", engine.DefaultRulesetMetrics,
		`rulesets, in tree order, with their own label in the per-ruleset metrics on /metrics; the others are summed as ruleset="other" (0: all of them)`)
	f.DurationVar(&cfg.CommitDelay, "commit-delay", cfg.CommitDelay, "commit the offsets this long after an event's actions complete (0: only every 100ms or 1000 events); shorter repeats fewer events after a crash")
	f.IntVar(&cfg.DedupeSize, "dedupe-size", cfg.DedupeSize, "event ids remembered to skip redelivered events (0: off)")
	f.DurationVar(&cfg.DedupeMaxAge, "dedupe-max-age", cfg.DedupeMaxAge, "how long an event id is remembered (0: until pushed out)")
	f.StringVar(&cfg.ActionsConfig, "actions-config", "", "executor configuration file (archive, script, http, kafka, finding, elasticsearch, retries); without it only logger and foreach run; reloaded when the file changes and on SIGHUP (a bad file is logged and the current settings stay)")
	f.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "listen address of /healthz, /readyz and /metrics")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long a stop waits for the events in progress")
	kafkaClientFlags(f, &cfg.TLS, &cfg.SASL, &saslPasswordFile)
	fl.define(f, true)
	bt.define(f)
	role.define(f, tracing.ServiceEngine)
	documentEnv(f)
	return cmd
}

// clientWithCA returns an HTTP client that trusts the CA certificates of a
// PEM file.
func clientWithCA(path string) (*http.Client, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in " + path)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: t}, nil
}
