package satellite

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"

	"github.com/squallhq/squall/satellite/clientaddr"
	"github.com/squallhq/squall/satellite/dedupe"
	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/satellite/kafkasink"
	"github.com/squallhq/squall/satellite/ratelimit"
	"github.com/squallhq/squall/satellite/spool"
	"github.com/squallhq/squall/satellite/watcher"
)

// Satellite is the webhook intake of a site: it watches a folder of webhook
// files, serves one endpoint per webhook, and forwards the events to Kafka,
// through a durable spool when Kafka is away. Build it with [New] and
// [Satellite.Run] it once.
type Satellite struct {
	cfg      Config
	logger   *slog.Logger
	gatherer prometheus.Gatherer

	watcher *watcher.Watcher
	sink    *kafkasink.Sink
	spool   *spool.Spool
	dedupe  *dedupe.Store
	fwd     *forwarder
	intake  *intake.Intake
	mux     *http.ServeMux
	m       *metrics

	ran     atomic.Bool
	serving atomic.Bool // between the start of the intake and the shutdown
	started chan struct{}
	addr    string
}

// New validates cfg and builds a Satellite whose metrics are registered with
// reg. When reg is also a prometheus.Gatherer (a *prometheus.Registry is),
// /metrics serves it; a nil reg registers nothing and /metrics serves an
// empty registry. A nil logger discards. New reads the Kafka TLS files but
// starts nothing and opens nothing else: [Satellite.Run] does.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Satellite, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("satellite config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Name == "" {
		name, err := os.Hostname()
		if err != nil || name == "" {
			name = "satellite"
		}
		cfg.Name = name
	}
	gatherer, _ := reg.(prometheus.Gatherer)
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	s := &Satellite{cfg: cfg, logger: logger, gatherer: gatherer, started: make(chan struct{})}

	var err error
	if s.watcher, err = watcher.New(cfg.Webhooks, logger, reg); err != nil {
		return nil, err
	}
	if s.sink, err = kafkasink.New(cfg.Kafka, logger, reg); err != nil {
		return nil, err
	}
	if s.spool, err = spool.New(cfg.Spool, logger, reg); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s.m = m
	s.fwd = newForwarder(forwarderConfig{
		ackTimeout:     cfg.AckTimeout,
		drainTimeout:   max(2*cfg.Kafka.WriteTimeout, cfg.AckTimeout),
		backoffMin:     cfg.RetryBackoffMin,
		backoffMax:     cfg.RetryBackoffMax,
		healthInterval: cfg.HealthInterval,
		topic:          cfg.Kafka.Topic,
	}, s.sink, s.spool, logger, m, cfg.TracerProvider)
	if s.dedupe, err = dedupe.New(dedupe.Config{Path: filepath.Join(cfg.Spool.Dir, dedupe.FileName), MaxEntries: cfg.DedupeMaxEntries}, logger, reg); err != nil {
		return nil, err
	}
	clients, err := clientaddr.New(cfg.TrustedProxies, cfg.TrustedProxyHeader)
	if err != nil {
		return nil, err
	}
	s.intake, err = intake.New(intake.Config{TenantID: cfg.TenantID, Source: cfg.Name, RetryAfter: cfg.RetryAfter,
		MaxCalls: cfg.MaxCalls, MaxPendingBytes: cfg.MaxPendingBytes,
		Clients: clients, Limits: ratelimit.New(cfg.RateLimitMaxClients), Dedupe: s.dedupe, TracerProvider: cfg.TracerProvider},
		s.watcher, s.fwd, logger, reg)
	if err != nil {
		return nil, err
	}

	s.mux = http.NewServeMux()
	s.intake.Register(s.mux)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": "NOT_FOUND", "params": map[string]any{}, "message": "no such endpoint"})
	})
	return s, nil
}

// Handler returns the satellite's HTTP routes: the webhook endpoint,
// /healthz, /readyz and /metrics. Before Run has loaded the webhooks, every
// webhook call is 404 and /readyz is 503.
func (s *Satellite) Handler() http.Handler { return s.mux }

// WebhookHandler returns only the webhook endpoint, for a server that has
// its own ops endpoints (the master's). Mount it on [intake.Pattern].
func (s *Satellite) WebhookHandler() http.Handler { return s.intake }

// Started returns a channel closed once Run has opened the spool, read the
// webhook folder and, with an HTTPAddr, started listening.
func (s *Satellite) Started() <-chan struct{} { return s.started }

// Addr returns the address the satellite listens on (after Started), or "".
func (s *Satellite) Addr() string {
	select {
	case <-s.started:
		return s.addr
	default:
		return ""
	}
}

// Run opens the spool, starts watching the webhook folder, sends the spool
// to Kafka, and serves HTTP (HTTPS with Config.TLS) on Config.HTTPAddr
// until ctx ends. Then it shuts down in order, within
// Config.ShutdownTimeout: it stops listening and answers the calls in
// progress (each one acknowledged by Kafka or spooled), stops sending the
// spool, flushes and closes the Kafka writer, and closes the spool. Events
// left in the spool are sent by the next Run. Run returns nil after a
// clean shutdown; it can be called once.
func (s *Satellite) Run(ctx context.Context) (err error) {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("satellite: Run called twice")
	}
	if err := s.spool.Open(ctx); err != nil {
		return fmt.Errorf("open spool: %w", err)
	}
	// The delivery ids live beside the spool; the spool's lock keeps a
	// second satellite away from both.
	if err := s.dedupe.Open(ctx, time.Now()); err != nil {
		return errors.Join(err, s.spool.Close())
	}
	s.fwd.resume()
	// The forwarder outlives ctx: it must take the events of the calls
	// still answered during the shutdown.
	fctx, stopForwarder := context.WithCancel(context.WithoutCancel(ctx))
	defer stopForwarder()
	var background sync.WaitGroup
	// The shutdown ends by this deadline, set when it starts: the drain of
	// the calls in progress and the flush to Kafka share
	// Config.ShutdownTimeout.
	var deadline time.Time
	defer func() {
		stopForwarder()
		background.Wait()
		if deadline.IsZero() { // stopped while starting
			deadline = time.Now().Add(s.cfg.ShutdownTimeout)
		}
		cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancel()
		err = errors.Join(err, s.closeSinks(cctx))
	}()

	wctx, stopWatcher := context.WithCancel(ctx)
	defer stopWatcher()
	watchErr := make(chan error, 1)
	background.Go(func() { watchErr <- s.watcher.Run(wctx) })
	select {
	case <-s.watcher.Loaded():
	case err := <-watchErr:
		return fmt.Errorf("webhooks: %w", err)
	case <-ctx.Done():
		return nil
	}
	background.Go(func() { s.fwd.run(fctx) })

	var srv *fasthttp.Server
	serveErr := make(chan error, 1)
	if s.cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		s.addr = ln.Addr().String()
		scfg := intake.ServerConfig{HeaderTimeout: s.cfg.ReadHeaderTimeout, BodyTimeout: s.cfg.ReadTimeout,
			IdleTimeout: s.cfg.IdleTimeout, MaxHeaderBytes: s.cfg.MaxHeaderBytes, MaxConns: s.cfg.MaxConnections,
			RetryAfter: s.cfg.RetryAfter, Refused: s.m.connsRefused, TLS: s.cfg.TLS, Logger: s.logger}
		srv = s.intake.NewServer(s.mux, scfg)
		ln = intake.Listener(ln, scfg)
		if srv.TLSConfig != nil {
			ln = tls.NewListener(ln, srv.TLSConfig)
		}
		background.Go(func() {
			// Serve returns nil once ShutdownWithContext closed the
			// listener.
			if err := srv.Serve(ln); err != nil {
				serveErr <- err
			}
		})
	}
	s.serving.Store(true)
	close(s.started)
	snap := s.watcher.Snapshot()
	attrs := []any{"name", s.cfg.Name}
	if s.addr != "" { // else mounted on another server (squall dev, a master)
		attrs = append(attrs, "http", s.addr, "tls", s.cfg.TLS != nil)
	}
	s.logger.Info("satellite started", append(attrs, "webhooks", len(snap.Webhooks),
		"kafka", s.cfg.Kafka.Brokers, "topic", s.cfg.Kafka.Topic, "spool", s.cfg.Spool.Dir)...)

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err)
	case err := <-watchErr:
		runErr = fmt.Errorf("webhooks: %w", err)
	}

	// Shutdown: stop taking calls, answer those in progress.
	s.serving.Store(false)
	s.logger.Info("satellite stopping")
	deadline = time.Now().Add(s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	if srv != nil {
		// The listener closes; idle connections close; the calls in
		// progress are answered (with Connection: close), then their
		// connections close.
		if err := srv.ShutdownWithContext(sctx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if err := s.intake.Drain(sctx); err != nil {
		runErr = errors.Join(runErr, err)
	}
	stopWatcher()
	return runErr
}

// closeSinks writes the delivery ids, flushes and closes Kafka (its produce
// requests still in flight when ctx ends are cancelled), then the spool.
func (s *Satellite) closeSinks(ctx context.Context) error {
	var errs []error
	if err := s.dedupe.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := s.sink.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.spool.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close spool: %w", err))
	}
	s.logger.Info("satellite stopped", "spooled_events", s.spool.Stats().Records)
	return errors.Join(errs...)
}

// Status is the satellite's state, the body of /readyz.
type Status struct {
	// Ready reports whether the satellite takes events: it runs, its
	// webhooks are loaded, and its spool has room for an event.
	Ready bool `json:"ready"`
	// Mode is "direct" (events go to Kafka) or "spooling".
	Mode string `json:"mode"`
	// Webhooks describes the webhook set served.
	Webhooks WebhooksStatus `json:"webhooks"`
	// Kafka is the broker health as last seen.
	Kafka Health `json:"kafka"`
	// Spool describes the local spool.
	Spool SpoolStatus `json:"spool"`
}

// WebhooksStatus describes the current webhook set.
type WebhooksStatus struct {
	// Loaded is the number of webhooks served.
	Loaded int `json:"loaded"`
	// SkippedFiles is the number of files left out (invalid, duplicate).
	SkippedFiles int `json:"skipped_files"`
	// Generation counts the sets loaded since the start.
	Generation uint64 `json:"generation"`
}

// SpoolStatus describes the spool.
type SpoolStatus struct {
	// Records is the number of events waiting for Kafka.
	Records int64 `json:"records"`
	// Bytes is their size on disk.
	Bytes int64 `json:"bytes"`
	// DiskBytes is the size of the spool's files.
	DiskBytes int64 `json:"disk_bytes"`
	// MaxBytes is the bound of DiskBytes.
	MaxBytes int64 `json:"max_bytes"`
	// Full reports that the spool has no room for one more large event.
	Full bool `json:"full"`
}

// Status returns the satellite's current state.
func (s *Satellite) Status() Status {
	st := Status{Mode: s.fwd.mode(), Kafka: s.fwd.Health()}
	if snap := s.watcher.Snapshot(); snap != nil {
		st.Webhooks = WebhooksStatus{Loaded: len(snap.Webhooks), SkippedFiles: len(snap.Problems), Generation: snap.Generation}
	}
	sp := s.spool.Stats()
	st.Spool = SpoolStatus{Records: sp.Records, Bytes: sp.Bytes, DiskBytes: sp.DiskBytes, MaxBytes: sp.MaxBytes,
		Full: sp.DiskBytes+s.cfg.Kafka.MaxMessageBytes > sp.MaxBytes}
	st.Ready = s.serving.Load() && st.Webhooks.Generation > 0 && !st.Spool.Full
	return st
}

func (s *Satellite) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Satellite) readyz(w http.ResponseWriter, _ *http.Request) {
	st := s.Status()
	code := http.StatusOK
	if !st.Ready {
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", fmt.Sprint(int(s.cfg.RetryAfter/time.Second)))
	}
	writeJSON(w, code, st)
}

// writeJSON writes v as a JSON answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
