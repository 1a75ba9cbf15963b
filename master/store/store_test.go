package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/squallhq/squall/config"
)

func TestNew_Validate(t *testing.T) {
	t.Parallel()
	valid := Config{NodeID: "n", DataDir: t.TempDir(), BindAddr: "127.0.0.1:0"}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no node id", func(c *Config) { c.NodeID = "" }, "node id is required"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "data dir is required"},
		{"no bind address", func(c *Config) { c.BindAddr = "" }, "bind address is required"},
		{"half tls", func(c *Config) { c.TLS.CertFile = "x.pem" }, "tls needs a certificate, a key and a CA file"},
		{"negative timeout", func(c *Config) { c.ApplyTimeout = -1 }, "apply timeout is negative"},
		{"lease above heartbeat", func(c *Config) {
			c.HeartbeatTimeout = 100 * time.Millisecond
			c.LeaderLeaseTimeout = 200 * time.Millisecond
		}, "leader lease timeout 200ms is longer than the heartbeat timeout 100ms"},
		{"election below heartbeat", func(c *Config) {
			c.HeartbeatTimeout = time.Second
			c.ElectionTimeout = 500 * time.Millisecond
		}, "election timeout 500ms is shorter than the heartbeat timeout 1s"},
		{"commit above heartbeat", func(c *Config) {
			c.HeartbeatTimeout = 100 * time.Millisecond
			c.CommitTimeout = 200 * time.Millisecond
		}, "commit timeout 200ms is longer than the heartbeat timeout 100ms"},
		{"heartbeat too short", func(c *Config) { c.HeartbeatTimeout = time.Millisecond }, "heartbeat timeout 1ms is shorter than 50ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mod(&c)
			if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	// A short heartbeat alone pulls the lease and commit timeouts down
	// to it; a long one pulls the election timeout up.
	c := valid
	c.HeartbeatTimeout = 100 * time.Millisecond
	if _, err := New(c); err != nil {
		t.Fatal(err)
	}
	c.HeartbeatTimeout = 5 * time.Second
	if _, err := New(c); err != nil {
		t.Fatal(err)
	}
}

func TestStore_Lifecycle(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	cfg := testConfig(t, "n1")
	cfg.Registerer = reg
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is started or created by New.
	if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) {
		t.Fatalf("data dir after New: %v", err)
	}
	if err := s.ConsistentRead(t.Context()); !errors.Is(err, ErrNotOpen) {
		t.Fatalf("before Open: %v", err)
	}
	if _, err := s.Draft(); !errors.Is(err, ErrNotOpen) {
		t.Fatalf("before Open: %v", err)
	}
	// A second store cannot register the same metrics.
	if _, err := New(cfg); err == nil {
		t.Fatal("duplicate metrics registration succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Open after Close: %v", err)
	}
	// Close unregistered the metrics.
	s2 := openStore(t, cfg)
	if err := s2.Open(t.Context()); err == nil {
		t.Fatal("second Open succeeded")
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s2.Stats(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Stats after Close: %v", err)
	}
	if _, _, err := s2.WaitActive(t.Context(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitActive after Close: %v", err)
	}
}

func TestStore_SingleNode(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "n1")
	cfg.Bootstrap = true
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	s := openStore(t, cfg)
	waitReady(t, s)
	ctx := ctxTimeout(t, 10*time.Second)

	if id, addr := s.Leader(); id != "n1" || addr != s.Addr() {
		t.Fatalf("leader %s %s, want n1 %s", id, addr, s.Addr())
	}
	if !s.IsLeader() || !s.Ready() {
		t.Fatal("single node is not a ready leader")
	}
	tree, idx := s.Active()
	if idx != 0 || tree.Name != config.RootName {
		t.Fatalf("initial active %v %d", tree.Name, idx)
	}

	rich := mustTree(t, richTree)
	idx, err := s.ReplaceActive(ctx, rich)
	if err != nil || idx == 0 {
		t.Fatalf("replace active: %d %v", idx, err)
	}
	at := time.UnixMilli(1_700_000_000_000)
	s.now = func() time.Time { return at }
	id, err := s.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 36 || id[14] != '7' {
		t.Fatalf("draft id %q is not a UUIDv7", id)
	}
	d, err := s.Draft()
	if err != nil || d.ID != id || d.Owner != "alice" || d.CreatedMS != at.UnixMilli() {
		t.Fatalf("draft %+v %v", d, err)
	}
	equalTrees(t, d.Tree, rich)

	if err := s.EditDraft(ctx, id, "alice", invalidTree()); !errors.Is(err, ErrInvalidTree) {
		t.Fatalf("invalid edit: %v", err)
	}
	var noe *NotOwnerError
	if err := s.EditDraft(ctx, id, "bob", treeWith("x")); !errors.As(err, &noe) || noe.Owner != "alice" {
		t.Fatalf("edit by bob: %v", err)
	}
	if err := s.EditDraft(ctx, id, "alice", treeWith("x", "y")); err != nil {
		t.Fatal(err)
	}
	if err := s.TakeOver(ctx, nil, id, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deploy(ctx, id, "alice"); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("deploy by displaced owner: %v", err)
	}
	deployed, err := s.Deploy(ctx, id, "bob")
	if err != nil {
		t.Fatal(err)
	}
	tree, idx = s.Active()
	if idx != deployed || !reflect.DeepEqual(childNames(tree), []string{"x", "y"}) {
		t.Fatalf("active %v at %d, want x y at %d", childNames(tree), idx, deployed)
	}
	if s.Index() != deployed {
		t.Fatalf("state index %d", s.Index())
	}

	results, err := s.Batch(ctx,
		EditDraft{ID: id, User: "bob", Tree: treeWith("z"), Now: at},
		DeleteDraft{ID: id, User: "alice"},
		Deploy{ID: id, User: "bob"},
		DeleteDraft{ID: id, User: "bob"},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 4 || results[0].Err != nil || !errors.Is(results[1].Err, ErrNotOwner) || results[2].Err != nil || results[3].Err != nil {
		t.Fatalf("batch results %+v", results)
	}
	if _, err := s.Draft(); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("draft after batch: %v", err)
	}
	if tree, _ := s.Active(); !reflect.DeepEqual(childNames(tree), []string{"z"}) {
		t.Fatalf("active after batch %v", childNames(tree))
	}
	if err := s.DeleteDraft(ctx, nil, id, "bob"); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("delete missing draft: %v", err)
	}
	if _, err := s.Apply(ctx, nil, TakeOver{}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("invalid command: %v", err)
	}
	if _, err := s.Batch(ctx); err != nil {
		t.Fatalf("empty batch: %v", err)
	}

	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "Leader" || st.LeaderID != "n1" || len(st.Members) != 1 || !st.Members[0].Leader || !st.Members[0].Voter ||
		st.Term == 0 || st.CommitIndex < st.StateIndex || st.AppliedIndex < st.StateIndex || st.StateIndex != s.Index() {
		t.Fatalf("stats %+v", st)
	}

	// Metrics: raft gauges on scrape, apply latency, commands applied.
	for name, want := range map[string]float64{"squall_store_raft_leader": 1, "squall_store_raft_voters": 1, "squall_store_raft_has_leader": 1} {
		if got := gaugeValue(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n := testutil.CollectAndCount(reg, "squall_store_apply_duration_seconds"); n < 5 {
		t.Errorf("apply histogram series %d", n)
	}
	// The stages of a write: every entry above was written to the log and
	// applied; inserted findings go through the group commit.
	if _, err := s.InsertFinding(ctx, testFinding("a", 0, 1)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"squall_store_raft_log_append_seconds", "squall_store_fsm_apply_seconds",
		"squall_store_finding_batch_wait_seconds", "squall_store_finding_batch_size"} {
		if n := histogramCount(t, reg, name); n == 0 {
			t.Errorf("%s: no observations", name)
		}
	}
	if got := testutil.ToFloat64(s.metrics.findingBatches.WithLabelValues(closeAlone)); got != 1 {
		t.Errorf("finding batches closed alone: %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.metrics.fsmCommands.WithLabelValues("deploy_version", resultOK)); got != 2 {
		t.Errorf("deploy ok counter %v", got)
	}
	if got := gaugeValue(t, reg, "squall_store_active_index"); got != float64(results[2].Index) {
		t.Errorf("active index gauge %v", got)
	}
}

// onlyMetric returns the single series of the metric family name in reg.
func onlyMetric(t testing.TB, reg *prometheus.Registry, name string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0]
		}
	}
	t.Fatalf("no single-series metric %s", name)
	return nil
}

func gaugeValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return onlyMetric(t, reg, name).GetGauge().GetValue()
}

func TestStore_WaitActive(t *testing.T) {
	t.Parallel()
	s := openReady(t, "n1")
	ctx := ctxTimeout(t, 10*time.Second)
	id, err := s.CreateDraft(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EditDraft(ctx, id, "u", treeWith("new")); err != nil {
		t.Fatal(err)
	}
	_, before := s.Active()

	t.Run("returns on deploy", func(t *testing.T) {
		got := goWaitActive(func() (*config.Node, uint64, error) { return s.WaitActive(ctx, before) })
		// Changes that leave the active tree alone do not wake it.
		if err := s.TakeOver(ctx, nil, id, "u"); err != nil {
			t.Fatal(err)
		}
		deployed, err := s.Deploy(ctx, id, "u")
		if err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil || r.idx != deployed || !reflect.DeepEqual(childNames(r.tree), []string{"new"}) {
			t.Fatalf("got %v at %d (%v), want new at %d", childNames(r.tree), r.idx, r.err, deployed)
		}
	})

	t.Run("returns the current tree on timeout", func(t *testing.T) {
		_, cur := s.Active()
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		tree, idx, err := s.WaitActive(wctx, cur)
		if err != nil || idx != cur || !reflect.DeepEqual(childNames(tree), []string{"new"}) {
			t.Fatalf("got %v at %d (%v)", childNames(tree), idx, err)
		}
		if wctx.Err() == nil {
			t.Fatal("returned before the deadline")
		}
	})
}

func TestStore_RestartKeepsState(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "n1")
	cfg.Bootstrap = true
	s := openStore(t, cfg)
	waitReady(t, s)
	ctx := ctxTimeout(t, 20*time.Second)
	if _, err := s.ReplaceActive(ctx, treeWith("a", "b")); err != nil {
		t.Fatal(err)
	}
	id, err := s.CreateDraft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	wantIndex := s.Index()
	addr := s.Addr()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("from the state file", func(t *testing.T) {
		cfg.BindAddr = addr
		cfg.Registerer = prometheus.NewRegistry()
		s := openStore(t, cfg)
		// The state is there before any leader: it is read from fsm.db.
		if tree, _ := s.Active(); !reflect.DeepEqual(childNames(tree), []string{"a", "b"}) || s.Index() != wantIndex {
			t.Fatalf("after restart: %v at %d", childNames(tree), s.Index())
		}
		waitReady(t, s)
		if d, err := s.Draft(); err != nil || d.ID != id {
			t.Fatalf("draft %+v %v", d, err)
		}
		if err := s.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReplaceActive(ctx, treeWith("c")); err != nil {
			t.Fatal(err)
		}
		wantIndex = s.Index()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("from the snapshot when the state file is lost", func(t *testing.T) {
		if err := os.Remove(filepath.Join(cfg.DataDir, fsmDBName)); err != nil {
			t.Fatal(err)
		}
		cfg.Registerer = prometheus.NewRegistry()
		s := openStore(t, cfg)
		// Restored from the snapshot at Open; raft replays the rest once
		// the node leads again.
		if d, err := s.Draft(); err != nil || d.ID != id {
			t.Fatalf("draft after restore %+v %v", d, err)
		}
		waitReady(t, s)
		if tree, _ := s.Active(); !reflect.DeepEqual(childNames(tree), []string{"c"}) || s.Index() != wantIndex {
			t.Fatalf("after replay: %v at %d, want c at %d", childNames(tree), s.Index(), wantIndex)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a state file without raft state is discarded", func(t *testing.T) {
		for _, name := range []string{raftDBName, "snapshots"} {
			if err := os.RemoveAll(filepath.Join(cfg.DataDir, name)); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Registerer = prometheus.NewRegistry()
		s := openStore(t, cfg)
		if _, idx := s.Active(); idx != 0 || s.Index() != 0 {
			t.Fatalf("old state kept: active %d, state %d", idx, s.Index())
		}
		waitReady(t, s)
		if _, err := s.Draft(); !errors.Is(err, ErrNoDraft) {
			t.Fatalf("draft %v", err)
		}
	})
}

func TestStore_NotLeaderError(t *testing.T) {
	t.Parallel()
	err := error(&NotLeaderError{LeaderID: "n2", LeaderAddr: "10.0.0.2:7000", Err: ErrLeadershipLost})
	err = errors.Join(errors.New("context"), err)
	var nle *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.Is(err, ErrLeadershipLost) || !errors.As(err, &nle) || nle.LeaderAddr != "10.0.0.2:7000" {
		t.Fatalf("%v", err)
	}
	if got := (&NotLeaderError{}).Error(); got != "not the leader (no leader)" {
		t.Fatalf("%q", got)
	}
}

func histogramCount(t testing.TB, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	return onlyMetric(t, reg, name).GetHistogram().GetSampleCount()
}
