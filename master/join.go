package master

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/internal/sleep"
	"github.com/squallhq/squall/master/store"
)

// Join retry pacing.
const (
	joinBackoffMin = 100 * time.Millisecond
	joinBackoffMax = 5 * time.Second
	joinAttempt    = 30 * time.Second
	// A registered node checks its recorded feature level every
	// levelCheckMin; while registering again does not record it (the
	// leader runs a binary without levels) the wait doubles up to
	// levelCheckMax, and starts again when the leader changes.
	levelCheckMin = 2 * time.Second
	levelCheckMax = time.Minute
)

// JoinRefusedError is a join the cluster refused for good (a wrong join
// token, an invalid request): retrying cannot help, and Run returns it.
type JoinRefusedError struct {
	URL     string
	Status  int
	Message string
}

// Error names the member and its answer.
func (e *JoinRefusedError) Error() string {
	return fmt.Sprintf("join via %s refused: %d %s", e.URL, e.Status, e.Message)
}

// register makes sure the cluster knows this node: its raft address as a
// voter and its HTTP address for forwarding. A node whose own state
// already says so sends nothing. It posts a join request to
// the configured members, and also to this node itself once this node
// is in the raft configuration (a restart, or the bootstrap node), which
// forwards it to the leader. Joining again is harmless: the leader
// changes nothing when it already knows the node as it is. It retries
// transient failures with backoff until it succeeds or ctx ends; a
// refusal stops it and fails the server.
func (s *Server) register(ctx context.Context) {
	req := JoinRequest{ID: s.cfg.NodeID, RaftAddr: s.store.Addr(), HTTPAddr: s.HTTPAdvertise()}
	if s.registered(ctx, req) {
		// A restart with the same addresses: nothing to change, and no
		// need of the leader (a member keeps working even while its join
		// secret differs from the leader's, as after an upgrade).
		s.logger.Info("already a voter with these addresses", "raft_addr", req.RaftAddr, "http_addr", req.HTTPAddr)
		s.keepLevel(ctx, req)
		return
	}
	backoff := joinBackoffMin
	for round := 1; ; round++ {
		targets := slices.Clone(s.cfg.JoinURLs)
		if s.inConfiguration(ctx) {
			targets = append(targets, s.URL())
		}
		for _, u := range targets {
			err := s.join(ctx, u, req)
			if err == nil {
				s.logger.Info("registered with the cluster", keyURL, u, "rounds", round)
				s.keepLevel(ctx, req)
				return
			}
			if ctx.Err() != nil {
				return
			}
			var refused *JoinRefusedError
			if errors.As(err, &refused) {
				s.fail(err)
				return
			}
			level := slog.LevelDebug
			if round > 3 {
				level = slog.LevelWarn
			}
			s.logger.Log(ctx, level, "join attempt failed; retrying", keyURL, u, keyError, err)
		}
		if !sleep.For(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, joinBackoffMax)
	}
}

// keepLevel registers this node again, through itself (it forwards to the
// leader), whenever its state records another feature level for it than
// its binary's, and once after each change of leader: a node that
// registered through a leader without levels, during a rolling upgrade,
// has none recorded, and a leader that ran such a binary when the others
// registered has none of theirs in its state (that binary ignored them).
// The cluster's level rises only once the leader has every member's. A
// join that changes nothing writes nothing. It returns when ctx ends.
func (s *Server) keepLevel(ctx context.Context, req JoinRequest) {
	wait := levelCheckMin
	leader, _ := s.store.Leader()
	again := false
	for {
		if !sleep.For(ctx, wait) {
			return
		}
		if l, _ := s.store.Leader(); l != leader {
			leader, wait, again = l, levelCheckMin, l != ""
		}
		if !again && !s.levelStale(ctx, req) {
			wait = levelCheckMin
			continue
		}
		if err := s.join(ctx, s.URL(), req); err != nil {
			if ctx.Err() != nil {
				return
			}
			level := slog.LevelDebug
			var refused *JoinRefusedError
			if errors.As(err, &refused) {
				// E.g. a join secret that differs from the leader's: the
				// cluster stays below this binary's level meanwhile.
				level = slog.LevelWarn
			}
			s.logger.Log(ctx, level, "registering the feature level failed; retrying", keyError, err)
		} else {
			s.logger.Debug("sent the feature level again", "feature_level", s.store.FeatureLevel())
			again = false
		}
		wait = min(2*wait, levelCheckMax)
	}
}

// registered reports whether this node's state already has it as a
// voter with the raft and HTTP addresses of req.
func (s *Server) registered(ctx context.Context, req JoinRequest) bool {
	st, err := s.store.Stats(ctx)
	if err != nil {
		return false
	}
	// The feature level is left to keepLevel, whose refused joins do not
	// stop the server (a member upgraded from a version without join
	// secrets may have its own secret: see docs/operations.md).
	return slices.ContainsFunc(st.Members, func(m store.Member) bool {
		return m.ID == req.ID && m.Voter && m.Addr == req.RaftAddr && m.HTTPAddr == req.HTTPAddr
	})
}

// levelStale reports whether this node's state has it as a voter with
// the addresses of req but not with its binary's feature level: it
// registered through a leader without levels (a rolling upgrade), which
// recorded none.
func (s *Server) levelStale(ctx context.Context, req JoinRequest) bool {
	st, err := s.store.Stats(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(st.Members, func(m store.Member) bool {
		return m.ID == req.ID && m.Voter && m.Addr == req.RaftAddr && m.HTTPAddr == req.HTTPAddr &&
			m.FeatureLevel != s.store.FeatureLevel()
	})
}

// inConfiguration reports whether this node is in the raft configuration
// it knows.
func (s *Server) inConfiguration(ctx context.Context) bool {
	st, err := s.store.Stats(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(st.Members, func(m store.Member) bool { return m.ID == s.cfg.NodeID })
}

// join posts one join request to the member at base.
func (s *Server) join(ctx context.Context, base string, jr JoinRequest) error {
	endpoint, err := joinEndpoint(base)
	if err != nil {
		return &JoinRefusedError{URL: base, Message: err.Error()}
	}
	body, err := json.Marshal(jr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, joinAttempt)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return &JoinRefusedError{URL: base, Message: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderFeatureLevel, strconv.Itoa(s.store.FeatureLevel()))
	if js := s.joinSecret.Load(); js != nil {
		req.Header.Set(HeaderJoinToken, string(js.secret))
	}
	resp, err := (&http.Client{Transport: s.transport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var e apiError
	text := strings.TrimSpace(string(msg))
	if json.Unmarshal(msg, &e) == nil && e.Message != "" {
		text = e.Code + ": " + e.Message
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
	default:
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return &JoinRefusedError{URL: base, Status: resp.StatusCode, Message: text}
		}
	}
	return fmt.Errorf("join via %s: %d %s", base, resp.StatusCode, text)
}
