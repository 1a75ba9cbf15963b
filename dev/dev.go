// Package dev runs squall dev: the whole system in one process, for
// development and a first look. Its data dir is seeded with an example
// (a webhook, a deployed tree, tokens) on the first start.
package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/squallhq/squall/engine"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/joinmute"
	"github.com/squallhq/squall/internal/metricset"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/backtests"
	"github.com/squallhq/squall/master/console"
	"github.com/squallhq/squall/master/deadletters"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/fleet/heartbeat"
	"github.com/squallhq/squall/master/node"
	"github.com/squallhq/squall/satellite"
	"github.com/squallhq/squall/satellite/intake"
)

// Defaults of squall dev.
const (
	// DefaultHTTPAddr is the listen address of every endpoint.
	DefaultHTTPAddr = "127.0.0.1:8080"
	// DefaultKafkaAddr is the dev broker's address: stable, so that a
	// satellite or engine attached to it finds it again after a restart,
	// and beside Kafka's usual 9092, so that a local Kafka does not clash.
	DefaultKafkaAddr = "127.0.0.1:9093"
	// PIDFile, in the data dir, holds the process id while dev runs.
	PIDFile = "squall.pid"
	// DefaultDataDir holds all the state.
	DefaultDataDir = "squall-data"
	// EnginePrefix is where the engine's own /healthz, /readyz and
	// /metrics are mounted; the process's /readyz includes its readiness.
	EnginePrefix = "/squall/v1/engine"
)

// Config is squall dev's settings.
type Config struct {
	// HTTPAddr is the listen address of every endpoint.
	HTTPAddr string
	// DataDir holds all the state.
	DataDir string
	// KafkaAddr is the listen address of the in-process broker.
	KafkaAddr string
	// Logger logs for every part.
	Logger *slog.Logger
	// Tracers are the parts' tracer providers, each with its service
	// name.
	Tracers struct{ Master, Satellite, Engine trace.TracerProvider }
	// Intake holds the intake's settings that dev takes from flags:
	// TrustedProxies, TrustedProxyHeader, MaxCalls and MaxPendingBytes.
	Intake satellite.Config
	// Fleet is the fleet list's.
	Fleet fleet.Config
	// Version is the version the fleet list shows.
	Version string
	// BacktestWorker builds the engine's worker of the backtests the
	// master hands out (nil: none), from the engine's config, its fleet
	// id and its consumer lag.
	BacktestWorker func(ecfg engine.Config, id string, lag func() (int64, bool), logger *slog.Logger) (*backtests.Worker, error)
}

// Run runs squall dev until ctx ends: a single-node master, the webhook
// intake, the engine and a Kafka-protocol broker in one process, their
// state under cfg.DataDir; it prints where everything is to stdout.
func Run(ctx context.Context, cfg Config, stdout io.Writer) (err error) {
	logger := cfg.Logger
	if _, _, err := net.SplitHostPort(cfg.HTTPAddr); err != nil {
		return fmt.Errorf("--http %q: want host:port", cfg.HTTPAddr)
	}
	if err := node.CheckFleet(cfg.Fleet); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(cfg.KafkaAddr); err != nil {
		return fmt.Errorf("--kafka-addr %q: want host:port", cfg.KafkaAddr)
	}
	d, err := prepareDir(cfg.DataDir)
	if err != nil {
		return err
	}
	logger.Warn("dev mode: unsigned tokens are accepted; anyone who reaches the address is an admin", "http", cfg.HTTPAddr)
	if d.tokenReplaced {
		logger.Warn("the example webhook's token example-token, the same everywhere, was replaced by a random one",
			"webhook", d.path(webhooksDir, WebhookID+".json"), "token_file", d.path(WebhookTokenFile))
	}

	// One registry serves the metrics of every component on /metrics.
	reg := metricset.NewRegistry()

	mcfg := master.Default()
	mcfg.NodeID = "dev"
	mcfg.DataDir = d.path("master")
	mcfg.HTTPAddr = cfg.HTTPAddr
	mcfg.RaftAddr = "127.0.0.1:0"
	mcfg.Bootstrap = true
	mcfg.JoinTokenFile = d.path(joinTokenFile)
	mcfg.TokenHMACKeyFile = d.path(keyFile)
	mcfg.AllowUnsignedTokens = true
	mcfg.Logger = logger
	mcfg.Version = cfg.Version
	mcfg.Registerer = reg
	mcfg.TracerProvider = cfg.Tracers.Master
	mcfg.WrapHandler = func(h http.Handler) http.Handler { return hostCheck(cfg.HTTPAddr, h) }
	srv, err := master.New(mcfg)
	if err != nil {
		return err
	}
	// Test events with process_type Full run the same executors as the
	// engine. Their metrics are left out: the engine's executors own the
	// squall_action_* names on the shared registry.
	testActions, err := node.NewActions(d.path(actionsFile), logger, nil)
	if err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}
	defer testActions.Close()
	apiCfg := api.Default()
	apiCfg.Hostname = "squall-dev"
	if err := node.MountAPIs(srv, apiCfg, findings.Default(), testActions, logger); err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}
	fl, err := node.MountConsole(srv, console.Options{Dev: true}, cfg.Fleet, reg, logger)
	if err != nil {
		return errors.Join(err, srv.Shutdown(ctx))
	}
	followBacktests, err := node.MountBacktests(srv, backtests.Default(), reg, logger)
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
	if err := errors.Join(mountComponents(srv, &sat, &eng), mountDeadLetters(srv, &deadLetters)); err != nil {
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
	if err := seedTree(ctx, srv.Store(), logger); err != nil {
		if ctx.Err() != nil { // stopped while starting
			return stopMaster()
		}
		return errors.Join(err, stopMaster())
	}

	broker, err := ListenBroker(cfg.KafkaAddr, d.path("kafka"), 1, []string{engine.DefaultTopic, engine.DefaultDLQTopic})
	if err != nil {
		return errors.Join(fmt.Errorf("%w (--kafka-addr; port 0 picks a free one)", err), stopMaster())
	}
	// The broker closes last: the intake and the engine flush into it.
	defer broker.Close()
	brokers := broker.ListenAddrs()

	dlCfg := deadletters.Default()
	dlCfg.Registerer = reg
	dl, closeDL, err := node.NewDeadLetterAPI(dlCfg, kafkasource.Dial{Brokers: brokers, ClientID: "squall-dev"}, srv.Verifier(), logger)
	if err != nil {
		return errors.Join(fmt.Errorf("dead-letter API: %w", err), stopMaster())
	}
	defer func() { err = errors.Join(err, closeDL()) }()
	deadLetters.Store(dl)

	scfg := satellite.Default()
	scfg.Name = "dev"
	scfg.HTTPAddr = ""
	scfg.Webhooks.Dir = d.path(webhooksDir)
	scfg.Kafka.Brokers = brokers
	scfg.Spool.Dir = d.path("spool")
	scfg.TracerProvider = cfg.Tracers.Satellite
	scfg.TrustedProxies, scfg.TrustedProxyHeader = cfg.Intake.TrustedProxies, cfg.Intake.TrustedProxyHeader
	scfg.MaxCalls, scfg.MaxPendingBytes = cfg.Intake.MaxCalls, cfg.Intake.MaxPendingBytes
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
	if ecfg.Actions, err = d.actionsConfig("http://" + srv.HTTPAddr()); err != nil {
		return errors.Join(fmt.Errorf("engine: %w", err), stopMaster())
	}
	ecfg.HTTPAddr = ""
	ecfg.Logger = logger
	ecfg.Registerer = reg
	ecfg.TracerProvider = cfg.Tracers.Engine
	e, err := engine.New(ecfg)
	if err != nil {
		return errors.Join(err, stopMaster())
	}
	eng.Store(e)
	// The engine runs the backtests asked of the master, as squall engine
	// does with its default flags.
	btWorker, err := cfg.BacktestWorker(ecfg, ecfg.Name, e.ConsumerLag, logger)
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
	g.Go(func() error {
		defer parts.Done()
		if btWorker == nil {
			<-gctx.Done()
			return nil
		}
		return btWorker.Run(gctx)
	})
	g.Go(func() error { return followBacktests(gctx) })
	g.Go(func() error { return reportFleet(gctx, fl, s, e, cfg.Version) })
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
	pidFile := d.path(PIDFile)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		logger.Warn("cannot write the pid file", "path", pidFile, "error", err.Error())
	}
	defer os.Remove(pidFile)
	logger.Info("squall dev started", "http_addr", addr, "data_dir", d.dir, "kafka", brokers[0], "first_start", d.firstStart)
	printBanner(stdout, addr, d, brokers[0])

	if err := g.Wait(); err != nil {
		return err
	}
	broker.Close()
	logger.Info("squall dev stopped")
	return nil
}

// mountComponents mounts, on the master, the webhook intake and the
// engine's ops endpoints (under EnginePrefix), and makes the master's
// /readyz wait for both. Until sat and eng are set, their routes answer
// 503 and /readyz says they are starting.
func mountComponents(srv *master.Server, sat *atomic.Pointer[satellite.Satellite], eng *atomic.Pointer[engine.Service]) error {
	webhooks := lateHandler("the webhook intake", func() http.Handler {
		if s := sat.Load(); s != nil {
			return s.WebhookHandler()
		}
		return nil
	})
	engineOps := http.StripPrefix(EnginePrefix, lateHandler("the engine", func() http.Handler {
		if e := eng.Load(); e != nil {
			return e.Handler()
		}
		return nil
	}))
	return errors.Join(
		srv.Mount(intake.Pattern, webhooks, master.OnAnyNode),
		srv.Mount("GET "+EnginePrefix+"/", engineOps, master.OnAnyNode),
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
				return fmt.Errorf("not ready (tree index %d, partitions %v); see %s/readyz", e.TreeIndex(), e.Assignment().Partitions, EnginePrefix)
			}
			return nil
		}),
	)
}

// mountDeadLetters mounts the dead-letter API's routes, which answer
// once api is set (the broker started).
func mountDeadLetters(srv *master.Server, api *atomic.Pointer[deadletters.API]) error {
	return node.MountDeadLetters(srv, lateHandler("the dead-letter API", func() http.Handler {
		if a := api.Load(); a != nil {
			return a.Handler()
		}
		return nil
	}))
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

// consoleLink is the console's address that signs in with token: the
// fragment never reaches the server, and the page moves it into the
// tab's session storage and clears it from the address bar.
func consoleLink(addr, token string) string {
	return "http://" + addr + console.Prefix + "#token=" + token
}

// heartbeatInterval is how often squall dev reports its engine and intake: in
// the process, a report costs a map write, so the list follows their
// state within a second.
const heartbeatInterval = time.Second

// reportFleet reports squall dev's engine and webhook intake to its own
// fleet list every heartbeatInterval until ctx ends, as a separate engine and
// satellite would over HTTP.
func reportFleet(ctx context.Context, f *fleet.Fleet, s *satellite.Satellite, e *engine.Service, version string) error {
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	for {
		now := time.Now()
		// The list of a process has room for its own two parts, which
		// it reports as the reporter "dev".
		_ = f.Report(heartbeat.Satellite("dev", "dev", version, s.Status()), "dev", now)
		_ = f.Report(heartbeat.Engine("dev", "dev", version, e), "dev", now)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ListenBroker starts a one-broker kfake cluster on addr with topics, kept
// in dataDir ("" keeps them in memory): squall broker's, and squall dev's.
func ListenBroker(addr, dataDir string, partitions int32, topics []string) (*kfake.Cluster, error) {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(partitions, topics...),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return joinmute.Listen(network, addr) }),
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	b, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka broker on %s: %w", addr, err)
	}
	return b, nil
}
