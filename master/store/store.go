package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/tracing"
)

// File names in Config.DataDir.
const (
	raftDBName = "raft.db"
	fsmDBName  = "fsm.db"
)

// raftShutdownWait bounds how long Close waits for raft to shut down.
const raftShutdownWait = 10 * time.Second

// logCacheSize is how many recent raft log entries are kept in memory.
const logCacheSize = 512

// Store is the master's replicated state: it owns the raft node, its log
// store, snapshot store and transport, and the state machine. Writes go
// through the leader's raft log; reads come from the local in-memory copy of
// the state. See the package documentation.
type Store struct {
	cfg     Config
	logger  *slog.Logger
	metrics *metrics
	tracer  trace.Tracer // nil: tracing off
	rconf   *raft.Config
	notify  chan bool

	// now and newID are the clock and the draft id source of the commands
	// this node submits; tests replace them.
	now   func() time.Time
	newID func() (string, error)
	// level is the feature level this node advertises and whose entry
	// forms it applies: FeatureLevel.
	level int

	raft atomic.Pointer[raft.Raft]
	fsm  atomic.Pointer[fsm]
	// levelCache is the cluster's feature level as last computed (see
	// ClusterFeatureLevel).
	levelCache atomic.Pointer[levelCache]
	// idsMu lets one AssignIDs entry be written at a time (ensureIDs).
	idsMu sync.Mutex

	// findingBatch groups concurrent InsertFinding calls into one entry.
	findingBatch findingBatcher

	mu       sync.Mutex // guards the lifecycle fields below
	opened   bool
	closed   bool
	logs     *raftboltdb.BoltStore
	stream   *streamLayer
	trans    *raft.NetworkTransport
	observer *raft.Observer
	stop     chan struct{} // closed by Close: stops the goroutines Open started
	wg       sync.WaitGroup

	// futuresMu guards futuresClosed; futures counts the raft futures
	// (leadership checks, entries, membership changes) raft has not
	// answered yet. Raft queues some of those in buffered channels and
	// answers none left there when it shuts down, so Close lets raft
	// answer these before it shuts raft down (see await, verifyLeader).
	futuresMu     sync.Mutex
	futuresClosed bool
	futures       sync.WaitGroup

	leaderMu sync.Mutex
	leaderCh chan struct{} // closed and replaced when the known leader changes
	lead     *leadership   // non-nil while this node leads
}

// leadership is one term of this node as leader.
type leadership struct {
	term  uint64
	ready chan struct{} // closed once the post-election barrier completed
	lost  chan struct{} // closed when the leadership ends
}

// New checks cfg and builds a Store. It starts nothing and touches no
// files; Open does.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Store{
		cfg:      cfg,
		logger:   cfg.Logger.With("component", "store", "node", cfg.NodeID),
		tracer:   tracing.Tracer(cfg.TracerProvider, "master/store"),
		notify:   make(chan bool, 16),
		now:      time.Now,
		newID:    NewDraftID,
		level:    FeatureLevel,
		stop:     make(chan struct{}),
		leaderCh: make(chan struct{}),
	}
	if cfg.FeatureLevel > 0 {
		s.level = cfg.FeatureLevel
	}
	s.rconf = s.raftConfig()
	if err := raft.ValidateConfig(s.rconf); err != nil {
		return nil, fmt.Errorf("store config: raft: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.findingBatch.metrics = m
	s.findingBatch.apply = func(ctx context.Context, items []Finding) ([]FindingOutcome, error) {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
		defer cancel()
		return s.InsertFindings(ctx, items)
	}
	return s, nil
}

// raftConfig maps Config onto raft's configuration.
func (s *Store) raftConfig() *raft.Config {
	c := s.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.Logger = newRaftLogger(c.Logger.With("node", c.NodeID), "raft")
	rc.NotifyCh = s.notify
	// The state file survives restarts; Open restores a snapshot only when
	// the state file is behind it.
	rc.NoSnapshotRestoreOnStart = true
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout, rc.CommitTimeout = c.RaftTimeouts()
	if c.SnapshotInterval > 0 {
		rc.SnapshotInterval = c.SnapshotInterval
	}
	if c.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = c.SnapshotThreshold
	}
	if c.TrailingLogs > 0 {
		rc.TrailingLogs = c.TrailingLogs
	}
	return rc
}

// NewDraftID returns a new unique draft id, a UUIDv7. Callers choose ids
// before submitting a command so that applying it stays deterministic.
func NewDraftID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new draft id: %w", err)
	}
	return id.String(), nil
}

// Open opens the data dir, starts the raft node and its transport, and
// bootstraps a new cluster when Config.Bootstrap is set and the data dir
// holds no raft state. It returns without waiting for a leader (see
// WaitForLeader).
func (s *Store) Open(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.opened:
		return errors.New("store is already open")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	c := s.cfg
	var cleanup []func() error
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				if cerr := cleanup[i](); cerr != nil {
					s.logger.Warn("clean up after failed open", "error", cerr)
				}
			}
		}
	}()

	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	logs, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(c.DataDir, raftDBName),
		BoltOptions: boltOptions(),
		NoSync:      c.NoSync,
	})
	if err != nil {
		return fmt.Errorf("open store: raft log: %w", err)
	}
	cleanup = append(cleanup, logs.Close)
	cache, err := raft.NewLogCache(logCacheSize, timedLogs{LogStore: logs, append: s.metrics.logAppend})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	rlog := newRaftLogger(c.Logger.With("node", c.NodeID), "raft")
	snaps, err := raft.NewFileSnapshotStoreWithLogger(c.DataDir, c.SnapshotRetain, rlog.Named("snapshots"))
	if err != nil {
		return fmt.Errorf("open store: snapshot store: %w", err)
	}
	existing, err := raft.HasExistingState(cache, logs, snaps)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}

	fsmPath := filepath.Join(c.DataDir, fsmDBName)
	clean, err := takeCleanMark(fsmPath)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	switch {
	case !existing:
		// A state file without raft state belongs to an earlier life of
		// this data dir (raft.db was deleted): its applied index means
		// nothing in the cluster this node is about to join, and skipping
		// entries by it would corrupt the state. Start empty.
		err = s.discardStateFile(fsmPath, "no raft state: discarded the old state file")
	case !clean:
		// The state file is written without fsync: after a crash it may
		// be stale or torn. Rebuild it from the newest snapshot
		// (restoreIfBehind) and the raft log (raft replays the entries
		// after the snapshot), both synced.
		err = s.discardStateFile(fsmPath, "state file was not closed cleanly: rebuilding it from the newest snapshot and the raft log")
	}
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	f, err := openFSM(fsmPath, c.Logger.With("component", "fsm", "node", c.NodeID), s.metrics)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	f.level = s.level
	cleanup = append(cleanup, f.close)
	if err := restoreIfBehind(f, snaps); err != nil {
		return fmt.Errorf("open store: %w", err)
	}

	stream, err := newStreamLayer(c.BindAddr, c.AdvertiseAddr, c.TLS, c.Network)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	if err := stream.checkOwn(c.NodeID); err != nil {
		stream.Close()
		return fmt.Errorf("open store: %w", err)
	}
	if err := stream.setSource(c.SourceIP); err != nil {
		stream.Close()
		return fmt.Errorf("open store: %w", err)
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: c.MaxPool,
		Timeout: c.TransportTimeout,
		Logger:  rlog.Named("transport"),
	})
	cleanup = append(cleanup, trans.Close)

	r, err := raft.NewRaft(s.rconf, f, cache, logs, snaps, unpipelined{NetworkTransport: trans, peers: newPeerWatch(c.Logger.With("node", c.NodeID, "component", "raft")), layer: stream})
	if err != nil {
		return fmt.Errorf("open store: start raft: %w", err)
	}
	// Shutdown also closes the transport; closing it twice is harmless.
	cleanup = append(cleanup, func() error { return r.Shutdown().Error() })
	if c.Bootstrap && !existing {
		boot := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(c.NodeID), Address: trans.LocalAddr()}}}
		if err := r.BootstrapCluster(boot).Error(); err != nil {
			return fmt.Errorf("open store: bootstrap: %w", err)
		}
		s.logger.Info("bootstrapped a new cluster", "addr", trans.LocalAddr())
	}

	obsCh := make(chan raft.Observation, 64)
	s.observer = raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(s.observer)

	s.logs, s.stream, s.trans = logs, stream, trans
	s.fsm.Store(f)
	s.raft.Store(r)
	s.metrics.raft.raft.Store(r)
	s.metrics.raft.store.Store(s)
	s.wg.Add(2)
	go s.leaderLoop(r)
	go s.observeLoop(obsCh)
	s.opened = true
	s.logger.Info("store open", "data_dir", c.DataDir, "addr", trans.LocalAddr(), "existing_state", existing,
		"tls", c.TLS.Enabled(), "applied_index", f.appliedIndex())
	return nil
}

// discardStateFile removes the state file at path and the temporary files
// of an interrupted restore, and logs msg if there was a state file.
func (s *Store) discardStateFile(path, msg string) error {
	tmps, err := filepath.Glob(path + ".restore-*")
	if err != nil {
		return err
	}
	for _, p := range tmps {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	err = os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	s.logger.Warn(msg, "path", path)
	return nil
}

// restoreIfBehind brings the state file up to the newest snapshot when the
// state file is older (e.g. it was lost). Raft itself does not restore on
// start (NoSnapshotRestoreOnStart): the state file normally is newer.
func restoreIfBehind(f *fsm, snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	if len(list) == 0 || list[0].Index <= f.appliedIndex() {
		return nil
	}
	meta, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", list[0].ID, err)
	}
	f.logger.Info("state file is behind the newest snapshot; restoring it", "snapshot", meta.ID,
		"snapshot_index", meta.Index, "applied_index", f.appliedIndex())
	if err := f.Restore(rc); err != nil {
		return fmt.Errorf("restore snapshot %s: %w", meta.ID, err)
	}
	return nil
}

// Close shuts raft down, stops the store's goroutines and closes the data
// dir. The store cannot be opened again; make a new one on the same dir.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.opened {
		s.metrics.Unregister()
		return nil
	}
	r := s.raft.Load()
	var errs []error
	s.stopFutures()
	// Raft's shutdown waits for its goroutines. A pipelined replication
	// goroutine of a leader that just stepped down was seen stuck for
	// good (hashicorp/raft v1.7.3's pipeline deadlock, now avoided: see
	// unpipelined); the wait stays bounded, so that the process can still
	// stop whatever else may hang.
	shut := make(chan error, 1)
	go func() { shut <- r.Shutdown().Error() }()
	wait := time.NewTimer(raftShutdownWait)
	select {
	case err := <-shut:
		if err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
	case <-wait.C:
		s.logger.Error("raft did not shut down in time: a raft goroutine is stuck; closing the store anyway", "waited", raftShutdownWait)
	}
	wait.Stop()
	// Shutdown closes the transport only the first time raft shuts down:
	// a leader that removed itself has already shut raft down. Close it
	// here, and every raft connection with it, so that no goroutine of
	// raft's transport outlives the store (its connection handlers read
	// until their connection closes).
	if err := s.trans.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close raft transport: %w", err))
	}
	s.stream.closeConns()
	if !s.stream.waitHandlers(5 * time.Second) {
		s.logger.Warn("raft connection handlers still running after 5s; closing the raft log anyway")
	}
	r.DeregisterObserver(s.observer)
	close(s.stop)
	s.wg.Wait()
	if err := s.logs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close raft log: %w", err))
	}
	if err := s.fsm.Load().close(); err != nil {
		errs = append(errs, fmt.Errorf("close state file: %w", err))
	}
	s.metrics.raft.raft.Store(nil)
	s.metrics.raft.store.Store(nil)
	s.metrics.Unregister()
	s.logger.Info("store closed")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// leaderLoop follows this node's leadership. On winning an election it
// starts establish, which runs a barrier so that the state holds every
// entry of earlier terms before the node serves consistent reads (Consul
// and Nomad do the same).
func (s *Store) leaderLoop(r *raft.Raft) {
	defer s.wg.Done()
	var cur *leadership
	lose := func() {
		if cur == nil {
			return
		}
		close(cur.lost)
		cur = nil
		s.leaderMu.Lock()
		s.lead = nil
		s.leaderMu.Unlock()
	}
	for {
		select {
		case <-s.stop:
			lose()
			return
		case isLeader := <-s.notify:
			lose()
			if isLeader {
				cur = &leadership{term: r.CurrentTerm(), ready: make(chan struct{}), lost: make(chan struct{})}
				s.leaderMu.Lock()
				s.lead = cur
				s.leaderMu.Unlock()
				s.wg.Add(1)
				go s.establish(r, cur)
				s.logger.Info("gained leadership", "term", r.CurrentTerm())
			} else {
				s.logger.Info("lost leadership")
			}
			s.signalLeaderChange()
		}
	}
}

// establish runs the post-election barrier, retrying until it succeeds or
// the leadership ends, and then marks the leadership ready; then it turns
// on the ids of tools and tenants once the cluster's level has them
// (assignIDs).
func (s *Store) establish(r *raft.Raft, l *leadership) {
	defer s.wg.Done()
	const retry = 50 * time.Millisecond
	for {
		start := time.Now()
		err := r.Barrier(s.cfg.BarrierTimeout).Error()
		if err == nil {
			close(l.ready)
			s.logger.Info("leader ready for consistent reads", "barrier", time.Since(start), "applied_index", r.AppliedIndex())
			s.assignIDs(l)
			return
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return
		}
		s.logger.Warn("post-election barrier failed", "error", err)
		if !s.leaderWait(l, retry, nil) {
			return
		}
	}
}

// leaderWait waits d, or until wake is closed (nil: never), while l lasts:
// false when the leadership ended or the store stopped first.
func (s *Store) leaderWait(l *leadership, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.lost:
		return false
	case <-s.stop:
		return false
	case <-wake:
	case <-t.C:
	}
	return true
}

// observeLoop wakes WaitForLeader callers whenever the known leader changes.
func (s *Store) observeLoop(ch <-chan raft.Observation) {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-ch:
			s.signalLeaderChange()
		}
	}
}

func (s *Store) signalLeaderChange() {
	s.leaderMu.Lock()
	close(s.leaderCh)
	s.leaderCh = make(chan struct{})
	s.leaderMu.Unlock()
}

func (s *Store) leaderChanged() <-chan struct{} {
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	return s.leaderCh
}

func (s *Store) leadership() *leadership {
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	return s.lead
}

// node returns the raft node, or ErrNotOpen or ErrClosed.
func (s *Store) node() (*raft.Raft, error) {
	r := s.raft.Load()
	if r == nil {
		if s.isClosed() {
			return nil, ErrClosed
		}
		return nil, ErrNotOpen
	}
	if r.State() == raft.Shutdown {
		return nil, ErrClosed
	}
	return r, nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// notLeader returns a *NotLeaderError naming the leader raft knows.
func notLeader(r *raft.Raft, cause error) *NotLeaderError {
	addr, id := r.LeaderWithID()
	return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr), Err: cause}
}

// raftError maps raft's errors onto the store's, so no caller needs raft.
func raftError(r *raft.Raft, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return notLeader(r, nil)
	case errors.Is(err, raft.ErrLeadershipLost):
		return notLeader(r, ErrLeadershipLost)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	}
	return err
}

// await waits for a raft future, or for ctx. When ctx ends first the
// operation goes on inside raft and its outcome is unknown; the goroutine
// that waits for it ends when raft answers the future. Raft answers every
// future while it runs (at the latest when leadership is lost) but none
// still queued when it shuts down, so the goroutine is counted in
// s.futures, which Close lets raft answer before it shuts raft down
// (stopFutures); one started while Close runs is not counted.
func (s *Store) await(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	s.futuresMu.Lock()
	counted := !s.futuresClosed
	if counted {
		s.futures.Add(1)
	}
	s.futuresMu.Unlock()
	return s.waitAnswer(ctx, f, counted)
}

// waitAnswer waits for f's answer or for ctx. If counted, f is one of
// s.futures, marked done once raft answers it, even after ctx ended.
func (s *Store) waitAnswer(ctx context.Context, f raft.Future, counted bool) error {
	done := make(chan error, 1)
	go func() {
		if counted {
			defer s.futures.Done()
		}
		done <- f.Error()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// verifyLeader asks raft whether a quorum still acknowledges this node as
// the leader, and waits for the answer or for ctx. Raft (v1.7.3) queues
// the request in a buffered channel and, when it shuts down, answers none
// of those still queued: a request made just before or after the shutdown
// would wait forever. So Close refuses new requests and lets raft answer
// the pending ones before it shuts raft down; a refused one is ErrClosed.
func (s *Store) verifyLeader(ctx context.Context, r *raft.Raft) error {
	s.futuresMu.Lock()
	if s.futuresClosed {
		s.futuresMu.Unlock()
		return ErrClosed
	}
	s.futures.Add(1)
	f := r.VerifyLeader()
	s.futuresMu.Unlock()
	return s.waitAnswer(ctx, f, true)
}

// stopFutures refuses new VerifyLeader requests, stops counting the
// futures await waits for, and waits for raft, still running, to answer
// those counted: a leader answers a leadership check once a quorum
// acknowledges it or when it steps down (its lease runs out), an entry
// once committed or when leadership is lost, a follower at once. After
// verifyWait it gives up: their goroutines then stay.
func (s *Store) stopFutures() {
	s.futuresMu.Lock()
	s.futuresClosed = true
	s.futuresMu.Unlock()
	done := make(chan struct{})
	go func() {
		s.futures.Wait()
		close(done)
	}()
	t := time.NewTimer(verifyWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.logger.Warn("raft operations still unanswered; shutting raft down anyway", "waited", verifyWait)
	}
}

// verifyWait bounds how long Close waits for raft to answer the pending
// leadership checks: many times a leader lease.
const verifyWait = 5 * time.Second

// timeout returns how long raft may take to accept an operation: until
// ctx's deadline, else def.
func timeout(ctx context.Context, def time.Duration) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond), nil
	}
	return def, nil
}

// Span attribute keys of a raft apply.
const (
	attrCommand    = "squall.raft.command"
	attrEntryBytes = "squall.raft.entry_bytes"
	attrRaftIndex  = "squall.raft.index"
)

// leaderNode returns the raft node if this node is the leader.
func (s *Store) leaderNode() (*raft.Raft, error) {
	r, err := s.node()
	if err != nil {
		return nil, err
	}
	if r.State() != raft.Leader {
		return nil, notLeader(r, nil)
	}
	return r, nil
}

// submit appends an entry to the raft log on the leader and returns the
// state machine's response once the entry is committed and applied here.
// ext, if not nil, becomes the entry's raft extensions (see memberExt).
func (s *Store) submit(ctx context.Context, label string, data, ext []byte) (any, error) {
	r, err := s.leaderNode()
	if err != nil {
		return nil, err
	}
	d, err := timeout(ctx, s.cfg.ApplyTimeout)
	if err != nil {
		return nil, err
	}
	var span trace.Span
	if s.tracer != nil {
		_, span = s.tracer.Start(ctx, "raft apply "+label, trace.WithAttributes(attribute.String(attrCommand, label),
			attribute.Int(attrEntryBytes, len(data))))
		defer span.End()
	}
	start := time.Now()
	var f raft.ApplyFuture
	if ext != nil {
		f = r.ApplyLog(raft.Log{Data: data, Extensions: ext}, d)
	} else {
		f = r.Apply(data, d)
	}
	if err := s.await(ctx, f); err != nil {
		err = raftError(r, err)
		if span != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "not applied")
		}
		return nil, err
	}
	s.metrics.applyDuration.WithLabelValues(label).Observe(time.Since(start).Seconds())
	if span != nil {
		span.SetAttributes(attribute.Int64(attrRaftIndex, int64(f.Index())))
	}
	return f.Response(), nil
}

// Apply submits one command on the leader and returns its result once it
// is committed and applied. A refused command is a nil error with
// Result.Err set; the error is about the submission itself: a
// *NotLeaderError, ErrTimeout, ErrClosed, ErrInvalidCommand or ctx's error.
// After ErrLeadershipLost or a ctx error the command may still commit.
//
// sess is the session of the request that submits cmd, or nil: with one,
// cmd is applied at most once per session key (see [Session]). Only a
// write of the draft, the active tree or a finding's triage takes a
// session, and a session wraps one command: anything else is
// ErrInvalidCommand.
func (s *Store) Apply(ctx context.Context, sess *Session, cmd Command) (Result, error) {
	if cmd == nil {
		return Result{}, fmt.Errorf("%w: nil command", ErrInvalidCommand)
	}
	// The label is the command's as submitted (a deploy stays "deploy"
	// in the apply metrics whatever form it is written in).
	label := cmd.cmdType().String()
	level := s.ClusterFeatureLevel()
	cmd, err := s.versioned(cmd, level)
	if err != nil {
		return Result{}, err
	}
	wrapped, err := s.withSession(sess, cmd, level)
	if err != nil {
		return Result{}, err
	}
	data, err := encodeCommandAt(wrapped, level)
	if err != nil {
		return Result{}, err
	}
	var x *auditExt
	if audited(cmd) {
		x = s.auditContext(ctx, level)
	}
	var ext []byte
	if m, ok := cmd.(SetMember); ok {
		ext = encodeMemberExt(m.FeatureLevel, x)
	} else if recordsLevel(cmd) || x != nil {
		ext = encodeWrittenExt(level, x)
	}
	resp, err := s.submit(ctx, label, data, ext)
	if err != nil {
		return Result{}, fmt.Errorf("apply %s: %w", cmd.cmdType(), err)
	}
	res, ok := resp.(Result)
	if !ok {
		return Result{}, fmt.Errorf("apply %s: unexpected response %T", cmd.cmdType(), resp)
	}
	return res, nil
}

// Batch submits several commands in one raft log entry, which costs about
// as much as one command. They are applied in order, each on the state the
// previous ones left, and each has its own result: a refused command does
// not stop the others and nothing is rolled back.
func (s *Store) Batch(ctx context.Context, cmds ...Command) ([]Result, error) {
	level := s.ClusterFeatureLevel()
	cmds = slices.Clone(cmds)
	for i, c := range cmds {
		if c == nil {
			continue // encodeBatch refuses it
		}
		var err error
		if cmds[i], err = s.versioned(c, level); err != nil {
			return nil, err
		}
	}
	data, err := encodeBatch(cmds)
	if err != nil {
		return nil, err
	}
	var x *auditExt
	if slices.ContainsFunc(cmds, audited) {
		x = s.auditContext(ctx, level)
	}
	var ext []byte
	if slices.ContainsFunc(cmds, recordsLevel) || x != nil {
		ext = encodeWrittenExt(level, x)
	}
	resp, err := s.submit(ctx, typeBatch.String(), data, ext)
	if err != nil {
		return nil, fmt.Errorf("apply batch: %w", err)
	}
	res, ok := resp.([]Result)
	if !ok {
		return nil, fmt.Errorf("apply batch: unexpected response %T", resp)
	}
	return res, nil
}

// do applies cmd with sess (nil: none) and turns a refusal into the
// error.
func (s *Store) do(ctx context.Context, sess *Session, cmd Command) (uint64, error) {
	res, err := s.Apply(ctx, sess, cmd)
	if err != nil {
		return 0, err
	}
	return res.Index, res.Err
}

// ReplaceActive replaces the active tree and returns its new index. A tree
// over the limits (config.CheckTreeLimits) is refused with ErrInvalidTree
// and a *config.LimitError, before anything is submitted.
func (s *Store) ReplaceActive(ctx context.Context, tree *config.Node) (uint64, error) {
	if err := checkTreeLimits(tree); err != nil {
		return 0, err
	}
	return s.do(ctx, nil, ReplaceActive{Tree: tree})
}

// checkTreeLimits checks a whole tree against the limits, before it is
// submitted: the state machine does not check them on a whole tree (the
// entries of older releases must apply alike), so a whole tree passes
// them here, on the leader, like every edit does in the API.
func checkTreeLimits(tree *config.Node) error {
	if tree == nil {
		return nil // the command's own check refuses it
	}
	if _, err := config.CheckTreeLimits(tree); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTree, err)
	}
	return nil
}

// CreateDraft makes a new draft owned by owner, a copy of the active tree,
// replacing any existing draft, and returns its id.
func (s *Store) CreateDraft(ctx context.Context, owner string) (string, error) {
	id, err := s.newID()
	if err != nil {
		return "", err
	}
	if err := s.CreateDraftID(ctx, nil, id, owner); err != nil {
		return "", err
	}
	return id, nil
}

// NewDraftID returns a new draft id, for CreateDraftID.
func (s *Store) NewDraftID() (string, error) { return s.newID() }

// CreateDraftID is CreateDraft with the id chosen by the caller (with
// NewDraftID), e.g. to record its answer before (see Session.SetAnswer),
// submitted with sess (nil: none; see Apply).
func (s *Store) CreateDraftID(ctx context.Context, sess *Session, id, owner string) error {
	_, err := s.do(ctx, sess, CreateDraft{ID: id, Owner: owner, Now: s.now()})
	return err
}

// EditDraft replaces the tree of draft id, owned by user. See [EditDraft].
func (s *Store) EditDraft(ctx context.Context, id, user string, tree *config.Node) error {
	_, err := s.do(ctx, nil, EditDraft{ID: id, User: user, Tree: tree, Now: s.now()})
	return err
}

// TakeOver makes user the owner of draft id, submitted with sess (nil:
// none; see Apply).
func (s *Store) TakeOver(ctx context.Context, sess *Session, id, user string) error {
	_, err := s.do(ctx, sess, TakeOver{ID: id, User: user})
	return err
}

// Deploy makes draft id, owned by user, the active tree, and returns the
// active tree's new index.
func (s *Store) Deploy(ctx context.Context, id, user string) (uint64, error) {
	return s.do(ctx, nil, Deploy{ID: id, User: user})
}

// DeployScoped deploys draft id, owned by user, whose authorization ends
// at the node scope: see [DeployScoped]. A scope of the root alone (or
// none) deploys as Deploy does. It is submitted with sess (nil: none; see
// Apply).
func (s *Store) DeployScoped(ctx context.Context, sess *Session, id, user string, scope []string) (uint64, error) {
	if len(scope) <= 1 {
		return s.do(ctx, sess, Deploy{ID: id, User: user})
	}
	return s.do(ctx, sess, DeployScoped{ID: id, User: user, Scope: scope})
}

// DeleteDraft deletes draft id, owned by user, submitted with sess (nil:
// none; see Apply).
func (s *Store) DeleteDraft(ctx context.Context, sess *Session, id, user string) error {
	_, err := s.do(ctx, sess, DeleteDraft{ID: id, User: user})
	return err
}

// Active returns a copy of the active tree and its index (0 for the
// initial tree, the root filter alone) from this node's state. For a
// linearizable read call ConsistentRead first.
func (s *Store) Active() (*config.Node, uint64) {
	f := s.fsm.Load()
	if f == nil {
		return config.NewRoot(), 0
	}
	return f.active()
}

// Draft returns a copy of the draft from this node's state, or ErrNoDraft.
func (s *Store) Draft() (*Draft, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, ErrNotOpen
	}
	return f.draft()
}

// Index returns the state index: the raft log index of the last change.
func (s *Store) Index() uint64 {
	f := s.fsm.Load()
	if f == nil {
		return 0
	}
	idx, _ := f.indexes()
	return idx
}

// WaitActive returns the active tree as soon as its index exceeds after,
// at once if it already does, or the current tree when ctx ends (a
// Consul-style blocking query: the caller compares the index). The error is
// only ErrNotOpen or ErrClosed. It reads this node's state.
func (s *Store) WaitActive(ctx context.Context, after uint64) (*config.Node, uint64, error) {
	f := s.fsm.Load()
	if f == nil {
		return nil, 0, ErrNotOpen
	}
	return f.waitActive(ctx, after)
}

// ConsistentRead returns nil once reading this node's state is
// linearizable: this node is the leader, its post-election barrier has
// completed in the current term (the state holds every entry committed
// before this term), and a quorum still acknowledges its leadership
// (VerifyLeader). Otherwise it returns a *NotLeaderError, ErrClosed or
// ctx's error.
func (s *Store) ConsistentRead(ctx context.Context) error {
	for {
		changed := s.leaderChanged()
		r, err := s.leaderNode()
		if err != nil {
			return err
		}
		l := s.leadership()
		if l == nil || l.term != r.CurrentTerm() {
			// Raft already leads in this term; leaderLoop has not caught up.
			select {
			case <-changed:
				continue
			case <-s.stop:
				return ErrClosed
			case <-ctx.Done():
				return fmt.Errorf("consistent read: %w", ctx.Err())
			}
		}
		select {
		case <-l.ready:
		case <-l.lost:
			continue
		case <-s.stop:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("consistent read: %w", ctx.Err())
		}
		if err := s.verifyLeader(ctx, r); err != nil {
			return fmt.Errorf("consistent read: %w", raftError(r, err))
		}
		if r.CurrentTerm() == l.term {
			return nil
		}
	}
}

// Remove removes member id from the cluster. Only the leader can.
func (s *Store) Remove(ctx context.Context, id string) error {
	r, err := s.leaderNode()
	if err != nil {
		return err
	}
	servers, err := s.servers(ctx, r)
	if err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	found := false
	for _, srv := range servers {
		found = found || srv.ID == raft.ServerID(id)
	}
	if !found {
		return fmt.Errorf("remove %s: %w", id, ErrUnknownMember)
	}
	d, err := timeout(ctx, s.cfg.ApplyTimeout)
	if err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	if err := s.await(ctx, r.RemoveServer(raft.ServerID(id), 0, d)); err != nil {
		return fmt.Errorf("remove %s: %w", id, raftError(r, err))
	}
	s.logger.Info("removed member", "member", id)
	// Forget its HTTP address. A leader that removed itself is no longer
	// leader and cannot: the entry then stays, unused, since members are
	// listed from the raft configuration.
	if _, err := s.Apply(ctx, nil, DeleteMember{ID: id}); err != nil {
		s.logger.Info("removed member's HTTP address not deleted", "member", id, "error", err)
	}
	return nil
}

// SetMember records the HTTP address of member id (see [SetMember]), which
// advertises no feature level (see SetMemberLevel). Only the leader can.
func (s *Store) SetMember(ctx context.Context, id, httpAddr string) error {
	return s.SetMemberLevel(ctx, id, httpAddr, 0)
}

// SetMemberLevel records the HTTP address of member id and the feature
// level it advertises (see [SetMember]). It submits nothing when this
// node's state already has both. Only the leader can.
func (s *Store) SetMemberLevel(ctx context.Context, id, httpAddr string, level int) error {
	if f := s.fsm.Load(); f != nil && id != "" && f.httpAddr(id) == httpAddr && f.levels().get(id) == max(level, 0) {
		if _, err := s.leaderNode(); err != nil {
			return err
		}
		return nil
	}
	_, err := s.do(ctx, nil, SetMember{ID: id, HTTPAddr: httpAddr, FeatureLevel: level})
	return err
}

// MemberLevel returns the feature level member id advertised, in this
// node's state (0: none).
func (s *Store) MemberLevel(id string) int {
	f := s.fsm.Load()
	if f == nil {
		return 0
	}
	return f.levels().get(id)
}

// DeleteMember forgets the HTTP address of member id. Only the leader can.
func (s *Store) DeleteMember(ctx context.Context, id string) error {
	_, err := s.do(ctx, nil, DeleteMember{ID: id})
	return err
}

// HTTPAddr returns the HTTP address recorded for member id in this node's
// state, or "" if none is.
func (s *Store) HTTPAddr(id string) string {
	f := s.fsm.Load()
	if f == nil {
		return ""
	}
	return f.httpAddr(id)
}

func (s *Store) servers(ctx context.Context, r *raft.Raft) ([]raft.Server, error) {
	f := r.GetConfiguration()
	if err := s.await(ctx, f); err != nil {
		return nil, fmt.Errorf("get configuration: %w", raftError(r, err))
	}
	return f.Configuration().Servers, nil
}

// ID returns this node's id.
func (s *Store) ID() string { return s.cfg.NodeID }

// Addr returns this node's advertised raft address ("" before Open).
func (s *Store) Addr() string {
	l := s.streamLayer()
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

func (s *Store) streamLayer() *streamLayer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream
}

// Leader returns the id and raft address of the leader this node knows,
// or empty strings during an election.
func (s *Store) Leader() (id, addr string) {
	r := s.raft.Load()
	if r == nil {
		return "", ""
	}
	a, i := r.LeaderWithID()
	return string(i), string(a)
}

// LastContact returns when this node last heard from the leader (raft's
// last contact; the zero time if never). On the leader it is not kept.
func (s *Store) LastContact() time.Time {
	r := s.raft.Load()
	if r == nil {
		return time.Time{}
	}
	return r.LastContact()
}

// LeaderChanged returns a channel that is closed when the leader this
// node knows changes, or this node gains or loses leadership. Take a new
// channel after each change.
func (s *Store) LeaderChanged() <-chan struct{} { return s.leaderChanged() }

// IsLeader reports whether this node is the leader.
func (s *Store) IsLeader() bool {
	r := s.raft.Load()
	return r != nil && r.State() == raft.Leader
}

// WaitForLeader waits until this node knows a leader and returns it.
func (s *Store) WaitForLeader(ctx context.Context) (id, addr string, err error) {
	r, err := s.node()
	if err != nil {
		return "", "", err
	}
	for {
		ch := s.leaderChanged()
		if a, i := r.LeaderWithID(); a != "" {
			return string(i), string(a), nil
		}
		select {
		case <-ch:
		case <-s.stop:
			return "", "", ErrClosed
		case <-ctx.Done():
			return "", "", fmt.Errorf("wait for leader: %w", ctx.Err())
		}
	}
}

// ReadyLag is how many committed entries a node may have left to apply
// and still be ready: under a steady stream of writes the state machine
// always trails the commit index by a batch or two, and readiness must
// not flap with it.
const ReadyLag = 1024

// Ready reports whether this node can serve: it knows a leader, has
// applied the entries it knows to be committed but for at most ReadyLag,
// and, if it is the leader, has completed its post-election barrier.
func (s *Store) Ready() bool {
	r := s.raft.Load()
	if r == nil || r.State() == raft.Shutdown {
		return false
	}
	if a, _ := r.LeaderWithID(); a == "" {
		return false
	}
	if applied, commit := r.AppliedIndex(), r.CommitIndex(); applied+ReadyLag < commit {
		return false
	}
	if r.State() != raft.Leader {
		return true
	}
	l := s.leadership()
	if l == nil || l.term != r.CurrentTerm() {
		return false
	}
	select {
	case <-l.ready:
		return true
	default:
		return false
	}
}

// Snapshot makes raft take a snapshot now and compact its log (beyond
// Config.TrailingLogs). Raft also snapshots on its own (SnapshotInterval,
// SnapshotThreshold).
func (s *Store) Snapshot(ctx context.Context) error {
	r, err := s.node()
	if err != nil {
		return err
	}
	if err := s.await(ctx, r.Snapshot()); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("snapshot: %w", raftError(r, err))
	}
	return nil
}

// Member is a member of the cluster's raft configuration.
type Member struct {
	ID string `json:"id"`
	// Addr is the member's raft address.
	Addr string `json:"addr"`
	// HTTPAddr is the member's HTTP address recorded with SetMember, or
	// empty when none is (yet).
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
	// FeatureLevel is the level of log entry forms the member advertised
	// when it registered (see [FeatureLevel]; 0: none).
	FeatureLevel int `json:"feature_level"`
}

// Stats is a view of this node's raft and state machine.
type Stats struct {
	NodeID string `json:"node_id"`
	Addr   string `json:"addr"`
	// State is Follower, Candidate, Leader or Shutdown.
	State      string `json:"state"`
	LeaderID   string `json:"leader_id"`
	LeaderAddr string `json:"leader_addr"`
	Term       uint64 `json:"term"`
	// CommitIndex is the highest log index known committed; AppliedIndex the
	// highest handed to the state machine.
	CommitIndex       uint64 `json:"commit_index"`
	AppliedIndex      uint64 `json:"applied_index"`
	LastLogIndex      uint64 `json:"last_log_index"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
	// StateIndex and ActiveIndex are the state's and the active tree's indexes.
	StateIndex  uint64   `json:"state_index"`
	ActiveIndex uint64   `json:"active_index"`
	Members     []Member `json:"members"`
	// FeatureLevel is the cluster's level of log entry forms: the lowest
	// its members advertise (see [Store.ClusterFeatureLevel]).
	FeatureLevel int `json:"feature_level"`
}

// Stats returns this node's view of the cluster.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	r, err := s.node()
	if err != nil {
		return Stats{}, err
	}
	servers, err := s.servers(ctx, r)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	la, li := r.LeaderWithID()
	st := Stats{
		NodeID:            s.cfg.NodeID,
		Addr:              s.Addr(),
		State:             r.State().String(),
		LeaderID:          string(li),
		LeaderAddr:        string(la),
		Term:              r.CurrentTerm(),
		CommitIndex:       r.CommitIndex(),
		AppliedIndex:      r.AppliedIndex(),
		LastLogIndex:      r.LastIndex(),
		LastSnapshotIndex: statUint(r.Stats(), "last_snapshot_index"),
	}
	var (
		httpAddrs map[string]string
		levels    *levelMap
	)
	if f := s.fsm.Load(); f != nil {
		st.StateIndex, st.ActiveIndex = f.indexes()
		httpAddrs = f.members()
		levels = f.levels()
	}
	st.FeatureLevel = s.ClusterFeatureLevel()
	for _, srv := range servers {
		st.Members = append(st.Members, Member{
			ID:       string(srv.ID),
			Addr:     string(srv.Address),
			HTTPAddr: httpAddrs[string(srv.ID)],
			Voter:    srv.Suffrage == raft.Voter,
			Leader:   srv.ID == li,

			FeatureLevel: levels.get(string(srv.ID)),
		})
	}
	return st, nil
}

// TransferLeadership hands this node's leadership to the most up-to-date
// voter: it returns once this node stepped down (raft gives up after its
// election timeout, an error), or when ctx ends. It returns nil
// at once when this node does not lead, and ErrNoTransferTarget when it
// is the only voter. While the transfer runs, raft refuses new commands
// (*NotLeaderError), so callers stop submitting first.
func (s *Store) TransferLeadership(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("transfer leadership: %w", err)
	}
	r, err := s.node()
	if err != nil {
		return err
	}
	if r.State() != raft.Leader {
		return nil
	}
	servers, err := s.servers(ctx, r)
	if err != nil {
		return fmt.Errorf("transfer leadership: %w", err)
	}
	others := 0
	for _, srv := range servers {
		if srv.Suffrage == raft.Voter && srv.ID != raft.ServerID(s.cfg.NodeID) {
			others++
		}
	}
	if others == 0 {
		return fmt.Errorf("transfer leadership: %w", ErrNoTransferTarget)
	}
	start := time.Now()
	if err := s.await(ctx, r.LeadershipTransfer()); err != nil {
		return fmt.Errorf("transfer leadership: %w", raftError(r, err))
	}
	s.logger.Info("transferred leadership", "took", time.Since(start))
	return nil
}
