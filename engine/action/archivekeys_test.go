package action

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/metrictest"
)

// archiveAct returns an archive action of an event at a position, writing
// {"n": n} to the default file.
func archiveAct(eventID, position string, n int) tree.Action {
	return keyed(IDArchive, map[string]any{"event": map[string]any{"n": n}}, eventID, position)
}

// archiveEvents runs on ex the archive action of rule root/rs/r/0 for the
// events ev-i of each i, with n = i.
func archiveEvents(t *testing.T, ex *archiveExecutor, is ...int) {
	t.Helper()
	for _, i := range is {
		if err := ex.Execute(t.Context(), archiveAct(fmt.Sprint("ev-", i), "root/rs/r/0", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// keyLines returns the keys and the n fields of a file's lines.
func keyLines(t testing.TB, path string) (keys []string, ns []int) {
	t.Helper()
	for _, l := range readLines(t, path) {
		var v struct {
			Key string `json:"squall_idempotency_key"`
			N   int    `json:"n"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		keys = append(keys, v.Key)
		ns = append(ns, v.N)
	}
	return keys, ns
}

// The archive writes an action's key once per file: the line starts with
// the key, and the same action again (a redelivered event) writes nothing,
// in this process, after a restart and from another process on the same
// directory.
func TestArchive_idempotencyKey(t *testing.T) {
	t.Parallel()
	t.Run("line shape", func(t *testing.T) {
		t.Parallel()
		a, base := newTestArchive(t, nil)
		ev := map[string]any{"type": "t", "payload": map[string]any{"x": "<&>"}}
		acts := []tree.Action{
			keyed(IDArchive, map[string]any{"event": ev}, "ev-1", "root/rs/r/0"),
			keyed(IDArchive, map[string]any{"event": map[string]any{}}, "ev-1", "root/rs/r/1"),
			// Not an object, an own field of the name, no event id:
			// written as they are, every time.
			keyed(IDArchive, map[string]any{"event": "s"}, "ev-1", "root/rs/r/2"),
			keyed(IDArchive, map[string]any{"event": map[string]any{ArchiveKeyField: "mine"}}, "ev-1", "root/rs/r/3"),
			{ID: IDArchive, Payload: map[string]any{"event": map[string]any{"n": 1}}},
		}
		for range 2 {
			for _, act := range acts {
				if err := a.Execute(t.Context(), act); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := readLines(t, filepath.Join(base, "default", "file.out"))
		k0, k1 := acts[0].IdempotencyKey(), acts[1].IdempotencyKey()
		want := []string{
			`{"squall_idempotency_key":"` + k0 + `","payload":{"x":"<&>"},"type":"t"}`,
			`{"squall_idempotency_key":"` + k1 + `"}`,
			`"s"`, `{"squall_idempotency_key":"mine"}`, `{"n":1}`,
			`"s"`, `{"squall_idempotency_key":"mine"}`, `{"n":1}`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("restart", func(t *testing.T) {
		t.Parallel()
		a, base := newTestArchive(t, nil)
		for i := range 3 {
			if err := a.Execute(t.Context(), archiveAct("ev-1", fmt.Sprintf("root/rs/r/%d", i), i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		b, _ := newTestArchive(t, func(c *ArchiveConfig) { c.BasePath = base })
		for i := range 4 { // 0 to 2 again, and 3
			if err := b.Execute(t.Context(), archiveAct("ev-1", fmt.Sprintf("root/rs/r/%d", i), i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, ns := keyLines(t, filepath.Join(base, "default", "file.out")); fmt.Sprint(ns) != "[0 1 2 3]" {
			t.Errorf("lines of n %v, want [0 1 2 3]", ns)
		}
	})
	t.Run("another writer", func(t *testing.T) {
		t.Parallel()
		a, base := newTestArchive(t, nil)
		b, _ := newTestArchive(t, func(c *ArchiveConfig) { c.BasePath = base })
		// Both have the file open before either writes.
		for i, ex := range []*archiveExecutor{a, b} {
			if err := ex.Execute(t.Context(), archiveAct("ev-0", "root/rs/r/0", i)); err != nil {
				t.Fatal(err)
			}
		}
		for _, ex := range []*archiveExecutor{a, b, a} {
			if err := ex.Execute(t.Context(), archiveAct("ev-1", "root/rs/r/0", 1)); err != nil {
				t.Fatal(err)
			}
		}
		if _, ns := keyLines(t, filepath.Join(base, "default", "file.out")); fmt.Sprint(ns) != "[0 1]" {
			t.Errorf("lines of n %v, want [0 1]", ns)
		}
	})
	t.Run("bounded by recent_keys", func(t *testing.T) {
		t.Parallel()
		bound := func(c *ArchiveConfig) { c.RecentKeys = 3 }
		a, base := newTestArchive(t, bound)
		archiveEvents(t, a, 0, 1, 2, 3)
		// In this process: 0 is forgotten, 3 is remembered.
		archiveEvents(t, a, 3, 0)
		// After a restart, the last 3 lines are read back: 3, 0 and 2
		// are there, 1 is not.
		b, _ := newTestArchive(t, func(c *ArchiveConfig) { c.BasePath = base; bound(c) })
		archiveEvents(t, b, 0, 3, 2, 1)
		if _, ns := keyLines(t, filepath.Join(base, "default", "file.out")); fmt.Sprint(ns) != "[0 1 2 3 0 1]" {
			t.Errorf("lines of n %v, want [0 1 2 3 0 1]", ns)
		}
	})
	t.Run("own lines keep the lines found", func(t *testing.T) {
		t.Parallel()
		bound := func(c *ArchiveConfig) { c.RecentKeys = 3 }
		a, base := newTestArchive(t, bound)
		archiveEvents(t, a, 0, 1, 2)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		// The engine after a crash writes more lines of its own than
		// recent_keys before it runs the crashed one's events again.
		b, _ := newTestArchive(t, func(c *ArchiveConfig) { c.BasePath = base; bound(c) })
		archiveEvents(t, b, 3, 4, 5, 6, 0, 1, 2, 3)
		if _, ns := keyLines(t, filepath.Join(base, "default", "file.out")); fmt.Sprint(ns) != "[0 1 2 3 4 5 6 3]" {
			t.Errorf("lines of n %v, want [0 1 2 3 4 5 6 3]: the found lines once, 3 pushed out of the lines of its own", ns)
		}
	})
	t.Run("torn last line", func(t *testing.T) {
		t.Parallel()
		a, base := newTestArchive(t, nil)
		act := archiveAct("ev-1", "root/rs/r/0", 1)
		archiveEvents(t, a, 0)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		// A crash cut the write of act's line.
		path := filepath.Join(base, "default", "file.out")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(archiveKeyPrefix + act.IdempotencyKey() + `","n":`); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		b, _ := newTestArchive(t, func(c *ArchiveConfig) { c.BasePath = base })
		if err := b.Execute(t.Context(), act); err != nil {
			t.Fatal(err)
		}
		got := readLines(t, path)
		if len(got) != 3 || !strings.HasSuffix(got[1], `"n":`) || !strings.HasSuffix(got[2], `"n":1}`) {
			t.Errorf("lines %q: want the first, the cut one, then the whole one", got)
		}
	})
	t.Run("write batch", func(t *testing.T) {
		t.Parallel()
		a, base := newTestArchive(t, nil)
		archiveEvents(t, a, 0)
		wb := &WriteBatch{}
		ctx := WithWriteBatch(t.Context(), wb)
		for _, i := range []int{0, 1, 2, 1} {
			if err := a.Execute(ctx, archiveAct(fmt.Sprint("ev-", i), "root/rs/r/0", i)); err != nil {
				t.Fatal(err)
			}
		}
		if failed := wb.Flush(nil); len(failed) > 0 {
			t.Fatal(failed[0].Err)
		}
		if _, ns := keyLines(t, filepath.Join(base, "default", "file.out")); fmt.Sprint(ns) != "[0 1 2]" {
			t.Errorf("lines of n %v, want [0 1 2]", ns)
		}
	})
	t.Run("recent_keys 0", func(t *testing.T) {
		t.Parallel()
		a, base := newTestArchive(t, func(c *ArchiveConfig) { c.RecentKeys = 0 })
		for range 2 {
			if err := a.Execute(t.Context(), archiveAct("ev-1", "root/rs/r/0", 1)); err != nil {
				t.Fatal(err)
			}
		}
		if got := readLines(t, filepath.Join(base, "default", "file.out")); strings.Join(got, "|") != `{"n":1}|{"n":1}` {
			t.Errorf("lines %q, want the event twice without a key", got)
		}
	})
}

// The registry counts the lines the archive did not write again.
func TestArchive_repeatsMetric(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Archive.BasePath = t.TempDir()
	cfg.Archive.DefaultPath = "all.log"
	r, reg := newTestRegistry(t, cfg, Deps{})
	for range 3 {
		if err := r.Run(t.Context(), archiveAct("ev-1", "root/rs/r/0", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if got := metrictest.Sum(t, reg, "squall_action_archive_repeats_total", nil); got != 2 {
		t.Errorf("squall_action_archive_repeats_total %v, want 2", got)
	}
}

func TestReadTail(t *testing.T) {
	t.Parallel()
	file := []byte("aaaa\nbb\ncccccc\nd\n")
	type tailCase struct {
		name            string
		file            string
		lines, maxBytes int
		want            string
		torn            bool
	}
	tests := []tailCase{
		{"all", string(file), 10, 100, string(file), false},
		{"last two lines", string(file), 2, 100, "cccccc\nd\n", false},
		{"byte bound cuts a line", string(file), 10, 9, "d\n", false},
		{"byte bound on a line's start", string(file), 10, 10, "cccccc\nd\n", false},
		{"torn end", "aaaa\nbb", 10, 100, "aaaa\n", true},
		{"only a torn line", "aaaa", 10, 100, "", true},
		{"empty", "", 10, 100, "", false},
	}
	// A file of several read chunks.
	var big bytes.Buffer
	for i := range 20000 {
		fmt.Fprintf(&big, "line %020d\n", i) // 26 bytes
	}
	tests = append(tests,
		tailCase{"big file, line bound", big.String(), 3, 1 << 20, "line 00000000000000019997\nline 00000000000000019998\nline 00000000000000019999\n", false},
		tailCase{"big file, byte bound", big.String(), 1 << 20, 26*9000 + 5, big.String()[26*11000:], false},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, torn, err := readTail(bytes.NewReader([]byte(tt.file)), int64(len(tt.file)), tt.lines, tt.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want || torn != tt.torn {
				t.Errorf("readTail = %d bytes %.60q…, torn %v; want %d bytes %.60q…, %v", len(got), got, torn, len(tt.want), tt.want, tt.torn)
			}
		})
	}
}
