package deadletters

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/metricset"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/internal/apierror"
)

// Prefix is the path of the routes.
const Prefix = "/squall/v1/deadletters"

// Defaults of [Config].
const (
	DefaultTopic          = "squall.events.dlq"
	DefaultEventsTopic    = "squall.events"
	DefaultMaxReplays     = 5
	DefaultPageSize       = 50
	MaxPageSize           = 500
	DefaultScanLimit      = 10_000
	DefaultScanBytes      = 64 << 20
	DefaultTimeout        = 10 * time.Second
	DefaultReplayRate     = 50
	DefaultReplayBurst    = 50
	DefaultMaxReplayBatch = 500
)

// Config configures an [API].
type Config struct {
	// Topic is the dead-letter topic (the engines' --dlq-topic).
	Topic string
	// EventsTopic receives the replays (the engines' --topic).
	EventsTopic string
	// MaxReplays is how many times one event may be replayed: a dead
	// letter whose squall-replay-count reached it stays dead.
	MaxReplays int
	// ScanLimit and ScanBytes bound the records and bytes one request
	// reads; Timeout bounds its time.
	ScanLimit int
	ScanBytes int
	Timeout   time.Duration
	// ReplayRate (replays per second) and ReplayBurst pace the replays
	// of the node.
	ReplayRate  float64
	ReplayBurst int
	// MaxReplayBatch bounds the dead letters of one replay request.
	MaxReplayBatch int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Registerer receives squall_master_deadletter_replays_total; nil
	// registers nothing.
	Registerer prometheus.Registerer
}

// Default returns the default configuration.
func Default() Config {
	return Config{
		Topic:          DefaultTopic,
		EventsTopic:    DefaultEventsTopic,
		MaxReplays:     DefaultMaxReplays,
		ScanLimit:      DefaultScanLimit,
		ScanBytes:      DefaultScanBytes,
		Timeout:        DefaultTimeout,
		ReplayRate:     DefaultReplayRate,
		ReplayBurst:    DefaultReplayBurst,
		MaxReplayBatch: DefaultMaxReplayBatch,
	}
}

// Validate checks c.
func (c Config) Validate() error {
	var errs []error
	if c.Topic == "" || c.EventsTopic == "" {
		errs = append(errs, errors.New("deadletters: the dead-letter topic and the events topic are required"))
	}
	if c.Topic == c.EventsTopic {
		errs = append(errs, fmt.Errorf("deadletters: the dead-letter topic %q is the events topic", c.Topic))
	}
	if c.MaxReplays < 1 {
		errs = append(errs, fmt.Errorf("deadletters: max replays %d is less than 1", c.MaxReplays))
	}
	if c.ScanLimit < 1 || c.ScanBytes < 1 || c.Timeout <= 0 || c.MaxReplayBatch < 1 {
		errs = append(errs, errors.New("deadletters: the scan limit, scan bytes, timeout and replay batch must be positive"))
	}
	if c.ReplayRate <= 0 || c.ReplayBurst < 1 {
		errs = append(errs, errors.New("deadletters: the replay rate and burst must be positive"))
	}
	return errors.Join(errs...)
}

// Log reads the dead-letter topic ([kafkasource.Reader]).
type Log interface {
	Partitions(ctx context.Context, topic string) ([]kafkasource.PartitionRange, error)
	OffsetAt(ctx context.Context, topic string, part int, t time.Time) (int64, error)
	Read(ctx context.Context, topic string, part int, from, end int64, maxBytes int, fn func(*kafkasource.Message) bool) (int64, error)
}

// Producer writes the replays and their markers ([kafkasource.Writer]).
type Producer interface {
	Write(ctx context.Context, recs ...kafkasource.Record) error
}

// Tokens verifies the requests' tokens ([auth.Verifier]).
type Tokens interface {
	Verify(header string) (*auth.Claims, error)
}

var (
	_ Log      = (*kafkasource.Reader)(nil)
	_ Producer = (*kafkasource.Writer)(nil)
	_ Tokens   = (*auth.Verifier)(nil)
)

// API serves the dead-letter routes.
type API struct {
	cfg    Config
	log    Log
	prod   Producer
	tokens Tokens
	logger *slog.Logger
	limit  *rate.Limiter
	// replays counts the dead letters of replay requests by outcome.
	replays *prometheus.CounterVec

	replayMu sync.Mutex // one replay request at a time
}

// New builds the API. It starts nothing.
func New(cfg Config, log Log, prod Producer, tokens Tokens, logger *slog.Logger) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	replays := metricset.CounterVec("squall_master_deadletter_replays_total",
		"Dead letters of replay requests on this node, by status: replayed, already_replayed, refused (replayed too often, or past the scan limit), not_found or failed.", "status")
	if _, err := metricset.Register(cfg.Registerer, replays); err != nil {
		return nil, fmt.Errorf("deadletters: %w", err)
	}
	return &API{cfg: cfg, log: log, prod: prod, tokens: tokens, logger: logger.With("component", "deadletters"),
		limit: rate.NewLimiter(rate.Limit(cfg.ReplayRate), cfg.ReplayBurst), replays: replays}, nil
}

// Handler returns the routes' handler.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix, a.wrap(auth.DeadLettersRead, a.serveList))
	mux.HandleFunc("GET "+Prefix+"/{topic}/{partition}/{offset}", a.wrap(auth.DeadLettersRead, a.serveShow))
	mux.HandleFunc("POST "+Prefix+"/replay", a.wrap(auth.DeadLettersReplay, a.serveReplay))
	// In JSON, as every answer: 404, or 405 with Allow.
	return apierror.WithNoRoute(mux, func(w http.ResponseWriter, _ *http.Request, e *apierror.Error) { apierror.Write(w, e) })
}

// handler is a route: it returns its answer or an error.
type handler func(ctx context.Context, r *http.Request, claims *auth.Claims) (any, error)

// wrap authenticates the request (the token first), bounds its time, and
// writes the answer or the error as JSON.
func (a *API) wrap(p auth.Permission, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, err := a.tokens.Verify(r.Header.Get("Authorization"))
		if err == nil {
			err = claims.OnRoot(p)
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Timeout)
		defer cancel()
		v, err := h(ctx, r, claims)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		apierror.WriteJSON(w, http.StatusOK, v)
	}
}

// fail answers err.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := apierror.Common(err)
	if e == nil {
		e = apierror.Errorf(http.StatusBadGateway, "KAFKA_UNAVAILABLE", "%s", err)
	}
	if e.Status >= 500 {
		a.logger.WarnContext(r.Context(), "request failed", "path", r.URL.Path, "status", e.Status, "error", e.Message)
	}
	pub, _ := e.Public()
	apierror.Write(w, pub)
}

func badRequest(format string, args ...any) error {
	return apierror.Errorf(http.StatusBadRequest, "BAD_REQUEST", format, args...)
}

func notFound(id string, format string, args ...any) error {
	e := apierror.Errorf(http.StatusNotFound, "DEAD_LETTER_NOT_FOUND", format, args...)
	e.Params = map[string]string{"ID": id}
	return e
}

// decodeBase64 decodes what parse encoded.
func decodeBase64(s string) []byte {
	b, _ := base64.StdEncoding.DecodeString(s)
	return b
}
