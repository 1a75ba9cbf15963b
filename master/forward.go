package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/master/store"
)

// HeaderForwardedBy marks a request forwarded to the leader: its value is
// the id of the node that forwarded it. A node that receives a forwarded
// request and is not the leader answers 503 instead of forwarding it
// again, so requests never loop between nodes that disagree about the
// leader.
const HeaderForwardedBy = "X-Squall-Forwarded-By"

// HeaderNotApplied is set to "true" on a 503 answer to a request that
// was certainly not applied: no handler ran it (the node that received it
// was not the leader, or was handing its leadership over). The node that
// forwarded such a request sends it again to the new leader; a client
// may resend it too.
const HeaderNotApplied = "X-Squall-Not-Applied"

// HeaderResent is set to "true" on the answer to a request that was sent
// again after a leader failed while it had it (only requests that cannot
// take effect twice are: GET, HEAD, OPTIONS, the methods a mount
// declares with [IdempotentMethods], and the writes of a mount with
// [RequestIDs], which the state machine applies once). The first attempt
// may have been applied: an idempotent insert answered "already stored"
// (200 instead of 201) may have been stored by this very request.
const HeaderResent = "X-Squall-Resent"

// leaderPoll is how often a request waiting for a leader looks again,
// besides being woken by leader changes: the leader's HTTP address may
// arrive in the replicated state after the leader is known.
const leaderPoll = 20 * time.Millisecond

// retryBackoff is how long a request whose forwarding to a leader failed
// waits before it tries that same leader again, unless the leader
// changes first: a dead leader stays the known leader until the
// followers' heartbeat timeout.
const retryBackoff = 100 * time.Millisecond

// maxLeaderFailures bounds how many leaders may fail while they have one
// request before it is answered 503 LEADER_LOST. Attempts that did not
// reach a leader are bounded by Config.LeaderWait instead.
const maxLeaderFailures = 5

// maxReplayBody is the largest request body a follower keeps in memory
// to send it again to a new leader; a larger body is streamed to the
// leader once, and its request is retried only when the leader could not
// be connected to before any of the body was read.
const maxReplayBody = 1 << 20

// onLeader makes h run on the leader: this is the one place where
// requests move to the leader (see OnLeader).
//
//   - On the leader, the request waits for Store.ConsistentRead (the
//     post-election barrier, then leadership verified with a quorum) and h
//     serves it. Every request does, writes too: handlers read the state
//     to validate a change before they submit it.
//   - On a follower that knows the leader and its HTTP address, the
//     request is proxied there; the leader's answer is relayed as is.
//     When the leader cannot be reached or fails while it has the
//     request, the follower looks for the leader again and resends the
//     request where that cannot apply it twice (see forwardOnce).
//   - Otherwise (an election, leadership lost mid-request, the leader's
//     address not replicated yet, this node handing its leadership over)
//     it waits for a change, up to Config.LeaderWait, then answers 503
//     NO_LEADER with Retry-After.
//   - A request already forwarded by another node is never forwarded
//     again: if this node is not the leader it answers 503 at once, with
//     HeaderNotApplied, so that the forwarding node retries.
//
// A [router] holds one request's routing: each of these cases is one of
// its states, a method.
//
// With writes set (placement OnLeaderWrite), a request that is not a read
// (see readMethod) skips the consistent read on the leader: h serves it
// as soon as this node believes it leads. See OnLeaderWrite for what h
// must guarantee and why that is safe.
//
// With bearer set, a follower forwards a request with a body only when
// its bearer token verifies (signature and expiry; the leader checks the
// roles): it never streams an unauthenticated body to the leader. Routes
// authenticated otherwise (joins carry the join secret) leave it unset.
//
// idempotent lists the methods, besides GET, HEAD and OPTIONS, whose
// requests h applies at most once in effect however often they arrive.
//
// With ids set (mounted routes declared with RequestIDs, whose handlers h
// runs behind Server.sessions), a write of any other method for which ids
// reports true gets a request id here, on the node that receives it (see
// HeaderRequestID), and is retry-safe too: its command carries the id,
// and the state machine applies it at most once however many leaders
// receive it.
func (s *Server) onLeader(h http.Handler, writes, bearer bool, ids func(*http.Request) bool, idempotent ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		direct := writes && !readMethod(r.Method)
		safe := retrySafe(r.Method, idempotent)
		// Request ids need session entries, which the leader writes only
		// at the cluster's feature level for them (docs/decisions.md
		// decision 40): below it such a write is resent only when it
		// certainly was not applied.
		if ids != nil && !safe && !readMethod(r.Method) && s.store.ClusterFeatureLevel() >= store.LevelSessions && ids(r) {
			ensureRequestID(r)
			safe = true
		}
		if direct && !safe && s.serveAsLeader(h, w, r) {
			// The common case of a write on the leader, without the
			// router (a retry-safe write takes the router, which routes
			// it again if the leadership is lost under it).
			return
		}
		rt := &router{
			s: s, h: h, w: w, r: r,
			f:      &forwarding{r: r, retrySafe: safe},
			direct: direct, bearer: bearer,
			from:     r.Header.Get(HeaderForwardedBy),
			deadline: time.Now().Add(s.cfg.LeaderWait),
		}
		defer rt.stop()
		for !rt.route() {
		}
	})
}

// router routes one request until it is answered. Each turn (route) puts
// it in one of four states, each a method:
//
//   - serve: this node leads (and is not handing its leadership over):
//     it serves the request;
//   - refuse: another node forwarded the request and this one does not
//     lead: 503 with HeaderNotApplied, so that the forwarding node
//     retries;
//   - forward: this node follows a leader whose HTTP address it knows:
//     it proxies the request there;
//   - wait: there is no leader to serve or forward to yet: it waits for
//     a change, or answers 503 NO_LEADER (giveUp) once the wait is over.
//
// A turn that neither answered nor gave up routes the request again.
type router struct {
	s *Server
	h http.Handler
	w http.ResponseWriter
	// r is the request as received; f.r the one to send on.
	r *http.Request
	f *forwarding
	// direct skips the consistent read on the leader (OnLeaderWrite).
	direct bool
	// bearer: verify the bearer token before forwarding a body.
	bearer bool
	// from is the node that forwarded the request here, if any.
	from string
	// deadline ends the wait for a leader; a forwarding attempt that may
	// be retried starts a new wait.
	deadline time.Time
	poll     *time.Timer
}

// stop releases what the routing held.
func (rt *router) stop() {
	if rt.poll != nil {
		rt.poll.Stop()
	}
}

// route routes the request once: it reports whether the request was
// answered.
func (rt *router) route() bool {
	if rt.f.reached {
		// A leader failed while it had the request: this attempt resends
		// it (see HeaderResent).
		rt.w.Header().Set(HeaderResent, "true")
	}
	changed := rt.s.store.LeaderChanged()
	if rt.s.store.IsLeader() && rt.s.enterLeader() {
		// Counted from here: a handover waits for the consistent read
		// and the handler.
		defer rt.s.exitLeader()
		return rt.serve()
	}
	// The wait for a leader (a write served as leader needs no context of
	// its own: no timer per request).
	ctx, cancel := context.WithDeadline(rt.r.Context(), rt.deadline)
	defer cancel()
	if rt.from != "" {
		return rt.refuse()
	}
	if ctx.Err() != nil {
		// Attempts that did not reach a leader used the wait up.
		return rt.giveUp(ctx, ctx.Err())
	}
	if id, addr := rt.leader(); addr != "" {
		return rt.forward(id, addr)
	}
	return rt.wait(ctx, changed)
}

// leader returns the leader to forward to and its HTTP address, or an
// empty address: none known, this node, one that failed the request a
// moment ago (see forwarding.avoid), or one whose address is not
// replicated yet.
func (rt *router) leader() (id, addr string) {
	id, _ = rt.s.store.Leader()
	if id == "" || id == rt.s.cfg.NodeID || rt.f.avoid(id) {
		return "", ""
	}
	return id, rt.s.store.HTTPAddr(id)
}

// serve serves the request on this node, the leader: after the
// consistent read unless direct, then with h.
func (rt *router) serve() bool {
	if !rt.direct {
		if answered, ok := rt.consistentRead(); !ok {
			return answered
		}
	}
	lr, ok := rt.f.localRequest()
	if !ok {
		// Part of a large body went to a leader that failed, and this
		// node has since been elected.
		rt.s.writeError(rt.w, rt.r, noLeader("the leader failed while it was receiving the request body; send the request again"))
		return true
	}
	if rt.from != "" || !rt.f.retrySafe || !rt.f.replayable() || rt.f.failures >= maxLeaderFailures-1 {
		rt.h.ServeHTTP(rt.w, lr)
		return true
	}
	return rt.serveRetrySafe(lr)
}

// consistentRead waits for Store.ConsistentRead until the deadline. When
// it fails (ok false), answered reports whether the request was answered
// (an error), or else is to be routed again (leadership moved on).
func (rt *router) consistentRead() (answered, ok bool) {
	ctx, cancel := context.WithDeadline(rt.r.Context(), rt.deadline)
	defer cancel()
	err := rt.s.store.ConsistentRead(ctx)
	switch {
	case err == nil:
		return false, true
	case errors.Is(err, store.ErrNotLeader):
		return false, false
	}
	return rt.giveUp(ctx, err), false
}

// serveRetrySafe serves a retry-safe request as leader, keeping what the
// handler reads of its body (the handler authenticates before it reads),
// so that it can go to the next leader if this node loses its leadership
// while it serves it: the handler's 503 is then dropped and the request
// routed again (false).
func (rt *router) serveRetrySafe(lr *http.Request) bool {
	t := rt.s.newTurn(rt.w)
	if !rt.f.prepared && hasBody(rt.r) {
		// lr's body, which is r's unless an earlier turn as leader
		// already read r's (then f.r holds what it read). Swapped in
		// place, not in a copy of the request (as httpguard.BodyDeadline
		// does), and put back after.
		t.rec.r = lr.Body
		t.hw.rec = &t.rec
		lr.Body = &t.rec
		defer func(lr *http.Request, body io.ReadCloser) { lr.Body = body }(lr, t.rec.r)
	}
	rt.h.ServeHTTP(&t.hw, lr)
	if !t.hw.held {
		return true
	}
	// Not reused: what the handler read is sent on.
	if rec := t.hw.rec; rec != nil {
		// The body to send on: what the handler read, then the rest.
		c := *rt.r
		c.Body = io.NopCloser(io.MultiReader(bytes.NewReader(rec.buf.Bytes()), rec.r))
		rt.f.r = &c
	}
	// This node lost its leadership while it served the request, and the
	// handler answered 503: route it again, to the next leader.
	rt.f.failures++
	rt.f.reached = true
	rt.s.metrics.forwarded.WithLabelValues(forwardRetry).Inc()
	rt.deadline = time.Now().Add(rt.s.cfg.LeaderWait)
	return false
}

// refuse answers a request another node forwarded here, to a node that
// does not lead: it is never forwarded again, so that requests never
// loop between nodes that disagree about the leader.
func (rt *router) refuse() bool {
	rt.w.Header().Set(HeaderNotApplied, "true")
	rt.s.writeError(rt.w, rt.r, noLeader("request forwarded by %s, but %s is not the leader", rt.from, rt.s.cfg.NodeID))
	return true
}

// forward proxies the request to leader id at addr (see forwardOnce): it
// reports whether the request was answered.
func (rt *router) forward(id, addr string) bool {
	if !rt.f.verified && rt.bearer && hasBody(rt.r) {
		if _, err := rt.s.tokens.Verify(rt.r.Header.Get("Authorization")); err != nil {
			rt.s.writeError(rt.w, rt.r, err)
			return true
		}
		rt.f.verified = true
	}
	if err := rt.f.prepare(); err != nil {
		rt.s.writeError(rt.w, rt.r, err)
		return true
	}
	switch rt.s.forwardOnce(rt.w, rt.f, id, addr) {
	case attemptDone:
		return true
	case attemptFailed:
		// The leader failed while it had the request: a new wait for
		// the next leader begins.
		rt.deadline = time.Now().Add(rt.s.cfg.LeaderWait)
	}
	return false
}

// wait waits for a leader change, or leaderPoll (the leader's HTTP
// address may arrive in the replicated state after the leader is known),
// until ctx's deadline, when it gives up.
func (rt *router) wait(ctx context.Context, changed <-chan struct{}) bool {
	if rt.poll == nil {
		rt.poll = time.NewTimer(leaderPoll)
	} else {
		rt.poll.Reset(leaderPoll)
	}
	select {
	case <-changed:
	case <-rt.poll.C:
	case <-ctx.Done():
		return rt.giveUp(ctx, ctx.Err())
	}
	return false
}

// giveUp answers 503 when no leader could serve the request by ctx's
// deadline, or err from the consistent read (see Server.leaderError).
func (rt *router) giveUp(ctx context.Context, err error) bool {
	rt.f.markNotApplied(rt.w)
	rt.s.writeError(rt.w, rt.r, rt.s.leaderError(ctx, rt.r, err))
	return true
}

// serveAsLeader serves r with h if this node leads and is not handing
// its leadership over, counting it among the requests a handover waits
// for. It reports whether it served r.
func (s *Server) serveAsLeader(h http.Handler, w http.ResponseWriter, r *http.Request) bool {
	if !s.store.IsLeader() || !s.enterLeader() {
		return false
	}
	defer s.exitLeader()
	h.ServeHTTP(w, r)
	return true
}

// enterLeader counts a request served as leader, unless a handover began.
func (s *Server) enterLeader() bool {
	s.leadMu.Lock()
	defer s.leadMu.Unlock()
	if s.handover {
		return false
	}
	s.serving++
	return true
}

// exitLeader ends a request counted by enterLeader.
func (s *Server) exitLeader() {
	s.leadMu.Lock()
	defer s.leadMu.Unlock()
	s.serving--
	if s.serving == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// beginHandover stops serving requests as leader: new ones wait for the
// next leader and are forwarded to it. The channel is closed once the
// requests served as leader so far have ended.
func (s *Server) beginHandover() <-chan struct{} {
	s.leadMu.Lock()
	defer s.leadMu.Unlock()
	s.handover = true
	ch := make(chan struct{})
	if s.serving == 0 {
		close(ch)
	} else {
		s.idle = ch
	}
	return ch
}

// retrySafe reports whether a request of method may be sent to a new
// leader after the previous one failed while it had it: the request
// cannot take effect twice.
func retrySafe(method string, idempotent []string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	for _, m := range idempotent {
		if m == method {
			return true
		}
	}
	return false
}

// forwarding is the state of one request that a follower forwards.
type forwarding struct {
	r         *http.Request
	retrySafe bool

	prepared bool
	verified bool   // the bearer token was checked
	body     []byte // the whole body, when it is kept to be replayed
	stream   *countingReader
	// failures counts the leaders that failed while they had the request.
	failures int
	// reached is set once a leader may have had the request.
	reached bool
	// last and lastAt are the leader of the last failed attempt and when
	// it failed.
	last   string
	lastAt time.Time
}

// prepare reads a small body into memory so that it can be sent again.
func (f *forwarding) prepare() error {
	if f.prepared {
		return nil
	}
	f.prepared = true
	if !hasBody(f.r) {
		return nil
	}
	if f.r.ContentLength > maxReplayBody {
		f.stream = &countingReader{r: f.r.Body}
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f.r.Body, maxReplayBody+1))
	if err != nil {
		return fmt.Errorf("read the request body: %w", err)
	}
	if len(b) > maxReplayBody {
		f.stream = &countingReader{r: io.MultiReader(bytes.NewReader(b), f.r.Body)}
		return nil
	}
	f.body = b
	return nil
}

// localRequest is the request to serve on this node, which was elected
// after an attempt to forward the request read its body: the body as it
// was received. It is false when part of the body is gone.
func (f *forwarding) localRequest() (*http.Request, bool) {
	if !f.prepared {
		return f.r, true
	}
	r := *f.r
	switch {
	case f.stream != nil && f.stream.n > 0:
		return nil, false
	case f.stream != nil:
		r.Body = io.NopCloser(f.stream)
	case f.body != nil:
		r.Body = io.NopCloser(bytes.NewReader(f.body))
		r.ContentLength = int64(len(f.body))
	}
	return &r, true
}

// markNotApplied sets HeaderNotApplied on an error answer, unless a
// leader may have had the request.
func (f *forwarding) markNotApplied(w http.ResponseWriter) {
	if !f.reached {
		w.Header().Set(HeaderNotApplied, "true")
	}
}

// replayable reports whether the body can be sent (again).
func (f *forwarding) replayable() bool { return f.stream == nil || f.stream.n == 0 }

// avoid reports whether leader id failed this request a moment ago: the
// request then waits for a leader change, or for retryBackoff.
func (f *forwarding) avoid(id string) bool {
	return id == f.last && time.Since(f.lastAt) < retryBackoff
}

// outRequest is the request to send to the leader this attempt.
func (f *forwarding) outRequest(ctx context.Context) *http.Request {
	out := f.r.WithContext(ctx)
	switch {
	case f.stream != nil:
		out.Body = io.NopCloser(f.stream)
	case f.body != nil:
		out.Body = io.NopCloser(bytes.NewReader(f.body))
		out.ContentLength = int64(len(f.body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.body)), nil }
	}
	return out
}

// recordingBody keeps what is read of a request body, up to
// maxReplayBody (over is set beyond).
type recordingBody struct {
	r    io.ReadCloser
	buf  bytes.Buffer
	over bool
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if !b.over {
		if b.buf.Len()+n > maxReplayBody {
			b.over = true
			b.buf = bytes.Buffer{}
		} else {
			b.buf.Write(p[:n])
		}
	}
	return n, err
}

func (b *recordingBody) Close() error { return b.r.Close() }

// holdWriter passes a handler's answer through, except a 503 answered
// once lost reports true (the node lost its leadership while it served
// the request): that answer is dropped, so that the request can be
// routed again.
type holdWriter struct {
	w http.ResponseWriter
	// saved is w's header before the handler, put back when the answer
	// is dropped; the handler sets w's header itself (no copy per
	// request), and a throwaway one once the answer is dropped.
	saved     http.Header
	throwaway http.Header
	s         *Server
	// rec records the request body, when there is one.
	rec   *recordingBody
	held  bool // the answer was dropped
	wrote bool // the answer went through
}

// lost reports whether the node lost its leadership and the request can
// be sent on: all of the body the handler read was kept.
func (hw *holdWriter) lost() bool {
	return !hw.s.store.IsLeader() && (hw.rec == nil || !hw.rec.over)
}

// leaderTurn is what a retry-safe request served as leader needs besides
// the request.
type leaderTurn struct {
	hw  holdWriter
	rec recordingBody
}

// newTurn returns a leaderTurn whose writer answers to w, with a copy of
// w's header (usually empty) to put back if the answer is dropped.
func (s *Server) newTurn(w http.ResponseWriter) *leaderTurn {
	return &leaderTurn{hw: holdWriter{w: w, s: s, saved: w.Header().Clone()}}
}

func (hw *holdWriter) Header() http.Header {
	if hw.held {
		if hw.throwaway == nil {
			hw.throwaway = http.Header{}
		}
		return hw.throwaway
	}
	return hw.w.Header()
}

func (hw *holdWriter) WriteHeader(code int) {
	if hw.wrote || hw.held {
		return
	}
	if code == http.StatusServiceUnavailable && hw.lost() {
		hw.held = true
		// w's header as it was before the handler, for the next turn.
		h := hw.w.Header()
		clear(h)
		for k, v := range hw.saved {
			h[k] = v
		}
		return
	}
	hw.wrote = true
	hw.w.WriteHeader(code)
}

func (hw *holdWriter) Write(b []byte) (int, error) {
	if !hw.wrote && !hw.held {
		hw.WriteHeader(http.StatusOK)
	}
	if hw.held {
		return len(b), nil
	}
	return hw.w.Write(b)
}

// Flush flushes the answer once it goes through.
func (hw *holdWriter) Flush() {
	if f, ok := hw.w.(http.Flusher); ok && hw.wrote {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (hw *holdWriter) Unwrap() http.ResponseWriter { return hw.w }

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// forwardResult says what a forwarding attempt did.
type forwardResult int

const (
	// attemptDone: the answer (the leader's or an error) was written.
	attemptDone forwardResult = iota
	// attemptNotSent: the leader did not get the request; nothing was
	// written, and the request may be sent again.
	attemptNotSent
	// attemptFailed: the leader failed while it had the request, which
	// cannot apply twice; nothing was written, and the request may be
	// sent again.
	attemptFailed
)

// Errors that end a forwarding attempt.
var (
	// errNotApplied: the node forwarded to answered 503 with
	// HeaderNotApplied.
	errNotApplied = errors.New("the node is not the leader (the request was not applied)")
	// errLeaderGone: this node stopped following the leader while the
	// leader had the request (it stopped heartbeating, or another node
	// was elected).
	errLeaderGone = errors.New("the leader stopped leading while it had the request")
	// errLeaderRefused: the leader answered 503 to a retry-safe request
	// (it lost its leadership while it served it, typically).
	errLeaderRefused = errors.New("the leader answered 503")
)

// forwardOnce proxies the request to the leader at addr and relays its
// answer. When the leader cannot answer, it decides from what may have
// happened to the request:
//
//   - the leader was not reached (the connection was refused or timed out
//     at Config.ForwardDialTimeout), or answered that it did not apply
//     the request (HeaderNotApplied): the request may be sent again, to
//     the leader found next, whatever its method (attemptNotSent);
//   - the leader had the request and failed (the connection broke, or
//     this node stopped following it: raft's heartbeat timeout passed
//     or another node was elected): a retry-safe request (a retry-safe
//     method, or a write with a request id) may be sent again
//     (attemptFailed), until maxLeaderFailures leaders failed with it;
//     any other is answered 503 LEADER_LOST, since it may have been
//     applied. A write with a request id is applied at most once
//     however many leaders had it: see store.Session for why raft's
//     log order makes the resend safe.
//
// A request whose body was partly streamed to a leader that failed is
// never sent again.
func (s *Server) forwardOnce(w http.ResponseWriter, f *forwarding, leaderID, addr string) forwardResult {
	r := f.r
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := s.watchLeader(ctx, leaderID, cancel)
	defer stop()

	var failure error
	s.leaderProxy(f, addr, &failure).ServeHTTP(w, f.outRequest(ctx))
	if failure == nil {
		s.metrics.forwarded.WithLabelValues(forwardOK).Inc()
		return attemptDone
	}
	if cause := context.Cause(ctx); errors.Is(cause, errLeaderGone) {
		failure = cause
	}
	if r.Context().Err() != nil {
		// The client went away: whatever is answered, nobody reads it.
		s.metrics.forwarded.WithLabelValues(forwardError).Inc()
		return attemptDone
	}
	return s.afterFailure(w, f, leaderID, addr, failure)
}

// leaderProxy is the proxy of one forwarding attempt of f to the leader
// at addr. An attempt that did not get the leader's answer through sets
// *failure (and writes nothing): the leader could not be reached, or
// answered 503 to a request that may be sent again.
func (s *Server) leaderProxy(f *forwarding, addr string, failure *error) *httputil.ReverseProxy {
	target := &url.URL{Scheme: "http", Host: addr}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(HeaderForwardedBy, s.cfg.NodeID)
			if s.tracer != nil {
				// The leader's span is the child of this node's.
				tracing.Inject(pr.Out.Context(), pr.Out.Header)
			}
		},
		Transport: s.transport,
		ErrorLog:  s.errLog,
		ModifyResponse: func(resp *http.Response) error {
			if !f.replayable() || resp.StatusCode != http.StatusServiceUnavailable {
				return nil
			}
			if resp.Header.Get(HeaderNotApplied) == "true" {
				return errNotApplied
			}
			if f.retrySafe && f.failures < maxLeaderFailures-1 {
				return errLeaderRefused
			}
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) {
			*failure = err
		},
	}
}

// afterFailure decides what follows an attempt to forward f to leader
// leaderID at addr that failed with failure, and answers when the
// request is not to be sent again (see forwardOnce).
func (s *Server) afterFailure(w http.ResponseWriter, f *forwarding, leaderID, addr string, failure error) forwardResult {
	notSent := errors.Is(failure, errNotApplied) || dialError(failure)
	if notSent && f.replayable() {
		s.retried(f, leaderID, failure)
		return attemptNotSent
	}
	if !notSent {
		f.reached = true
		if f.retrySafe && f.replayable() && f.failures < maxLeaderFailures-1 {
			f.failures++
			s.retried(f, leaderID, failure)
			return attemptFailed
		}
	}
	s.metrics.forwarded.WithLabelValues(forwardError).Inc()
	if notSent {
		f.markNotApplied(w)
		s.writeError(w, f.r, noLeader("cannot reach leader %s at %s: %s", leaderID, addr, failure))
		return attemptDone
	}
	e := errorf(http.StatusServiceUnavailable, codeLeaderLost,
		"leader %s failed while it had the request (%s): it may or may not have been applied", leaderID, failure)
	e.RetryAfter = 1
	s.writeError(w, f.r, e)
	return attemptDone
}

// retried counts and logs an attempt that is to be made again.
func (s *Server) retried(f *forwarding, leaderID string, err error) {
	s.metrics.forwarded.WithLabelValues(forwardRetry).Inc()
	s.logger.Debug("forwarding to the leader failed; sending the request again to the next leader",
		keyMethod, f.r.Method, keyPath, f.r.URL.Path, "leader", leaderID, keyError, err)
	f.last, f.lastAt = leaderID, time.Now()
}

// watchLeader cancels ctx with errLeaderGone once this node no longer
// follows leaderID: at once when it has heard nothing from a leader for
// forwardGrace (raft's heartbeat timeout: the leader froze or died), else
// after forwardGrace, which lets a leader that handed its leadership over
// answer the requests it still has. The returned func stops the watch.
func (s *Server) watchLeader(ctx context.Context, leaderID string, cancel context.CancelCauseFunc) func() {
	done := make(chan struct{})
	go func() {
		var grace *time.Timer
		defer func() {
			if grace != nil {
				grace.Stop()
			}
		}()
		for {
			changed := s.store.LeaderChanged()
			var expired <-chan time.Time
			id, _ := s.store.Leader()
			switch {
			case id == leaderID && grace != nil:
				grace.Stop()
				grace = nil
			case id != leaderID && time.Since(s.store.LastContact()) >= s.forwardGrace:
				// Not a word from the leader for a heartbeat timeout: it
				// froze or died, it did not hand over.
				cancel(fmt.Errorf("%w (now: %q)", errLeaderGone, id))
				return
			case id != leaderID && grace == nil:
				grace = time.NewTimer(s.forwardGrace)
			}
			if grace != nil {
				expired = grace.C
			}
			select {
			case <-changed:
			case <-expired:
				cancel(fmt.Errorf("%w (now: %q)", errLeaderGone, id))
				return
			case <-ctx.Done():
				return
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

// dialError reports whether err is a failure to connect: the request was
// not sent.
func dialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// hasBody reports whether r may carry a body.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// readMethod reports whether requests of method only read: under
// OnLeaderWrite they keep the consistent read. Every method that is not
// one of the writes RFC 9110 defines (PUT, POST, PATCH, DELETE) counts as
// a read, unknown ones included, so that a mistake costs a quorum check,
// never a stale answer.
func readMethod(method string) bool {
	switch method {
	case http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete:
		return false
	}
	return true
}

// leaderError is the answer when no leader could serve the request.
func (s *Server) leaderError(ctx context.Context, r *http.Request, err error) error {
	if r.Context().Err() != nil {
		// The client went away: whatever is answered, nobody reads it.
		return err
	}
	if ctx.Err() != nil {
		id, _ := s.store.Leader()
		if id == "" {
			return noLeader("no leader was elected within %s", s.cfg.LeaderWait)
		}
		// A leader is known: the answer says so (NO_LEADER would
		// contradict its own message).
		e := errorf(http.StatusServiceUnavailable, codeLeaderUnavailable, "leader %s could not serve the request within %s", id, s.cfg.LeaderWait)
		e.Params = map[string]string{"LEADER": id}
		e.RetryAfter = 1
		return e
	}
	return err
}

// done returns a channel closed when the server shuts down.
func (s *Server) done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bg == nil {
		return nil
	}
	return s.bg.Done()
}

// stopping reports whether the server is shutting down.
func (s *Server) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}
