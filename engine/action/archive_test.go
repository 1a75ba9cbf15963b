package action

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/polltest"
)

// newTestArchive returns an archive executor on a fresh base directory,
// closed when the test ends.
func newTestArchive(t testing.TB, modify func(c *ArchiveConfig)) (*archiveExecutor, string) {
	t.Helper()
	base := filepath.Join(t.TempDir(), "archive")
	cfg := Default().Archive
	cfg.BasePath = base
	cfg.DefaultPath = "/default/file.out"
	cfg.Paths = map[string]string{
		"one":  "/one/${key}/file.log",
		"two":  "two/${a}-${b}.log",
		"flat": "${name}",
		"link": "link/${name}",
	}
	if modify != nil {
		modify(&cfg)
	}
	a, err := newArchiveExecutor(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a, base
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	if b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end with a newline", path)
	}
	return strings.Split(string(b[:len(b)-1]), "\n")
}

func TestArchive_Execute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		payload  string
		wantFile string // relative to the base; empty: an error is expected
		wantLine string
		wantErr  error
	}{
		{
			name:     "default path",
			payload:  `{"event": {"type": "email", "n": 1.50, "html": "<a&b>"}}`,
			wantFile: "default/file.out",
			wantLine: `{"html":"<a&b>","n":1.50,"type":"email"}`,
		},
		{
			name:     "archive_type not a string uses the default path",
			payload:  `{"event": "x", "archive_type": 3}`,
			wantFile: "default/file.out",
			wantLine: `"x"`,
		},
		{
			name:     "typed path with a parameter",
			payload:  `{"event": [1, null, true], "archive_type": "one", "key": "k1"}`,
			wantFile: "one/k1/file.log",
			wantLine: `[1,null,true]`,
		},
		{
			name:     "two parameters",
			payload:  `{"event": null, "archive_type": "two", "a": "x", "b": "y"}`,
			wantFile: "two/x-y.log",
			wantLine: `null`,
		},
		{
			name:     "parameter with a slash stays inside",
			payload:  `{"event": 1, "archive_type": "one", "key": "/etc"}`,
			wantFile: "one/etc/file.log",
			wantLine: `1`,
		},
		{name: "event missing", payload: `{"archive_type": "one", "key": "k"}`, wantErr: ErrInvalidPayload},
		{name: "unknown archive_type", payload: `{"event": 1, "archive_type": "three"}`, wantErr: ErrInvalidPayload},
		{name: "parameter missing", payload: `{"event": 1, "archive_type": "two", "a": "x"}`, wantErr: ErrInvalidPayload},
		{name: "parameter not a string", payload: `{"event": 1, "archive_type": "one", "key": 7}`, wantErr: ErrInvalidPayload},
		{name: "parameter is ..", payload: `{"event": 1, "archive_type": "one", "key": ".."}`, wantErr: ErrPathEscape},
		{name: "parameter climbs out", payload: `{"event": 1, "archive_type": "flat", "name": "../../etc/passwd"}`, wantErr: ErrPathEscape},
		{name: "parameter with a .. element", payload: `{"event": 1, "archive_type": "flat", "name": "a/../b"}`, wantErr: ErrPathEscape},
		{name: "absolute parameter", payload: `{"event": 1, "archive_type": "flat", "name": "/etc/passwd"}`, wantErr: ErrPathEscape},
		{name: "empty parameter", payload: `{"event": 1, "archive_type": "flat", "name": ""}`, wantErr: ErrPathEscape},
		{name: "NUL in parameter", payload: `{"event": 1, "archive_type": "flat", "name": "a\u0000b"}`, wantErr: ErrPathEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, base := newTestArchive(t, nil)
			err := a.Execute(t.Context(), tree.Action{ID: IDArchive, Payload: payload(t, tt.payload)})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || Retriable(err) {
					t.Fatalf("Execute: %v, want a permanent %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lines := readLines(t, filepath.Join(base, tt.wantFile))
			if len(lines) != 1 || lines[0] != tt.wantLine {
				t.Fatalf("%s holds %q, want %q", tt.wantFile, lines, tt.wantLine)
			}
		})
	}
}

func TestArchive_Execute_appends(t *testing.T) {
	t.Parallel()
	a, base := newTestArchive(t, nil)
	for i := range 3 {
		if err := a.Execute(t.Context(), tree.Action{Payload: map[string]any{"event": map[string]any{"i": i}}}); err != nil {
			t.Fatal(err)
		}
	}
	// A second executor (a restart) appends to the same file.
	b, _ := newTestArchive(t, func(c *ArchiveConfig) { c.BasePath = base })
	if err := b.Execute(t.Context(), tree.Action{Payload: map[string]any{"event": "again"}}); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, filepath.Join(base, "default", "file.out"))
	want := []string{`{"i":0}`, `{"i":1}`, `{"i":2}`, `"again"`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q, want %q", got, want)
	}
}

func TestArchive_Execute_symlinkEscape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, base, outside string)
		file  string // the payload's name field
	}{
		{
			name: "directory link to outside",
			setup: func(t *testing.T, base, outside string) {
				mustSymlink(t, outside, filepath.Join(base, "link"))
			},
			file: "stolen.log",
		},
		{
			name: "file link to outside",
			setup: func(t *testing.T, base, outside string) {
				mustMkdir(t, filepath.Join(base, "link"))
				mustSymlink(t, filepath.Join(outside, "stolen.log"), filepath.Join(base, "link", "stolen.log"))
			},
			file: "stolen.log",
		},
		{
			name: "relative link climbing out",
			setup: func(t *testing.T, base, outside string) {
				mustMkdir(t, filepath.Join(base, "link"))
				rel, err := filepath.Rel(filepath.Join(base, "link"), outside)
				if err != nil {
					t.Fatal(err)
				}
				mustSymlink(t, rel, filepath.Join(base, "link", "up"))
			},
			file: "up/stolen.log",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, base := newTestArchive(t, nil)
			outside := t.TempDir()
			mustMkdir(t, base)
			tt.setup(t, base, outside)
			err := a.Execute(t.Context(), tree.Action{Payload: map[string]any{
				"event": "secret", "archive_type": "link", "name": tt.file,
			}})
			if !errors.Is(err, ErrPathEscape) || Retriable(err) {
				t.Fatalf("Execute: %v, want a permanent ErrPathEscape", err)
			}
			if _, err := os.Stat(filepath.Join(outside, "stolen.log")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a file was written outside the base directory (stat: %v)", err)
			}
		})
	}

	t.Run("link inside the base is followed", func(t *testing.T) {
		t.Parallel()
		a, base := newTestArchive(t, nil)
		mustMkdir(t, filepath.Join(base, "real"))
		mustSymlink(t, "real", filepath.Join(base, "link"))
		if err := a.Execute(t.Context(), tree.Action{Payload: map[string]any{
			"event": "ok", "archive_type": "link", "name": "f.log",
		}}); err != nil {
			t.Fatal(err)
		}
		if got := readLines(t, filepath.Join(base, "real", "f.log")); len(got) != 1 {
			t.Fatalf("lines %q", got)
		}
	})
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
}

func TestArchive_Execute_concurrentAppends(t *testing.T) {
	t.Parallel()
	const writers, perWriter = 8, 200
	// A few open files for many paths: eviction runs during the writes.
	a, base := newTestArchive(t, func(c *ArchiveConfig) { c.MaxOpenFiles = 2 })
	big := strings.Repeat("x", 5000) // lines larger than a pipe buffer's atomic write
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				p := map[string]any{
					"event":        map[string]any{"w": w, "i": i, "pad": big},
					"archive_type": "one",
					"key":          fmt.Sprint(i % 3), // three files
				}
				if err := a.Execute(t.Context(), tree.Action{Payload: p}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	seen := make(map[[2]int]bool)
	for k := range 3 {
		f, err := os.Open(filepath.Join(base, "one", fmt.Sprint(k), "file.log"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				W, I int
				Pad  string
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Pad != big {
				t.Fatalf("file %d: broken line %.80q: %v", k, sc.Text(), err)
			}
			if ev.I%3 != k || seen[[2]int{ev.W, ev.I}] {
				t.Fatalf("file %d: unexpected or repeated line w=%d i=%d", k, ev.W, ev.I)
			}
			seen[[2]int{ev.W, ev.I}] = true
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	if len(seen) != writers*perWriter {
		t.Fatalf("%d lines, want %d", len(seen), writers*perWriter)
	}
}

func TestArchive_Execute_reopensAfterTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a, base := newTestArchive(t, func(c *ArchiveConfig) { c.FileTTL = Duration(time.Minute) })
		write := func(v string) {
			t.Helper()
			if err := a.Execute(t.Context(), tree.Action{Payload: map[string]any{"event": v}}); err != nil {
				t.Fatal(err)
			}
		}
		file := filepath.Join(base, "default", "file.out")
		write("before")
		// Log rotation moves the file away; writes within the TTL follow it.
		if err := os.Rename(file, file+".1"); err != nil {
			t.Fatal(err)
		}
		write("rotated")
		time.Sleep(2 * time.Minute) // fake time
		write("after")
		if got := readLines(t, file+".1"); strings.Join(got, ",") != `"before","rotated"` {
			t.Errorf("rotated file holds %q", got)
		}
		if got := readLines(t, file); strings.Join(got, ",") != `"after"` {
			t.Errorf("new file holds %q", got)
		}
	})
}

func TestArchive_Close(t *testing.T) {
	t.Parallel()
	a, _ := newTestArchive(t, nil)
	if err := a.Execute(t.Context(), tree.Action{Payload: map[string]any{"event": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	err := a.Execute(t.Context(), tree.Action{Payload: map[string]any{"event": 1}})
	if !errors.Is(err, ErrClosed) || Retriable(err) {
		t.Fatalf("Execute after Close: %v, want a permanent ErrClosed", err)
	}
}

func TestArchive_Execute_basePathIsAFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := newTestArchive(t, func(c *ArchiveConfig) { c.BasePath = file })
	if err := a.Execute(t.Context(), tree.Action{Payload: map[string]any{"event": 1}}); err == nil || Retriable(err) {
		t.Fatalf("Execute: %v, want a permanent error", err)
	}
}

// TestArchive_reopenWaitsForTheWriteInFlight checks that a file evicted
// while a write goes through it is closed, after that write, before its
// path is opened again: a new handle would read the half-written line
// back as one a crash cut short and start its own line with a newline,
// which leaves a broken line and an empty one in the file.
func TestArchive_reopenWaitsForTheWriteInFlight(t *testing.T) {
	t.Parallel()
	a, base := newTestArchive(t, func(c *ArchiveConfig) { c.MaxOpenFiles = 1 })
	execute := func(key string, n int) error {
		return a.Execute(t.Context(), tree.Action{Payload: map[string]any{
			"event": map[string]any{"n": n}, "archive_type": "one", "key": key,
		}})
	}
	if err := execute("0", 1); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	var f *archiveFile
	for _, open := range a.files {
		f = open
	}
	a.mu.Unlock()

	// A write in flight through f: its first half is in the file.
	f.mu.Lock()
	if _, err := f.f.WriteString(`{"n":`); err != nil {
		t.Fatal(err)
	}
	evicting, reopening := make(chan error, 1), make(chan error, 1)
	go func() { evicting <- execute("1", 2) }() // evicts f, whose close waits for the write
	if !polltest.Until(t.Context(), 10*time.Second, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.files[f.path] == nil
	}) {
		t.Fatal("the file was not evicted")
	}
	go func() { reopening <- execute("0", 3) }()
	// The reopening write must not land while the first is in flight.
	select {
	case err := <-reopening:
		t.Errorf("the path was written again during the write in flight (err %v)", err)
		reopening <- err
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := f.f.WriteString("2}\n"); err != nil {
		t.Fatal(err)
	}
	f.mu.Unlock()
	for _, c := range []chan error{evicting, reopening} {
		select {
		case err := <-c:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a write did not end")
		}
	}

	b, err := os.ReadFile(filepath.Join(base, "one", "0", "file.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var ns []int
	for _, l := range lines {
		var ev struct{ N int }
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("broken line %q in %q", l, b)
		}
		ns = append(ns, ev.N)
	}
	if fmt.Sprint(ns) != "[1 2 3]" {
		t.Fatalf("events %v, want [1 2 3]; file %q", ns, b)
	}
}
