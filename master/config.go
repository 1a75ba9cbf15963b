package master

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/baseurl"
	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/master/store"
)

// Config configures a master node. Start from Default.
type Config struct {
	// NodeID is this node's id, unique in the cluster for all time. Required.
	NodeID string
	// DataDir holds the replicated state and the raft log. Required.
	DataDir string

	// HTTPAddr is the listen address of the HTTP API (default ":8080");
	// port 0 picks a free port (see Server.HTTPAddr).
	HTTPAddr string
	// HTTPAdvertise is the host:port other masters use to reach this
	// node's HTTP API when they forward requests to it. Empty means the
	// listener's address when it is a specific IP, else the host of
	// RaftAdvertise with the HTTP port.
	HTTPAdvertise string
	// RaftAddr is the raft listen address (default ":7000").
	RaftAddr string
	// RaftAdvertise is the host:port other masters dial for raft. Empty
	// means the listener's address, which must then be a specific IP.
	RaftAdvertise string
	// RaftSourceIP is the local IP that outbound raft connections are
	// made from (store.Config.SourceIP). Empty lets the operating system
	// choose.
	RaftSourceIP string
	// RaftTLS enables mutual TLS between masters on the raft port.
	RaftTLS store.TLSConfig

	// Bootstrap makes a node without state form a new cluster with itself
	// as the only voter. It is ignored when the data dir holds state.
	Bootstrap bool
	// JoinURLs are the HTTP URLs (http://host:port) of members to ask to
	// add this node to their cluster; any member will do, the request is
	// forwarded to the leader. Tried in order until one succeeds.
	JoinURLs []string
	// JoinTokenFile holds the cluster's join secret, which every join
	// request must carry (and which this node sends when it joins). Empty
	// means the secret in the data dir (JoinSecretFile), which a node
	// writes there when it bootstraps a cluster or restarts with raft
	// state; a node that is to join a cluster without it fails to start.
	// Joins are always authenticated.
	JoinTokenFile string

	// TokenHMACKeyFile verifies API tokens signed with HS256;
	// TokenEd25519PublicKeyFile verifies EdDSA tokens. At most one.
	TokenHMACKeyFile          string
	TokenEd25519PublicKeyFile string
	// AllowUnsignedTokens accepts the spec's unsigned base64 JSON tokens
	// (behind an authenticating proxy, or in development).
	AllowUnsignedTokens bool

	// LeaderWait bounds how long a request that needs the leader waits
	// for one during an election before it is answered 503 (default 3s).
	LeaderWait time.Duration
	// ForwardTimeout bounds how long a request forwarded to the leader
	// waits for the leader's response headers (default 30s).
	ForwardTimeout time.Duration
	// ForwardDialTimeout bounds how long a follower tries to connect to
	// the leader's HTTP address before it counts the leader as gone
	// (default 500ms): the request never reached the leader, so it looks
	// for the leader again and retries.
	ForwardDialTimeout time.Duration
	// TransferTimeout bounds how long Shutdown waits for the leadership
	// to move to another node before it stops the store anyway (default
	// 5s).
	TransferTimeout time.Duration
	// RaftHeartbeatTimeout, RaftElectionTimeout, RaftLeaderLeaseTimeout
	// and RaftCommitTimeout are raft's timeouts (see store.Config); zero
	// takes the store's defaults, which suit a LAN.
	RaftHeartbeatTimeout   time.Duration
	RaftElectionTimeout    time.Duration
	RaftLeaderLeaseTimeout time.Duration
	RaftCommitTimeout      time.Duration
	// MaxWatchWait caps the wait of a tree watch (default 5m).
	MaxWatchWait time.Duration
	// KeepVersions is how many versions of the active tree the state keeps
	// (0: store.DefaultKeepVersions); see store.Config.KeepVersions.
	KeepVersions int
	// AuditKeep and AuditMaxAge bound the audit log (0: the store's
	// defaults); see store.Config.AuditKeep.
	AuditKeep   int
	AuditMaxAge time.Duration
	// ShutdownTimeout bounds the graceful shutdown in Run (default 10s).
	ShutdownTimeout time.Duration
	// HTTPTimeouts bound reading a request's headers and body, and idle
	// kept-alive connections; zero fields take httpguard's defaults
	// (10 s, 30 s, 2 min).
	HTTPTimeouts httpguard.Timeouts

	// WrapHandler, when set, wraps the whole HTTP handler, every route
	// included: squall dev puts its Host check there.
	WrapHandler func(http.Handler) http.Handler

	// Version describes the binary; GET /squall/v1/cluster reports it, so
	// that the fleet list shows each master's own.
	Version string

	// Logger receives the master's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the metrics and Gatherer serves them on
	// /metrics. When both are nil the server makes its own registry with
	// the Go and process collectors; a Registerer that is a
	// *prometheus.Registry is also used as the Gatherer.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// TracerProvider records a server span per API request (the child of
	// its traceparent) and a span per raft apply; nil records none.
	TracerProvider trace.TracerProvider

	// ForwardDial, when set, replaces the dialer of the connections to
	// the leader's HTTP address (ForwardDialTimeout then does not
	// apply). For tests that make the leader unreachable.
	ForwardDial func(ctx context.Context, network, addr string) (net.Conn, error)

	// StoreOptions, when set, adjusts the store's configuration after the
	// master filled it in: raft timeouts, snapshot thresholds, test hooks
	// (store.Config.Network). For tests and benchmarks.
	StoreOptions func(*store.Config)
}

// The defaults of Config.
const (
	DefaultHTTPAddr       = ":8080"
	DefaultRaftAddr       = ":7000"
	DefaultLeaderWait     = 3 * time.Second
	DefaultForwardTimeout = 30 * time.Second
	// DefaultForwardDialTimeout is generous for a LAN (a connect takes
	// well under a millisecond) and short next to the leader wait.
	DefaultForwardDialTimeout = 500 * time.Millisecond
	DefaultTransferTimeout    = 5 * time.Second
	DefaultMaxWatchWait       = 5 * time.Minute
	DefaultShutdownTimeout    = 10 * time.Second
)

// Default returns a Config with the default addresses and timeouts.
func Default() Config {
	return Config{
		HTTPAddr:           DefaultHTTPAddr,
		RaftAddr:           DefaultRaftAddr,
		LeaderWait:         DefaultLeaderWait,
		ForwardTimeout:     DefaultForwardTimeout,
		ForwardDialTimeout: DefaultForwardDialTimeout,
		TransferTimeout:    DefaultTransferTimeout,
		MaxWatchWait:       DefaultMaxWatchWait,
		ShutdownTimeout:    DefaultShutdownTimeout,
	}
}

// ConfigError is a Config that does not validate; it lists every problem.
type ConfigError struct {
	Errs []error
}

// Error lists the problems.
func (e *ConfigError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return "master config: " + strings.Join(msgs, "; ")
}

// Unwrap returns the problems.
func (e *ConfigError) Unwrap() []error { return e.Errs }

// Validate checks the config without touching files or the network.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.NodeID == "" {
		add("node id is required")
	}
	if c.DataDir == "" {
		add("data dir is required")
	}
	for _, a := range []struct{ name, v string }{
		{"HTTP address", c.HTTPAddr}, {"raft address", c.RaftAddr},
	} {
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			add("%s %q: want host:port", a.name, a.v)
		}
	}
	for _, a := range []struct{ name, v string }{
		{"HTTP advertise address", c.HTTPAdvertise}, {"raft advertise address", c.RaftAdvertise},
	} {
		if a.v == "" {
			continue
		}
		if host, port, err := net.SplitHostPort(a.v); err != nil || host == "" || port == "" || port == "0" {
			add("%s %q: want host:port with a host and a port", a.name, a.v)
		}
	}
	if c.Bootstrap && len(c.JoinURLs) > 0 {
		add("bootstrap and join exclude each other: bootstrap the first node, join the others")
	}
	for _, u := range c.JoinURLs {
		if _, err := joinEndpoint(u); err != nil {
			add("join URL %q: %v", u, err)
		}
	}
	if c.TokenHMACKeyFile != "" && c.TokenEd25519PublicKeyFile != "" {
		add("tokens: give an HMAC key file (--token-hmac-key-file, SQUALL_TOKEN_HMAC_KEY_FILE) or an Ed25519 public key file (--token-ed25519-public-key-file, SQUALL_TOKEN_ED25519_PUBLIC_KEY_FILE), not both")
	}
	if c.TokenHMACKeyFile == "" && c.TokenEd25519PublicKeyFile == "" && !c.AllowUnsignedTokens {
		add("tokens: give an HMAC key file (--token-hmac-key-file, SQUALL_TOKEN_HMAC_KEY_FILE) or an Ed25519 public key file (--token-ed25519-public-key-file, SQUALL_TOKEN_ED25519_PUBLIC_KEY_FILE), or allow unsigned tokens (--allow-unsigned-tokens, SQUALL_ALLOW_UNSIGNED_TOKENS)")
	}
	if c.RaftTLS.Enabled() && (c.RaftTLS.CertFile == "" || c.RaftTLS.KeyFile == "" || c.RaftTLS.CAFile == "") {
		add("raft TLS needs a certificate, a key and a CA file")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"leader wait", c.LeaderWait}, {"forward timeout", c.ForwardTimeout},
		{"forward dial timeout", c.ForwardDialTimeout}, {"transfer timeout", c.TransferTimeout},
		{"raft heartbeat timeout", c.RaftHeartbeatTimeout}, {"raft election timeout", c.RaftElectionTimeout},
		{"raft leader lease timeout", c.RaftLeaderLeaseTimeout}, {"raft commit timeout", c.RaftCommitTimeout},
		{"max watch wait", c.MaxWatchWait}, {"shutdown timeout", c.ShutdownTimeout},
		{"http header timeout", c.HTTPTimeouts.Header}, {"http body timeout", c.HTTPTimeouts.Body},
		{"http idle timeout", c.HTTPTimeouts.Idle},
	} {
		if d.v < 0 {
			add("%s is negative", d.name)
		}
	}
	if err := c.raftTimeouts().ValidateRaftTimeouts(); err != nil {
		errs = append(errs, fmt.Errorf("raft timeouts: %w", err))
	}
	if len(errs) > 0 {
		return &ConfigError{Errs: errs}
	}
	return nil
}

// withDefaults fills in zero durations and addresses.
func (c Config) withDefaults() Config {
	d := Default()
	if c.HTTPAddr == "" {
		c.HTTPAddr = d.HTTPAddr
	}
	if c.RaftAddr == "" {
		c.RaftAddr = d.RaftAddr
	}
	if c.LeaderWait == 0 {
		c.LeaderWait = d.LeaderWait
	}
	if c.ForwardTimeout == 0 {
		c.ForwardTimeout = d.ForwardTimeout
	}
	if c.ForwardDialTimeout == 0 {
		c.ForwardDialTimeout = d.ForwardDialTimeout
	}
	if c.TransferTimeout == 0 {
		c.TransferTimeout = d.TransferTimeout
	}
	if c.MaxWatchWait == 0 {
		c.MaxWatchWait = d.MaxWatchWait
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.HTTPTimeouts = c.HTTPTimeouts.WithDefaults()
	return c
}

// raftTimeouts is a store config that holds only the raft timeouts.
func (c Config) raftTimeouts() store.Config {
	return store.Config{
		HeartbeatTimeout:   c.RaftHeartbeatTimeout,
		ElectionTimeout:    c.RaftElectionTimeout,
		LeaderLeaseTimeout: c.RaftLeaderLeaseTimeout,
		CommitTimeout:      c.RaftCommitTimeout,
	}
}

// storeConfig is the store's configuration for this node.
func (c Config) storeConfig() store.Config {
	sc := store.Config{
		HeartbeatTimeout:   c.RaftHeartbeatTimeout,
		ElectionTimeout:    c.RaftElectionTimeout,
		LeaderLeaseTimeout: c.RaftLeaderLeaseTimeout,
		CommitTimeout:      c.RaftCommitTimeout,
		NodeID:             c.NodeID,
		DataDir:            c.DataDir,
		BindAddr:           c.RaftAddr,
		AdvertiseAddr:      c.RaftAdvertise,
		SourceIP:           c.RaftSourceIP,
		Bootstrap:          c.Bootstrap,
		TLS:                c.RaftTLS,
		Logger:             c.Logger,
		// Raft applies, as children of the API requests' spans.
		TracerProvider: c.TracerProvider,
		KeepVersions:   c.KeepVersions,
		AuditKeep:      c.AuditKeep,
		AuditMaxAge:    c.AuditMaxAge,
	}
	if c.StoreOptions != nil {
		c.StoreOptions(&sc)
	}
	return sc
}

// joinEndpoint returns the join endpoint of a member's URL; a bare
// host:port means http.
func joinEndpoint(member string) (string, error) {
	u, err := baseurl.Parse(member)
	if err != nil {
		return "", err
	}
	u.Path += pathJoin
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}
