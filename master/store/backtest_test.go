package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// keptIDs returns the ids of the backtests s keeps, in order.
func keptIDs(t *testing.T, s *Store) []string {
	t.Helper()
	bs, err := s.Backtests()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	return ids
}

// newBacktest is the record of backtest id asked for by alice at ms.
func newBacktest(id string, ms int64) Backtest {
	return Backtest{ID: id, User: "alice", CreatedMS: ms, Summary: []byte(fmt.Sprintf(`{"id":%q}`, id))}
}

// finishedBacktest is backtest id finished with a result of n bytes.
func finishedBacktest(id string, ms int64, n int) Backtest {
	b := newBacktest(id, ms)
	b.Finished, b.FinishedMS = true, ms+1
	if n > 0 {
		b.Result = bytes.Repeat([]byte{byte(len(id))}, n)
	}
	return b
}

// TestStore_Backtests: records asked for, finished, bounded by count and
// bytes (the oldest finished go first), deleted and expired, with the
// refusals; the state file becomes format 10; creation and deletion are
// audited.
func TestStore_Backtests(t *testing.T) {
	s := openReady(t, "node0")
	ctx := ctxTimeout(t, 30*time.Second)
	save := func(b Backtest, create bool, kept, bytes int) error {
		return s.SaveBacktest(ctx, SaveBacktest{Backtest: b, Create: create, MaxKept: kept, MaxBytes: bytes})
	}
	for i, id := range []string{"a", "b", "c"} {
		if err := save(newBacktest(id, int64(100+i)), false, 3, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := save(newBacktest("a", 1), false, 3, 1000); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("the same id again: %v", err)
	}
	if err := save(newBacktest("d", 200), false, 3, 1000); !errors.Is(err, ErrBacktestsFull) {
		t.Fatalf("a fourth unfinished with 3 kept at most: %v", err)
	}
	if err := save(finishedBacktest("zz", 1, 10), false, 3, 1000); !errors.Is(err, ErrNoBacktest) {
		t.Fatalf("finishing an unknown one: %v", err)
	}
	if err := save(finishedBacktest("a", 100, 400), false, 3, 1000); err != nil {
		t.Fatal(err)
	}
	if err := save(finishedBacktest("a", 100, 10), false, 3, 1000); !errors.Is(err, ErrBacktestFinished) {
		t.Fatalf("finishing it again: %v", err)
	}
	got, err := s.Backtest("a")
	if err != nil || !got.Finished || got.ResultBytes != 400 || len(got.Result) != 400 || got.FinishedMS != 101 {
		t.Fatalf("a: %+v %v", got, err)
	}
	// b finishes with 700 bytes: 1,100 in all, a (the oldest finished
	// with a result) goes.
	if err := save(finishedBacktest("b", 101, 700), false, 3, 1000); err != nil {
		t.Fatal(err)
	}
	if ids := keptIDs(t, s); !slices.Equal(ids, []string{"b", "c"}) {
		t.Fatalf("after the byte bound: %v", ids)
	}
	// A new one asked for when 3 are kept at most and 2 are: kept; the
	// next one makes room by dropping b, the finished one.
	if err := save(newBacktest("d", 300), false, 3, 1000); err != nil {
		t.Fatal(err)
	}
	if err := save(newBacktest("e", 301), false, 3, 1000); err != nil {
		t.Fatal(err)
	}
	if ids := keptIDs(t, s); !slices.Equal(ids, []string{"c", "d", "e"}) {
		t.Fatalf("after the count bound: %v", ids)
	}
	// A backtest asked for below the level is kept when it finishes.
	if err := save(finishedBacktest("old", 5, 0), true, 4, 1000); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBacktests(ctx, DeleteBacktests{ID: "d"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBacktests(ctx, DeleteBacktests{ID: "d"}); !errors.Is(err, ErrNoBacktest) {
		t.Fatalf("deleting it again: %v", err)
	}
	if err := save(finishedBacktest("c", 102, 0), false, 4, 1000); err != nil {
		t.Fatal(err)
	}
	// Expiry: finished before 50 ms (old), not c (103) nor e (unfinished).
	if err := s.DeleteBacktests(ctx, DeleteBacktests{FinishedBeforeMS: 50}); err != nil {
		t.Fatal(err)
	}
	if ids := keptIDs(t, s); !slices.Equal(ids, []string{"c", "e"}) {
		t.Fatalf("after expiry: %v", ids)
	}
	if err := s.DeleteBacktests(ctx, DeleteBacktests{}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("delete without an id or a time: %v", err)
	}
	if err := save(Backtest{ID: "x", User: "alice", CreatedMS: 1, Summary: []byte("{")}, false, 3, 10); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("a summary that is not JSON: %v", err)
	}
	big := finishedBacktest("e", 301, MaxBacktestResultBytes+1)
	if err := save(big, false, 3, 10<<20); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("a result over the cap: %v", err)
	}
	recs, err := s.AuditRecords()
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs {
		if strings.HasPrefix(r.Action, "backtest") {
			actions = append(actions, strings.TrimSpace(r.Action+" "+r.Target+" "+r.Result+" "+r.Code))
		}
	}
	want := []string{"backtest.create a applied", "backtest.create b applied", "backtest.create c applied",
		"backtest.create a refused INVALID_COMMAND", "backtest.create d refused BACKTESTS_FULL", "backtest.create d applied",
		"backtest.create e applied", "backtest.delete d applied", "backtest.delete d refused NO_BACKTEST", "backtests.expire  applied"}
	if !slices.Equal(actions, want) {
		t.Errorf("audit %q, want %q", actions, want)
	}
	if format := stateFormatOf(t, s.fsm.Load()); format != strconv.Itoa(formatBacktests) {
		t.Fatalf("state file format %s, want %d", format, formatBacktests)
	}
}

// TestFSM_BacktestsBelowLevel: a master of the level before kept
// backtests panics on their entries, as a release of that level does.
func TestFSM_BacktestsBelowLevel(t *testing.T) {
	t.Parallel()
	save, err := encodeCommand(SaveBacktest{Backtest: newBacktest("a", 1), MaxKept: 1})
	if err != nil {
		t.Fatal(err)
	}
	del, err := encodeCommand(DeleteBacktests{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"save": save, "delete": del} {
		t.Run(name, func(t *testing.T) {
			f := newTestFSM(t)
			f.level = LevelBacktests - 1
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), fmt.Sprintf("feature level %d", LevelBacktests)) {
					t.Fatalf("panic %v, want one naming feature level %d", p, LevelBacktests)
				}
			}()
			f.ApplyBatch([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}})
		})
	}
}

// TestStore_BacktestsLevel: below LevelBacktests the entries are refused
// before they are written (ErrLevel).
func TestStore_BacktestsLevel(t *testing.T) {
	cfg := testConfig(t, "node0")
	cfg.Bootstrap = true
	cfg.FeatureLevel = LevelBacktests - 1
	s := openStore(t, cfg)
	waitReady(t, s)
	ctx := ctxTimeout(t, 10*time.Second)
	if err := s.SaveBacktest(ctx, SaveBacktest{Backtest: newBacktest("a", 1), MaxKept: 1}); !errors.Is(err, ErrLevel) {
		t.Fatalf("save below the level: %v", err)
	}
	if err := s.DeleteBacktests(ctx, DeleteBacktests{ID: "a"}); !errors.Is(err, ErrLevel) {
		t.Fatalf("delete below the level: %v", err)
	}
}

// TestStore_BacktestLargestResult: a result of the largest size an entry
// takes (1 MiB compressed, incompressible here) commits on a 3-node
// cluster and every node reads it back alike.
func TestStore_BacktestLargestResult(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil)
	res := make([]byte, MaxBacktestResultBytes)
	_, _ = rand.Read(res)
	b := finishedBacktest("big", 100, 0)
	b.Result = res
	start := time.Now()
	err := onLeader(t, nodes, func(ctx context.Context, l *Store) error {
		return l.SaveBacktest(ctx, SaveBacktest{Backtest: b, Create: true, MaxKept: 1, MaxBytes: MaxBacktestResultBytes})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a SaveBacktest entry with a %d-byte result committed and applied in %s", len(res), time.Since(start))
	waitConverged(t, nodes)
	for _, s := range nodes {
		got, err := s.Backtest("big")
		if err != nil || !bytes.Equal(got.Result, res) || got.ResultBytes != len(res) {
			t.Fatalf("%s: %d bytes, %v", s.ID(), len(got.Result), err)
		}
	}
}
