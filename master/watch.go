package master

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/master/auth"
)

// DefaultWatchWait is the wait of a tree watch without a wait parameter.
const DefaultWatchWait = 30 * time.Second

// HeaderIndex carries the index of a tree watch's answer, as in its body.
const HeaderIndex = "X-Squall-Index"

// TreeAnswer is the answer of GET /squall/v1/tree/active.
type TreeAnswer struct {
	// Index is the active tree's index: pass it as ?index= to wait for the
	// next change.
	Index uint64 `json:"index"`
	// Tree is the active tree's export file.
	Tree json.RawMessage `json:"tree"`
}

// handleWatch is the tree watch of the engines, a Consul-style blocking
// query: GET /squall/v1/tree/active?index=N&wait=30s answers the active
// tree as soon as its index exceeds N, or the current one when wait has
// passed; without index it answers at once. Token: view on root.
//
// Any node that is ready serves it from its own state: engines spread
// over the masters, a follower answers a change as soon as it applied it
// (a few milliseconds after the leader), and since an answer only comes
// once the index exceeds N, an engine never goes back to an older tree
// when it moves to another master. A node that is not ready (no leader
// known, log not applied) answers 503, and the engine tries another.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.authorize(r, auth.View); err != nil {
		return err
	}
	q := r.URL.Query()
	var after uint64
	block := false
	if v := q.Get("index"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return errorf(http.StatusBadRequest, codeBadRequest, "index %q is not a non-negative integer", v)
		}
		after, block = n, true
	}
	wait := DefaultWatchWait
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return errorf(http.StatusBadRequest, codeBadRequest, "wait %q is not a duration such as 30s or 5m", v)
		}
		wait = d
	}
	wait = min(wait, s.cfg.MaxWatchWait)
	if !s.store.Ready() {
		e := errorf(http.StatusServiceUnavailable, codeNotReady, "node %s is not ready: no leader known, or the log is not applied yet", s.cfg.NodeID)
		e.RetryAfter = 1
		return e
	}

	var tree *config.Node
	var idx uint64
	if block {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		// Shutting down answers waiting watches at once.
		if done := s.done(); done != nil {
			go func() {
				select {
				case <-done:
					cancel()
				case <-ctx.Done():
				}
			}()
		}
		var err error
		if tree, idx, err = s.store.WaitActive(ctx, after); err != nil {
			return err
		}
		if err := r.Context().Err(); err != nil {
			return err
		}
		if idx <= after && s.stopping() {
			return errorf(http.StatusServiceUnavailable, codeUnavailable, "node %s is shutting down", s.cfg.NodeID)
		}
	} else {
		tree, idx = s.store.Active()
	}
	raw, err := json.Marshal(&config.Export{Version: config.ExportVersion, Node: tree})
	if err != nil {
		return err
	}
	w.Header().Set(HeaderIndex, strconv.FormatUint(idx, 10))
	writeJSON(w, http.StatusOK, TreeAnswer{Index: idx, Tree: raw})
	return nil
}
