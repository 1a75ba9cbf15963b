package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/config"
)

// newTestFSM opens an fsm in a temporary dir, closed when the test ends
// unless the test closed it.
func newTestFSM(t testing.TB) *fsm {
	t.Helper()
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return openTestFSM(t, filepath.Join(t.TempDir(), fsmDBName), testLogger(t), m)
}

// reopenFSM closes f and opens its state file again, as a master
// restarted on it does, closed when the test ends unless the test closed
// it.
func reopenFSM(t testing.TB, f *fsm) *fsm {
	t.Helper()
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	return openTestFSM(t, f.path, f.logger, f.metrics)
}

func openTestFSM(t testing.TB, path string, logger *slog.Logger, m *metrics) *fsm {
	t.Helper()
	f, err := openFSM(path, logger, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.mu.RLock()
		closed := f.closed
		f.mu.RUnlock()
		if closed {
			return
		}
		if err := f.close(); err != nil {
			t.Errorf("close fsm: %v", err)
		}
	})
	return f
}

// fsmApply applies one command as the committed log entry idx.
func fsmApply(t testing.TB, f *fsm, idx uint64, cmd Command) Result {
	t.Helper()
	data, err := encodeCommand(cmd)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	resp := f.ApplyBatch([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}})[0]
	r, ok := resp.(Result)
	if !ok {
		t.Fatalf("response %T, want Result", resp)
	}
	return r
}

// mustPanicForLevel fails the test unless apply panics naming feature
// level level, as a state machine below that level does on an entry of
// its forms; what says what apply does.
func mustPanicForLevel(t testing.TB, level int, what string, apply func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), fmt.Sprintf("feature level %d", level)) {
			t.Fatalf("%s: panic %v, want one naming feature level %d", what, p, level)
		}
	}()
	apply()
}

func equalTrees(t testing.TB, got, want *config.Node) {
	t.Helper()
	g, err := config.EncodeExport(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := config.EncodeExport(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Fatalf("tree:\n%s\nwant:\n%s", g, w)
	}
}

func TestFSM_Commands(t *testing.T) {
	f := newTestFSM(t)
	now := time.UnixMilli(1_700_000_000_000)

	tree, idx := f.active()
	if idx != 0 || tree.Name != config.RootName || len(tree.Children) != 0 {
		t.Fatalf("initial active: %v %d", childNames(tree), idx)
	}
	if _, err := f.draft(); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("initial draft: %v", err)
	}

	rich := mustTree(t, richTree)
	if r := fsmApply(t, f, 3, ReplaceActive{Tree: rich}); r.Err != nil || r.Index != 3 {
		t.Fatalf("replace active: %+v", r)
	}
	got, idx := f.active()
	if idx != 3 {
		t.Fatalf("active index %d", idx)
	}
	equalTrees(t, got, rich)

	if r := fsmApply(t, f, 4, CreateDraft{ID: "d1", Owner: "alice", Now: now}); r.Err != nil || r.Index != 4 {
		t.Fatalf("create draft: %+v", r)
	}
	d, err := f.draft()
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "d1" || d.Owner != "alice" || d.CreatedMS != now.UnixMilli() || d.UpdatedMS != now.UnixMilli() {
		t.Fatalf("draft: %+v", d)
	}
	equalTrees(t, d.Tree, rich)

	t.Run("refusals change nothing", func(t *testing.T) {
		before, _ := f.draft()
		beforeIndex, _ := f.indexes()
		for _, tc := range []struct {
			name string
			cmd  Command
			want error
		}{
			{"edit by another user", EditDraft{ID: "d1", User: "bob", Tree: treeWith("x"), Now: now}, ErrNotOwner},
			{"edit unknown id", EditDraft{ID: "d2", User: "alice", Tree: treeWith("x"), Now: now}, ErrNoDraft},
			{"edit invalid tree", EditDraft{ID: "d1", User: "alice", Tree: invalidTree(), Now: now}, ErrInvalidTree},
			{"deploy by another user", Deploy{ID: "d1", User: "bob"}, ErrNotOwner},
			{"deploy unknown id", Deploy{ID: "nope", User: "alice"}, ErrNoDraft},
			{"delete by another user", DeleteDraft{ID: "d1", User: "bob"}, ErrNotOwner},
			{"take over unknown id", TakeOver{ID: "nope", User: "bob"}, ErrNoDraft},
			{"replace active with invalid tree", ReplaceActive{Tree: invalidTree()}, ErrInvalidTree},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := fsmApply(t, f, f.appliedIndex()+1, tc.cmd)
				if !errors.Is(r.Err, tc.want) {
					t.Fatalf("err %v, want %v", r.Err, tc.want)
				}
				if r.Index != beforeIndex {
					t.Fatalf("result index %d, want unchanged %d", r.Index, beforeIndex)
				}
			})
		}
		after, _ := f.draft()
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("draft changed: %+v -> %+v", before, after)
		}
		if i, _ := f.indexes(); i != beforeIndex {
			t.Fatalf("state index %d, want %d", i, beforeIndex)
		}
		if _, ai := f.active(); ai != 3 {
			t.Fatalf("active index %d", ai)
		}
	})

	t.Run("typed errors", func(t *testing.T) {
		r := fsmApply(t, f, f.appliedIndex()+1, EditDraft{ID: "d1", User: "bob", Tree: treeWith("x"), Now: now})
		var noe *NotOwnerError
		if !errors.As(r.Err, &noe) || noe.Owner != "alice" || noe.DraftID != "d1" {
			t.Fatalf("err %#v", r.Err)
		}
		r = fsmApply(t, f, f.appliedIndex()+1, EditDraft{ID: "d1", User: "alice", Tree: invalidTree(), Now: now})
		var ve *config.ValidationError
		if !errors.As(r.Err, &ve) || !errors.Is(r.Err, config.ErrInvalidName) {
			t.Fatalf("err %v, want a config.ValidationError", r.Err)
		}
	})

	edited := treeWith("a", "b")
	later := now.Add(time.Minute)
	idx = f.appliedIndex() + 1
	if r := fsmApply(t, f, idx, EditDraft{ID: "d1", User: "alice", Tree: edited, Now: later}); r.Err != nil || r.Index != idx {
		t.Fatalf("edit: %+v", r)
	}
	d, _ = f.draft()
	if d.UpdatedMS != later.UnixMilli() || d.CreatedMS != now.UnixMilli() {
		t.Fatalf("timestamps %d %d", d.CreatedMS, d.UpdatedMS)
	}
	equalTrees(t, d.Tree, edited)

	// Take over: bob owns it, alice is displaced, timestamps stay.
	if r := fsmApply(t, f, f.appliedIndex()+1, TakeOver{ID: "d1", User: "bob"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	d, _ = f.draft()
	if d.Owner != "bob" || d.UpdatedMS != later.UnixMilli() {
		t.Fatalf("after take over: %+v", d)
	}
	if r := fsmApply(t, f, f.appliedIndex()+1, Deploy{ID: "d1", User: "alice"}); !errors.Is(r.Err, ErrNotOwner) {
		t.Fatalf("displaced owner deploy: %v", r.Err)
	}

	idx = f.appliedIndex() + 1
	if r := fsmApply(t, f, idx, Deploy{ID: "d1", User: "bob"}); r.Err != nil || r.Index != idx {
		t.Fatalf("deploy: %+v", r)
	}
	got, ai := f.active()
	if ai != idx {
		t.Fatalf("active index %d, want %d", ai, idx)
	}
	equalTrees(t, got, edited)
	if d, err := f.draft(); err != nil || d.ID != "d1" {
		t.Fatalf("draft after deploy: %v %v", d, err)
	}

	// Reads are copies.
	got.Children = nil
	if again, _ := f.active(); len(again.Children) != 2 {
		t.Fatal("mutating a read changed the state")
	}

	if r := fsmApply(t, f, f.appliedIndex()+1, DeleteDraft{ID: "d1", User: "bob"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := f.draft(); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("draft after delete: %v", err)
	}

	// Create replaces a draft whoever owns it.
	fsmApply(t, f, f.appliedIndex()+1, CreateDraft{ID: "d2", Owner: "carol", Now: now})
	fsmApply(t, f, f.appliedIndex()+1, CreateDraft{ID: "d3", Owner: "dave", Now: later})
	if d, _ := f.draft(); d.ID != "d3" || d.Owner != "dave" {
		t.Fatalf("draft %+v", d)
	}

	if n := testutil.ToFloat64(f.metrics.fsmCommands.WithLabelValues("edit_draft", resultRefused)); n < 4 {
		t.Fatalf("refused edit_draft counter %v", n)
	}

	// The state file holds the same state.
	st, err := readState(f.db)
	if err != nil {
		t.Fatal(err)
	}
	if st.index != f.st.index || st.applied != f.st.applied || st.activeIndex != f.st.activeIndex || st.draft.ID != "d3" {
		t.Fatalf("file state %+v, memory %+v", st, f.st)
	}
}

func TestFSM_Batch(t *testing.T) {
	f := newTestFSM(t)
	now := time.UnixMilli(1_700_000_000_000)
	data, err := encodeBatch([]Command{
		CreateDraft{ID: "d1", Owner: "alice", Now: now},
		EditDraft{ID: "d1", User: "alice", Tree: invalidTree(), Now: now},
		EditDraft{ID: "d1", User: "bob", Tree: treeWith("x"), Now: now},
		EditDraft{ID: "d1", User: "alice", Tree: treeWith("x"), Now: now},
		Deploy{ID: "d1", User: "alice"},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp := f.ApplyBatch([]*raft.Log{{Index: 7, Type: raft.LogCommand, Data: data}})[0]
	results, ok := resp.([]Result)
	if !ok || len(results) != 5 {
		t.Fatalf("response %#v", resp)
	}
	wantErr := []error{nil, ErrInvalidTree, ErrNotOwner, nil, nil}
	for i, r := range results {
		if !errors.Is(r.Err, wantErr[i]) || (wantErr[i] == nil) != (r.Err == nil) {
			t.Errorf("result %d: %v, want %v", i, r.Err, wantErr[i])
		}
		if r.Index != 7 {
			t.Errorf("result %d index %d, want 7", i, r.Index)
		}
	}
	tree, idx := f.active()
	if idx != 7 || !reflect.DeepEqual(childNames(tree), []string{"x"}) {
		t.Fatalf("active %v at %d", childNames(tree), idx)
	}

	if _, err := encodeBatch([]Command{TakeOver{ID: "d1"}}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("batch with an invalid command: %v", err)
	}
}

func TestFSM_ApplyBatchOfEntries(t *testing.T) {
	f := newTestFSM(t)
	enc := func(c Command) []byte {
		b, err := encodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	logs := []*raft.Log{
		{Index: 1, Type: raft.LogConfiguration},
		{Index: 2, Type: raft.LogCommand, Data: enc(ReplaceActive{Tree: treeWith("a")})},
		{Index: 3, Type: raft.LogCommand, Data: enc(CreateDraft{ID: "d", Owner: "u"})},
		{Index: 4, Type: raft.LogCommand, Data: enc(Deploy{ID: "d", User: "nobody"})},
	}
	resps := f.ApplyBatch(logs)
	if resps[0] != nil {
		t.Fatalf("configuration entry response %v", resps[0])
	}
	if r := resps[3].(Result); !errors.Is(r.Err, ErrNotOwner) {
		t.Fatalf("deploy: %+v", r)
	}
	if f.appliedIndex() != 4 {
		t.Fatalf("applied %d", f.appliedIndex())
	}
	if i, ai := f.indexes(); i != 3 || ai != 2 {
		t.Fatalf("indexes %d %d", i, ai)
	}

	// Raft replays entries after a restart that the state file already
	// has: they are skipped, so nothing is applied twice.
	replay := f.ApplyBatch([]*raft.Log{{Index: 2, Type: raft.LogCommand, Data: enc(ReplaceActive{Tree: treeWith("zzz")})}})
	if replay[0] != nil {
		t.Fatalf("replayed entry response %v", replay[0])
	}
	if tree, _ := f.active(); !reflect.DeepEqual(childNames(tree), []string{"a"}) {
		t.Fatalf("replay changed the state: %v", childNames(tree))
	}
}

func TestFSM_UndecodableEntryPanics(t *testing.T) {
	valid, err := encodeCommand(TakeOver{ID: "d", User: "u"})
	if err != nil {
		t.Fatal(err)
	}
	withByte := func(i int, b byte) []byte {
		c := bytes.Clone(valid)
		c[i] = b
		return c
	}
	nested, err := encodeBatch([]Command{TakeOver{ID: "d", User: "u"}})
	if err != nil {
		t.Fatal(err)
	}
	nested = bytes.Replace(nested, []byte(`"type":4`), []byte(`"type":7`), 1)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{byte(typeDeploy)}},
		{"unknown type", withByte(0, 99)},
		{"zero type", withByte(0, 0)},
		{"unknown version", withByte(1, 2)},
		{"bad json", append([]byte{byte(typeDeploy), payloadVersion}, `{"id":`...)},
		{"unknown field", append([]byte{byte(typeDeploy), payloadVersion}, `{"id":"d","user":"u","extra":1}`...)},
		{"trailing data", append(bytes.Clone(valid), `{}`...)},
		{"nested batch", nested},
		{"unknown type in batch", append([]byte{byte(typeBatch), payloadVersion}, `{"commands":[{"type":42,"version":1,"payload":{}}]}`...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFSM(t)
			fsmApply(t, f, 1, ReplaceActive{Tree: treeWith("a")})
			func() {
				defer func() {
					p := recover()
					if p == nil {
						t.Fatal("no panic")
					}
					if !strings.Contains(p.(string), "cannot apply committed raft log entry 2") {
						t.Fatalf("panic %v", p)
					}
				}()
				f.ApplyBatch([]*raft.Log{{Index: 2, Type: raft.LogCommand, Data: tc.data}})
			}()
			// Nothing was applied, and the state file is still usable.
			if f.appliedIndex() != 1 {
				t.Fatalf("applied %d", f.appliedIndex())
			}
			if r := fsmApply(t, f, 2, ReplaceActive{Tree: treeWith("b")}); r.Err != nil {
				t.Fatal(r.Err)
			}
		})
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.canceled = true; return nil }

func snapshotOf(t testing.TB, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed || sink.canceled {
		t.Fatalf("sink closed %v canceled %v", sink.closed, sink.canceled)
	}
	return sink.Bytes()
}

func TestFSM_SnapshotRestore(t *testing.T) {
	f := newTestFSM(t)
	now := time.UnixMilli(1_700_000_000_000)
	fsmApply(t, f, 1, ReplaceActive{Tree: mustTree(t, richTree)})
	fsmApply(t, f, 2, CreateDraft{ID: "d1", Owner: "alice", Now: now})
	fsmApply(t, f, 3, EditDraft{ID: "d1", User: "alice", Tree: treeWith("x"), Now: now})
	wantActive, wantIdx := f.active()
	wantDraft, _ := f.draft()

	// The snapshot is taken at index 3 and persisted on another goroutine,
	// as raft does, while Apply goes on.
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	persisted := make(chan error, 1)
	go func() {
		defer snap.Release()
		persisted <- snap.Persist(sink)
	}()
	fsmApply(t, f, 4, Deploy{ID: "d1", User: "alice"})
	fsmApply(t, f, 5, DeleteDraft{ID: "d1", User: "alice"})
	if err := <-persisted; err != nil {
		t.Fatal(err)
	}
	data := sink.Bytes()

	check := func(t *testing.T, g *fsm) {
		t.Helper()
		active, idx := g.active()
		if idx != wantIdx {
			t.Fatalf("active index %d, want %d", idx, wantIdx)
		}
		equalTrees(t, active, wantActive)
		d, err := g.draft()
		if err != nil || !reflect.DeepEqual(d, wantDraft) {
			t.Fatalf("draft %+v %v, want %+v", d, err, wantDraft)
		}
		if g.appliedIndex() != 3 {
			t.Fatalf("applied %d, want 3", g.appliedIndex())
		}
	}

	t.Run("into a fresh fsm", func(t *testing.T) {
		g := newTestFSM(t)
		if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatal(err)
		}
		check(t, g)
		// It goes on applying from there.
		if r := fsmApply(t, g, 4, Deploy{ID: "d1", User: "alice"}); r.Err != nil {
			t.Fatal(r.Err)
		}
	})

	t.Run("over newer state, waking watchers", func(t *testing.T) {
		_, cur := f.active()
		woke := make(chan uint64, 1)
		go func() {
			_, idx, _ := f.waitActive(t.Context(), cur)
			woke <- idx
		}()
		// The restore moves the active index back to 1: the watcher is
		// woken, sees no index above cur, and waits on.
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatal(err)
		}
		check(t, f)
		fsmApply(t, f, 9, ReplaceActive{Tree: treeWith("later")})
		if idx := <-woke; idx != 9 {
			t.Fatalf("watcher woke at %d", idx)
		}
		if n := f.metrics.fsmRestores; testutil.ToFloat64(n) != 1 {
			t.Fatalf("restores counter %v", testutil.ToFloat64(n))
		}
	})

	t.Run("garbage is refused and changes nothing", func(t *testing.T) {
		g := newTestFSM(t)
		fsmApply(t, g, 1, ReplaceActive{Tree: treeWith("keep")})
		if err := g.Restore(io.NopCloser(strings.NewReader("not a bolt file"))); err == nil {
			t.Fatal("restore of garbage succeeded")
		}
		if tree, idx := g.active(); idx != 1 || !reflect.DeepEqual(childNames(tree), []string{"keep"}) {
			t.Fatalf("state changed: %v %d", childNames(tree), idx)
		}
		if r := fsmApply(t, g, 2, ReplaceActive{Tree: treeWith("next")}); r.Err != nil {
			t.Fatal(r.Err)
		}
	})

	t.Run("snapshot of a restored fsm round-trips", func(t *testing.T) {
		g := newTestFSM(t)
		if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatal(err)
		}
		h := newTestFSM(t)
		if err := h.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, g)))); err != nil {
			t.Fatal(err)
		}
		check(t, h)
	})
}

func TestFSM_WaitActive(t *testing.T) {
	t.Run("returns on deploy", func(t *testing.T) {
		f := newTestFSM(t)
		fsmApply(t, f, 1, CreateDraft{ID: "d", Owner: "u"})
		fsmApply(t, f, 2, EditDraft{ID: "d", User: "u", Tree: treeWith("new")})
		got := goWaitActive(func() (*config.Node, uint64, error) { return f.waitActive(t.Context(), 0) })
		fsmApply(t, f, 3, Deploy{ID: "d", User: "u"})
		r := <-got
		if r.err != nil || r.idx != 3 || !reflect.DeepEqual(childNames(r.tree), []string{"new"}) {
			t.Fatalf("got %v %d %v", childNames(r.tree), r.idx, r.err)
		}
		// Already newer: returns at once.
		if _, idx, err := f.waitActive(t.Context(), 2); idx != 3 || err != nil {
			t.Fatalf("got %d %v", idx, err)
		}
	})

	t.Run("returns the current tree when ctx ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newTestFSM(t)
			fsmApply(t, f, 1, ReplaceActive{Tree: treeWith("a")})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			start := time.Now()
			tree, idx, err := f.waitActive(ctx, 1)
			if err != nil || idx != 1 || !reflect.DeepEqual(childNames(tree), []string{"a"}) {
				t.Fatalf("got %v %d %v", childNames(tree), idx, err)
			}
			if d := time.Since(start); d != 30*time.Second {
				t.Fatalf("returned after %s", d)
			}
		})
	})

	t.Run("returns ErrClosed when closed", func(t *testing.T) {
		f := newTestFSM(t)
		done := make(chan error, 1)
		go func() {
			_, _, err := f.waitActive(t.Context(), 0)
			done <- err
		}()
		if err := f.close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestFSM_ReopenKeepsState(t *testing.T) {
	f := newTestFSM(t)
	fsmApply(t, f, 5, ReplaceActive{Tree: mustTree(t, richTree)})
	fsmApply(t, f, 6, CreateDraft{ID: "d", Owner: "u", Now: time.UnixMilli(42)})
	want := f.st
	g := reopenFSM(t, f)
	if g.st.applied != 6 || g.st.index != 6 || g.st.activeIndex != 5 || g.st.draft.CreatedMS != 42 {
		t.Fatalf("reopened state %+v", g.st)
	}
	equalTrees(t, g.st.active, want.active)
	equalTrees(t, g.st.draft.Tree, want.active)
}
