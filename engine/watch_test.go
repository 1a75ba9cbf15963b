package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// stubMaster serves the tree watch protocol of master/watch.go from memory:
// for the watcher's unit tests, where time is synctest's and a real master
// cannot be made to serve what these tests need (trees its own validation
// refuses, failures on demand).
type stubMaster struct {
	token string

	mu      sync.Mutex
	index   uint64
	tree    string
	changed chan struct{}
	fail    int // answer this many requests 503
	down    bool
	lagging bool // answer index 1 at once, as a master far behind would
	times   []time.Time
}

func newStubMaster() *stubMaster {
	return &stubMaster{token: "tok", tree: rootOnly, changed: make(chan struct{})}
}

const rootOnly = `{"version": "1.1", "Filter": {"name": "root", "filter": {"description": "", "active": true, "filter": {}}, "nodes": []}}`

// badTree passes decoding but not compilation (an invalid regex): what an
// engine would get from a master of another version.
const badTree = `{"version": "1.1", "Filter": {"name": "root", "filter": {"description": "", "active": true,
	"filter": {"type": "regex", "regex": "(", "target": "${event.type}"}}, "nodes": []}}`

// setDown makes memTransport refuse the master's connections, or let
// them through again.
func (m *stubMaster) setDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
}

func (m *stubMaster) set(index uint64, tree string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.index, m.tree = index, tree
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *stubMaster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.times = append(m.times, time.Now())
	if m.fail > 0 {
		m.fail--
		m.mu.Unlock()
		w.Header().Set("Retry-After", "3")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"code": "NO_LEADER", "params": map[string]any{}, "message": "no leader"})
		return
	}
	m.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+m.token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": "UNAUTHORIZED", "params": map[string]any{}, "message": "bad token"})
		return
	}
	q := r.URL.Query()
	after, block := uint64(0), q.Has("index")
	if block {
		after, _ = strconv.ParseUint(q.Get("index"), 10, 64)
	}
	wait, _ := time.ParseDuration(q.Get("wait"))
	deadline := time.After(wait)
	for {
		m.mu.Lock()
		idx, tree, changed, lagging := m.index, m.tree, m.changed, m.lagging
		m.mu.Unlock()
		if lagging {
			idx, tree = 1, rootOnly
		}
		if !block || idx > after || lagging {
			writeJSON(w, http.StatusOK, map[string]any{"index": idx, "tree": json.RawMessage(tree)})
			return
		}
		select {
		case <-changed:
		case <-deadline:
			block = false
		case <-r.Context().Done():
			return
		}
	}
}

// memTransport routes requests to handlers by host, in memory; unknown
// hosts refuse the connection.
type memTransport map[string]http.Handler

func (t memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h, ok := t[r.URL.Host]
	if !ok {
		return nil, fmt.Errorf("dial %s: connection refused", r.URL.Host)
	}
	if s, ok := h.(*stubMaster); ok {
		s.mu.Lock()
		down := s.down
		s.mu.Unlock()
		if down {
			return nil, fmt.Errorf("dial %s: connection refused", r.URL.Host)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// watchRecorder collects what a watcher installs and refuses.
type watchRecorder struct {
	mu        sync.Mutex
	installed []uint64
	refused   []uint64
}

func (r *watchRecorder) get() (installed, refused []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.installed...), append([]uint64(nil), r.refused...)
}

func newTestWatcher(t *testing.T, hosts memTransport, urls ...string) (*watcher, *watchRecorder) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &watchRecorder{}
	return &watcher{
		urls:       urls,
		token:      "tok",
		client:     &http.Client{Transport: hosts},
		wait:       30 * time.Second,
		backoffMin: 200 * time.Millisecond,
		backoffMax: 10 * time.Second,
		log:        slog.New(slog.DiscardHandler),
		m:          m,
		install: func(tv treeVersion) {
			rec.mu.Lock()
			rec.installed = append(rec.installed, tv.index)
			rec.mu.Unlock()
		},
		refused: func(index uint64, err error) {
			rec.mu.Lock()
			rec.refused = append(rec.refused, index)
			rec.mu.Unlock()
		},
	}, rec
}

// runWatcher runs w until the end of the synctest bubble's test function.
func runWatcher(t *testing.T, w *watcher) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func equalIdx(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWatcher_InstallsNewTrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newStubMaster()
		w, rec := newTestWatcher(t, memTransport{"m1": m}, "http://m1")
		runWatcher(t, w)
		synctest.Wait()
		if in, _ := rec.get(); len(in) != 0 {
			t.Fatalf("index 0 installed: %v", in)
		}
		m.set(4, rootOnly)
		synctest.Wait()
		m.set(9, rootOnly)
		synctest.Wait()
		// A wait that ends without a change installs nothing.
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if in, _ := rec.get(); !equalIdx(in, []uint64{4, 9}) {
			t.Fatalf("installed %v, want [4 9]", in)
		}
	})
}

func TestWatcher_RefusesTreeThatDoesNotCompile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newStubMaster()
		m.set(3, rootOnly)
		w, rec := newTestWatcher(t, memTransport{"m1": m}, "http://m1")
		runWatcher(t, w)
		synctest.Wait()
		m.set(5, badTree)
		synctest.Wait()
		m.set(6, `{"version": "1.1", "Filter": {"name": "root"}}`) // does not decode
		synctest.Wait()
		m.set(7, rootOnly)
		synctest.Wait()
		in, refused := rec.get()
		if !equalIdx(in, []uint64{3, 7}) || !equalIdx(refused, []uint64{5, 6}) {
			t.Fatalf("installed %v refused %v, want [3 7] and [5 6]", in, refused)
		}
		if v := testCounter(w.m.compileFails); v != 0 {
			// The service counts refusals; the watcher only reports them.
			t.Errorf("watcher counted %v refusals", v)
		}
	})
}

func TestWatcher_FailsOverAndBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		good := newStubMaster()
		good.set(2, rootOnly)
		// m1 refuses connections; m2 is up.
		w, rec := newTestWatcher(t, memTransport{"m2": good}, "http://m1", "http://m2")
		start := time.Now()
		runWatcher(t, w)
		synctest.Wait()
		if in, _ := rec.get(); !equalIdx(in, []uint64{2}) {
			t.Fatalf("installed %v", in)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the second master was tried after %s, want at once", d)
		}

		// Now both are down: the watcher backs off, exponentially, with
		// jitter, up to the maximum.
		good.mu.Lock()
		good.down = true
		good.times = nil
		good.mu.Unlock()
		good.set(3, rootOnly) // ends the blocking query in progress
		synctest.Wait()
		time.Sleep(2 * time.Minute)
		good.setDown(false)
		time.Sleep(11 * time.Second) // the longest backoff
		synctest.Wait()
		if in, _ := rec.get(); !equalIdx(in, []uint64{2, 3}) {
			t.Fatalf("installed %v after recovery", in)
		}
		if n := testCounter(w.m.watchErrors); n < 10 || n > 40 {
			t.Errorf("%v failed requests in 2 minutes with a 200ms..10s backoff", n)
		}
	})
}

func TestWatcher_HonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newStubMaster()
		m.set(1, rootOnly)
		m.fail = 2
		w, rec := newTestWatcher(t, memTransport{"m1": m}, "http://m1")
		runWatcher(t, w)
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if in, _ := rec.get(); !equalIdx(in, []uint64{1}) {
			t.Fatalf("installed %v", in)
		}
		m.mu.Lock()
		times := append([]time.Time(nil), m.times...)
		m.mu.Unlock()
		if len(times) < 3 {
			t.Fatalf("%d requests", len(times))
		}
		for i := 1; i < 3; i++ {
			if d := times[i].Sub(times[i-1]); d < 3*time.Second {
				t.Errorf("request %d came %s after a 503 with Retry-After: 3", i, d)
			}
		}
	})
}

func TestWatcher_IgnoresOlderIndexes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ahead, behind := newStubMaster(), newStubMaster()
		ahead.set(8, rootOnly)
		behind.lagging = true
		w, rec := newTestWatcher(t, memTransport{"a": ahead, "b": behind}, "http://a", "http://b")
		runWatcher(t, w)
		synctest.Wait()
		// a goes away; b answers index 1 at once: never installed.
		ahead.setDown(true)
		time.Sleep(time.Minute) // the query in progress ends; then a is down
		synctest.Wait()
		behind.mu.Lock()
		n := len(behind.times)
		behind.mu.Unlock()
		if n == 0 {
			t.Fatal("the lagging master was never asked")
		}
		if in, _ := rec.get(); !equalIdx(in, []uint64{8}) {
			t.Fatalf("installed %v, want [8]", in)
		}
	})
}

func TestWatcher_SendsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newStubMaster()
		m.token = "other"
		m.set(1, rootOnly)
		w, rec := newTestWatcher(t, memTransport{"m1": m}, "http://m1")
		runWatcher(t, w)
		time.Sleep(time.Second)
		synctest.Wait()
		if in, _ := rec.get(); len(in) != 0 {
			t.Fatalf("installed %v with a wrong token", in)
		}
		if testCounter(w.m.watchErrors) == 0 {
			t.Error("no watch error counted")
		}
		m.mu.Lock()
		m.token = "tok"
		m.mu.Unlock()
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if in, _ := rec.get(); !equalIdx(in, []uint64{1}) {
			t.Fatalf("installed %v", in)
		}
	})
}

func TestWatcher_Backoff(t *testing.T) {
	t.Parallel()
	w := &watcher{urls: []string{"a", "b"}, backoffMin: 100 * time.Millisecond, backoffMax: time.Second}
	tests := []struct {
		failures int
		err      error
		lo, hi   time.Duration
	}{
		{1, errors.New("x"), 0, 0},
		{2, errors.New("x"), 50 * time.Millisecond, 100 * time.Millisecond},
		{4, errors.New("x"), 100 * time.Millisecond, 200 * time.Millisecond},
		{6, errors.New("x"), 200 * time.Millisecond, 400 * time.Millisecond},
		{40, errors.New("x"), 500 * time.Millisecond, time.Second},
		{2, &masterError{RetryAfter: 700 * time.Millisecond}, 700 * time.Millisecond, 700 * time.Millisecond},
		{2, &masterError{RetryAfter: time.Hour}, time.Second, time.Second},
	}
	for _, tt := range tests {
		for range 20 {
			if d := w.backoff(tt.failures, tt.err); d < tt.lo || d > tt.hi {
				t.Errorf("backoff(%d, %v) = %s, want in [%s, %s]", tt.failures, tt.err, d, tt.lo, tt.hi)
			}
		}
	}
}

// TestWatcher_FailoverClearsTheFailureAtOnce: after a failed request, the
// master that answers next clears the failure with an answer at once, not
// at the end of a blocking wait.
func TestWatcher_FailoverClearsTheFailureAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m1, m2 := newStubMaster(), newStubMaster()
		m1.set(2, rootOnly)
		m2.set(2, rootOnly)
		w, rec := newTestWatcher(t, memTransport{"m1": m1, "m2": m2}, "http://m1", "http://m2")
		runWatcher(t, w)
		synctest.Wait()
		m1.setDown(true)
		time.Sleep(w.wait) // the blocking query in progress ends; m1 then refuses
		synctest.Wait()
		o := w.last.Load()
		if o.err != nil || o.master != "http://m2" {
			t.Fatalf("after m1 failed: last outcome %+v, want m2's answer at once", o)
		}
		if n := testCounter(w.m.watchErrors); n != 1 {
			t.Errorf("%v failed requests, want 1", n)
		}
		if in, _ := rec.get(); !equalIdx(in, []uint64{2}) {
			t.Errorf("installed %v, want [2]", in)
		}
	})
}
