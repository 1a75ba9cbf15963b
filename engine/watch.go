package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/panics"
	"github.com/squallhq/squall/internal/sleep"
)

// watchPath is the master's tree watch (master/watch.go).
const watchPath = "/squall/v1/tree/active"

// maxTreeBytes bounds a watch answer.
const maxTreeBytes = 64 << 20

// treeVersion is a compiled tree and the master's index of it. Workers read
// the current one once per event, so each event sees exactly one version.
type treeVersion struct {
	tree  *tree.Tree
	index uint64
	// origin is set when the tree comes from the engine's cache.
	origin *cacheOrigin
	// counters count the evaluations of the tree, a shard per worker
	// (install makes them); loaded is when the tree was installed.
	counters []*tree.Counters
	loaded   time.Time
}

// watcher follows the active tree of the masters with blocking queries
// (GET /squall/v1/tree/active?index=N&wait=W) and installs every new tree
// that compiles. It uses one master at a time, and moves to the next when a
// request fails; once every master failed in a row it waits, with
// exponential backoff and jitter, or as long as a 503's Retry-After says.
type watcher struct {
	urls       []string
	token      string
	client     *http.Client
	wait       time.Duration
	backoffMin time.Duration
	backoffMax time.Duration
	log        *slog.Logger
	m          *metrics
	// install is called with each new tree, in index order.
	install func(treeVersion)
	// refused is called when a tree does not decode or compile.
	refused func(index uint64, err error)
	// saved, when set, is called with the export file of each tree
	// installed from a master.
	saved func(index uint64, raw json.RawMessage)
	// fallback, when set, is called once, when every master failed the
	// first request: it installs a tree kept from an earlier run and
	// returns its index (0: none). The watcher then installs only trees
	// with a greater index.
	fallback func() uint64
	// confirmed, when set, is called when a master answers with the
	// index of the tree in use.
	confirmed func(index uint64)

	// last is the outcome of the latest watch request; nil before the
	// first one ended.
	last atomic.Pointer[watchOutcome]
}

// watchOutcome is how a watch request ended.
type watchOutcome struct {
	master string
	err    error  // nil: answered
	index  uint64 // the answer's index (0: no tree was ever deployed)
}

// watchAnswer is the master's answer (master.TreeAnswer).
type watchAnswer struct {
	Index uint64          `json:"index"`
	Tree  json.RawMessage `json:"tree"`
}

// masterError is an error answer of a master.
type masterError struct {
	URL        string
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
}

func (e *masterError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("master %s: status %d", e.URL, e.Status)
	}
	return fmt.Sprintf("master %s: status %d %s: %s", e.URL, e.Status, e.Code, e.Message)
}

// run watches until ctx ends.
func (w *watcher) run(ctx context.Context) {
	var index uint64
	first := true
	failures := 0
	cur := 0
	for ctx.Err() == nil {
		url := w.urls[cur]
		// After a failure the request does not block: the master that
		// answers clears the failure at once, not at the end of a wait.
		ans, err := w.poll(ctx, url, index, first || failures > 0)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.m.watchErrors.Inc()
			w.last.Store(&watchOutcome{master: url, err: err})
			failures++
			level := slog.LevelWarn
			if failures > len(w.urls) {
				level = slog.LevelDebug // already said
			}
			w.log.Log(ctx, level, "tree watch failed", slog.String(logKeyMaster, url),
				slog.Int(logKeyAttempt, failures), slog.String(logKeyError, err.Error()))
			cur = (cur + 1) % len(w.urls)
			if first && failures == len(w.urls) && w.fallback != nil {
				// No master answers the engine that just started.
				index = max(index, w.fallback())
			}
			if d := w.backoff(failures, err); d > 0 && !sleep.For(ctx, d) {
				return
			}
			continue
		}
		if failures > 0 {
			w.log.Info("tree watch recovered", slog.String(logKeyMaster, url), slog.Uint64(logKeyTreeIndex, ans.Index))
		}
		failures, first = 0, false
		w.last.Store(&watchOutcome{master: url, index: ans.Index})
		if ans.Index < index {
			// A master behind the tree we have (it lost its state, or
			// lags far behind): never go back; try another, after a pause
			// so that a master answering at once cannot make us spin.
			w.log.Warn("master is behind the tree in use; trying another", slog.String(logKeyMaster, url),
				slog.Uint64(logKeyTreeIndex, index), slog.Uint64("master_index", ans.Index))
			cur = (cur + 1) % len(w.urls)
			if !sleep.For(ctx, w.backoffMin) {
				return
			}
			continue
		}
		if ans.Index == index {
			// The wait ended without a change (or the first answer is
			// the tree in use).
			if index > 0 && w.confirmed != nil {
				w.confirmed(index)
			}
			continue
		}
		index = ans.Index
		t, err := compileAnswer(ans.Tree)
		if err != nil {
			w.refused(index, err)
			continue
		}
		w.install(treeVersion{tree: t, index: index})
		if w.saved != nil {
			w.saved(index, ans.Tree)
		}
	}
}

// compileAnswer decodes and compiles a watch answer's export file.
func compileAnswer(raw json.RawMessage) (*tree.Tree, error) { return compileWith(raw, tree.Compile) }

// compileWith decodes an export file and compiles it with compile. A panic
// while doing so is an error (a *panics.Error): one bad tree must not
// take the engine down, which keeps its current tree (decision 51).
func compileWith(raw json.RawMessage, compile func(*config.Node) (*tree.Tree, error)) (t *tree.Tree, err error) {
	defer func() {
		if v := recover(); v != nil {
			t, err = nil, fmt.Errorf("compile tree: %w", panics.Recovered(v))
		}
	}()
	ex, err := config.DecodeExport(raw)
	if err != nil {
		return nil, fmt.Errorf("decode tree: %w", err)
	}
	t, err = compile(ex.Node)
	if err != nil {
		return nil, fmt.Errorf("compile tree: %w", err)
	}
	return t, nil
}

// poll sends one watch request; it blocks (waits for a tree newer than
// index) unless now is set.
func (w *watcher) poll(ctx context.Context, base string, index uint64, now bool) (*watchAnswer, error) {
	u := base + watchPath
	if !now {
		u += "?index=" + strconv.FormatUint(index, 10) + "&wait=" + w.wait.String()
	}
	// The master answers at the end of the wait at the latest.
	ctx, cancel := context.WithTimeout(ctx, w.wait+15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTreeBytes+1))
	if err != nil {
		return nil, fmt.Errorf("master %s: read answer: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		me := &masterError{URL: base, Status: resp.StatusCode}
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &e) == nil {
			me.Code, me.Message = e.Code, e.Message
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			me.RetryAfter = time.Duration(s) * time.Second
		}
		return nil, me
	}
	if len(body) > maxTreeBytes {
		return nil, fmt.Errorf("master %s: answer larger than %d bytes", base, maxTreeBytes)
	}
	var ans watchAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("master %s: decode answer: %w", base, err)
	}
	if len(ans.Tree) == 0 {
		return nil, fmt.Errorf("master %s: answer without a tree", base)
	}
	return &ans, nil
}

// backoff returns the wait after the given number of failures in a row: none
// while some master was not tried yet in this round, then an exponential
// backoff with jitter (at least a 503's Retry-After).
func (w *watcher) backoff(failures int, err error) time.Duration {
	if failures < len(w.urls) {
		return 0
	}
	rounds := failures/len(w.urls) - 1
	d := w.backoffMin
	for range rounds {
		if d >= w.backoffMax {
			break
		}
		d *= 2
	}
	d = min(d, w.backoffMax)
	d = d/2 + rand.N(d/2+1) // jitter: between half and all of it
	var me *masterError
	if errors.As(err, &me) && me.RetryAfter > d {
		d = min(me.RetryAfter, w.backoffMax)
	}
	return d
}
