package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/internal/metricset"
	"github.com/squallhq/squall/internal/panics"
	"github.com/squallhq/squall/internal/tracing"
)

// Log attribute keys.
const (
	logKeyComponent = "component"
	logKeyTreeIndex = "tree_index"
	logKeyMaster    = "master"
	logKeyAttempt   = "attempt"
	logKeyError     = "error"
	logKeyPartition = "partition"
	logKeyOffset    = "offset"
	logKeyEventID   = "event_id"
	logKeyReason    = "reason"
	logKeyActions   = "actions"
	logKeyStage     = "stage"
	logKeyPositions = "positions"
	logKeyAddr      = "addr"
)

// Service is the engine: it follows the masters' active tree, consumes the
// events from Kafka, evaluates each against the tree and runs the actions of
// the rules that match. Build it with [New], run it with [Service.Run].
type Service struct {
	cfg    Config
	base   *slog.Logger // Config.Logger, for the components
	log    *slog.Logger
	tracer trace.Tracer // nil: tracing off
	// processSpan names the events' spans: "process <topic>".
	processSpan string
	m           *metrics
	// rulesetMetrics serves the per-ruleset counters (treestats.go).
	rulesetMetrics *metricset.Set
	gatherer       prometheus.Gatherer
	actions        *action.Reloader
	dlq            *kafkasource.Writer
	watcher        *watcher
	tracker        *offsetTracker
	dedupe         *dedupeWindow
	mux            *http.ServeMux
	// masterClient is closed (idle connections) when Run ends, if ours.
	masterClient *http.Client

	current atomic.Pointer[treeVersion]
	// instance names this run of the engine in its tree stats: counts
	// are cumulative per instance and tree (treestats.go).
	instance string
	// cache keeps the last tree installed from a master (nil: no
	// Config.DataDir); fromCache is set while the current tree is one
	// the cache gave at start, not yet confirmed by a master.
	cache     *treeCache
	fromCache atomic.Pointer[cacheOrigin]
	// refused is the latest tree refused, until a later one is installed.
	refused   atomic.Pointer[refusal]
	treeReady chan struct{} // closed when the first tree is installed
	treeOnce  sync.Once

	assignment atomic.Pointer[kafkasource.Assignment]
	source     atomic.Pointer[kafkasource.Source] // once consuming
	draining   atomic.Bool
	ran        atomic.Bool
	started    chan struct{} // closed once Run listens
	addr       atomic.Pointer[string]
	closeOnce  sync.Once
	closeErr   error
}

// New validates cfg, reads the actions configuration file and builds a
// Service. It starts no goroutine and opens no connection: Run does.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	if cfg.Actions != nil {
		if err := cfg.Actions.Validate(); err != nil {
			return nil, fmt.Errorf("engine: actions config: %w", err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	urls := make([]string, len(cfg.MasterURLs))
	for i, u := range cfg.MasterURLs {
		urls[i], _ = masterURL(u)
	}

	reg, gath, err := metricset.Resolve(cfg.Registerer, cfg.Gatherer)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		// Every worker may post to the same host: keep a connection each
		// (the default transport keeps 2 per host and reconnects).
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = cfg.Workers
		httpClient = &http.Client{Transport: t}
	}
	// The dead-letter writer (acks=all) also sends the kafka actions,
	// each to its own topic.
	dlq, err := kafkasource.NewWriter(cfg.dlqConfig())
	if err != nil {
		m.Unregister()
		return nil, fmt.Errorf("engine: %w", err)
	}
	rcfg := action.ReloaderConfig{File: cfg.ActionsConfig, Settings: cfg.Actions}
	if cfg.Actions != nil {
		rcfg.File = "" // Actions wins over the file
	}
	actions, err := action.NewReloader(rcfg, action.Deps{
		Logger:     log,
		Registerer: reg,
		HTTPClient: httpClient,
		Producer:   kafkaProducer{dlq},
		Executors:  cfg.Executors,
		// Spans of the actions.
		TracerProvider: cfg.TracerProvider,
	})
	if err != nil {
		m.Unregister()
		_ = dlq.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}

	s := &Service{
		cfg:         cfg,
		base:        log,
		log:         log.With(logKeyComponent, "engine"),
		tracer:      tracing.Tracer(cfg.TracerProvider, "engine"),
		processSpan: "process " + cfg.Topic,
		m:           m,
		gatherer:    gath,
		actions:     actions,
		dlq:         dlq,
		tracker:     newOffsetTracker(),
		dedupe:      newDedupeWindow(cfg.DedupeSize, cfg.DedupeMaxAge),
		treeReady:   make(chan struct{}),
		started:     make(chan struct{}),
		instance:    newInstanceID(),
	}
	client := cfg.MasterClient
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
		}}
		s.masterClient = client
	}
	s.watcher = &watcher{
		urls:       urls,
		token:      cfg.Token,
		client:     client,
		wait:       cfg.WatchWait,
		backoffMin: cfg.WatchBackoffMin,
		backoffMax: cfg.WatchBackoffMax,
		log:        log.With(logKeyComponent, "treewatch"),
		m:          m,
		install:    s.install,
		refused:    s.refuse,
	}
	if cfg.DataDir != "" {
		s.cache = &treeCache{dir: cfg.DataDir}
		s.watcher.saved = s.saveTree
		s.watcher.fallback = s.installCached
		s.watcher.confirmed = s.confirmTree
	}
	budget := cfg.RulesetMetrics
	if budget == 0 {
		budget = DefaultRulesetMetrics
	}
	if s.rulesetMetrics, err = metricset.Register(reg, newRulesetCollector(max(budget, 0), s.TreeStats)); err != nil {
		m.Unregister()
		_ = actions.Close()
		_ = dlq.Close()
		return nil, fmt.Errorf("engine: register ruleset metrics: %w", err)
	}
	s.mux = s.routes()
	return s, nil
}

// install swaps a new tree in.
func (s *Service) install(tv treeVersion) {
	tv.counters = make([]*tree.Counters, s.cfg.Workers)
	for i := range tv.counters {
		tv.counters[i] = tv.tree.NewCounters()
	}
	tv.loaded = time.Now()
	s.fromCache.Store(tv.origin) // before the tree can make the engine ready
	old := s.current.Swap(&tv)
	if r := s.refused.Load(); r != nil && r.index < tv.index {
		s.refused.CompareAndSwap(r, nil)
	}
	s.m.treeIndex.Set(float64(tv.index))
	s.m.treeUpdates.Inc()
	attrs := []any{slog.Uint64(logKeyTreeIndex, tv.index)}
	if old != nil {
		attrs = append(attrs, slog.Uint64("previous_index", old.index))
	}
	s.log.Info("tree installed", attrs...)
	s.treeOnce.Do(func() { close(s.treeReady) })
	s.updateReady()
}

// cacheOrigin is the cached tree the engine runs.
type cacheOrigin struct {
	index   uint64
	savedAt time.Time
}

// saveTree keeps a tree installed from a master in the cache.
func (s *Service) saveTree(index uint64, raw json.RawMessage) {
	if err := s.cache.save(index, raw, time.Now()); err != nil {
		s.log.Warn("tree not cached: an engine restarted while no master answers will not run it",
			slog.Uint64(logKeyTreeIndex, index), slog.String(logKeyError, err.Error()))
	}
}

// installCached installs the cached tree, when no master answered the
// engine's first request, and returns its index (0: none installed). A
// corrupt cache file, or a tree that does not compile, is logged and
// ignored.
func (s *Service) installCached() uint64 {
	ct, err := s.cache.load()
	if errors.Is(err, errNoCachedTree) {
		s.log.Info("no master answers and no tree is cached: waiting for a master", slog.String("data_dir", s.cfg.DataDir))
		return 0
	}
	if err != nil {
		s.log.Error("cached tree ignored", slog.String(logKeyError, err.Error()))
		return 0
	}
	t, err := compileAnswer(ct.Tree)
	if err != nil {
		s.log.Error("cached tree ignored: it does not compile", slog.Uint64(logKeyTreeIndex, ct.Index),
			slog.String(logKeyError, err.Error()))
		return 0
	}
	s.log.Warn("no master answers: running the cached tree until one does",
		slog.Uint64(logKeyTreeIndex, ct.Index), slog.Time("saved_at", ct.SavedAt))
	s.install(treeVersion{tree: t, index: ct.Index, origin: &cacheOrigin{index: ct.Index, savedAt: ct.SavedAt}})
	return ct.Index
}

// confirmTree records that a master answered with the index of the tree
// in use: a cached tree is the masters' again.
func (s *Service) confirmTree(index uint64) {
	if o := s.fromCache.Load(); o != nil && o.index == index && s.fromCache.CompareAndSwap(o, nil) {
		s.log.Info("a master answers with the cached tree's index: it is the active tree", slog.Uint64(logKeyTreeIndex, index))
	}
}

// refusal is a tree the engine refused.
type refusal struct {
	index uint64
	err   error
}

// refuse records, counts and logs (once: the watcher reports each index
// once) a tree that does not compile; the current one stays, and /readyz
// and the fleet report say so until a later tree is installed.
func (s *Service) refuse(index uint64, err error) {
	s.m.compileFails.Inc()
	s.refused.Store(&refusal{index: index, err: err})
	attrs := []any{slog.Uint64(logKeyTreeIndex, index), slog.String(logKeyError, err.Error())}
	if cur := s.current.Load(); cur != nil {
		attrs = append(attrs, slog.Uint64("kept_index", cur.index))
	}
	if pe, ok := errors.AsType[*panics.Error](err); ok {
		s.m.panics.WithLabelValues(panicCompile).Inc()
		attrs = append(attrs, slog.String("stack", string(pe.Stack)))
	}
	s.log.Error("tree refused: it does not compile; the current tree stays", attrs...)
}

// TreeIndex returns the index of the tree events are evaluated against, 0 before
// the first.
func (s *Service) TreeIndex() uint64 {
	if tv := s.current.Load(); tv != nil {
		return tv.index
	}
	return 0
}

// Assignment returns the engine's share of the consumer group: its
// partitions in the current generation.
func (s *Service) Assignment() kafkasource.Assignment {
	if a := s.assignment.Load(); a != nil {
		return *a
	}
	return kafkasource.Assignment{}
}

// onAssignment follows the consumer group's generations.
func (s *Service) onAssignment(a kafkasource.Assignment) {
	s.tracker.assign(a.Joined, a.Partitions)
	if old := s.assignment.Swap(&a); old != nil {
		// Another member reports the lag of the partitions this one lost.
		for _, p := range old.Partitions {
			if !slices.Contains(a.Partitions, p) {
				s.m.lag.DeleteLabelValues(strconv.Itoa(p))
			}
		}
	}
	s.m.partitions.Set(float64(len(a.Partitions)))
	s.updateReady()
}

// Ready reports whether the engine processes events: it has a tree, has
// joined the consumer group, and is not shutting down.
func (s *Service) Ready() bool {
	a := s.assignment.Load()
	return s.current.Load() != nil && a != nil && a.Joined && !s.draining.Load()
}

func (s *Service) updateReady() {
	v := 0.0
	if s.Ready() {
		v = 1
	}
	s.m.ready.Set(v)
}

// Started is closed once Run listens on Config.HTTPAddr (at once when it
// is empty).
func (s *Service) Started() <-chan struct{} { return s.started }

// Addr returns the address the ops endpoints listen on, once Started.
func (s *Service) Addr() string {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// Run runs the engine until ctx ends: it serves the ops endpoints, follows
// the masters' tree and, once it has a tree, consumes and processes events.
// When ctx ends it stops fetching, waits up to Config.ShutdownTimeout for
// the events in progress, commits their offsets, leaves the consumer group
// and closes its writers. It returns nil after a clean stop. Run may be
// called once; it releases what New built when it returns.
func (s *Service) Run(ctx context.Context) error {
	if s.ran.Swap(true) {
		return errors.New("engine: Run called twice")
	}
	defer s.Close()

	var srv *http.Server
	var srvDone chan struct{}
	if s.cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("engine: listen: %w", err)
		}
		addr := ln.Addr().String()
		s.addr.Store(&addr)
		// Header, body and idle deadlines (the ops endpoints read no
		// body, so a body deadline costs them nothing).
		srv = httpguard.Timeouts{}.Server(httpguard.Recover(s.mux, s.log, s.m.panics.WithLabelValues(panicHTTP)))
		srv.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
		srvDone = make(chan struct{})
		go func() {
			defer close(srvDone)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("ops server stopped", slog.String(logKeyError, err.Error()))
			}
		}()
		s.log.Info("ops endpoints listening", slog.String(logKeyAddr, addr))
	}
	close(s.started)

	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	watchers.Go(func() { s.watcher.run(watchCtx) })
	watchers.Go(func() { s.logNotReady(watchCtx, s.cfg.NotReadyLogInterval) })
	watchers.Go(func() {
		if err := s.actions.Watch(watchCtx); err != nil {
			s.log.Error("the actions settings file is not watched: reload it with SIGHUP", slog.String(logKeyError, err.Error()))
		}
	})

	err := s.consume(ctx)

	stopWatch()
	watchers.Wait()
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if serr := srv.Shutdown(sctx); serr != nil {
			_ = srv.Close()
		}
		cancel()
		<-srvDone
	}
	if cerr := s.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// ReloadActions reads the actions settings file (Config.ActionsConfig)
// again and, if it is valid, runs the next actions with the executors it
// configures; the actions in progress finish with the previous ones. On
// error the current executors stay. Run also reloads the file when it
// changes. Without a file it does nothing.
func (s *Service) ReloadActions(ctx context.Context) error {
	return s.actions.Reload(ctx)
}

// Close releases what New built: the dead-letter writer, the executors
// and the metrics. Run calls it; call it only for a Service never run.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.draining.Store(true)
		s.updateReady()
		errs := []error{s.actions.Close(), s.dlq.Close()}
		if s.masterClient != nil {
			s.masterClient.CloseIdleConnections()
		}
		s.m.Unregister()
		s.rulesetMetrics.Unregister()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// kafkaProducer sends the kafka actions through a Kafka writer.
type kafkaProducer struct{ w *kafkasource.Writer }

// Produce writes one record to topic and waits for its acknowledgement.
func (p kafkaProducer) Produce(ctx context.Context, topic string, key, value []byte, headers []action.Header) error {
	var hs []kafkasource.Header
	if len(headers) > 0 {
		hs = make([]kafkasource.Header, len(headers))
		for i, h := range headers {
			hs[i] = kafkasource.Header{Key: h.Key, Value: h.Value}
		}
	}
	return p.w.Write(ctx, kafkasource.Record{Topic: topic, Key: key, Value: value, Headers: hs})
}
