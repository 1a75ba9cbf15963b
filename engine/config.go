package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/baseurl"
	"github.com/squallhq/squall/internal/fielderr"
)

// Defaults of [Config].
const (
	DefaultHTTPAddr        = ":8082"
	DefaultTopic           = "squall.events"
	DefaultDLQTopic        = "squall.events.dlq"
	DefaultGroup           = "squall-engine"
	DefaultWatchWait       = 30 * time.Second
	DefaultWatchBackoffMin = 200 * time.Millisecond
	DefaultWatchBackoffMax = 10 * time.Second
	DefaultQueueSize       = 256
	DefaultDedupeSize      = 100_000
	DefaultDedupeMaxAge    = 10 * time.Minute
	DefaultCommitInterval  = 100 * time.Millisecond
	DefaultCommitDelay     = 5 * time.Millisecond
	DefaultCommitBatch     = 1000
	DefaultCommitTimeout   = 10 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultNotReadyLogInterval is how often a not-ready engine logs why.
	DefaultNotReadyLogInterval = 10 * time.Second
	// MaxWorkers bounds Config.Workers.
	MaxWorkers = 1024
)

// Config configures a [Service]. Start from [Default] and set the fields
// without a default: MasterURLs, Token and Brokers.
type Config struct {
	// MasterURLs are the base URLs (http://host:port) of the masters whose
	// tree watch the engine follows. It uses one at a time and moves to the
	// next when it fails. Required.
	MasterURLs []string
	// Token is the bearer token sent to the masters: it needs view on the
	// root. Required.
	Token string
	// Name is the engine's id (its id in the masters' fleet list),
	// written in the squall-engine header of its dead letters; empty
	// writes none.
	Name string
	// WatchWait is the wait of each blocking query (default 30s).
	WatchWait time.Duration
	// WatchBackoffMin and WatchBackoffMax bound the wait between failed
	// watch requests once every master failed (defaults 200ms and 10s);
	// the wait doubles with each failure, with jitter.
	WatchBackoffMin time.Duration
	WatchBackoffMax time.Duration
	// NotReadyLogInterval is how often the engine logs why it is not
	// ready, while it is not (default 10s).
	NotReadyLogInterval time.Duration
	// MasterClient sends the watch requests (for TLS to the masters). Nil
	// uses a client of its own.
	MasterClient *http.Client
	// DataDir, when set, is a directory of the engine's own: it keeps the
	// last tree installed from a master there (tree.json, written
	// atomically), and an engine that starts while no master answers its
	// first request runs that tree until one does. Empty keeps nothing.
	DataDir string

	// Brokers are the Kafka bootstrap brokers, host:port. Required.
	Brokers []string
	// Topic is the topic of the events (default "squall.events").
	Topic string
	// DLQTopic receives the events that cannot be processed (default
	// "squall.events.dlq").
	DLQTopic string
	// Group is the consumer group the engines share (default
	// "squall-engine").
	Group string
	// TLS and SASL configure the connections to the brokers.
	TLS  kafkasource.TLSConfig
	SASL kafkasource.SASLConfig
	// Kafka tunes the consumer; zero fields take kafkasource's defaults.
	Kafka KafkaTuning

	// Workers is the number of events processed in parallel; the events of
	// one key always go to the same worker, in order (default 2×GOMAXPROCS,
	// at most MaxWorkers).
	Workers int
	// QueueSize is the number of events waiting for each worker (default
	// 256). Fetching pauses while the worker of the next event is full.
	QueueSize int
	// RulesetMetrics is the label budget of the per-ruleset metrics: how
	// many rulesets, in tree order, have their own ruleset label; the rest
	// are summed as ruleset="other" (0: DefaultRulesetMetrics; negative:
	// none, every ruleset is "other").
	RulesetMetrics int
	// DedupeSize bounds the event ids remembered to recognise redelivered
	// events (default 100,000); 0 disables deduplication.
	DedupeSize int
	// DedupeMaxAge forgets ids older than this (default 10m); 0 keeps
	// them until DedupeSize pushes them out.
	DedupeMaxAge time.Duration
	// CommitInterval is how often processed offsets are committed
	// (default 100ms).
	CommitInterval time.Duration
	// CommitDelay commits sooner: this long after an event finished
	// (default 5ms), with the events that finished meanwhile; 0 leaves
	// the commits to CommitInterval and CommitBatch. The shorter it is,
	// the fewer finished events an engine that dies leaves uncommitted,
	// to run again elsewhere, and the more commits the group coordinator
	// takes: one at a time, so at most one per CommitDelay and commit
	// round trip (under 200/s) while events keep finishing.
	CommitDelay time.Duration
	// CommitBatch commits sooner, once this many events were processed
	// since the last commit (default 1000).
	CommitBatch int
	// CommitTimeout bounds one commit (default 10s).
	CommitTimeout time.Duration
	// ShutdownTimeout bounds the wait for events in progress when Run's
	// context ends (default 30s); actions still running then are canceled
	// and their events are left uncommitted, for redelivery.
	ShutdownTimeout time.Duration

	// ActionsConfig is the executor configuration file ([action.Load]);
	// empty means [action.Default]: logger and foreach only. Run reloads
	// it when it changes, and [Service.ReloadActions] on demand; a bad
	// file keeps the current executors ([action.Reloader]).
	ActionsConfig string
	// Actions, when set, is the executor configuration, instead of
	// ActionsConfig's file (and never reloaded). It must pass
	// [action.Config.Validate].
	Actions *action.Config
	// Executors adds or replaces executors by action id
	// ([action.Deps.Executors]). They are the caller's: they stay across
	// reloads of the actions settings and the engine never closes them.
	Executors map[string]action.Executor
	// HTTPClient sends the http actions; nil uses the executor's own.
	HTTPClient *http.Client

	// HTTPAddr serves /healthz, /readyz and /metrics (default ":8082");
	// port 0 picks a free port ([Service.Addr]). Empty serves nothing: mount
	// [Service.Handler] elsewhere.
	HTTPAddr string

	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// TracerProvider records a consumer span per event, the child of its
	// traceparent header, with spans for the tree's evaluation and each
	// action (http, elasticsearch and finding pass the trace on to their
	// targets); nil records none (tracing off).
	TracerProvider trace.TracerProvider
	// Registerer receives the metrics (the engine's and the actions') and
	// Gatherer serves them on /metrics. When both are nil the service makes
	// its own registry with the Go and process collectors; a Registerer
	// that is a *prometheus.Registry is also used as the Gatherer.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// KafkaTuning tunes the consumer; see [kafkasource.SourceConfig].
type KafkaTuning struct {
	ClientID          string
	DialTimeout       time.Duration
	MaxWait           time.Duration
	MaxBytes          int
	QueueCapacity     int
	HeartbeatInterval time.Duration
	SessionTimeout    time.Duration
	RebalanceTimeout  time.Duration
	// StartOffset is where a group with no committed offset starts
	// (default earliest); see [kafkasource.StartOffset].
	StartOffset kafkasource.StartOffset
}

// Default returns the default configuration.
func Default() Config {
	return Config{
		WatchWait:           DefaultWatchWait,
		NotReadyLogInterval: DefaultNotReadyLogInterval,
		WatchBackoffMin:     DefaultWatchBackoffMin,
		WatchBackoffMax:     DefaultWatchBackoffMax,
		Topic:               DefaultTopic,
		DLQTopic:            DefaultDLQTopic,
		Group:               DefaultGroup,
		Workers:             min(2*runtime.GOMAXPROCS(0), MaxWorkers),
		QueueSize:           DefaultQueueSize,
		DedupeSize:          DefaultDedupeSize,
		DedupeMaxAge:        DefaultDedupeMaxAge,
		CommitInterval:      DefaultCommitInterval,
		CommitDelay:         DefaultCommitDelay,
		CommitBatch:         DefaultCommitBatch,
		CommitTimeout:       DefaultCommitTimeout,
		ShutdownTimeout:     DefaultShutdownTimeout,
		HTTPAddr:            DefaultHTTPAddr,
	}
}

// ConfigError reports an invalid field of a [Config] (see [fielderr.Error]).
type ConfigError = fielderr.Error

// Validate checks c without touching files or the network. Every problem
// is reported, joined with [errors.Join], each a [*ConfigError].
func (c Config) Validate() error {
	var problems fielderr.List
	add, positive := problems.Add, problems.Positive
	if len(c.MasterURLs) == 0 {
		add("master_urls", errors.New("at least one master URL is required"))
	}
	for _, u := range c.MasterURLs {
		if _, err := masterURL(u); err != nil {
			add("master_urls", fmt.Errorf("%q: %w", u, err))
		}
	}
	if c.Token == "" {
		add("token", errors.New("required (a token with view on the root)"))
	}
	positive("watch_wait", c.WatchWait)
	positive("watch_backoff_min", c.WatchBackoffMin)
	positive("not_ready_log_interval", c.NotReadyLogInterval)
	if c.WatchBackoffMax < c.WatchBackoffMin {
		add("watch_backoff_max", fmt.Errorf("%s is less than watch_backoff_min %s", c.WatchBackoffMax, c.WatchBackoffMin))
	}
	if c.DLQTopic != "" && c.DLQTopic == c.Topic {
		add("dlq_topic", errors.New("must differ from the topic"))
	}
	if c.DLQTopic == "" {
		add("dlq_topic", errors.New("required"))
	}
	add("kafka", c.sourceConfig(nil).Validate())
	add("kafka", c.dlqConfig().Validate())
	if c.Workers < 1 || c.Workers > MaxWorkers {
		add("workers", fmt.Errorf("%d is not between 1 and %d", c.Workers, MaxWorkers))
	}
	if c.QueueSize < 1 {
		add("queue_size", fmt.Errorf("%d is less than 1", c.QueueSize))
	}
	if c.DedupeSize < 0 {
		add("dedupe_size", fmt.Errorf("%d is negative", c.DedupeSize))
	}
	if c.DedupeMaxAge < 0 {
		add("dedupe_max_age", fmt.Errorf("%s is negative", c.DedupeMaxAge))
	}
	positive("commit_interval", c.CommitInterval)
	if c.CommitDelay < 0 {
		add("commit_delay", fmt.Errorf("%s is negative", c.CommitDelay))
	}
	if c.CommitBatch < 1 {
		add("commit_batch", fmt.Errorf("%d is less than 1", c.CommitBatch))
	}
	positive("commit_timeout", c.CommitTimeout)
	positive("shutdown_timeout", c.ShutdownTimeout)
	if c.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			add("http_addr", fmt.Errorf("%q: want host:port", c.HTTPAddr))
		}
	}
	return problems.Err()
}

// masterURL checks and normalises a master's base URL: http or https, a
// host, no query; a bare host:port means http.
func masterURL(s string) (string, error) {
	u, err := baseurl.Parse(s)
	if err != nil {
		return "", err
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("a base URL has no query or fragment")
	}
	return u.String(), nil
}

func (c Config) dial() kafkasource.Dial {
	return kafkasource.Dial{
		Brokers:  c.Brokers,
		ClientID: c.Kafka.ClientID,
		TLS:      c.TLS,
		SASL:     c.SASL,
		Timeout:  c.Kafka.DialTimeout,
	}
}

// sourceConfig is the consumer's configuration.
func (c Config) sourceConfig(log *slog.Logger) kafkasource.SourceConfig {
	return kafkasource.SourceConfig{
		Dial:              c.dial(),
		Topic:             c.Topic,
		Group:             c.Group,
		MaxWait:           c.Kafka.MaxWait,
		MaxBytes:          c.Kafka.MaxBytes,
		QueueCapacity:     c.Kafka.QueueCapacity,
		HeartbeatInterval: c.Kafka.HeartbeatInterval,
		SessionTimeout:    c.Kafka.SessionTimeout,
		RebalanceTimeout:  c.Kafka.RebalanceTimeout,
		StartOffset:       c.Kafka.StartOffset,
		Logger:            log,
	}
}

// dlqConfig is the dead-letter writer's configuration.
func (c Config) dlqConfig() kafkasource.WriterConfig {
	return kafkasource.WriterConfig{Dial: c.dial(), Topic: c.DLQTopic}
}
