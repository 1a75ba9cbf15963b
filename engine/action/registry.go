package action

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/tracing"
)

// Executor runs one kind of action. Execute must not modify the action's
// payload (it may share values with the event and the tree) and must be safe
// for concurrent use. Its error says, through [NewRetriable] or
// [NewPermanent], whether running the action again may succeed.
type Executor interface {
	Execute(ctx context.Context, a tree.Action) error
}

// ExecutorFunc adapts a function to [Executor].
type ExecutorFunc func(ctx context.Context, a tree.Action) error

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, a tree.Action) error { return f(ctx, a) }

var _ Executor = ExecutorFunc(nil)

// The ids of the built-in executors.
const (
	IDLogger  = "logger"
	IDArchive = "archive"
	IDScript  = "script"
	IDHTTP    = "http"
	IDForeach = "foreach"

	IDKafka         = "kafka"
	IDFinding       = "finding"
	IDElasticsearch = "elasticsearch"
)

// Deps are the collaborators of a [Registry]. Every field is optional.
type Deps struct {
	// Logger receives the logger action's output and the executors' logs.
	// Nil discards them.
	Logger *slog.Logger
	// Registerer registers the squall_action_* metrics. Nil registers
	// nothing.
	Registerer prometheus.Registerer
	// HTTPClient sends the http actions. Nil uses a client with its own
	// transport. Its CheckRedirect is replaced: redirects are never followed.
	HTTPClient *http.Client
	// Producer sends the kafka actions. Without it the kafka executor is
	// not registered, even when configured (the master, which runs actions
	// of test events, has no Kafka writer).
	Producer Producer
	// Executors adds executors by action id (fakes in tests, or executors
	// of other kinds). An id of a built-in executor replaces it; a nil
	// Executor removes it.
	Executors map[string]Executor
	// TracerProvider records a span per action run (a client span for
	// http, elasticsearch and finding, which send its traceparent to
	// their targets). Nil records none.
	TracerProvider trace.TracerProvider
}

// Registry maps action ids to executors and runs actions with retries. It
// is built once from a [Config]; it is safe for concurrent use.
type Registry struct {
	log     *slog.Logger
	tracer  trace.Tracer // nil: tracing off
	retry   RetryConfig
	entries map[string]*entry
	// disabled maps the ids of built-in executors left disabled by the
	// configuration to how to enable them.
	disabled map[string]string
	closers  []io.Closer
	metrics  *metrics
	// ownMetrics tells whether Close unregisters the metrics: not when a
	// [Reloader] shares them between its registries.
	ownMetrics bool
	closed     atomic.Bool
}

// entry is one registered executor with its metric series.
type entry struct {
	ex Executor
	m  actionMetrics
}

// NewRegistry validates cfg and builds the registry: logger and foreach
// always, http when cfg.HTTP names its allowed hosts (or allows any host,
// which logs a warning), archive when cfg.Archive.BasePath is set, script when
// cfg.Script.AllowedDir is set, kafka when a topic is configured and
// deps.Producer is set, finding when cfg.Finding.MasterURLs is set,
// elasticsearch when an endpoint is configured, then deps.Executors. It
// starts no goroutine and reads only the secret files (finding token,
// elasticsearch password, API key and CA file): the archive directory is
// created, and the elasticsearch batchers started, on first use.
func NewRegistry(cfg Config, deps Deps) (*Registry, error) {
	return newRegistry(cfg, deps, nil)
}

// newRegistry builds the registry; with m nil it registers its own metrics
// (unregistered by Close), else it counts into m, which it leaves
// registered, and it does not close the executors of deps.Executors, which
// the registries of a [Reloader] share.
func newRegistry(cfg Config, deps Deps, m *metrics) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("action config: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With(logKeyComponent, "action")
	r := &Registry{log: log, retry: cfg.Retry, tracer: tracing.Tracer(deps.TracerProvider, "engine/action")}

	executors := map[string]Executor{
		IDLogger:  &loggerExecutor{log: log},
		IDForeach: &foreachExecutor{run: r.Run, log: log, maxDepth: cfg.Foreach.MaxDepth},
	}
	if cfg.HTTP.Enabled() {
		h := newHTTPExecutor(cfg.HTTP, deps.HTTPClient)
		h.tracing = r.tracer != nil
		executors[IDHTTP] = h
		if cfg.HTTP.AllowAnyHost {
			log.Warn("http.allow_any_host is set: http actions may reach any host, internal services included; list the hosts in http.allowed_hosts instead")
		}
	}
	if cfg.Archive.BasePath != "" {
		a, err := newArchiveExecutor(cfg.Archive, log)
		if err != nil {
			return nil, err
		}
		executors[IDArchive] = a
	}
	if cfg.Script.AllowedDir != "" {
		executors[IDScript] = newScriptExecutor(cfg.Script, log)
	}
	if (cfg.Kafka.DefaultTopic != "" || len(cfg.Kafka.AllowedTopics) > 0) && deps.Producer != nil {
		executors[IDKafka] = &kafkaExecutor{p: deps.Producer, def: cfg.Kafka.DefaultTopic, allowed: cfg.Kafka.AllowedTopics}
	}
	if len(cfg.Finding.MasterURLs) > 0 {
		f, err := newFindingExecutor(cfg.Finding, deps.HTTPClient)
		if err != nil {
			return nil, err
		}
		f.tracing = r.tracer != nil
		executors[IDFinding] = f
	}
	if cfg.Elasticsearch.DefaultEndpoint != "" || len(cfg.Elasticsearch.AllowedEndpoints) > 0 {
		e, err := newElasticsearchExecutor(cfg.Elasticsearch, deps.HTTPClient)
		if err != nil {
			return nil, err
		}
		e.tracer = r.tracer
		executors[IDElasticsearch] = e
	}
	for id, ex := range deps.Executors {
		if id == "" {
			return nil, errors.New("action registry: empty executor id")
		}
		if ex == nil {
			delete(executors, id)
			continue
		}
		executors[id] = ex
	}

	r.disabled = make(map[string]string)
	// The built-in executors that the configuration may leave disabled.
	for _, id := range []string{IDHTTP, IDArchive, IDScript, IDKafka, IDFinding, IDElasticsearch} {
		if _, ok := executors[id]; !ok {
			r.disabled[id] = enableHint(id)
		}
	}
	if _, ok := executors[IDKafka]; !ok && (cfg.Kafka.DefaultTopic != "" || len(cfg.Kafka.AllowedTopics) > 0) {
		r.disabled[IDKafka] = "this process has no Kafka writer: kafka actions run on engines only"
	}

	if m == nil {
		var err error
		if m, err = newMetrics(deps.Registerer); err != nil {
			return nil, err
		}
		r.ownMetrics = true
	}
	r.metrics = m
	if a, ok := executors[IDArchive].(*archiveExecutor); ok {
		a.repeats = m.archiveRepeats
	}
	r.entries = make(map[string]*entry, len(executors))
	for id, ex := range executors {
		r.entries[id] = &entry{ex: ex, m: m.forAction(id)}
		if _, shared := deps.Executors[id]; shared && !r.ownMetrics {
			continue
		}
		if c, ok := ex.(io.Closer); ok {
			r.closers = append(r.closers, c)
		}
	}
	return r, nil
}

// enableHint says how the actions settings file enables the built-in
// executor id.
func enableHint(id string) string {
	const file = " in the actions settings file (--actions-config)"
	switch id {
	case IDHTTP:
		return `set http.allowed_hosts (or "allow_any_host": true)` + file
	case IDArchive:
		return "set archive.base_path and archive.default_path" + file
	case IDScript:
		return "set script.allowed_dir" + file
	case IDKafka:
		return "set kafka.default_topic or kafka.allowed_topics in the engine's actions settings file (--actions-config); kafka actions run on engines only"
	case IDFinding:
		return "set finding.master_urls and finding.token_file" + file
	case IDElasticsearch:
		return "set elasticsearch.default_endpoint or elasticsearch.allowed_endpoints" + file
	}
	return ""
}

// IDs returns the action ids the registry handles, sorted.
func (r *Registry) IDs() []string {
	ids := make([]string, 0, len(r.entries))
	for id := range r.entries {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Run executes the action with the executor registered for its id. A
// retriable failure is retried after an exponential backoff with jitter, up
// to retry.max_attempts executions in all; a permanent failure is returned at
// once. The error wraps the executor's last error (so [Retriable] still tells
// what it was), [ErrNoExecutor] for an unknown id ([ErrNotEnabled], which
// says how to enable it, for a built-in executor left disabled), or the context's error
// when ctx ended while waiting to retry.
func (r *Registry) Run(ctx context.Context, a tree.Action) error {
	if r.tracer == nil {
		return r.run(ctx, a)
	}
	ctx, span := r.tracer.Start(ctx, "action "+a.ID, trace.WithSpanKind(spanKind(a.ID)))
	defer span.End()
	if !span.IsRecording() {
		return r.run(ctx, a)
	}
	span.SetAttributes(attribute.String(attrAction, a.ID))
	err := r.run(ctx, a)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "action failed")
		span.SetAttributes(attribute.Bool(attrRetriable, Retriable(err)))
	}
	return err
}

// run is Run without its span.
func (r *Registry) run(ctx context.Context, a tree.Action) error {
	if r.closed.Load() {
		return NewPermanent(fmt.Errorf("action %s: %w", a.ID, ErrClosed))
	}
	e, ok := r.entries[a.ID]
	if !ok {
		r.metrics.unknown.Inc()
		if hint, ok := r.disabled[a.ID]; ok {
			return NewPermanent(fmt.Errorf("action %q: %w: %s", a.ID, ErrNotEnabled, hint))
		}
		return NewPermanent(fmt.Errorf("action %q: %w", a.ID, ErrNoExecutor))
	}
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := e.ex.Execute(ctx, a)
		e.m.duration.Observe(time.Since(start).Seconds())
		switch {
		case err == nil:
			e.m.executed.Inc()
			return nil
		case !Retriable(err):
			e.m.permanent.Inc()
			return fmt.Errorf("action %s: %w", a.ID, err)
		case attempt >= r.retry.MaxAttempts:
			e.m.exhausted.Inc()
			return fmt.Errorf("action %s: attempt %d of %d: %w", a.ID, attempt, r.retry.MaxAttempts, err)
		case ctx.Err() != nil:
			e.m.canceled.Inc()
			return fmt.Errorf("action %s: %w after attempt %d: %w", a.ID, context.Cause(ctx), attempt, err)
		}
		delay := r.backoff(attempt)
		if r.tracer != nil {
			trace.SpanFromContext(ctx).AddEvent("retry", trace.WithAttributes(
				attribute.Int(attrAttempt, attempt), attribute.String(attrError, err.Error())))
		}
		r.log.LogAttrs(ctx, slog.LevelWarn, "action failed, retrying",
			slog.String(logKeyAction, a.ID), slog.Int(logKeyAttempt, attempt),
			slog.Duration(logKeyDelay, delay), slog.String(logKeyError, err.Error()))
		e.m.retried.Inc()
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			e.m.canceled.Inc()
			return fmt.Errorf("action %s: %w after attempt %d: %w", a.ID, context.Cause(ctx), attempt, err)
		case <-t.C:
		}
	}
}

// backoff returns the delay after the given failed attempt (1 for the
// first): min(max_delay, base_delay·2^(attempt-1)), minus up to jitter of it.
func (r *Registry) backoff(attempt int) time.Duration {
	d, limit := time.Duration(r.retry.BaseDelay), time.Duration(r.retry.MaxDelay)
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	if r.retry.Jitter > 0 {
		d -= time.Duration(rand.Float64() * r.retry.Jitter * float64(d))
	}
	return d
}

// Close releases the executors' resources (open archive files, idle HTTP
// connections), flushes the documents the elasticsearch executor buffers
// (waiting for their results) and unregisters the metrics. Actions still running finish;
// later calls to Run fail with [ErrClosed].
func (r *Registry) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, c := range r.closers {
		errs = append(errs, c.Close())
	}
	if r.ownMetrics {
		r.metrics.Unregister()
	}
	return errors.Join(errs...)
}

// Log attribute keys.
const (
	logKeyComponent = "component"
	logKeyAction    = "action"
	logKeyPayload   = "payload"
	logKeyAttempt   = "attempt"
	logKeyDelay     = "delay"
	logKeyError     = "error"
	logKeyPath      = "path"
	logKeyScript    = "script"
	logKeyExitCode  = "exit_code"
	logKeyDuration  = "duration"
	logKeyStdout    = "stdout"
	logKeyStderr    = "stderr"
	logKeyIndex     = "index"
	logKeyReason    = "reason"
	logKeyKey       = "idempotency_key"
	logKeyEventID   = "event_id"
	logKeyPosition  = "position"
)
