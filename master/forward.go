package master

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/squallhq/squall/master/store"
	"github.com/squallhq/squall/webhooks/tracing"
)

// HeaderForwardedBy marks a request forwarded to the leader: its value is
// the id of the node that forwarded it. A node that receives a forwarded
// request and is not the leader answers 503 instead of forwarding it
// again, so requests never loop between nodes that disagree about the
// leader.
const HeaderForwardedBy = "X-Squall-Forwarded-By"

// leaderPoll is how often a request waiting for a leader looks again,
// besides being woken by leader changes: the leader's HTTP address may
// arrive in the replicated state after the leader is known.
const leaderPoll = 20 * time.Millisecond

// onLeader makes h run on the leader: this is the one place where
// requests move to the leader (see OnLeader).
//
//   - On the leader, the request waits for Store.ConsistentRead (the
//     post-election barrier, then leadership verified with a quorum) and h
//     serves it. Every request does, writes too: handlers read the state
//     to validate a change before they submit it.
//   - On a follower that knows the leader and its HTTP address, the
//     request is proxied there; the leader's answer is relayed as is.
//   - Otherwise (an election, leadership lost mid-request, the leader's
//     address not replicated yet) it waits for a change, up to
//     Config.LeaderWait, then answers 503 NO_LEADER with Retry-After.
//   - A request already forwarded by another node is never forwarded
//     again: if this node is not the leader it answers 503 at once.
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
func (s *Server) onLeader(h http.Handler, writes, bearer bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		direct := writes && !readMethod(r.Method)
		if direct && s.store.IsLeader() {
			// The common case of a write on the leader, without the
			// routing loop's timer and context.
			h.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.LeaderWait)
		defer cancel()
		from := r.Header.Get(HeaderForwardedBy)
		var poll *time.Timer
		defer func() {
			if poll != nil {
				poll.Stop()
			}
		}()
		for {
			changed := s.store.LeaderChanged()
			if s.store.IsLeader() {
				if direct {
					h.ServeHTTP(w, r)
					return
				}
				err := s.store.ConsistentRead(ctx)
				if err == nil {
					h.ServeHTTP(w, r)
					return
				}
				if !errors.Is(err, store.ErrNotLeader) {
					s.writeError(w, r, s.leaderError(ctx, r, err))
					return
				}
				// Leadership moved on: route again.
				continue
			}
			if from != "" {
				s.writeError(w, r, noLeader("request forwarded by %s, but %s is not the leader", from, s.cfg.NodeID))
				return
			}
			if id, _ := s.store.Leader(); id != "" && id != s.cfg.NodeID {
				if addr := s.store.HTTPAddr(id); addr != "" {
					if bearer && hasBody(r) {
						if _, err := s.tokens.Verify(r.Header.Get("Authorization")); err != nil {
							s.writeError(w, r, err)
							return
						}
					}
					s.forward(w, r, id, addr)
					return
				}
			}
			if poll == nil {
				poll = time.NewTimer(leaderPoll)
			} else {
				poll.Reset(leaderPoll)
			}
			select {
			case <-changed:
			case <-poll.C:
			case <-ctx.Done():
				s.writeError(w, r, s.leaderError(ctx, r, ctx.Err()))
				return
			case <-s.done():
				s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable, "the node is shutting down"))
				return
			}
		}
	})
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
		return noLeader("leader %s could not serve the request within %s", id, s.cfg.LeaderWait)
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

// forward proxies the request to the leader at addr and relays its answer.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, leaderID, addr string) {
	target := &url.URL{Scheme: "http", Host: addr}
	failed := false
	p := &httputil.ReverseProxy{
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
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			failed = true
			if r.Context().Err() != nil {
				return
			}
			// The leader is unreachable (it probably just died) or too
			// slow: an election is likely. A write may or may not have
			// been applied; the client retries, as with any 503.
			s.writeError(w, r, noLeader("cannot reach leader %s at %s: %s", leaderID, addr, err))
		},
	}
	p.ServeHTTP(w, r)
	result := forwardOK
	if failed {
		result = forwardError
	}
	s.metrics.forwarded.WithLabelValues(result).Inc()
}
