package action

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/squallhq/squall/engine/tree"
)

// TestWriteBatch: under a write batch the archive writes nothing until
// Flush, which writes every file's lines in order; lines it cannot write
// come back with their owner, index and action.
func TestWriteBatch(t *testing.T) {
	t.Parallel()
	a, base := newTestArchive(t, nil)
	wb := &WriteBatch{}
	ctx := WithWriteBatch(t.Context(), wb)
	act := func(key string, n int) tree.Action {
		return tree.Action{ID: IDArchive, Payload: map[string]any{
			"archive_type": "one", "key": key, "event": map[string]any{"n": n}}}
	}
	for i := range 6 {
		wb.Owner, wb.Index = i, 1
		if err := a.Execute(ctx, act([]string{"x", "y"}[i%2], i)); err != nil {
			t.Fatal(err)
		}
	}
	// A payload error is returned at once, not at Flush.
	if err := a.Execute(ctx, tree.Action{ID: IDArchive, Payload: map[string]any{}}); !errors.Is(err, ErrInvalidPayload) {
		t.Fatalf("invalid payload under a batch: %v", err)
	}
	if !wb.Pending() {
		t.Fatal("nothing pending")
	}
	if _, err := os.Stat(filepath.Join(base, "one/x/file.log")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("written before Flush: %v", err)
	}
	if failed := wb.Flush(nil); len(failed) != 0 {
		t.Fatalf("failed %v", failed)
	}
	if wb.Pending() {
		t.Fatal("pending after Flush")
	}
	if got := readLines(t, filepath.Join(base, "one/x/file.log")); !slices.Equal(got, []string{`{"n":0}`, `{"n":2}`, `{"n":4}`}) {
		t.Errorf("x: %q", got)
	}
	if got := readLines(t, filepath.Join(base, "one/y/file.log")); !slices.Equal(got, []string{`{"n":1}`, `{"n":3}`, `{"n":5}`}) {
		t.Errorf("y: %q", got)
	}

	// Lines of a closed executor fail at Flush, each with its tags.
	wb.Owner, wb.Index = 7, 2
	if err := a.Execute(ctx, act("x", 7)); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	failed := wb.Flush(nil)
	if len(failed) != 1 || failed[0].Owner != 7 || failed[0].Index != 2 || failed[0].Action.Payload["key"] != "x" ||
		!errors.Is(failed[0].Err, ErrClosed) {
		t.Fatalf("failed %+v", failed)
	}
	if got := readLines(t, filepath.Join(base, "one/x/file.log")); len(got) != 3 {
		t.Errorf("x after the failed flush: %q", got)
	}
}
