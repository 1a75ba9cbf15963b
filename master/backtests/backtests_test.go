package backtests

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/engine/backtest"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
)

// TestBacktests_run: a backtest of the draft asked through the API, run
// by an engine's worker from the broker, counts per rule what the test
// computes from the events it sent; the list shows it without its result.
func TestBacktests_run(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}})
	const n = 600
	produce(t, b.Addr, n)
	f := newFixture(t, Default(), false)
	f.worker(t, b, "engine-1", 0)
	c := f.client(t, token("alice", "edit"))
	for _, req := range []Request{{Draft: "d1", Last: n, Sample: 5}, {Version: 2, Duration: "1h"}} {
		bt, err := c.Start(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if bt.State != StatePending || bt.ActiveVersion != 3 || bt.ActiveIndex != 7 || bt.CreatedBy != "alice" {
			t.Errorf("started %+v", bt)
		}
		var seen []string
		done, err := c.Wait(t.Context(), bt.ID, 20*time.Millisecond, func(b Backtest) { seen = append(seen, b.State) })
		if err != nil {
			t.Fatal(err)
		}
		if done.State != StateSucceeded || done.Engine != "engine-1" || done.Attempts != 1 || done.Result == nil {
			t.Fatalf("finished %+v", done)
		}
		res := done.Result
		got := map[string][2]int64{}
		for _, rc := range res.Rules {
			got[rc.Rule] = [2]int64{rc.Active, rc.Candidate}
		}
		if want := wantCounts(n); !maps.Equal(got, want) {
			t.Errorf("%+v: counts\n got %v\nwant %v", req, got, want)
		}
		if !slices.Equal(res.DifferingRules, []string{"root/all/r2", "root/all/r3"}) {
			t.Errorf("differing rules %v", res.DifferingRules)
		}
		// b, c and d events: 6 of 10.
		if res.Events != n || res.DifferingEvents != n*6/10 || done.Progress.Read != n {
			t.Errorf("events %d, differing %d, progress %+v", res.Events, res.DifferingEvents, done.Progress)
		}
		wantSample := min(req.Sample, 5)
		if req.Sample == 0 {
			wantSample = 20
		}
		if len(res.Samples) != wantSample {
			t.Errorf("%d samples, want %d", len(res.Samples), wantSample)
		}
	}
	list, err := c.List(t.Context())
	if err != nil || len(list) != 2 || list[0].Version != 2 || list[1].Draft != "d1" || list[0].Result != nil {
		t.Errorf("list %+v, %v", list, err)
	}
}

// TestBacktests_cancelDelete: a cancelled backtest stops on its engine
// and keeps what it counted; a deleted one is gone, and its engine stops.
func TestBacktests_cancelDelete(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}})
	produce(t, b.Addr, 3000)
	f := newFixture(t, Default(), false)
	f.worker(t, b, "engine-1", 200) // 15 s for the whole range
	c := f.client(t, token("alice", "edit"))
	runningWith := func(id string, read int64) Backtest {
		t.Helper()
		var bt Backtest
		if !polltest.Until(t.Context(), 10*time.Second, func() bool {
			bt, _ = c.Get(t.Context(), id)
			return bt.State == StateRunning && bt.Progress != nil && bt.Progress.Read >= read
		}) {
			t.Fatalf("not running: %+v", bt)
		}
		return bt
	}
	bt, err := c.Start(t.Context(), Request{Draft: "d1", Last: 1000})
	if err != nil {
		t.Fatal(err)
	}
	running := runningWith(bt.ID, 20)
	if running.Progress.Total != 3000 || running.Progress.Rate <= 0 {
		t.Errorf("progress %+v", running.Progress)
	}
	if got, err := c.Cancel(t.Context(), bt.ID); err != nil || !got.CancelRequested {
		t.Fatalf("cancel: %+v, %v", got, err)
	}
	done, err := c.Wait(t.Context(), bt.ID, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done.State != StateCancelled || done.Result == nil || done.Result.Complete || done.Result.Events == 0 || done.Result.Events >= 3000 {
		t.Errorf("cancelled %+v", done)
	}
	if _, err := c.Cancel(t.Context(), bt.ID); !isStatus(err, http.StatusConflict) {
		t.Errorf("cancel of a finished backtest: %v", err)
	}
	// A deleted running backtest: the worker is free again for the next.
	bt2, err := c.Start(t.Context(), Request{Draft: "d1", Last: 1000})
	if err != nil {
		t.Fatal(err)
	}
	runningWith(bt2.ID, 1)
	if err := c.Delete(t.Context(), bt2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), bt2.ID); !isStatus(err, http.StatusNotFound) {
		t.Errorf("get of a deleted backtest: %v", err)
	}
	bt3, err := c.Start(t.Context(), Request{Draft: "d1", Last: 2})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := c.Wait(t.Context(), bt3.ID, 20*time.Millisecond, nil); err != nil || done.State != StateSucceeded || done.Result.Events != 6 {
		t.Errorf("after a delete: %+v, %v", done, err)
	}
}

// TestBacktests_lease: a backtest whose engine stops reporting is pending
// again for another engine, then failed; one no engine claims fails; a
// finished one expires; nothing stays running or pending.
func TestBacktests_lease(t *testing.T) {
	t.Parallel()
	cfg := Default()
	f := newFixture(t, cfg, true)
	alice, engine := token("alice", "edit"), token("engine", "view", "fleet_report")
	start := func() string {
		t.Helper()
		return f.start(t, alice).ID
	}
	get := func(id string) Backtest {
		t.Helper()
		status, body := f.do(t, http.MethodGet, Prefix+"/"+id, alice, nil)
		var bt Backtest
		if status != http.StatusOK || json.Unmarshal(body, &bt) != nil {
			t.Fatalf("get: %d %s", status, body)
		}
		return bt
	}
	claim := func(eng string) *Assignment {
		t.Helper()
		status, body := f.do(t, http.MethodPost, ClaimPath+"?wait=0", engine, Claim{Engine: eng})
		if status == http.StatusNoContent {
			return nil
		}
		var as Assignment
		if status != http.StatusOK || json.Unmarshal(body, &as) != nil {
			t.Fatalf("claim: %d %s", status, body)
		}
		return &as
	}
	id := start()
	if as := claim("e1"); as == nil || as.ID != id || as.Range.Last != 10 || len(as.Active) == 0 || len(as.Candidate) == 0 {
		t.Fatalf("claim: %+v", as)
	}
	if claim("e2") != nil {
		t.Fatal("a running backtest claimed twice")
	}
	f.advance(cfg.LeaseTimeout)
	if bt := get(id); bt.State != StatePending || !strings.Contains(bt.Error, `engine "e1" stopped reporting`) {
		t.Fatalf("after e1's lease: %+v", bt)
	}
	// e1 comes back: it no longer runs the backtest.
	if status, body := f.do(t, http.MethodPut, Prefix+"/"+id+"/progress", engine, ProgressReport{Engine: "e1"}); status != http.StatusConflict {
		t.Errorf("progress of a lost lease: %d %s", status, body)
	}
	if as := claim("e2"); as == nil || as.ID != id {
		t.Fatalf("claim again: %+v", as)
	}
	f.advance(cfg.LeaseTimeout / 2)
	if status, body := f.do(t, http.MethodPut, Prefix+"/"+id+"/progress", engine, ProgressReport{Engine: "e2", Progress: Progress{Read: 3, Total: 30}}); status != http.StatusOK || !strings.Contains(string(body), `"cancel":false`) {
		t.Errorf("progress: %d %s", status, body)
	}
	f.advance(cfg.LeaseTimeout / 2) // renewed: still running
	if bt := get(id); bt.State != StateRunning || bt.Progress.Read != 3 || bt.Attempts != 2 {
		t.Fatalf("after a report: %+v", bt)
	}
	f.advance(cfg.LeaseTimeout)
	if bt := get(id); bt.State != StateFailed || !strings.Contains(bt.Error, "attempt 2 of 2") {
		t.Fatalf("after e2's lease: %+v", bt)
	}
	// The engine's token user must be the claimer's.
	id2 := start()
	claim("e3")
	if status, _ := f.do(t, http.MethodPut, Prefix+"/"+id2+"/result", token("other", "view", "fleet_report"), ResultReport{Engine: "e3"}); status != http.StatusConflict {
		t.Errorf("result by another user: %d", status)
	}
	// An error longer than a record keeps is refused, and changes nothing.
	long := ResultReport{Engine: "e3", Error: strings.Repeat("é", maxErrorBytes)}
	if status, body := f.do(t, http.MethodPut, Prefix+"/"+id2+"/result", engine, long); status != http.StatusBadRequest || !strings.Contains(string(body), `"FIELD":"error"`) {
		t.Errorf("a long error: %d %s", status, body)
	}
	if bt := get(id2); bt.State != StateRunning {
		t.Errorf("after a refused result: %+v", bt)
	}
	// The worker cuts it to what the masters take.
	cut, err := (&Worker{cfg: WorkerConfig{MaxResultBytes: DefaultMaxResultBytes}}).fit(long)
	var sent ResultReport
	if err != nil || json.Unmarshal(cut, &sent) != nil || len(sent.Error) > maxErrorBytes || !utf8.ValidString(sent.Error) || !strings.HasSuffix(sent.Error, "é…") {
		t.Errorf("the worker's cut error: %d bytes, %v", len(sent.Error), err)
	}
	if status, _ := f.do(t, http.MethodPut, Prefix+"/"+id2+"/result", engine, ResultReport{Engine: "e3", Error: "kafka: no leader"}); status != http.StatusNoContent {
		t.Errorf("result: %d", status)
	}
	if bt := get(id2); bt.State != StateFailed || bt.Error != "kafka: no leader" {
		t.Errorf("failed by the engine: %+v", bt)
	}
	// Nobody claims: failed after the pending timeout.
	id3 := start()
	f.advance(cfg.PendingTimeout)
	if bt := get(id3); bt.State != StateFailed || !strings.Contains(bt.Error, "no engine claimed it") {
		t.Errorf("unclaimed: %+v", bt)
	}
	// Finished ones expire.
	f.advance(cfg.Keep)
	if status, _ := f.do(t, http.MethodGet, Prefix+"/"+id, alice, nil); status != http.StatusNotFound {
		t.Errorf("expired: %d", status)
	}
}

// TestBacktests_bounds: at most MaxKept are kept; the oldest finished go
// first, and when all are pending or running a new one is refused 429.
func TestBacktests_bounds(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.MaxKept = 2
	f := newFixture(t, cfg, true)
	alice := token("alice", "edit")
	var ids []string
	for range 2 {
		ids = append(ids, f.start(t, alice).ID)
	}
	if status, body := f.do(t, http.MethodPost, Prefix, alice, Request{Draft: "d1", Last: 10}); status != http.StatusTooManyRequests || !strings.Contains(string(body), "TOO_MANY_BACKTESTS") {
		t.Fatalf("third: %d %s", status, body)
	}
	if status, _ := f.do(t, http.MethodPost, Prefix+"/"+ids[0]+"/cancel", alice, nil); status != http.StatusOK {
		t.Fatalf("cancel: %d", status)
	}
	if status, _ := f.do(t, http.MethodPost, Prefix, alice, Request{Draft: "d1", Last: 10}); status != http.StatusCreated {
		t.Fatalf("third after a cancel: %d", status)
	}
	if status, _ := f.do(t, http.MethodGet, Prefix+"/"+ids[0], alice, nil); status != http.StatusNotFound {
		t.Errorf("the oldest finished is still kept: %d", status)
	}
}

// TestAPI_invalid: bad requests change nothing and name what is wrong.
func TestAPI_invalid(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Default(), false)
	alice := token("alice", "edit")
	future := time.Now().Add(time.Hour).Format(time.RFC3339)
	tests := []struct {
		name   string
		tok    string
		path   string
		body   any
		status int
		want   string
	}{
		{"no token", "", Prefix, Request{Draft: "d1", Last: 1}, 401, "UNAUTHORIZED"},
		{"view only", token("alice", "view"), Prefix, Request{Draft: "d1", Last: 1}, 403, "FORBIDDEN"},
		{"engine token", token("engine", "view", "fleet_report"), Prefix, Request{Draft: "d1", Last: 1}, 403, "FORBIDDEN"},
		{"satellite token claims", token("satellite", "fleet_report"), ClaimPath, Claim{Engine: "e1"}, 403, "FORBIDDEN"},
		{"operator claims", alice, ClaimPath, Claim{Engine: "e1"}, 403, "FORBIDDEN"},
		{"not the owner", token("bob", "edit"), Prefix, Request{Draft: "d1", Last: 1}, 403, "NOT_OWNER"},
		{"no such draft", alice, Prefix, Request{Draft: "d2", Last: 1}, 404, "DRAFT_NOT_FOUND"},
		{"no such version", alice, Prefix, Request{Version: 9, Last: 1}, 404, "VERSION_NOT_FOUND"},
		{"nothing to compare", alice, Prefix, Request{Last: 1}, 400, `"FIELD":"draft"`},
		{"draft and version", alice, Prefix, Request{Draft: "d1", Version: 2, Last: 1}, 400, `"FIELD":"version"`},
		{"no range", alice, Prefix, Request{Draft: "d1"}, 400, `"FIELD":"last"`},
		{"two ranges", alice, Prefix, Request{Draft: "d1", Last: 1, Duration: "1h"}, 400, `"FIELD":"last"`},
		{"last too large", alice, Prefix, Request{Draft: "d1", Last: DefaultMaxEvents + 1}, 400, `"FIELD":"last"`},
		{"bad duration", alice, Prefix, Request{Draft: "d1", Duration: "an hour"}, 400, `"FIELD":"duration"`},
		{"negative duration", alice, Prefix, Request{Draft: "d1", Duration: "-1h"}, 400, `"FIELD":"duration"`},
		{"bad from", alice, Prefix, Request{Draft: "d1", From: "yesterday"}, 400, `"FIELD":"from"`},
		{"future from", alice, Prefix, Request{Draft: "d1", From: future}, 400, `"FIELD":"from"`},
		{"to alone", alice, Prefix, Request{Draft: "d1", To: future}, 400, `"FIELD":"from"`},
		{"to before from", alice, Prefix, Request{Draft: "d1", From: "2026-01-02T00:00:00Z", To: "2026-01-01T00:00:00Z"}, 400, `"FIELD":"to"`},
		{"sample too large", alice, Prefix, Request{Draft: "d1", Last: 1, Sample: DefaultMaxSample + 1}, 400, `"FIELD":"sample"`},
		{"max events too large", alice, Prefix, Request{Draft: "d1", Last: 1, MaxEvents: DefaultMaxEvents + 1}, 400, `"FIELD":"max_events"`},
		{"unknown field", alice, Prefix, []byte(`{"draft": "d1", "last": 1, "rate": 5}`), 400, "unknown field"},
		{"not JSON", alice, Prefix, []byte(`{"draft": `), 400, "BAD_REQUEST"},
		{"too large", alice, Prefix, []byte(`{"draft": "` + strings.Repeat("x", maxRequestBytes) + `"}`), 413, "PAYLOAD_TOO_LARGE"},
		{"bad engine id", token("engine", "view", "fleet_report"), ClaimPath, Claim{Engine: "a b"}, 400, `"FIELD":"engine"`},
		{"bad wait", token("engine", "view", "fleet_report"), ClaimPath + "?wait=600", Claim{Engine: "e1"}, 400, `"FIELD":"wait"`},
		{"no such backtest", alice, Prefix + "/nope/cancel", nil, 404, "BACKTEST_NOT_FOUND"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, http.MethodPost, tc.path, tc.tok, tc.body)
			if status != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("%d %s, want %d %s", status, body, tc.status, tc.want)
			}
		})
	}
	if status, body := f.do(t, http.MethodGet, Prefix, alice, nil); status != http.StatusOK || string(body) != "{\"backtests\":[]}\n" {
		t.Errorf("list after refusals: %d %s", status, body)
	}
	if status, _ := f.do(t, http.MethodPatch, Prefix, alice, nil); status != http.StatusMethodNotAllowed {
		t.Errorf("PATCH: %d", status)
	}
	// Unsupported media type.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+Prefix, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+alice)
	if resp, err := f.srv.Client().Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("no content type: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestWorker_lagGuard: a backtest is held while the engine's consumer lag
// is more than MaxLagGrowth above its lowest, and goes on once it is back.
func TestWorker_lagGuard(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}})
	produce(t, b.Addr, 1500)
	f := newFixture(t, Default(), false)
	var lag, reads atomic.Int64
	lag.Store(500)
	f.worker(t, b, "engine-1", 0, func(c *WorkerConfig) {
		// The first reading, when the backtest starts, is its lowest: 5;
		// then the live pipeline lags by 500.
		c.Lag = func() (int64, bool) {
			if reads.Add(1) == 1 {
				return 5, true
			}
			return lag.Load(), true
		}
		c.MaxLagGrowth = 100
	})
	c := f.client(t, token("alice", "edit"))
	bt, err := c.Start(t.Context(), Request{Draft: "d1", Last: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var seen Backtest
	if !polltest.Until(t.Context(), 10*time.Second, func() bool {
		seen, _ = c.Get(t.Context(), bt.ID)
		return seen.State == StateRunning && seen.Progress != nil && seen.Progress.Held
	}) {
		t.Fatalf("not held: %+v", seen)
	}
	if seen.Progress.Read != 0 {
		t.Errorf("held after %d events, want before the first chunk", seen.Progress.Read)
	}
	lag.Store(90) // within 100 of the lowest, 5
	done, err := c.Wait(t.Context(), bt.ID, 20*time.Millisecond, nil)
	if err != nil || done.State != StateSucceeded || done.Result.Events != 1500 {
		t.Errorf("after the lag fell: %+v, %v", done, err)
	}
}

// TestRegistry_bytes: the results kept stay under MaxKeptBytes; the
// oldest finished go first.
func TestRegistry_bytes(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.MaxKeptBytes = 250
	g := newRegistry(cfg, func() bool { return false }) // memory only
	now := time.Now()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := g.add(&record{Backtest: Backtest{ID: id}}, now); err != nil {
			t.Fatal(err)
		}
		as, _ := g.claim(t.Context(), "e1", "engine", func() time.Time { return now })
		if as == nil || as.ID != id {
			t.Fatalf("claim: %+v", as)
		}
		if err := g.finish(id, "e1", "engine", ResultReport{Engine: "e1", Result: &backtest.Result{Complete: true}}, 100, now); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for _, b := range g.list(now) {
		ids = append(ids, b.ID)
	}
	if !slices.Equal(ids, []string{"c", "b"}) {
		t.Errorf("kept %v, want [c b]", ids)
	}
}

// leadership is a Leadership the test flips.
type leadership struct {
	mu      sync.Mutex
	leading bool
	changed chan struct{}
}

func (l *leadership) LeaderChanged() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *leadership) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

func (l *leadership) set(leading bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading = leading
	close(l.changed)
	l.changed = make(chan struct{})
}

// TestAPI_Follow: a node that stops leading forgets its backtests, so
// that it starts empty if it leads again.
func TestAPI_Follow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Default(), false)
	alice := token("alice", "edit")
	f.start(t, alice)
	l := &leadership{leading: true, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.api.Follow(ctx, l) }()
	count := func() int { return len(f.api.reg.list(time.Now())) }
	l.set(true) // a change that keeps it leading keeps them
	if count() != 1 {
		t.Fatal("forgotten while leading")
	}
	l.set(false)
	if !polltest.Until(t.Context(), 5*time.Second, func() bool { return count() == 0 }) {
		t.Error("kept after the leadership was lost")
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestAPI_metrics: squall_master_backtests counts the backtests kept by
// state.
func TestAPI_metrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Default(), false)
	alice := token("alice", "edit")
	var ids []string
	for range 2 {
		ids = append(ids, f.start(t, alice).ID)
	}
	if status, _ := f.do(t, http.MethodPost, Prefix+"/"+ids[0]+"/cancel", alice, nil); status != http.StatusOK {
		t.Fatalf("cancel: %d", status)
	}
	want := `# HELP squall_master_backtests Backtests kept, by state (pending, running, succeeded, failed, cancelled): the leader's; on the other masters 0 below feature level 7, the finished ones from it.
# TYPE squall_master_backtests gauge
squall_master_backtests{state="cancelled"} 1
squall_master_backtests{state="failed"} 0
squall_master_backtests{state="pending"} 1
squall_master_backtests{state="running"} 0
squall_master_backtests{state="succeeded"} 0
`
	if err := testutil.CollectAndCompare(f.api, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestWorker_refused: a worker whose claims the masters refuse (a token
// without view) asks again only after a long wait, not in a loop.
func TestWorker_refused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Default(), false)
	var claims atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		claims.Add(1)
		f.api.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	w, err := NewWorker(WorkerConfig{MasterURLs: []string{srv.URL}, Token: token("satellite", "fleet_report"), Engine: "e1",
		Topic: testTopic, Reader: &kafkasource.Reader{}, ClaimWait: time.Second, Client: calltest.Client()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	if !polltest.Until(t.Context(), 5*time.Second, func() bool { return claims.Load() >= 1 }) {
		t.Fatal("no claim")
	}
	// A loop would have sent hundreds meanwhile; the next is minutes away.
	deadline := time.Now().Add(300 * time.Millisecond)
	polltest.Until(t.Context(), time.Until(deadline), func() bool { return claims.Load() > 1 })
	cancel()
	<-done
	if n := claims.Load(); n != 1 {
		t.Errorf("%d claims, want 1", n)
	}
}

// TestBacktests_engineStops: an engine that stops while it runs a
// backtest releases it, and another engine runs it again.
func TestBacktests_engineStops(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}})
	produce(t, b.Addr, 600)
	f := newFixture(t, Default(), false)
	stop := f.worker(t, b, "engine-1", 50) // 12 s for the range
	c := f.client(t, token("alice", "edit"))
	bt, err := c.Start(t.Context(), Request{Draft: "d1", Last: 200})
	if err != nil {
		t.Fatal(err)
	}
	var seen Backtest
	if !polltest.Until(t.Context(), 10*time.Second, func() bool {
		seen, _ = c.Get(t.Context(), bt.ID)
		return seen.State == StateRunning && seen.Progress != nil && seen.Progress.Read > 0
	}) {
		t.Fatalf("not running: %+v", seen)
	}
	stop()
	if seen, _ = c.Get(t.Context(), bt.ID); seen.State != StatePending || !strings.Contains(seen.Error, `engine "engine-1" stopped`) {
		t.Fatalf("after the engine stopped: %+v", seen)
	}
	f.worker(t, b, "engine-2", 0)
	done, err := c.Wait(t.Context(), bt.ID, 20*time.Millisecond, nil)
	if err != nil || done.State != StateSucceeded || done.Engine != "engine-2" || done.Attempts != 2 || done.Result.Events != 600 || done.Error != "" {
		t.Errorf("run again: %+v, %v", done, err)
	}
}

// TestRegistry_shownUntilWritten: while the backtests are kept in the
// replicated state, a backtest that finishes is shown as it was (running,
// with its last progress; pending with cancel_requested) until it is
// written; its engine's result posted again is taken, another's is
// refused; it is neither evicted nor expired before it is written.
func TestRegistry_shownUntilWritten(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.MaxKept = 2
	g := newRegistry(cfg, func() bool { return true })
	now := time.Now()
	for _, id := range []string{"a", "b"} {
		if _, err := g.add(&record{Backtest: Backtest{ID: id}}, now); err != nil {
			t.Fatal(err)
		}
	}
	if as, _ := g.claim(t.Context(), "e1", "engine", func() time.Time { return now }); as == nil || as.ID != "a" {
		t.Fatalf("claim: %+v", as)
	}
	rep := ResultReport{Engine: "e1", Result: &backtest.Result{Events: 5, Complete: true}}
	if err := g.finish("a", "e1", "engine", rep, 10, now); err != nil {
		t.Fatal(err)
	}
	if _, err := g.cancel("b", now); err != nil {
		t.Fatal(err)
	}
	a, _ := g.get("a", now)
	b, _ := g.get("b", now)
	if a.State != StateRunning || a.Result != nil || a.Progress == nil || a.Progress.Read != 5 || a.FinishedMS != 0 {
		t.Errorf("a finished, not written: %+v", a)
	}
	if b.State != StatePending || !b.CancelRequested || b.FinishedMS != 0 {
		t.Errorf("b cancelled, not written: %+v", b)
	}
	if err := g.finish("a", "e1", "engine", rep, 10, now); err != nil {
		t.Errorf("posted again: %v", err)
	}
	if err := g.finish("a", "e2", "engine", rep, 10, now); !errors.Is(err, errNotClaimer) {
		t.Errorf("posted by another engine: %v", err)
	}
	if got, err := g.cancel("a", now); err != nil || got.State != StateRunning {
		t.Errorf("cancel of a: %+v %v", got, err)
	}
	later := now.Add(cfg.Keep + time.Hour)
	if _, err := g.add(&record{Backtest: Backtest{ID: "c"}}, later); !errors.Is(err, errFull) {
		t.Errorf("a third while two are still to write: %v", err)
	}
	recs := g.finishedRecords(later)
	if len(recs) != 2 || recs[0].view.State != StateSucceeded || recs[0].view.Result == nil || recs[1].view.State != StateCancelled {
		t.Fatalf("to write: %+v", recs)
	}
	// Written: the API drops it from memory and reads it from the state.
	g.drop("a")
	if _, b := g.find("b"); g.has("a") || b == nil || b.shown == nil {
		t.Errorf("after a's write: has a %v, b %+v", g.has("a"), b)
	}
}
