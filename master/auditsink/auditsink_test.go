package auditsink_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/squallhq/squall/master/audit"
	"github.com/squallhq/squall/master/auditsink"
	"github.com/squallhq/squall/master/mastertest"
)

// lines returns the records of a JSON-lines file.
func lines(t *testing.T, path string) []audit.Record {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSink: the sink writes every record of a live master (mode 0600),
// each new one as it is applied; after a rename and Reopen it writes the
// next ones to a new file at the path; restarted with its position file
// it writes nothing twice, and goes on with what was applied meanwhile.
func TestSink(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 1)
	st := c.Server(0).Store()
	dir := t.TempDir()
	cfg := auditsink.Config{Path: filepath.Join(dir, "audit.jsonl"), PosPath: auditsink.PosPath(dir)}
	draft := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := st.CreateDraft(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	records := func() []audit.Record {
		t.Helper()
		recs, err := st.AuditRecords()
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	var sink *auditsink.Sink // the one started last
	start := func() (stop func()) {
		t.Helper()
		s, err := auditsink.New(cfg, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		sink = s
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	draft()
	stop := start()
	draft()
	mastertest.WaitFor(t, 10*time.Second, func() bool { return len(lines(t, cfg.Path)) == len(records()) }, "the sink to write every record")
	if got, want := lines(t, cfg.Path), records(); !equalSeqs(got, want) {
		t.Fatalf("file %+v, want %+v", got, want)
	}
	if fi, err := os.Stat(cfg.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v: %v", fi.Mode(), err)
	}

	// Rotation by renaming: the next records go to a new file.
	rotated := cfg.Path + ".1"
	if err := os.Rename(cfg.Path, rotated); err != nil {
		t.Fatal(err)
	}
	sink.Reopen()
	before := len(records())
	draft()
	mastertest.WaitFor(t, 10*time.Second, func() bool { return len(lines(t, cfg.Path)) == len(records())-before }, "the sink to write to the new file")
	stop()

	// Restarted: what was applied meanwhile, nothing twice.
	draft()
	stop = start()
	defer stop()
	mastertest.WaitFor(t, 10*time.Second, func() bool {
		return len(lines(t, rotated))+len(lines(t, cfg.Path)) == len(records())
	}, "the restarted sink to catch up")
	all := append(lines(t, rotated), lines(t, cfg.Path)...)
	if !equalSeqs(all, records()) {
		t.Fatalf("files hold %+v, want %+v", all, records())
	}
	if err := audit.Verify(all); err != nil {
		t.Fatal(err)
	}
}

func equalSeqs(a, b []audit.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Seq != b[i].Seq || a[i].Hash != b[i].Hash {
			return false
		}
	}
	return true
}
