package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/squallhq/squall/engine"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/metricset"
	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/backtests"
	"github.com/squallhq/squall/master/console"
	"github.com/squallhq/squall/master/deadletters"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/satellite"
	"github.com/squallhq/squall/satellite/intake"
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

// Defaults of squall dev.
const (
	devDefaultHTTP = "127.0.0.1:8080"
	// devDefaultKafka is the dev broker's address: stable, so that a
	// satellite or engine attached to it finds it again after a restart,
	// and beside Kafka's usual 9092, so that a local Kafka does not clash.
	devDefaultKafka = "127.0.0.1:9093"
	// devPIDFile, in the data dir, holds the process id while dev runs.
	devPIDFile        = "squall.pid"
	devDefaultDataDir = "squall-data"
	// devEnginePrefix is where the engine's own /healthz, /readyz and
	// /metrics are mounted; the process's /readyz includes its readiness.
	devEnginePrefix = "/squall/v1/engine"
)

func newDevCommand() *cobra.Command {
	o := devOptions{httpAddr: devDefaultHTTP, dataDir: devDefaultDataDir, logLevel: "info", kafkaAddr: devDefaultKafka, intake: satellite.Default(), fleet: fleet.Default()}
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

// mountDevComponents mounts, on the master, the webhook intake and the
// engine's ops endpoints (under devEnginePrefix), and makes the master's
// /readyz wait for both. Until sat and eng are set, their routes answer
// 503 and /readyz says they are starting.
func mountDevComponents(srv *master.Server, sat *atomic.Pointer[satellite.Satellite], eng *atomic.Pointer[engine.Service]) error {
	webhooks := lateHandler("the webhook intake", func() http.Handler {
		if s := sat.Load(); s != nil {
			return s.WebhookHandler()
		}
		return nil
	})
	engineOps := http.StripPrefix(devEnginePrefix, lateHandler("the engine", func() http.Handler {
		if e := eng.Load(); e != nil {
			return e.Handler()
		}
		return nil
	}))
	return errors.Join(
		srv.Mount(intake.Pattern, webhooks, master.OnAnyNode),
		srv.Mount("GET "+devEnginePrefix+"/", engineOps, master.OnAnyNode),
		srv.AddReadyCheck("intake", func() error {
			s := sat.Load()
			if s == nil {
				return errors.New("starting")
			}
			if st := s.Status(); !st.Ready {
				return fmt.Errorf("not ready (mode %s, %d webhooks loaded, spool full: %t)", st.Mode, st.Webhooks.Loaded, st.Spool.Full)
			}
			return nil
		}),
		srv.AddReadyCheck("engine", func() error {
			e := eng.Load()
			if e == nil {
				return errors.New("starting")
			}
			if !e.Ready() {
				return fmt.Errorf("not ready (tree index %d, partitions %v); see %s/readyz", e.TreeIndex(), e.Assignment().Partitions, devEnginePrefix)
			}
			return nil
		}),
	)
}

// mountDevDeadLetters mounts the dead-letter API's routes, which answer
// once api is set (the broker started).
func mountDevDeadLetters(srv *master.Server, api *atomic.Pointer[deadletters.API]) error {
	h := lateHandler("the dead-letter API", func() http.Handler {
		if a := api.Load(); a != nil {
			return a.Handler()
		}
		return nil
	})
	var errs []error
	for _, r := range deadLetterRoutes {
		errs = append(errs, srv.Mount(r.pattern, h, r.placement))
	}
	return errors.Join(errs...)
}

// lateHandler serves the handler get returns, or answers 503 while get
// returns nil: the component named what is still starting.
func lateHandler(what string, get func() http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := get(); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, `{"code":"NOT_READY","params":{},"message":"%s is starting"}`+"\n", what)
	})
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
	if _, _, err := net.SplitHostPort(o.httpAddr); err != nil {
		return fmt.Errorf("--http %q: want host:port", o.httpAddr)
	}
	if err := checkFleetList(o.fleet); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(o.kafkaAddr); err != nil {
		return fmt.Errorf("--kafka-addr %q: want host:port", o.kafkaAddr)
	}
	d, err := prepareDevDir(o.dataDir)
	if err != nil {
		return err
	}
	logger.Warn("dev mode: unsigned tokens are accepted; anyone who reaches the address is an admin", "http", o.httpAddr)
	if d.tokenReplaced {
		logger.Warn("the example webhook's token example-token, the same everywhere, was replaced by a random one",
			"webhook", d.path(devWebhooksDir, devWebhookID+".json"), "token_file", d.path(devWebhookTokenFile))
	}

	// One registry serves the metrics of every component on /metrics.
	reg := metricset.NewRegistry()

	mcfg := master.Default()
	mcfg.NodeID = "dev"
	mcfg.DataDir = d.path("master")
	mcfg.HTTPAddr = o.httpAddr
	mcfg.RaftAddr = "127.0.0.1:0"
	mcfg.Bootstrap = true
	mcfg.JoinTokenFile = d.path(devJoinTokenFile)
	mcfg.TokenHMACKeyFile = d.path(devKeyFile)
	mcfg.AllowUnsignedTokens = true
	mcfg.Logger = logger
	mcfg.Version = versionString()
	mcfg.Registerer = reg
	mcfg.TracerProvider = tracers[0].TracerProvider()
	mcfg.WrapHandler = func(h http.Handler) http.Handler { return devHostCheck(o.httpAddr, h) }
	srv, err := master.New(mcfg)
	if err != nil {
		return err
	}
	// Test events with process_type Full run the same executors as the
	// engine. Their metrics are left out: the engine's executors own the
	// squall_action_* names on the shared registry.
	testActions, err := newActionReloader(d.path(devActionsFile), logger, nil)
	if err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}
	defer testActions.Close()
	apiCfg := api.Default()
	apiCfg.Hostname = "squall-dev"
	devAPI := api.New(apiCfg, srv.Store(), srv.Verifier(), testActions, logger)
	if err := srv.Mount(api.Prefix, devAPI.Handler(), master.OnLeader, master.RequestIDs(api.StateWrite)); err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}
	if err := mountVersions(srv, devAPI); err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}
	if err := mountAudit(srv, devAPI); err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}
	fa := findings.New(findings.Default(), srv.Store(), srv.Verifier(), logger)
	if err := srv.Mount(findings.Prefix, fa.Handler(), master.OnLeaderWrite, master.IdempotentMethods(http.MethodPut), master.RequestIDs()); err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}
	fl, err := mountConsole(srv, console.Options{Dev: true}, o.fleet, reg, logger)
	if err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}
	followBacktests, err := mountBacktests(srv, backtests.Default(), reg, logger)
	if err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}

	// The intake and the engine need the broker, which starts once the
	// master holds the data dir (its files are locked: a second squall dev
	// on the same dir stops there), and the engine needs the master's
	// address: their routes are mounted now and answer once they exist.
	var sat atomic.Pointer[satellite.Satellite]
	var eng atomic.Pointer[engine.Service]
	var deadLetters atomic.Pointer[deadletters.API]
	if err := errors.Join(mountDevComponents(srv, &sat, &eng), mountDevDeadLetters(srv, &deadLetters)); err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}

	if err := srv.Start(ctx); err != nil {
		err = fmt.Errorf("%w (is another squall dev running on %s?)", err, d.dir)
		return errors.Join(err, srv.Shutdown(ctx))
	}
	stopMaster := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcfg.ShutdownTimeout)
		defer cancel()
		return srv.Shutdown(sctx)
	}
	if err := d.writeTokens(); err != nil {
		return errors.Join(err, stopMaster())
	}
	if err := seedDevTree(ctx, srv.Store(), logger); err != nil {
		if ctx.Err() != nil { // stopped while starting
			return stopMaster()
		}
		return errors.Join(err, stopMaster())
	}

	broker, err := listenBroker(o.kafkaAddr, d.path("kafka"), 1, []string{engine.DefaultTopic, engine.DefaultDLQTopic})
	if err != nil {
		return errors.Join(fmt.Errorf("%w (--kafka-addr; port 0 picks a free one)", err), stopMaster())
	}
	// The broker closes last: the intake and the engine flush into it.
	defer broker.Close()
	brokers := broker.ListenAddrs()

	dlCfg := deadletters.Default()
	dlCfg.Registerer = reg
	dl, closeDL, err := newDeadLetterAPI(dlCfg, kafkasource.Dial{Brokers: brokers, ClientID: "squall-dev"}, srv.Verifier(), logger)
	if err != nil {
		return errors.Join(fmt.Errorf("dead-letter API: %w", err), stopMaster())
	}
	defer func() { err = errors.Join(err, closeDL()) }()
	deadLetters.Store(dl)

	scfg := satellite.Default()
	scfg.Name = "dev"
	scfg.HTTPAddr = ""
	scfg.Webhooks.Dir = d.path(devWebhooksDir)
	scfg.Kafka.Brokers = brokers
	scfg.Spool.Dir = d.path("spool")
	scfg.TracerProvider = tracers[1].TracerProvider()
	scfg.TrustedProxies, scfg.TrustedProxyHeader = o.intake.TrustedProxies, o.intake.TrustedProxyHeader
	scfg.MaxCalls, scfg.MaxPendingBytes = o.intake.MaxCalls, o.intake.MaxPendingBytes
	s, err := satellite.New(scfg, logger.With("role", "intake"), reg)
	if err != nil {
		return errors.Join(fmt.Errorf("webhook intake: %w", err), stopMaster())
	}
	sat.Store(s)

	ecfg := engine.Default()
	ecfg.Name = "dev" // its id in the fleet list and its dead letters
	ecfg.MasterURLs = []string{"http://" + srv.HTTPAddr()}
	ecfg.Token = d.engineToken
	ecfg.Brokers = brokers
	ecfg.DataDir = d.path("engine")
	if ecfg.Actions, err = d.devActions("http://" + srv.HTTPAddr()); err != nil {
		return errors.Join(fmt.Errorf("engine: %w", err), stopMaster())
	}
	ecfg.HTTPAddr = ""
	ecfg.Logger = logger
	ecfg.Registerer = reg
	ecfg.TracerProvider = tracers[2].TracerProvider()
	e, err := engine.New(ecfg)
	if err != nil {
		return errors.Join(err, stopMaster())
	}
	eng.Store(e)
	// The engine runs the backtests asked of the master, as squall engine
	// does with its default flags.
	btFlags := engineBacktestFlags{maxRunning: 1, cpu: defaultBacktestCPU, maxLag: defaultBacktestMaxLag}
	btWorker, err := btFlags.worker(ecfg, ecfg.Name, e.ConsumerLag, logger)
	if err != nil {
		return errors.Join(err, stopMaster())
	}

	// Shutdown order: the intake stops taking calls, answers those in
	// progress and flushes them to Kafka while the engine drains the
	// events it holds, whose actions may post findings to the master; the
	// master stops once both have returned, and the broker last.
	pctx, stopParts := context.WithCancel(ctx)
	defer stopParts()
	g, gctx := errgroup.WithContext(pctx)
	var parts sync.WaitGroup
	parts.Add(3)
	g.Go(func() error { defer parts.Done(); return s.Run(gctx) })
	g.Go(func() error { defer parts.Done(); return e.Run(gctx) })
	g.Go(func() error { defer parts.Done(); return runWorker(gctx, btWorker) })
	g.Go(func() error { return followBacktests(gctx) })
	g.Go(func() error { return reportDevFleet(gctx, fl, s, e) })
	g.Go(func() error {
		var runErr error
		select {
		case <-gctx.Done():
		case runErr = <-srv.Err():
			stopParts()
		}
		parts.Wait()
		return errors.Join(runErr, stopMaster())
	})

	addr := srv.HTTPAddr()
	// The pid file lets a script (or a go run in the background, which
	// does not pass SIGTERM on) stop this process: kill $(cat …/squall.pid).
	pidFile := d.path(devPIDFile)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		logger.Warn("cannot write the pid file", "path", pidFile, "error", err.Error())
	}
	defer os.Remove(pidFile)
	logger.Info("squall dev started", "http_addr", addr, "data_dir", d.dir, "kafka", brokers[0], "first_start", d.firstStart)
	printDevBanner(stdout, addr, d, brokers[0])

	if err := g.Wait(); err != nil {
		return err
	}
	broker.Close()
	logger.Info("squall dev stopped")
	return nil
}
