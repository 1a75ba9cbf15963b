package satellite

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/fielderr"
	"github.com/squallhq/squall/satellite/clientaddr"
	"github.com/squallhq/squall/satellite/dedupe"
	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/satellite/kafkasink"
	"github.com/squallhq/squall/satellite/ratelimit"
	"github.com/squallhq/squall/satellite/spool"
	"github.com/squallhq/squall/satellite/watcher"
	"github.com/squallhq/squall/webhooks"
)

// Defaults of [Config].
const (
	DefaultHTTPAddr          = ":8081"
	DefaultAckTimeout        = 2 * time.Second
	DefaultRetryAfter        = 30 * time.Second
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = intake.DefaultMaxHeaderBytes
	DefaultRetryBackoffMin   = 100 * time.Millisecond
	DefaultRetryBackoffMax   = 5 * time.Second
	DefaultHealthInterval    = 10 * time.Second
	DefaultMaxConnections    = intake.DefaultMaxConns
	DefaultMaxCalls          = intake.DefaultMaxCalls
	DefaultMaxPendingBytes   = intake.DefaultMaxPendingBytes
)

// Config configures a [Satellite]. Start from [Default], set the fields that
// have no default (Webhooks.Dir, Kafka.Brokers, Spool.Dir), and call
// [Config.Validate] (New does too).
type Config struct {
	// Name names this satellite in the squall-source header of its events
	// (default: the host name).
	Name string
	// TenantID is the tenant of events whose webhook file names none
	// (DESIGN decision 12; default "master").
	TenantID string

	// HTTPAddr is the address the webhook endpoint, /healthz, /readyz and
	// /metrics are served on (default ":8081"). Empty serves nothing: the
	// caller mounts [Satellite.Handler] or [Satellite.WebhookHandler] on
	// its own server.
	HTTPAddr string
	// TLS, when set, makes the listener of HTTPAddr serve HTTPS (HTTP/1.1
	// only: the listener offers no HTTP/2, whatever NextProtos says) with
	// this configuration, which must provide a certificate (Certificates,
	// GetCertificate or GetConfigForClient; tlscert.Reloader.TLSConfig
	// gives one that follows rotated files). Nil serves plain HTTP.
	TLS *tls.Config
	// ReadHeaderTimeout bounds reading a request's headers (default 10 s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included
	// (default 1 min).
	ReadTimeout time.Duration
	// IdleTimeout closes kept-alive connections idle for longer (default
	// 2 min; up to 1/64 of the shortest of the three timeouts sooner on a
	// busy connection: docs/decisions.md decision 45).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers together on
	// HTTPAddr (default 16 KiB); larger ones are answered 431. It is the
	// read buffer of each connection.
	MaxHeaderBytes int
	// MaxConnections bounds the connections open at once on HTTPAddr
	// (default 4096); one more is answered 503 OVERLOADED with
	// Retry-After and closed.
	MaxConnections int
	// MaxCalls bounds the webhook calls handled at once (default 1024),
	// on HTTPAddr or mounted on another server; one more is answered 503
	// OVERLOADED with Retry-After, its body unread.
	MaxCalls int
	// MaxPendingBytes bounds the bytes of bodies and events that the
	// calls in progress hold until Kafka acknowledges or the spool takes
	// them (default 64 MiB); a call that would go over is answered 503
	// OVERLOADED with Retry-After (a call alone always goes on).
	MaxPendingBytes int64
	// ShutdownTimeout bounds the graceful shutdown: answering the calls in
	// progress and flushing Kafka (default 30 s).
	ShutdownTimeout time.Duration

	// AckTimeout is how long a call waits for Kafka's acknowledgement
	// before its event goes to the spool instead (default 2 s).
	AckTimeout time.Duration
	// RetryAfter is the Retry-After of 503 answers (default 30 s).
	RetryAfter time.Duration
	// RetryBackoffMin is the first wait between two attempts to send the
	// spool to Kafka (default 100 ms); each failure doubles it.
	RetryBackoffMin time.Duration
	// RetryBackoffMax bounds that wait (default 5 s).
	RetryBackoffMax time.Duration
	// HealthInterval is how often an idle satellite checks that a broker
	// answers (default 10 s).
	HealthInterval time.Duration

	// TrustedProxies lists the peers (CIDR prefixes) whose forwarding
	// header (TrustedProxyHeader) gives the client address used by the
	// webhooks' allow_ips and per-client rate limits; every other peer is
	// the client itself. Empty trusts nobody.
	TrustedProxies []netip.Prefix
	// TrustedProxyHeader is the header the trusted proxies set:
	// X-Forwarded-For (default) or Forwarded.
	TrustedProxyHeader string
	// DedupeMaxEntries bounds the delivery ids remembered for the
	// webhooks' dedupe, in the file dedupe.db of the spool directory
	// (default dedupe.DefaultMaxEntries).
	DedupeMaxEntries int
	// RateLimitMaxClients bounds the per-client buckets of the webhooks'
	// rate limits (default ratelimit.DefaultMaxClients).
	RateLimitMaxClients int

	// Webhooks is the folder of webhook files and how it is watched.
	Webhooks watcher.Config
	// Kafka is where events go.
	Kafka kafkasink.Config
	// Spool is the local queue of events Kafka has not taken yet.
	Spool spool.Config

	// TracerProvider records the spans of the webhook calls, the spool
	// appends and the Kafka writes; nil records none (tracing off).
	TracerProvider trace.TracerProvider
}

// Default returns the default configuration.
func Default() Config {
	return Config{
		TenantID:            webhooks.DefaultTenant,
		HTTPAddr:            DefaultHTTPAddr,
		ReadHeaderTimeout:   DefaultReadHeaderTimeout,
		ReadTimeout:         DefaultReadTimeout,
		IdleTimeout:         DefaultIdleTimeout,
		MaxHeaderBytes:      DefaultMaxHeaderBytes,
		MaxConnections:      DefaultMaxConnections,
		MaxCalls:            DefaultMaxCalls,
		MaxPendingBytes:     DefaultMaxPendingBytes,
		ShutdownTimeout:     DefaultShutdownTimeout,
		AckTimeout:          DefaultAckTimeout,
		RetryAfter:          DefaultRetryAfter,
		RetryBackoffMin:     DefaultRetryBackoffMin,
		RetryBackoffMax:     DefaultRetryBackoffMax,
		HealthInterval:      DefaultHealthInterval,
		Webhooks:            watcher.DefaultConfig(),
		Kafka:               kafkasink.DefaultConfig(),
		Spool:               spool.DefaultConfig(),
		TrustedProxyHeader:  clientaddr.HeaderXForwardedFor,
		DedupeMaxEntries:    dedupe.DefaultMaxEntries,
		RateLimitMaxClients: ratelimit.DefaultMaxClients,
	}
}

// ConfigError reports an invalid field of a [Config] (see [fielderr.Error]).
type ConfigError = fielderr.Error

// Validate checks c. Every problem is reported, joined with [errors.Join],
// each as a [*ConfigError].
func (c Config) Validate() error {
	var problems fielderr.List
	add, positive := problems.Add, problems.Positive
	add("webhooks", c.Webhooks.Validate())
	add("kafka", c.Kafka.Validate())
	add("spool", c.Spool.Validate())
	if c.TLS != nil {
		switch {
		case c.HTTPAddr == "":
			add("tls", errors.New("set without http_addr: TLS applies to the satellite's own listener"))
		case len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil && c.TLS.GetConfigForClient == nil:
			add("tls", errors.New("no certificate: set Certificates, GetCertificate or GetConfigForClient"))
		}
	}
	positive("read_header_timeout", c.ReadHeaderTimeout)
	positive("read_timeout", c.ReadTimeout)
	positive("idle_timeout", c.IdleTimeout)
	positive("shutdown_timeout", c.ShutdownTimeout)
	if c.MaxHeaderBytes < 4<<10 || c.MaxHeaderBytes > 1<<20 {
		add("max_header_bytes", fmt.Errorf("%d is not between 4096 and 1048576", c.MaxHeaderBytes))
	}
	if c.MaxConnections < 1 {
		add("max_connections", fmt.Errorf("%d is less than 1", c.MaxConnections))
	}
	if c.MaxCalls < 1 {
		add("max_calls", fmt.Errorf("%d is less than 1", c.MaxCalls))
	}
	if c.MaxPendingBytes < 1<<20 {
		add("max_pending_bytes", fmt.Errorf("%d is less than 1048576 (1 MiB)", c.MaxPendingBytes))
	}
	positive("ack_timeout", c.AckTimeout)
	positive("retry_after", c.RetryAfter)
	positive("retry_backoff_min", c.RetryBackoffMin)
	positive("health_interval", c.HealthInterval)
	if c.RetryBackoffMax < c.RetryBackoffMin {
		add("retry_backoff_max", fmt.Errorf("%s is less than retry_backoff_min %s", c.RetryBackoffMax, c.RetryBackoffMin))
	}
	if _, err := clientaddr.New(c.TrustedProxies, c.TrustedProxyHeader); err != nil {
		add("trusted_proxies", err)
	}
	if c.DedupeMaxEntries < 1 {
		add("dedupe_max_entries", fmt.Errorf("%d is less than 1", c.DedupeMaxEntries))
	}
	if c.RateLimitMaxClients < 1 {
		add("rate_limit_max_clients", fmt.Errorf("%d is less than 1", c.RateLimitMaxClients))
	}
	if c.Spool.MaxBytes < 4*c.Kafka.MaxMessageBytes {
		add("spool", fmt.Errorf("max_bytes %d must hold at least 4 records of kafka.max_message_bytes %d", c.Spool.MaxBytes, c.Kafka.MaxMessageBytes))
	}
	return problems.Err()
}
