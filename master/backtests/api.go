package backtests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/backtest"
	"github.com/squallhq/squall/internal/jsonlimit"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/internal/apierror"
	"github.com/squallhq/squall/master/store"
)

// Defaults of [Config].
const (
	DefaultMaxEvents      = backtest.DefaultMaxEvents
	DefaultMaxSample      = 100
	DefaultMaxKept        = 50
	DefaultKeep           = 24 * time.Hour
	DefaultLeaseTimeout   = 30 * time.Second
	DefaultPendingTimeout = 10 * time.Minute
	DefaultMaxAttempts    = 2
	DefaultMaxResultBytes = 8 << 20
	DefaultMaxKeptBytes   = 128 << 20
	// DefaultClaimWait is how long a claim waits for a backtest by
	// default; MaxClaimWait the longest it may ask.
	DefaultClaimWait = 20 * time.Second
	MaxClaimWait     = 60 * time.Second
	// maxRequestBytes bounds the bodies of the requests but results.
	maxRequestBytes = 64 << 10
	// maxErrorBytes bounds an engine's error in a result: it is kept in
	// the backtest's record (at most 64 KiB in the replicated state).
	maxErrorBytes = 8 << 10
	// resultDepth bounds the nesting of a result: a sample's event is at
	// most an event's depth, five levels down.
	resultDepth = jsonlimit.MaxEventDepth + 8
)

// Config configures an [API].
type Config struct {
	// MaxEvents bounds the events of one backtest (a request may ask
	// fewer).
	MaxEvents int64
	// MaxSample bounds the differing events a backtest keeps (at most
	// backtest.MaxSample).
	MaxSample int
	// MaxKept bounds the backtests kept; Keep is how long a finished one
	// is kept.
	MaxKept int
	Keep    time.Duration
	// LeaseTimeout is how long a running backtest waits for its engine's
	// next progress report before it is taken back; MaxAttempts the
	// engines that may claim one before it fails.
	LeaseTimeout time.Duration
	MaxAttempts  int
	// PendingTimeout is how long a backtest waits for an engine.
	PendingTimeout time.Duration
	// MaxResultBytes bounds a result's JSON; MaxKeptBytes the results'
	// JSON kept in all (the oldest finished backtests go first).
	MaxResultBytes int
	MaxKeptBytes   int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Default returns the default configuration.
func Default() Config {
	return Config{MaxEvents: DefaultMaxEvents, MaxSample: DefaultMaxSample, MaxKept: DefaultMaxKept, Keep: DefaultKeep,
		LeaseTimeout: DefaultLeaseTimeout, MaxAttempts: DefaultMaxAttempts, PendingTimeout: DefaultPendingTimeout,
		MaxResultBytes: DefaultMaxResultBytes, MaxKeptBytes: DefaultMaxKeptBytes}
}

// Validate checks c.
func (c Config) Validate() error {
	var errs []error
	if c.MaxEvents < 1 {
		errs = append(errs, fmt.Errorf("max events %d: want 1 or more", c.MaxEvents))
	}
	if c.MaxSample < 0 || c.MaxSample > backtest.MaxSample {
		errs = append(errs, fmt.Errorf("max sample %d: want 0 to %d", c.MaxSample, backtest.MaxSample))
	}
	if c.MaxKept < 1 || c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max kept %d, max attempts %d: want 1 or more", c.MaxKept, c.MaxAttempts))
	}
	if c.Keep <= 0 || c.LeaseTimeout <= 0 || c.PendingTimeout <= 0 {
		errs = append(errs, errors.New("keep, lease timeout and pending timeout must be positive"))
	}
	if c.MaxResultBytes < 64<<10 || c.MaxKeptBytes < c.MaxResultBytes {
		errs = append(errs, fmt.Errorf("max result bytes %d, max kept bytes %d: want 64 KiB ≤ result ≤ kept", c.MaxResultBytes, c.MaxKeptBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("backtests: %w", err)
	}
	return nil
}

// Trees reads the trees a backtest compares (*store.Store).
type Trees interface {
	Active() (*config.Node, uint64)
	Draft() (*store.Draft, error)
	Versions() []store.Version
	VersionTree(n uint64) (store.Version, *config.Node, error)
}

// Tokens verifies the requests' tokens ([auth.Verifier]).
type Tokens interface {
	Verify(header string) (*auth.Claims, error)
}

var (
	_ Trees  = (*store.Store)(nil)
	_ Tokens = (*auth.Verifier)(nil)
)

// API serves the backtests' routes and keeps the backtests.
type API struct {
	cfg    Config
	trees  Trees
	tokens Tokens
	logger *slog.Logger
	reg    *registry
	// keeper keeps the backtests in the replicated state (nil: trees is
	// not a Keeper); persistMu lets one writer at a time write the
	// finished ones.
	keeper    Keeper
	persistMu sync.Mutex
}

// New builds the API. It starts nothing. When trees is a Keeper too (as
// *store.Store is), the backtests are kept in the replicated state from
// feature level store.LevelBacktests on (see Keeper).
func New(cfg Config, trees Trees, tokens Tokens, logger *slog.Logger) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	keeper, _ := trees.(Keeper)
	a := &API{cfg: cfg, trees: trees, tokens: tokens, logger: logger.With("component", "backtests"), keeper: keeper}
	a.reg = newRegistry(cfg, a.keeping)
	return a, nil
}

// Handler returns the routes' handler, to mount at Prefix and Prefix+"/"
// on the leader.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Prefix, a.wrap(auth.Edit, a.serveStart))
	mux.HandleFunc("GET "+Prefix, a.wrap(auth.Edit, a.serveList))
	mux.HandleFunc("GET "+Prefix+"/{id}", a.wrap(auth.Edit, a.serveGet))
	mux.HandleFunc("DELETE "+Prefix+"/{id}", a.wrap(auth.Edit, a.serveDelete))
	mux.HandleFunc("POST "+Prefix+"/{id}/cancel", a.wrap(auth.Edit, a.serveCancel))
	// The engines' routes: the heartbeat's role, and view, which an
	// engine's token has and a satellite's (fleet_report alone) has not:
	// a claim answers whole trees.
	mux.HandleFunc("POST "+ClaimPath, a.wrap(auth.FleetReport, a.serveClaim, auth.View))
	mux.HandleFunc("PUT "+Prefix+"/{id}/progress", a.wrap(auth.FleetReport, a.serveProgress, auth.View))
	mux.HandleFunc("PUT "+Prefix+"/{id}/result", a.wrap(auth.FleetReport, a.serveResult, auth.View))
	return apierror.WithNoRoute(mux, func(w http.ResponseWriter, _ *http.Request, e *apierror.Error) { apierror.Write(w, e) })
}

// answer is a handler's answer: its status (0: 200) and body (nil: none).
type answer struct {
	status int
	body   any
}

type handler func(w http.ResponseWriter, r *http.Request, c *auth.Claims) (answer, error)

// wrap authenticates the request (the token first), checks that it has p
// and each of also on the root, and writes the answer or the error as
// JSON.
func (a *API) wrap(p auth.Permission, h handler, also ...auth.Permission) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := a.tokens.Verify(r.Header.Get("Authorization"))
		for _, q := range append([]auth.Permission{p}, also...) {
			if err == nil {
				err = c.OnRoot(q)
			}
		}
		var ans answer
		if err == nil {
			ans, err = h(w, r, c)
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if ans.status == 0 {
			ans.status = http.StatusOK
		}
		if ans.body == nil {
			w.WriteHeader(ans.status)
			return
		}
		apierror.WriteJSON(w, ans.status, ans.body)
	}
}

// fail answers err.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := apierror.Common(err)
	switch {
	case errors.Is(err, errNotKept):
		e = apierror.Errorf(http.StatusServiceUnavailable, "BACKTEST_NOT_KEPT", "the result of backtest %q is taken but not yet kept by the masters: post it again", r.PathValue("id"))
		e.RetryAfter = 1
	case e != nil:
	case errors.Is(err, errNotFound):
		e = apierror.Errorf(http.StatusNotFound, "BACKTEST_NOT_FOUND", "no backtest %q (deleted, expired, or kept by a leader that changed since)", r.PathValue("id"))
		e.Params = map[string]string{"ID": r.PathValue("id")}
	case errors.Is(err, errNotClaimer):
		e = apierror.Errorf(http.StatusConflict, "NOT_CLAIMER", "backtest %q is not running on this engine (taken back, cancelled or finished)", r.PathValue("id"))
	case errors.As(err, new(*endedError)):
		e = apierror.Errorf(http.StatusConflict, "BACKTEST_ENDED", "backtest %q ended without this engine: %s", r.PathValue("id"), err)
	case errors.Is(err, errFinished):
		e = apierror.Errorf(http.StatusConflict, "BACKTEST_FINISHED", "backtest %q is finished: delete it instead", r.PathValue("id"))
	case errors.Is(err, errFull):
		e = apierror.Errorf(http.StatusTooManyRequests, "TOO_MANY_BACKTESTS", "%d backtests are pending or running, as many as the masters keep: wait for one to finish, or cancel one", a.cfg.MaxKept)
		e.RetryAfter = 10
	default:
		e = apierror.Internal(err)
	}
	pub, id := e.Public()
	if id != "" {
		a.logger.ErrorContext(r.Context(), "request failed", "path", r.URL.Path, "request_id", id, "err", err)
	}
	apierror.Write(w, pub)
}

// invalid is a 400 naming the field.
func invalid(field, format string, args ...any) error {
	e := apierror.Errorf(http.StatusBadRequest, "INVALID_FIELD", "%s: %s", field, fmt.Sprintf(format, args...))
	e.Params = map[string]string{"FIELD": field}
	return e
}

// newID returns a random backtest id.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// serveStart checks a request, copies the trees and keeps a new pending
// backtest.
func (a *API) serveStart(w http.ResponseWriter, r *http.Request, c *auth.Claims) (answer, error) {
	var req Request
	if _, err := apierror.DecodeJSON(w, r, maxRequestBytes, jsonlimit.Limits{}, &req); err != nil {
		return answer{}, err
	}
	now := a.cfg.Now()
	rec := &record{Backtest: Backtest{ID: newID(), CreatedBy: c.User, CreatedMS: now.UnixMilli()}}
	if err := a.resolve(req, now, &rec.Backtest); err != nil {
		return answer{}, err
	}
	active, idx := a.trees.Active()
	rec.ActiveIndex = idx
	if vs := a.trees.Versions(); len(vs) > 0 && vs[0].Index == idx {
		rec.ActiveVersion = vs[0].Number
	}
	var candidate *config.Node
	switch {
	case req.Draft != "":
		d, err := a.trees.Draft()
		if errors.Is(err, store.ErrNoDraft) || (err == nil && d.ID != req.Draft) {
			e := apierror.Errorf(http.StatusNotFound, "DRAFT_NOT_FOUND", "no draft %q", req.Draft)
			e.Params = map[string]string{"ID": req.Draft}
			return answer{}, e
		}
		if err != nil {
			return answer{}, err
		}
		if d.Owner != c.User {
			e := apierror.Errorf(http.StatusForbidden, "NOT_OWNER", "draft %q belongs to %q: only its owner reads it, and backtests it", d.ID, d.Owner)
			e.Params = map[string]string{"OWNER": d.Owner, "ID": d.ID}
			return answer{}, e
		}
		candidate = d.Tree
	default:
		_, t, err := a.trees.VersionTree(req.Version)
		if errors.Is(err, store.ErrNoVersion) {
			e := apierror.Errorf(http.StatusNotFound, "VERSION_NOT_FOUND", "no version %d of the tree", req.Version)
			e.Params = map[string]string{"VERSION": strconv.FormatUint(req.Version, 10)}
			return answer{}, e
		}
		if err != nil {
			return answer{}, err
		}
		candidate = t
	}
	// Both trees must compile: an engine would refuse them.
	if _, err := backtest.New(nil, backtest.Spec{Active: active, Candidate: candidate, Topic: "-", Range: backtest.Range{Last: 1}}); err != nil {
		return answer{}, apierror.Errorf(http.StatusUnprocessableEntity, "TREE_INVALID", "%s", err)
	}
	var err error
	if rec.active, err = config.EncodeExport(active); err != nil {
		return answer{}, err
	}
	if rec.candidate, err = config.EncodeExport(candidate); err != nil {
		return answer{}, err
	}
	// Finished backtests leave the memory before it makes room.
	_ = a.persist(r.Context()) // logged; a later persist retries
	view, err := a.reg.add(rec, now)
	if err != nil {
		return answer{}, err
	}
	if a.keeping() {
		if err := a.keepNew(r.Context(), view); err != nil {
			_ = a.reg.remove(view.ID, now)
			return answer{}, err
		}
		a.reg.markStored(view.ID)
	}
	a.logger.InfoContext(r.Context(), "backtest asked for", "id", view.ID, "user", c.User, "draft", view.Draft, "version", view.Version)
	w.Header().Set("Location", Prefix+"/"+view.ID)
	return answer{http.StatusCreated, view}, nil
}

// resolve checks a request's fields and fills b's: what it compares, its
// range (a duration becomes times), sample and bound.
func (a *API) resolve(req Request, now time.Time, b *Backtest) error {
	switch {
	case req.Draft == "" && req.Version == 0:
		return invalid("draft", "give draft (a draft id) or version (a version number of the tree)")
	case req.Draft != "" && req.Version != 0:
		return invalid("version", "give draft or version, not both")
	case req.Draft != "" && !idPattern.MatchString(req.Draft):
		return invalid("draft", "%q is not a draft id", req.Draft)
	}
	b.Draft, b.Version = req.Draft, req.Version
	ranges := 0
	for _, set := range []bool{req.Last != 0, req.Duration != "", req.From != ""} {
		if set {
			ranges++
		}
	}
	switch {
	case ranges == 0 && req.To != "":
		return invalid("from", "to needs from")
	case ranges == 0:
		return invalid("last", "give the range: last (records per partition), duration (\"1h\": up to now) or from [and to] (RFC 3339)")
	case ranges > 1:
		return invalid("last", "give one range: last, duration, or from [and to]")
	case req.To != "" && req.From == "":
		return invalid("to", "to goes with from")
	}
	switch {
	case req.Last < 0 || req.Last > a.cfg.MaxEvents:
		return invalid("last", "%d: want 1 to %d records per partition", req.Last, a.cfg.MaxEvents)
	case req.Last > 0:
		b.Range.Last = req.Last
	case req.Duration != "":
		d, err := time.ParseDuration(req.Duration)
		if err != nil || d <= 0 {
			return invalid("duration", "%q: want a positive duration (\"1h\", \"30m\")", req.Duration)
		}
		since, until := now.Add(-d), now
		b.Range.Since, b.Range.Until = &since, &until
	default:
		from, err := time.Parse(time.RFC3339Nano, req.From)
		if err != nil {
			return invalid("from", "%q is not an RFC 3339 time", req.From)
		}
		if from.After(now) {
			return invalid("from", "%s is in the future", req.From)
		}
		b.Range.Since = &from
		if req.To != "" {
			to, err := time.Parse(time.RFC3339Nano, req.To)
			if err != nil {
				return invalid("to", "%q is not an RFC 3339 time", req.To)
			}
			if !to.After(from) {
				return invalid("to", "%s is not after from %s", req.To, req.From)
			}
			b.Range.Until = &to
		}
	}
	switch {
	case req.Sample < -1 || req.Sample > a.cfg.MaxSample:
		return invalid("sample", "%d: want 0 to %d (-1: none)", req.Sample, a.cfg.MaxSample)
	case req.Sample == 0:
		b.Sample = min(backtest.DefaultSample, a.cfg.MaxSample)
	case req.Sample > 0:
		b.Sample = req.Sample
	}
	switch {
	case req.MaxEvents < 0 || req.MaxEvents > a.cfg.MaxEvents:
		return invalid("max_events", "%d: want 1 to %d", req.MaxEvents, a.cfg.MaxEvents)
	case req.MaxEvents == 0:
		b.MaxEvents = a.cfg.MaxEvents
	default:
		b.MaxEvents = req.MaxEvents
	}
	return nil
}

// idPattern is what a draft id or an engine id looks like.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

func (a *API) serveList(_ http.ResponseWriter, _ *http.Request, _ *auth.Claims) (answer, error) {
	bs, err := a.list()
	return answer{body: List{Backtests: bs}}, err
}

func (a *API) serveGet(_ http.ResponseWriter, r *http.Request, _ *auth.Claims) (answer, error) {
	b, err := a.get(r.PathValue("id"))
	return answer{body: b}, err
}

func (a *API) serveDelete(_ http.ResponseWriter, r *http.Request, c *auth.Claims) (answer, error) {
	if err := a.remove(r.Context(), r.PathValue("id")); err != nil {
		return answer{}, err
	}
	a.logger.InfoContext(r.Context(), "backtest deleted", "id", r.PathValue("id"), "user", c.User)
	return answer{status: http.StatusNoContent}, nil
}

func (a *API) serveCancel(_ http.ResponseWriter, r *http.Request, c *auth.Claims) (answer, error) {
	b, err := a.reg.cancel(r.PathValue("id"), a.cfg.Now())
	if errors.Is(err, errNotFound) && a.keeping() {
		if _, kerr := a.get(r.PathValue("id")); kerr == nil {
			err = errFinished
		}
	}
	if err != nil {
		return answer{}, err
	}
	// A pending one is cancelled once written (the answer says
	// cancel_requested until then; the leader retries the write).
	_ = a.persist(r.Context())
	if cur, err := a.get(b.ID); err == nil {
		b = cur
	}
	a.logger.InfoContext(r.Context(), "backtest cancelled", "id", b.ID, "user", c.User, "state", b.State)
	return answer{body: b}, nil
}

// serveClaim gives a pending backtest to the engine, waiting up to the
// wait parameter (seconds) for one; 204 when none came.
func (a *API) serveClaim(w http.ResponseWriter, r *http.Request, c *auth.Claims) (answer, error) {
	var cl Claim
	if _, err := apierror.DecodeJSON(w, r, maxRequestBytes, jsonlimit.Limits{}, &cl); err != nil {
		return answer{}, err
	}
	if !idPattern.MatchString(cl.Engine) {
		return answer{}, invalid("engine", "%q is not an engine id", cl.Engine)
	}
	wait := DefaultClaimWait
	if v := r.URL.Query().Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || time.Duration(n)*time.Second > MaxClaimWait {
			return answer{}, invalid("wait", "%q: want 0 to %d seconds", v, int(MaxClaimWait/time.Second))
		}
		wait = time.Duration(n) * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	as, err := a.reg.claim(ctx, cl.Engine, c.User, a.cfg.Now)
	if err != nil || as == nil {
		return answer{status: http.StatusNoContent}, err
	}
	a.logger.InfoContext(r.Context(), "backtest claimed", "id", as.ID, "engine", cl.Engine)
	return answer{body: as}, nil
}

func (a *API) serveProgress(w http.ResponseWriter, r *http.Request, c *auth.Claims) (answer, error) {
	var rep ProgressReport
	if _, err := apierror.DecodeJSON(w, r, maxRequestBytes, jsonlimit.Limits{}, &rep); err != nil {
		return answer{}, err
	}
	stop, err := a.reg.progress(r.PathValue("id"), rep.Engine, c.User, rep.Progress, a.cfg.Now())
	return answer{body: ProgressAnswer{Cancel: stop}}, a.ended(r.PathValue("id"), err)
}

func (a *API) serveResult(w http.ResponseWriter, r *http.Request, c *auth.Claims) (answer, error) {
	var rep ResultReport
	n, err := apierror.DecodeJSON(w, r, int64(a.cfg.MaxResultBytes), jsonlimit.Limits{MaxDepth: resultDepth}, &rep)
	if err != nil {
		return answer{}, err
	}
	if len(rep.Error) > maxErrorBytes {
		return answer{}, invalid("error", "%d bytes: want at most %d", len(rep.Error), maxErrorBytes)
	}
	id := r.PathValue("id")
	if err := a.reg.finish(id, rep.Engine, c.User, rep, n, a.cfg.Now()); err != nil {
		if errors.Is(err, errNotFound) && a.keptAsReported(id, rep) {
			return answer{status: http.StatusNoContent}, nil // posted again once kept
		}
		return answer{}, a.ended(id, err)
	}
	// The engine is answered once the finished backtest is in the
	// replicated state (clients see it running until then). When it is
	// not, the engine posts again, and the leader retries (tend).
	if a.keeping() {
		perr := a.persist(r.Context())
		if k, err := a.keeper.Backtest(id); err != nil || !k.Finished {
			return answer{}, errors.Join(errNotKept, perr, err)
		}
	}
	a.logger.InfoContext(r.Context(), "backtest finished", "id", id, "engine", rep.Engine, "error", rep.Error)
	return answer{status: http.StatusNoContent}, nil
}

// Leadership tells a node's leadership (*store.Store).
type Leadership interface {
	LeaderChanged() <-chan struct{}
	IsLeader() bool
}

var _ Leadership = (*store.Store)(nil)

// Follow forgets the backtests of the leader's memory whenever this node
// stops leading, until ctx ends: a node that leads again later starts
// empty rather than with backtests that the leaders in between never knew
// (their engines were told so, and stopped). While it leads and the
// backtests are kept in the replicated state, it tends them every
// tendInterval (writes the finished ones, fails those a former leader
// ran, expires the old ones). It returns nil.
func (a *API) Follow(ctx context.Context, l Leadership) error {
	tick := time.NewTicker(tendInterval)
	defer tick.Stop()
	for {
		changed := l.LeaderChanged()
		if !l.IsLeader() {
			if n := a.reg.forget(); n > 0 {
				a.logger.Info("backtests forgotten: this node no longer leads", "backtests", n)
			}
		} else {
			a.tend(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}
