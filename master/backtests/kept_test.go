package backtests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/backtest"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/auth"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/store"
)

// keptCluster is a 3-node master cluster serving the backtests API, with
// an active tree and alice's draft d1 (the draft of ruleTree's tests),
// and a clock every node's API reads (the real time plus skew).
type keptCluster struct {
	*mastertest.Cluster
	skew  atomic.Int64 // nanoseconds
	draft string
	alice string
}

func (k *keptCluster) now() time.Time { return time.Now().Add(time.Duration(k.skew.Load())) }

// newKeptCluster starts the cluster; level 0 is the binary's feature
// level, else the level every node applies. keeper, when set, is what
// each node's API keeps the backtests in, given its store.
func newKeptCluster(t *testing.T, level int, cfg Config, keeper func(*store.Store) Trees) *keptCluster {
	t.Helper()
	k := &keptCluster{}
	cfg.Now = k.now
	k.Cluster = mastertest.TestCluster(t, 3, mastertest.WithConfig(func(_ int, c *master.Config) {
		prev := c.StoreOptions
		c.StoreOptions = func(sc *store.Config) {
			if prev != nil {
				prev(sc)
			}
			sc.TrailingLogs = 2
			sc.SnapshotThreshold = 1 << 20 // only explicit snapshots
			if level > 0 {
				sc.FeatureLevel = level
			}
		}
	}), mastertest.WithSetup(func(_ int, s *master.Server) {
		var trees Trees = s.Store()
		if keeper != nil {
			trees = keeper(s.Store())
		}
		a, err := New(cfg, trees, s.Verifier(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{Prefix, Prefix + "/"} {
			if err := s.Mount(p, a.Handler(), master.OnLeader); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() { _ = a.Follow(ctx, s.Store()) }()
	}))
	k.ReplaceActive(ruleTree(t, activeTypes))
	mastertest.WaitFor(t, mastertest.Timeout, func() bool {
		l := k.Leader()
		if l < 0 {
			return false
		}
		st := k.Server(l).Store()
		id, err := st.CreateDraft(t.Context(), "alice")
		if err != nil {
			return false
		}
		if err := st.EditDraft(t.Context(), id, "alice", ruleTree(t, draftTypes)); err != nil {
			return false
		}
		k.draft = id
		return true
	}, "alice's draft")
	k.alice = k.Token(auth.Claims{User: "alice", Auths: map[string]auth.Authorization{"main": {Path: []string{"root"}, Roles: []string{"edit"}}}})
	return k
}

// urls are the nodes' URLs.
func (k *keptCluster) urls() []string {
	var out []string
	for i := range k.Len() {
		out = append(out, k.URL(i))
	}
	return out
}

// client is alice's client of every node.
func (k *keptCluster) client(t *testing.T) *Client {
	t.Helper()
	c, err := NewClient(k.urls(), k.alice, calltest.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// worker starts an engine's worker on every node's URL, reading b at
// rate events/s (0: no limit).
func (k *keptCluster) worker(t *testing.T, b *kafkatest.Broker, id string, rate float64) {
	t.Helper()
	r, err := kafkasource.NewReader(kafkasource.Dial{Brokers: []string{b.Addr}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(WorkerConfig{MasterURLs: k.urls(), Token: k.engineToken(), Engine: id,
		Topic: testTopic, Reader: r, Rate: rate, ProgressInterval: 50 * time.Millisecond, ClaimWait: time.Second, Client: calltest.Client()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// engineToken is the engines' token: view and fleet_report on the root.
func (k *keptCluster) engineToken() string {
	return k.Token(auth.Claims{User: "engine", Auths: map[string]auth.Authorization{
		"main": {Path: []string{"root"}, Roles: []string{"view", "fleet_report"}}}})
}

// claim claims a backtest through node i as engine, and reports whether
// it got id (it may not when the leader changed since id was asked for).
func (k *keptCluster) claim(t *testing.T, i int, engine, id string) bool {
	t.Helper()
	body, _ := json.Marshal(Claim{Engine: engine})
	resp, got := k.Do(i, http.MethodPost, ClaimPath+"?wait=5", k.engineToken(), body)
	var as Assignment
	if resp.StatusCode != http.StatusOK || json.Unmarshal(got, &as) != nil || as.ID != id {
		t.Logf("claim: %d %s, want backtest %s", resp.StatusCode, got, id)
		return false
	}
	return true
}

// postResult posts an engine's result of id through node i: the status
// and the body of the answer.
func (k *keptCluster) postResult(t *testing.T, i int, id string, rep ResultReport) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	resp, got := k.Do(i, http.MethodPut, Prefix+"/"+id+"/result", k.engineToken(), body)
	return resp.StatusCode, got
}

// get reads backtest id through node i: its status and the backtest.
func (k *keptCluster) get(t *testing.T, i int, id string) (int, Backtest) {
	t.Helper()
	resp, body := k.Get(i, Prefix+"/"+id, k.alice)
	var b Backtest
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, b
}

// waitKept waits until the leader's state holds backtest id finished: one
// answered finished is (TestKept_finishedOnceWritten), but one lost with
// its leader is answered failed before the next leader writes it so.
func (k *keptCluster) waitKept(t *testing.T, id, what string) {
	t.Helper()
	mastertest.WaitFor(t, mastertest.Timeout, func() bool {
		got, err := k.Server(k.Leader()).Store().Backtest(id)
		return err == nil && got.Finished
	}, what)
}

// sameKept waits until every running node applied the leader's state,
// and returns the backtests the nodes keep, which must be the same.
func (k *keptCluster) sameKept(t *testing.T) []store.Backtest {
	t.Helper()
	var want []store.Backtest
	mastertest.WaitFor(t, mastertest.Timeout, func() bool {
		l := k.Leader()
		if l < 0 {
			return false
		}
		leader := k.Server(l).Store()
		for _, i := range k.Running() {
			if k.Server(i).Store().Index() != leader.Index() {
				return false
			}
		}
		var err error
		want, err = leader.Backtests()
		return err == nil
	}, "every node to apply the leader's state")
	for _, i := range k.Running() {
		got, err := k.Server(i).Store().Backtests()
		if err != nil || !slices.EqualFunc(got, want, func(a, b store.Backtest) bool {
			return a.ID == b.ID && a.Finished == b.Finished && a.ResultBytes == b.ResultBytes && string(a.Summary) == string(b.Summary)
		}) {
			t.Fatalf("node %d keeps %+v (%v), the leader %+v", i, got, err, want)
		}
	}
	return want
}

// TestKept_cluster: at feature level 7 a finished backtest is answered
// through every node, survives the leader's kill and a node's restart
// that installs a snapshot; one running when the leader is killed is
// answered failed by the next leader and its engine stops (it runs the
// next one at once); deletion and expiry apply on every node.
func TestKept_cluster(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}})
	const n = 600
	produce(t, b.Addr, n)
	k := newKeptCluster(t, 0, Default(), nil)
	k.worker(t, b, "engine-1", 10) // 10 events/s: 60 s for the whole range
	c := k.client(t)

	first, err := c.Start(t.Context(), Request{Draft: k.draft, Last: 2, Sample: 3})
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.Wait(t.Context(), first.ID, 20*time.Millisecond, nil)
	if err != nil || done.State != StateSucceeded || done.Result == nil || done.Result.Events != 6 {
		t.Fatalf("first: %+v %v", done, err)
	}
	k.waitKept(t, first.ID, "the first backtest kept finished")
	kept := k.sameKept(t)
	if len(kept) != 1 || !kept[0].Finished || kept[0].ResultBytes == 0 || kept[0].User != "alice" {
		t.Fatalf("kept %+v", kept)
	}
	t.Logf("a result of %d events, %d samples: %d bytes compressed, summary %d bytes", done.Result.Events, len(done.Result.Samples), kept[0].ResultBytes, len(kept[0].Summary))
	for i := range 3 {
		status, got := k.get(t, i, first.ID)
		if status != http.StatusOK || got.State != StateSucceeded || got.Result == nil || got.Result.Events != 6 || len(got.Result.Samples) != len(done.Result.Samples) {
			t.Fatalf("node %d answers %d %+v", i, status, got)
		}
	}

	// A backtest running when the leader is killed.
	running, err := c.Start(t.Context(), Request{Draft: k.draft, Last: n})
	if err != nil {
		t.Fatal(err)
	}
	mastertest.WaitFor(t, 10*time.Second, func() bool {
		b, err := c.Get(t.Context(), running.ID)
		return err == nil && b.State == StateRunning && b.Progress != nil && b.Progress.Read > 0
	}, "the backtest running")
	killed := k.Leader()
	k.Kill(killed)
	var lost Backtest
	mastertest.WaitFor(t, mastertest.Timeout, func() bool {
		lost, err = c.Get(t.Context(), running.ID)
		return err == nil
	}, "the next leader to answer")
	if lost.State != StateFailed || lost.Error != LeaderChangedError {
		t.Fatalf("running at the kill, the next leader answers %+v", lost)
	}
	// The engine stopped it: it runs the next backtest at once, long
	// before the lost one's range (60 s) would have ended.
	start := time.Now()
	next, err := c.Start(t.Context(), Request{Draft: k.draft, Last: 1})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := c.Wait(t.Context(), next.ID, 20*time.Millisecond, nil); err != nil || done.State != StateSucceeded || done.Engine != "engine-1" {
		t.Fatalf("next: %+v %v", done, err)
	} else if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the engine ran the next backtest after %s: it did not stop the lost one", d)
	}
	k.waitKept(t, next.ID, "the next backtest kept finished")
	// The next leader wrote the lost one finished.
	k.waitKept(t, running.ID, "the lost backtest written failed")

	// The killed node restarts behind a compacted log: it installs a
	// snapshot, which carries the backtests.
	if err := k.Server(k.Leader()).Store().Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	k.Restart(killed)
	k.WaitConverged()
	kept = k.sameKept(t)
	if len(kept) != 3 {
		t.Fatalf("kept %+v", kept)
	}
	if got := k.Counter(t, killed, "squall_store_fsm_restores_total"); got == 0 {
		t.Fatalf("node %d caught up without installing a snapshot", killed)
	}
	for _, i := range k.Running() {
		if status, got := k.get(t, i, first.ID); status != http.StatusOK || got.State != StateSucceeded || got.Result == nil || got.Result.Events != 6 {
			t.Fatalf("after the restart node %d answers %d %+v", i, status, got)
		}
		if status, got := k.get(t, i, running.ID); status != http.StatusOK || got.State != StateFailed || got.Error != LeaderChangedError {
			t.Fatalf("after the restart node %d answers %d %+v", i, status, got)
		}
	}

	// Delete through a follower.
	if err := c.Delete(t.Context(), first.ID); err != nil {
		t.Fatal(err)
	}
	if kept = k.sameKept(t); len(kept) != 2 || slices.ContainsFunc(kept, func(b store.Backtest) bool { return b.ID == first.ID }) {
		t.Fatalf("after the delete: %+v", kept)
	}
	if status, _ := k.get(t, k.Followers()[0], first.ID); status != http.StatusNotFound {
		t.Fatalf("deleted: %d", status)
	}
	// A day later they expire, on every node.
	k.skew.Store(int64(25 * time.Hour))
	mastertest.WaitFor(t, mastertest.Timeout, func() bool {
		bs, err := k.Server(k.Leader()).Store().Backtests()
		return err == nil && len(bs) == 0
	}, "the backtests to expire")
	if kept = k.sameKept(t); len(kept) != 0 {
		t.Fatalf("after expiry: %+v", kept)
	}
}

// TestKept_bounds: the bound on the backtests kept prunes the oldest
// finished ones alike on every node; when every kept one is unfinished a
// new one is refused 429.
func TestKept_bounds(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.MaxKept = 2
	k := newKeptCluster(t, 0, cfg, nil)
	c := k.client(t)
	var ids []string
	for range 3 {
		bt, err := c.Start(t.Context(), Request{Draft: k.draft, Last: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, bt.ID)
		if _, err := c.Cancel(t.Context(), bt.ID); err != nil {
			t.Fatal(err)
		}
		k.waitKept(t, bt.ID, "the cancelled backtest kept finished")
	}
	kept := k.sameKept(t)
	if got := []string{kept[0].ID, kept[1].ID}; len(kept) != 2 || !slices.Equal(got, ids[1:]) {
		t.Fatalf("kept %+v, want %v", kept, ids[1:])
	}
	for range 2 {
		if _, err := c.Start(t.Context(), Request{Draft: k.draft, Last: 1}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Start(t.Context(), Request{Draft: k.draft, Last: 1})
	var ae *AnswerError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
		t.Fatalf("a third unfinished: %v", err)
	}
	if kept := k.sameKept(t); len(kept) != 2 || kept[0].Finished || kept[1].Finished {
		t.Fatalf("kept %+v", kept)
	}
}

// TestKept_level6: below feature level 7 backtests stay in the leader's
// memory: nothing is kept in the state, and a new leader does not know
// them (404).
func TestKept_level6(t *testing.T) {
	t.Parallel()
	k := newKeptCluster(t, store.LevelBacktests-1, Default(), nil)
	c := k.client(t)
	bt, err := c.Start(t.Context(), Request{Draft: k.draft, Last: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(t.Context(), bt.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(t.Context(), bt.ID); err != nil || got.State != StateCancelled {
		t.Fatalf("cancelled: %+v %v", got, err)
	}
	if kept := k.sameKept(t); len(kept) != 0 {
		t.Fatalf("kept at level 6: %+v", kept)
	}
	k.Kill(k.Leader())
	mastertest.WaitFor(t, mastertest.Timeout, func() bool {
		_, err := c.Get(t.Context(), bt.ID)
		var ae *AnswerError
		return errors.As(err, &ae) && ae.Status == http.StatusNotFound
	}, "the next leader to answer 404")
}

// randomBody is an incompressible event body: the hex of random bytes, 4
// KiB.
func randomBody() json.RawMessage {
	b := make([]byte, 2048)
	_, _ = rand.Read(b)
	return json.RawMessage(`"` + hex.EncodeToString(b) + `"`)
}

// TestPackResult: a result that compresses to more than the masters keep
// of one loses its samples' events, then its samples, and says so; a small
// one is kept whole and reads back the same.
func TestPackResult(t *testing.T) {
	t.Parallel()
	body := randomBody
	sample := func(n, rules int) []backtest.Sample {
		var out []backtest.Sample
		for i := range n {
			s := backtest.Sample{Offset: int64(i), Event: body()}
			for r := range rules {
				s.Active.Matched = append(s.Active.Matched, fmt.Sprintf("root/n%d/%x", r, body()[:40]))
			}
			out = append(out, s)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		samples []backtest.Sample
		trimmed string
		left    int
		events  bool
	}{
		{"small", sample(5, 0), "", 5, true},
		{"events too large", sample(700, 0), "the samples' events were dropped", 700, false},
		{"samples too large", sample(400, 400), "the samples were dropped", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Backtest{ID: "x", Result: &backtest.Result{Events: 10, Samples: tc.samples}}
			packed, err := packResult(&b)
			if err != nil {
				t.Fatal(err)
			}
			if len(packed) > store.MaxBacktestResultBytes || !strings.HasPrefix(b.ResultTrimmed, tc.trimmed) || (tc.trimmed == "") != (b.ResultTrimmed == "") {
				t.Fatalf("%d bytes, trimmed %q", len(packed), b.ResultTrimmed)
			}
			raw, err := store.UnpackBacktestResult(packed)
			if err != nil {
				t.Fatal(err)
			}
			var got backtest.Result
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if got.Events != 10 || len(got.Samples) != tc.left || (tc.left > 0 && (got.Samples[0].Event != nil) != tc.events) {
				t.Fatalf("read back %d events, %d samples", got.Events, len(got.Samples))
			}
			t.Logf("%s: %d bytes compressed", tc.name, len(packed))
		})
	}
}

// TestKept_finishedOnceWritten: at feature level 7 a client never sees a
// backtest finished before its finished record is in the replicated
// state: while an engine posts its result, a client polling the leader
// sees it running until a node's state holds it finished; the engine's
// post is answered once the leader's does, so that a leader killed right
// after that answer leaves every other node answering the backtest
// succeeded with its result. A round in which the leader changed (a
// loaded machine) proves nothing and is run again.
func TestKept_finishedOnceWritten(t *testing.T) {
	t.Parallel()
	k := newKeptCluster(t, 0, Default(), nil)
	c := k.client(t)
	// A result of incompressible samples (about 400 KiB): its entry takes
	// a while to replicate, the time a client may look.
	res := &backtest.Result{Events: 100, Complete: true}
	for i := range 100 {
		res.Samples = append(res.Samples, backtest.Sample{Offset: int64(i), Event: randomBody()})
	}
	// keptFinished reports whether a running node's state holds id
	// finished.
	keptFinished := func(id string) bool {
		for _, i := range k.Running() {
			if b, err := k.Server(i).Store().Backtest(id); err == nil && b.Finished {
				return true
			}
		}
		return false
	}
	const rounds = 3
	var id string
	leader := -1
	for done, tries := 0, 0; done < rounds; tries++ {
		if tries == rounds+3 {
			t.Fatalf("the leader changed in %d of %d rounds", tries-done, tries)
		}
		leader = k.Leader()
		poll, err := NewClient([]string{k.URL(leader)}, k.alice, calltest.Client())
		if err != nil {
			t.Fatal(err)
		}
		bt, err := c.Start(t.Context(), Request{Draft: k.draft, Last: 1})
		if err != nil {
			t.Fatal(err)
		}
		id = bt.ID
		if !k.claim(t, leader, "engine-1", id) {
			continue
		}
		// A client polls the leader while the engine posts the result.
		stop := make(chan struct{})
		seen := make(chan string, 1)
		go func() {
			defer close(seen)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for deadline := time.Now().Add(mastertest.Timeout); time.Now().Before(deadline); {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if b, err := poll.Get(t.Context(), id); err == nil && Finished(b.State) {
					if !keptFinished(id) {
						seen <- b.State
					}
					return
				}
			}
		}()
		status, got := k.postResult(t, leader, id, ResultReport{Engine: "engine-1", Result: res})
		close(stop)
		state, saw := <-seen
		if k.Leader() != leader {
			continue
		}
		if saw {
			t.Fatalf("round %d: a client saw the backtest %s before any node's state held it finished", done, state)
		}
		if status != http.StatusNoContent {
			t.Fatalf("round %d: result %d %s", done, status, got)
		}
		done++
	}
	// The engine was answered: the last one is kept, whoever leads next.
	k.Kill(leader)
	for _, i := range k.Running() {
		var b Backtest
		mastertest.WaitFor(t, mastertest.Timeout, func() bool {
			var status int
			status, b = k.get(t, i, id)
			return status != http.StatusServiceUnavailable
		}, "a node to answer")
		if b.State != StateSucceeded || b.Result == nil || b.Result.Events != 100 || len(b.Result.Samples) != 100 {
			t.Fatalf("after the leader's kill node %d answers %s %q, result %v", i, b.State, b.Error, b.Result != nil)
		}
	}
}

// flakyKeeper is a node's store whose first write of a finished backtest
// fails, as a write that timed out before it committed.
type flakyKeeper struct {
	*store.Store
	failed atomic.Bool
}

func (f *flakyKeeper) SaveBacktest(ctx context.Context, c store.SaveBacktest) error {
	if c.Backtest.Finished && f.failed.CompareAndSwap(false, true) {
		return fmt.Errorf("flaky keeper: %w", store.ErrTimeout)
	}
	return f.Store.SaveBacktest(ctx, c)
}

// TestKept_resultPostedAgain: an engine's result whose finished record
// the leader fails to write is answered 503 BACKTEST_NOT_KEPT and the
// backtest is still shown running; posted again, it is answered 204 and
// the backtest succeeded (whether that post or the leader's retry wrote
// it); another engine's result is refused.
func TestKept_resultPostedAgain(t *testing.T) {
	t.Parallel()
	k := newKeptCluster(t, 0, Default(), func(s *store.Store) Trees { return &flakyKeeper{Store: s} })
	c := k.client(t)
	leader := k.Leader()
	bt, err := c.Start(t.Context(), Request{Draft: k.draft, Last: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !k.claim(t, leader, "engine-1", bt.ID) {
		t.Fatal("the backtest was not claimed")
	}
	rep := ResultReport{Engine: "engine-1", Result: &backtest.Result{Events: 3, Complete: true}}
	if status, body := k.postResult(t, leader, bt.ID, rep); status != http.StatusServiceUnavailable || !strings.Contains(string(body), "BACKTEST_NOT_KEPT") {
		t.Fatalf("result not written: %d %s", status, body)
	}
	if got, err := c.Get(t.Context(), bt.ID); err != nil || got.State != StateRunning || got.Result != nil || got.Progress == nil || got.Progress.Read != 3 {
		t.Fatalf("result not written, the backtest reads %+v %v", got, err)
	}
	if status, body := k.postResult(t, leader, bt.ID, rep); status != http.StatusNoContent {
		t.Fatalf("result posted again: %d %s", status, body)
	}
	if got, err := c.Get(t.Context(), bt.ID); err != nil || got.State != StateSucceeded || got.Result == nil || got.Result.Events != 3 {
		t.Fatalf("after the result posted again: %+v %v", got, err)
	}
	if kept, err := k.Server(leader).Store().Backtest(bt.ID); err != nil || !kept.Finished {
		t.Fatalf("kept %+v %v", kept, err)
	}
	if status, body := k.postResult(t, leader, bt.ID, ResultReport{Engine: "engine-2", Result: rep.Result}); status != http.StatusConflict {
		t.Fatalf("another engine's result: %d %s", status, body)
	}
}
