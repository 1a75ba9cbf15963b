package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/squallhq/squall/config"
)

// minCorpus is how many trees testdata/corpus holds at least.
const minCorpus = 40

// corpus returns the trees of testdata/corpus by file name.
func corpus(t *testing.T) map[string]*config.Node {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < minCorpus {
		t.Fatalf("%d trees in testdata/corpus, want at least %d", len(files), minCorpus)
	}
	trees := make(map[string]*config.Node, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := config.DecodeExport(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		trees[strings.TrimSuffix(filepath.Base(f), ".json")] = ex.Node
	}
	return trees
}

// fsmApplyAt applies cmd as the committed log entry idx, written under
// feature level level (its extension, as Store.Apply writes it).
func fsmApplyAt(t testing.TB, f *fsm, idx uint64, level int, cmd Command) Result {
	t.Helper()
	data, err := encodeCommandAt(cmd, level)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	l := &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data, Extensions: encodeWrittenExt(level, nil)}
	r, ok := f.ApplyBatch([]*raft.Log{l})[0].(Result)
	if !ok {
		t.Fatalf("entry %d: response is not a Result", idx)
	}
	return r
}

// TestCorpus_acceptedAtEveryLevel: every tree of the corpus passes every
// version of the validation rules, and the state machine accepts it at
// every feature level in each entry that carries a tree (ReplaceActive,
// EditDraft, DraftEdit, RestoreState).
func TestCorpus_acceptedAtEveryLevel(t *testing.T) {
	t.Parallel()
	trees := corpus(t)
	for name, tree := range trees {
		for r := config.Rules1; r <= config.LatestRules; r++ {
			if err := config.ValidateRules(tree, r); err != nil {
				t.Errorf("%s: refused by rules %d: %v", name, r, err)
			}
		}
	}
	for level := 0; level <= FeatureLevel; level++ {
		t.Run("level "+string(rune('0'+level)), func(t *testing.T) {
			t.Parallel()
			f := newTestFSM(t)
			idx := uint64(0)
			apply := func(name string, cmd Command) {
				t.Helper()
				idx++
				if r := fsmApplyAt(t, f, idx, level, cmd); r.Err != nil {
					t.Errorf("%s: %s refused at level %d: %v", name, cmd.cmdType(), level, r.Err)
				}
			}
			apply("create", CreateDraft{ID: "d", Owner: "u", Now: time.UnixMilli(1)})
			for name, tree := range trees {
				apply(name, ReplaceActive{Tree: tree})
				apply(name, EditDraft{ID: "d", User: "u", Tree: tree, Now: time.UnixMilli(2)})
				apply(name, DraftEdit{ID: "d", User: "u", Edit: &config.Edit{Op: config.EditReplaceNode, Path: []string{tree.Name}, Node: tree}, Now: time.UnixMilli(3)})
				apply(name, RestoreState{Active: tree, Draft: &Draft{ID: "d", Owner: "u", CreatedMS: 1, UpdatedMS: 4, Tree: tree}})
				equalTrees(t, f.st.active, tree)
			}
		})
	}
}
