package master

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/httpguard"
	"github.com/squallhq/squall/internal/metricset"
	"github.com/squallhq/squall/internal/sleep"
	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/store"
)

// Server is one master node: the replicated store, the HTTP API that
// serves it, and the forwarding of leader-only requests to the leader.
type Server struct {
	cfg        Config
	logger     *slog.Logger
	store      *store.Store
	tokens     *auth.Verifier
	joinSecret atomic.Pointer[joinSecret] // set by New or Start; nil refuses every join
	metrics    *metrics
	tracer     trace.Tracer // nil: tracing off
	gatherer   prometheus.Gatherer
	mux        *http.ServeMux
	transport  *http.Transport // to the leader
	// forwardGrace is how long a forwarded request waits for a leader
	// that this node no longer follows (raft's heartbeat timeout).
	forwardGrace time.Duration
	errLog       *log.Logger // net/http's and the proxy's error log
	clientErrs   *httpguard.ClientErrors

	errCh chan error // background failures, for Run

	readyChecks []readyCheck // added before Start, read-only after

	routesMu sync.Mutex                    // guards patterns
	patterns []registered                  // registered on mux, in order
	prefixes atomic.Pointer[[]prefixRoute] // see prefixRoute

	leadMu   sync.Mutex    // guards the handover fields below
	handover bool          // the node no longer serves requests as leader
	serving  int           // requests being served as leader
	idle     chan struct{} // closed when serving drops to 0 during a handover

	mu       sync.Mutex // guards the lifecycle fields below
	started  bool
	stopped  bool
	ln       net.Listener
	httpSrv  *http.Server
	httpAdv  string             // advertised HTTP address
	bg       context.Context    // ends when the server shuts down
	bgCancel context.CancelFunc // ends bg
	wg       sync.WaitGroup     // background goroutines
}

// New checks cfg, reads the key files it names and builds a Server. It
// starts nothing and listens on nothing; Start or Run does.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:    cfg,
		logger: cfg.Logger.With("component", "master", keyNode, cfg.NodeID),
		tracer: tracing.Tracer(cfg.TracerProvider, "master"),
		mux:    http.NewServeMux(),
		errCh:  make(chan error, 1),
	}
	s.errLog = slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn)
	s.clientErrs = httpguard.NewClientErrors(s.logger, 0)

	s.tokens = &auth.Verifier{AllowUnsigned: cfg.AllowUnsignedTokens, Leeway: 30 * time.Second}
	var err error
	if cfg.TokenHMACKeyFile != "" {
		if s.tokens.HMACKey, err = auth.LoadHMACKey(cfg.TokenHMACKeyFile); err != nil {
			return nil, fmt.Errorf("master: token key (--token-hmac-key-file, SQUALL_TOKEN_HMAC_KEY_FILE): %w", err)
		}
	}
	if cfg.TokenEd25519PublicKeyFile != "" {
		if s.tokens.PublicKey, err = auth.LoadEd25519Public(cfg.TokenEd25519PublicKeyFile); err != nil {
			return nil, fmt.Errorf("master: token key (--token-ed25519-public-key-file, SQUALL_TOKEN_ED25519_PUBLIC_KEY_FILE): %w", err)
		}
	}
	if cfg.JoinTokenFile != "" {
		tok, err := loadJoinToken(cfg.JoinTokenFile)
		if err != nil {
			return nil, fmt.Errorf("master: %w", err)
		}
		s.joinSecret.Store(newJoinSecret(tok))
	}

	reg, gath, err := metricset.Resolve(cfg.Registerer, cfg.Gatherer)
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	s.gatherer = gath
	if s.metrics, err = newMetrics(reg); err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}

	sc := cfg.storeConfig()
	sc.Registerer = reg
	s.forwardGrace, _, _, _ = sc.RaftTimeouts()
	if s.store, err = store.New(sc); err != nil {
		s.metrics.Unregister()
		return nil, fmt.Errorf("master: %w", err)
	}
	dial := (&net.Dialer{Timeout: cfg.ForwardDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	if cfg.ForwardDial != nil {
		dial = cfg.ForwardDial
	}
	s.transport = &http.Transport{
		DialContext:           dial,
		ResponseHeaderTimeout: cfg.ForwardTimeout,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
	}
	s.routes()
	return s, nil
}

// Paths of the master's own endpoints.
const (
	pathCluster = "/squall/v1/cluster"
	pathMembers = "/squall/v1/cluster/members/"
	pathJoin    = "/squall/v1/cluster/join"
	pathWatch   = "/squall/v1/tree/active"
	pathBackup  = "/squall/v1/backup"
	pathRestore = "/squall/v1/restore"
	pathDraft   = "/squall/v1/draft"
)

// routes registers the master's own endpoints.
func (s *Server) routes() {
	s.handle("GET /healthz", s.wrap(s.handleHealth))
	s.handle("GET /readyz", s.wrap(s.handleReady))
	s.handle("GET /metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{ErrorLog: s.errLog}))
	s.handle("GET "+pathCluster, s.wrap(s.handleCluster))
	s.handle("GET "+pathWatch, s.wrap(s.handleWatch))
	s.handle("DELETE "+pathMembers+"{id}", s.onLeader(s.wrap(s.handleRemove), false, true, nil))
	s.handle("POST "+pathJoin, s.joinAuth(s.onLeader(s.wrap(s.handleJoin), false, false, nil)))
	s.handle("GET "+pathBackup, s.onLeader(s.wrap(s.handleBackup), false, true, nil))
	s.handle("POST "+pathRestore, s.onLeader(s.wrap(s.handleRestore), false, true, nil))
	s.handle("GET "+pathDraft, s.onLeader(s.wrap(s.handleDraft), false, true, nil))
}

// Placement says which node serves the requests of a mounted handler.
type Placement int

const (
	// OnAnyNode serves requests on the node that receives them, from its
	// local state (which may lag the leader's by a few entries).
	OnAnyNode Placement = iota
	// OnLeader serves requests on the leader, with linearizable state. A
	// follower forwards them to the leader's HTTP address, preserving the
	// method, path, query, headers (Authorization included) and body, and
	// relays the leader's answer. On the leader, every request waits for
	// Store.ConsistentRead first. While no leader is known, a request
	// waits up to Config.LeaderWait, then is answered 503 with
	// Retry-After and a JSON error (code NO_LEADER).
	OnLeader
	// OnLeaderWrite is OnLeader, except that on the leader the writes (PUT,
	// POST, PATCH and DELETE requests) skip Store.ConsistentRead: the
	// handler runs as soon as the node believes it leads. Reads (GET,
	// HEAD and any other method) keep the consistent read.
	//
	// It is only for handlers whose every write is safe on a node that
	// believes it leads but may have been deposed, that is, a handler
	// whose writes
	//   - validate against the state only inside the state machine, when
	//     their command is applied (a check the handler made on its own
	//     state before submitting could read a stale state), and
	//   - acknowledge only what Store.Apply (or a call built on it)
	//     returned, and read, if at all, only this node's state after
	//     that Apply returned.
	//
	// Why that is enough: raft commits an entry only with a quorum, so a
	// deposed or cut-off leader's Apply fails (ErrNotLeader,
	// ErrLeadershipLost, a timeout) and the handler answers 503; it never
	// acknowledges an uncommitted write. A committed entry is applied
	// after every entry before it, in the same order on every node, so
	// checks made at apply time see the whole history whichever node led
	// when the request came in, and the state read after Apply returned
	// holds at least that entry. The quorum check of the consistent read
	// adds nothing to such a write but a round trip to the followers.
	OnLeaderWrite
)

// String returns the placement's name.
func (p Placement) String() string {
	switch p {
	case OnAnyNode:
		return "any node"
	case OnLeader:
		return "leader"
	case OnLeaderWrite:
		return "leader, writes without consistent read"
	}
	return "Placement(" + strconv.Itoa(int(p)) + ")"
}

// MountOption adjusts how Mount serves a handler.
type MountOption func(*mountOptions)

type mountOptions struct {
	idempotent []string
	requestIDs func(*http.Request) bool // nil: no request ids
}

// RequestIDs declares that the handler's writes (PUT, POST, PATCH and
// DELETE requests of the methods not declared with IdempotentMethods)
// each submit their change as one store.Store.Apply call with the
// request's session (store.SessionFromContext of the request's context),
// and check nothing against the state before it that their own first
// attempt could have changed, unless they record their answer first with
// store.Session.SetAnswer. The node that receives such a write gives it a
// request id (HeaderRequestID) or takes the client's
// HeaderIdempotencyKey; the leader serves it with its session (see
// store.Session), so that the state machine applies it at most once;
// and a follower whose leader failed while it had the request sends it
// again to the next leader, as it does with the idempotent methods.
//
// With a filter, only the writes for which it reports true get an id and
// are resent: e.g. not a request that acts outside the state (a test
// event that runs actions), which the state machine cannot deduplicate.
func RequestIDs(filter ...func(r *http.Request) bool) MountOption {
	return func(o *mountOptions) {
		o.requestIDs = func(r *http.Request) bool {
			for _, f := range filter {
				if !f(r) {
					return false
				}
			}
			return true
		}
	}
}

// IdempotentMethods declares that the handler's requests of these methods
// (besides GET, HEAD and OPTIONS, which always are) change nothing when
// they are applied again, even after other writes: e.g. an insert that
// deduplicates by content. (A PUT or PATCH that sets values is not: sent
// again after another client's write, it would undo that write; such
// writes are resent safely with RequestIDs.) When a leader fails while it has such
// a request, the follower that forwarded it sends it again to the next
// leader instead of answering 503 LEADER_LOST.
func IdempotentMethods(methods ...string) MountOption {
	return func(o *mountOptions) { o.idempotent = append(o.idempotent, methods...) }
}

// Mount registers h for pattern (an http.ServeMux pattern, e.g.
// "/api/v2_beta/" for every method and path below it), served where p
// says, behind the same request metrics as the master's own routes. It
// must be called before Start. It returns an error for a pattern the mux
// refuses (invalid, or conflicting with a registered one) and for a
// server already started.
func (s *Server) Mount(pattern string, h http.Handler, p Placement, opts ...MountOption) (err error) {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started {
		return fmt.Errorf("mount %s: the server is already started", pattern)
	}
	var o mountOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.requestIDs != nil && p != OnAnyNode {
		h = s.sessions(h, o.idempotent)
	}
	switch p {
	case OnAnyNode:
	case OnLeader:
		h = s.onLeader(h, false, true, o.requestIDs, o.idempotent...)
	case OnLeaderWrite:
		h = s.onLeader(h, true, true, o.requestIDs, o.idempotent...)
	default:
		return fmt.Errorf("mount %s: unknown placement %d", pattern, p)
	}
	// ServeMux.Handle panics on invalid and conflicting patterns.
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("mount %s: %v", pattern, v)
		}
	}()
	s.handle(pattern, h)
	return nil
}

// readyCheck is a check of AddReadyCheck.
type readyCheck struct {
	name  string
	check func() error
}

// AddReadyCheck makes /readyz depend on check too: the node is ready only
// while the store is and every check returns nil; the first failing
// check's name and error are in the 503 answer. It is for processes that
// serve more than the master on the same address (squall dev). Checks
// run on every /readyz request, so they must be fast. It must be called
// before Start.
func (s *Server) AddReadyCheck(name string, check func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("ready check %s: the server is already started", name)
	}
	if name == "" || check == nil {
		return errors.New("ready check: a name and a check are required")
	}
	s.readyChecks = append(s.readyChecks, readyCheck{name: name, check: check})
	return nil
}

// Handler returns the server's HTTP handler: every route, mounted ones
// included, behind Config.WrapHandler when set, and a handler's panic
// answered 500 with a request id (httpguard.Recover). Start serves it;
// tests may serve it themselves.
func (s *Server) Handler() http.Handler {
	var h http.Handler = http.HandlerFunc(s.serveHTTP)
	if s.cfg.WrapHandler != nil {
		h = s.cfg.WrapHandler(h)
	}
	// Outermost, so that the routes WrapHandler adds (squall dev's intake
	// and engine) are covered too.
	return httpguard.Recover(h, s.logger, s.metrics.panics)
}

// Store returns the node's replicated store, for the API packages to
// read and change the state. It is open between Start and Shutdown.
func (s *Server) Store() *store.Store { return s.store }

// Verifier returns the verifier of API tokens built from the config.
func (s *Server) Verifier() *auth.Verifier { return s.tokens }

// ID returns the node's id.
func (s *Server) ID() string { return s.cfg.NodeID }

// HTTPAddr returns the address the HTTP listener is bound to ("" before
// Start), with the real port when Config.HTTPAddr asked for port 0.
func (s *Server) HTTPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// HTTPAdvertise returns the address other masters use to reach this
// node's HTTP API ("" before Start).
func (s *Server) HTTPAdvertise() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.httpAdv
}

// URL returns the base URL of this node's HTTP API ("" before Start).
func (s *Server) URL() string {
	if a := s.HTTPAdvertise(); a != "" {
		return "http://" + a
	}
	return ""
}

// RaftAddr returns the advertised raft address ("" before Start).
func (s *Server) RaftAddr() string { return s.store.Addr() }

// Err returns a channel that receives an error if the server fails after
// Start: the HTTP listener fails, or the cluster refuses to let this node
// join (a wrong join token, an invalid request). Run returns that error.
func (s *Server) Err() <-chan error { return s.errCh }

// fail reports a background failure; only the first one is kept.
func (s *Server) fail(err error) {
	select {
	case s.errCh <- err:
	default:
	}
}

// Start listens on the HTTP address, opens the store (bootstrapping or
// rejoining as configured), serves HTTP, and starts registering this node
// with the cluster in the background. It returns once the node serves.
// After a failed Start, Shutdown releases what New registered.
func (s *Server) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("master: already started")
	}
	s.started = true
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("master: http listen: %w", err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	adv, err := advertiseHTTP(ln.Addr(), s.cfg.HTTPAdvertise, s.cfg.RaftAdvertise)
	if err != nil {
		return fmt.Errorf("master: %w", err)
	}
	if s.joinSecret.Load() == nil {
		js, err := s.dataDirJoinSecret()
		if err != nil {
			return fmt.Errorf("master: %w", err)
		}
		s.joinSecret.Store(js)
	}
	if err := s.store.Open(ctx); err != nil {
		return fmt.Errorf("master: %w", err)
	}
	s.ln, s.httpAdv = ln, adv
	s.bg, s.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	s.httpSrv = s.cfg.HTTPTimeouts.Server(s.Handler())
	s.httpSrv.ErrorLog = s.errLog
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.httpSrv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.fail(fmt.Errorf("master: serve http: %w", err))
		}
	}()
	go func() {
		defer s.wg.Done()
		s.register(s.bg)
	}()
	s.logger.Info("master started", "http_addr", ln.Addr().String(), "http_advertise", adv,
		"raft_addr", s.store.Addr(), "bootstrap", s.cfg.Bootstrap, "join", s.cfg.JoinURLs)
	return nil
}

// advertiseHTTP picks the HTTP address other masters use: the configured
// one, else the listener's when it is a specific IP, else the raft
// advertise host with the HTTP port.
func advertiseHTTP(bound net.Addr, adv, raftAdv string) (string, error) {
	if adv != "" {
		return adv, nil
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return "", fmt.Errorf("http listener address %s is not TCP", bound)
	}
	if tcp.IP != nil && !tcp.IP.IsUnspecified() {
		return tcp.String(), nil
	}
	if raftAdv != "" {
		host, _, err := net.SplitHostPort(raftAdv)
		if err == nil && host != "" {
			return net.JoinHostPort(host, strconv.Itoa(tcp.Port)), nil
		}
	}
	return "", fmt.Errorf("http address %s cannot be advertised: set an HTTP advertise address", bound)
}

// Shutdown stops the server. A leader first hands its leadership over:
// it stops serving requests as leader (new ones wait for the next leader
// and are forwarded to it), waits for the ones it serves, and transfers
// the leadership to another voter, within Config.TransferTimeout and ctx.
// Then the server stops accepting requests and waits for the running ones
// until ctx ends (then cuts them off), stops the background work, and
// closes the store. Tree watches in progress are answered at once. A
// Server cannot be started again.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	httpSrv, cancel := s.httpSrv, s.bgCancel
	s.mu.Unlock()

	var errs []error
	if httpSrv != nil {
		// Started: the store is open.
		s.handOver(ctx)
	}
	if cancel != nil {
		cancel()
	}
	if httpSrv != nil {
		if err := httpSrv.Shutdown(ctx); err != nil {
			s.logger.Warn("http shutdown cut off requests", keyError, err)
			if err := httpSrv.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close http: %w", err))
			}
		}
	}
	s.wg.Wait()
	s.transport.CloseIdleConnections()
	if err := s.store.Close(); err != nil {
		errs = append(errs, err)
	}
	s.metrics.Unregister()
	s.clientErrs.Close()
	s.logger.Info("master stopped")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("master shutdown: %w", err)
	}
	return nil
}

// handOver stops serving requests as leader and, if this node leads,
// transfers the leadership to another voter, within
// Config.TransferTimeout and ctx. A failed transfer is logged: the
// followers then elect a leader after their heartbeat timeout.
func (s *Server) handOver(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TransferTimeout)
	defer cancel()
	idle := s.beginHandover()
	if !s.store.IsLeader() || ctx.Err() != nil {
		// Not leading, or a shutdown with no time left (a kill).
		return
	}
	start := time.Now()
	select {
	case <-idle:
	case <-ctx.Done():
		s.logger.Warn("transferring the leadership while requests are still served as leader", "waited", time.Since(start))
	}
	err := s.store.TransferLeadership(ctx)
	switch {
	case err == nil:
		id := s.awaitNewLeader(ctx)
		s.logger.Info("leadership handed over", "leader", id, "took", time.Since(start))
	case errors.Is(err, store.ErrNoTransferTarget):
		s.logger.Info("no other voter to hand the leadership to")
	default:
		s.logger.Warn("leadership not handed over; the other nodes elect a leader after their heartbeat timeout", keyError, err)
	}
}

// handoverGrace is how long a node that handed its leadership over keeps
// its connections open once it knows the new leader: the other nodes
// learn it at the same moment, and a request one of them decided to
// forward here just before arrives within it (and is answered "not
// applied", so that it goes to the new leader). Closing the kept-alive
// connections sooner could cut such a request in flight, whose fate the
// forwarding node could not know.
const handoverGrace = 100 * time.Millisecond

// awaitNewLeader waits, within ctx, until this node knows a leader other
// than itself, then for handoverGrace; it returns that leader ("" if
// none is known in time).
func (s *Server) awaitNewLeader(ctx context.Context) string {
	for {
		changed := s.store.LeaderChanged()
		if id, _ := s.store.Leader(); id != "" && id != s.cfg.NodeID {
			sleep.For(ctx, handoverGrace)
			return id
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ""
		}
	}
}

// Run starts the server, serves until ctx ends or the server fails, and
// shuts down gracefully within Config.ShutdownTimeout.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		// Close what Start may have opened.
		return errors.Join(err, s.Shutdown(ctx))
	}
	var runErr error
	select {
	case <-ctx.Done():
		s.logger.Info("shutting down", "reason", context.Cause(ctx))
	case runErr = <-s.errCh:
		s.logger.Error("shutting down after a failure", keyError, runErr)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(runErr, s.Shutdown(sctx))
}
