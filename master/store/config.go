package store

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Store. Zero durations and counts take the defaults
// documented on each field.
type Config struct {
	// NodeID is this node's raft server id, unique in the cluster for all
	// time. Required.
	NodeID string
	// DataDir holds raft.db (raft log and stable store), fsm.db (the
	// replicated state) and snapshots/. Required.
	DataDir string
	// BindAddr is the raft listen address, e.g. ":7000" or "127.0.0.1:0".
	// Required.
	BindAddr string
	// AdvertiseAddr is the address other masters dial (host:port). Empty
	// means the listener's address, which must then be a specific IP.
	AdvertiseAddr string
	// SourceIP is the local IP that outbound raft connections are made
	// from, e.g. the bind address's IP on a host with several addresses
	// whose peers filter raft traffic by source (and the robustness
	// suite's partitions, which tell nodes apart by it). Empty lets the
	// operating system choose.
	SourceIP string
	// Bootstrap makes a node without raft state form a new cluster with
	// itself as the only voter. It is ignored when the data dir already
	// holds raft state, so it is safe on restart.
	Bootstrap bool
	// TLS enables mutual TLS between masters.
	TLS TLSConfig

	// Logger receives the store's and raft's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the store's metrics; nil registers none.
	Registerer prometheus.Registerer
	// TracerProvider records a span per raft apply; nil records none.
	TracerProvider trace.TracerProvider

	// HeartbeatTimeout (default DefaultHeartbeatTimeout) is how long a
	// follower goes without hearing from the leader before it starts an
	// election (raft waits between one and two of it). It is the largest
	// part of a failover after the leader dies.
	HeartbeatTimeout time.Duration
	// ElectionTimeout (default DefaultElectionTimeout) is how long a
	// candidate waits for votes before it starts a new election (again
	// between one and two of it). At least HeartbeatTimeout.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout (default DefaultLeaderLeaseTimeout) is how long a
	// leader stays leader without hearing from a quorum. At most
	// HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout (default DefaultCommitTimeout) is how long the leader
	// waits, when there is nothing to replicate, before it tells the
	// followers the commit index. At most HeartbeatTimeout.
	CommitTimeout time.Duration
	// SnapshotInterval (default 120s) is how often raft checks whether to
	// snapshot; SnapshotThreshold (default 8192) is how many new entries
	// trigger one; TrailingLogs (default 10240) is how many entries stay in
	// the log after a snapshot, for followers that are slightly behind.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// SnapshotRetain (default 2) is how many snapshots are kept on disk.
	SnapshotRetain int
	// ApplyTimeout (default 10s) bounds how long a command waits to enter
	// raft when the ctx has no deadline.
	ApplyTimeout time.Duration
	// BarrierTimeout (default 10s) bounds one attempt of the barrier a new
	// leader runs before it serves consistent reads.
	BarrierTimeout time.Duration
	// TransportTimeout (default 10s) is the I/O deadline of raft RPCs.
	TransportTimeout time.Duration
	// CatchUpTimeout (default 20s) bounds how long Join waits for a new
	// member, added as a non-voter, to catch up with the leader's log
	// before it is promoted to voter; a member that does not is removed.
	CatchUpTimeout time.Duration
	// MaxPool (default 3) is how many connections to each peer are pooled.
	MaxPool int
	// KeepVersions (default DefaultKeepVersions, at most MaxKeepVersions)
	// is how many versions of the active tree the state keeps. The leader
	// writes it into each deploy and rollback entry, so every node prunes
	// alike whatever its own setting.
	KeepVersions int
	// AuditKeep (default DefaultAuditKeep, at most MaxAuditKeep) is how
	// many audit records the state keeps, and AuditMaxAge (0: no limit)
	// how old they may grow. The leader writes both into each entry, so
	// every node prunes alike whatever its own settings.
	AuditKeep   int
	AuditMaxAge time.Duration
	// NoSync skips the fsync of the raft log. Unsafe (a machine crash can
	// lose acknowledged writes); for benchmarks and tests only.
	NoSync bool
	// Network, when set, makes the raft connections instead of TCP
	// (TCPNetwork); tests give one they can partition.
	Network Network
	// FeatureLevel, when set, is the level this node applies and
	// advertises instead of the binary's FeatureLevel: it refuses the
	// forms of later levels as a master of an older release does. For
	// tests of mixed clusters only.
	FeatureLevel int
}

// The defaults of Config. The raft timeouts suit a LAN: a follower starts
// an election 600 ms to 1.2 s after the leader's last heartbeat (the
// leader sends one every tenth of HeartbeatTimeout), and a leader steps
// down after 600 ms without a quorum. docs/operations.md ("Failover")
// gives the failover times and spurious elections measured with them.
const (
	DefaultHeartbeatTimeout   = 600 * time.Millisecond
	DefaultElectionTimeout    = 600 * time.Millisecond
	DefaultLeaderLeaseTimeout = 600 * time.Millisecond
	DefaultCommitTimeout      = 50 * time.Millisecond
	// MinRaftTimeout is the smallest heartbeat, election and lease
	// timeout Validate accepts: below it a busy machine's scheduling
	// delays alone start elections.
	MinRaftTimeout = 50 * time.Millisecond

	DefaultApplyTimeout     = 10 * time.Second
	DefaultBarrierTimeout   = 10 * time.Second
	DefaultTransportTimeout = 10 * time.Second
	DefaultMaxPool          = 3
	DefaultCatchUpTimeout   = 20 * time.Second
	DefaultSnapshotRetain   = 2
)

// Validate checks the required fields and the relations between timeouts.
func (c Config) Validate() error {
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node id is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	if c.BindAddr == "" {
		errs = append(errs, errors.New("raft bind address is required"))
	}
	if err := c.TLS.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.FeatureLevel < 0 || c.FeatureLevel > FeatureLevel {
		errs = append(errs, fmt.Errorf("feature level %d is not between 0 and %d", c.FeatureLevel, FeatureLevel))
	}
	if c.SourceIP != "" && net.ParseIP(c.SourceIP) == nil {
		errs = append(errs, fmt.Errorf("raft source ip %q: not an IP address", c.SourceIP))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"heartbeat timeout", c.HeartbeatTimeout}, {"election timeout", c.ElectionTimeout},
		{"leader lease timeout", c.LeaderLeaseTimeout}, {"commit timeout", c.CommitTimeout},
		{"snapshot interval", c.SnapshotInterval}, {"apply timeout", c.ApplyTimeout},
		{"barrier timeout", c.BarrierTimeout}, {"transport timeout", c.TransportTimeout},
		{"catch-up timeout", c.CatchUpTimeout},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s is negative", d.name))
		}
	}
	if err := c.ValidateRaftTimeouts(); err != nil {
		errs = append(errs, err)
	}
	if c.SnapshotRetain < 0 || c.MaxPool < 0 {
		errs = append(errs, errors.New("snapshot retain and max pool cannot be negative"))
	}
	if c.KeepVersions < 0 || c.KeepVersions > MaxKeepVersions {
		errs = append(errs, fmt.Errorf("versions kept %d is not between 1 and %d (0: the default, %d)", c.KeepVersions, MaxKeepVersions, DefaultKeepVersions))
	}
	if c.AuditKeep < 0 || c.AuditKeep > MaxAuditKeep {
		errs = append(errs, fmt.Errorf("audit records kept %d is not between 1 and %d (0: the default, %d)", c.AuditKeep, MaxAuditKeep, DefaultAuditKeep))
	}
	if c.AuditMaxAge < 0 {
		errs = append(errs, fmt.Errorf("audit record age %s cannot be negative (0: no limit)", c.AuditMaxAge))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store config: %w", err)
	}
	return nil
}

// RaftTimeouts returns the heartbeat, election, leader lease and commit
// timeouts in effect: the configured ones, or the defaults.
func (c Config) RaftTimeouts() (heartbeat, election, lease, commit time.Duration) {
	heartbeat, election, lease, commit = c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, c.CommitTimeout
	if heartbeat == 0 {
		heartbeat = DefaultHeartbeatTimeout
	}
	if election == 0 {
		election = max(DefaultElectionTimeout, heartbeat)
	}
	if lease == 0 {
		lease = min(DefaultLeaderLeaseTimeout, heartbeat)
	}
	if commit == 0 {
		commit = min(DefaultCommitTimeout, heartbeat)
	}
	return heartbeat, election, lease, commit
}

// ValidateRaftTimeouts checks the raft timeouts in effect against each
// other and against MinRaftTimeout (zero ones take their defaults, which
// adapt to the others). Validate includes it.
func (c Config) ValidateRaftTimeouts() error {
	for _, d := range []time.Duration{c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, c.CommitTimeout} {
		if d < 0 {
			return nil // reported as negative
		}
	}
	hb, el, lease, commit := c.RaftTimeouts()
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"heartbeat timeout", hb}, {"election timeout", el}, {"leader lease timeout", lease}} {
		if d.v < MinRaftTimeout {
			errs = append(errs, fmt.Errorf("%s %s is shorter than %s", d.name, d.v, MinRaftTimeout))
		}
	}
	if commit < time.Millisecond {
		errs = append(errs, fmt.Errorf("commit timeout %s is shorter than 1ms", commit))
	}
	if el < hb {
		errs = append(errs, fmt.Errorf("election timeout %s is shorter than the heartbeat timeout %s", el, hb))
	}
	if lease > hb {
		errs = append(errs, fmt.Errorf("leader lease timeout %s is longer than the heartbeat timeout %s", lease, hb))
	}
	if commit > hb {
		errs = append(errs, fmt.Errorf("commit timeout %s is longer than the heartbeat timeout %s", commit, hb))
	}
	return errors.Join(errs...)
}

// withDefaults returns c with the store's own defaults filled in (raft's are
// filled in by raftConfig).
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.KeepVersions == 0 {
		c.KeepVersions = DefaultKeepVersions
	}
	if c.AuditKeep == 0 {
		c.AuditKeep = DefaultAuditKeep
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	if c.BarrierTimeout == 0 {
		c.BarrierTimeout = DefaultBarrierTimeout
	}
	if c.TransportTimeout == 0 {
		c.TransportTimeout = DefaultTransportTimeout
	}
	if c.CatchUpTimeout == 0 {
		c.CatchUpTimeout = DefaultCatchUpTimeout
	}
	if c.MaxPool == 0 {
		c.MaxPool = DefaultMaxPool
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = DefaultSnapshotRetain
	}
	return c
}
