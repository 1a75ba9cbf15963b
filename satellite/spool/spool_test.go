package spool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// newTestSpool opens a spool in dir (a new temporary directory when dir is
// empty) and closes it at the end of the test.
func newTestSpool(t testing.TB, dir string, maxBytes, segBytes int64) *Spool {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := New(Config{Dir: dir, MaxBytes: maxBytes, SegmentBytes: segBytes}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close spool: %v", err)
		}
	})
	return s
}

func appendN(t testing.TB, s *Spool, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := s.Append(context.Background(), record(i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

// record is the payload of record i: its number, padded to a size that
// varies with i.
func record(i int) []byte {
	return []byte(fmt.Sprintf("rec-%d-%s", i, strings.Repeat("x", i%97)))
}

func recordNumber(t testing.TB, p []byte) int {
	t.Helper()
	rest, ok := bytes.CutPrefix(p, []byte("rec-"))
	digits, _, ok2 := bytes.Cut(rest, []byte("-"))
	n, err := strconv.Atoi(string(digits))
	if !ok || !ok2 || err != nil {
		t.Fatalf("bad record %q", p)
	}
	return n
}

// drain reads and commits everything, in batches of batch records, and
// returns the record numbers.
func drain(t testing.TB, s *Spool, batch int) []int {
	t.Helper()
	var got []int
	for {
		entries, err := s.Read(context.Background(), batch, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 {
			return got
		}
		for _, e := range entries {
			got = append(got, recordNumber(t, e.Payload))
		}
		if err := s.Commit(context.Background(), entries); err != nil {
			t.Fatal(err)
		}
	}
}

func wantSequence(t testing.TB, got []int, from, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d records, want %d", len(got), n)
	}
	for i, v := range got {
		if v != from+i {
			t.Fatalf("record %d is %d, want %d", i, v, from+i)
		}
	}
}

func TestSpool_AppendReadCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		segBytes int64
		batch    int
	}{
		{"one segment", 1 << 20, 7},
		{"many segments", 2 << 10, 5},
		{"record per read", 2 << 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newTestSpool(t, "", 64<<20, tc.segBytes)
			appendN(t, s, 0, 300)
			if st := s.Stats(); st.Records != 300 {
				t.Fatalf("stats %+v, want 300 records", st)
			}
			// Reading without committing reads the same records again.
			a, _ := s.Read(t.Context(), 3, 1<<20)
			b, _ := s.Read(t.Context(), 3, 1<<20)
			if len(a) != 3 || !bytes.Equal(a[2].Payload, b[2].Payload) {
				t.Fatalf("reads differ: %v / %v", a, b)
			}
			wantSequence(t, drain(t, s, tc.batch), 0, 300)
			st := s.Stats()
			if st.Records != 0 || st.Bytes != 0 {
				t.Fatalf("stats after drain %+v", st)
			}
			if st.DiskBytes != headerLen {
				t.Errorf("disk bytes after drain = %d, want one empty segment (%d)", st.DiskBytes, headerLen)
			}
			segs, _ := listSegments(s.cfg.Dir)
			if len(segs) != 1 {
				t.Errorf("segments after drain: %v, want 1", segs)
			}
			// And it goes on working.
			appendN(t, s, 300, 10)
			wantSequence(t, drain(t, s, tc.batch), 300, 10)
		})
	}
}

func TestSpool_Reopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newTestSpool(t, dir, 64<<20, 4<<10)
	appendN(t, s, 0, 200)
	entries, err := s.Read(t.Context(), 120, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), entries); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(t.Context(), 1, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v, want ErrClosed", err)
	}
	if err := s.Append(t.Context(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v, want ErrClosed", err)
	}

	// The same value opens again, as does a new one on the directory.
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Records != 80 {
		t.Fatalf("after reopen: %+v, want 80 records", st)
	}
	appendN(t, s, 200, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newTestSpool(t, dir, 64<<20, 4<<10)
	wantSequence(t, drain(t, s2, 16), 120, 85)
}

func TestSpool_Full(t *testing.T) {
	t.Parallel()
	s := newTestSpool(t, "", 16<<10, 4<<10)
	n := 0
	for ; ; n++ {
		err := s.Append(t.Context(), record(n))
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n > 10000 {
			t.Fatal("spool never full")
		}
	}
	if st := s.Stats(); st.DiskBytes > 16<<10 {
		t.Fatalf("disk %d over the bound", st.DiskBytes)
	}
	if got := testutil.ToFloat64(s.m.full); got != 1 {
		t.Errorf("squall_spool_full_total = %v, want 1", got)
	}
	if err := s.Append(t.Context(), make([]byte, 20<<10)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("append larger than the spool: %v, want ErrTooLarge", err)
	}
	// Delivering the first segments makes room again.
	entries, err := s.Read(t.Context(), n/2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), entries); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(t.Context(), record(n)); err != nil {
		t.Fatalf("append after commit: %v", err)
	}
	got := drain(t, s, 100)
	wantSequence(t, got, n/2, n-n/2+1)
}

func TestSpool_TornTail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tail func(last []byte) []byte // bytes appended after the last whole frame
	}{
		{"half a frame header", func([]byte) []byte { return []byte{0x10, 0, 0} }},
		{"header without payload", func([]byte) []byte { return appendFrame(nil, []byte("never acknowledged"))[:frameHeaderLen+3] }},
		{"bad CRC", func([]byte) []byte {
			f := appendFrame(nil, []byte("flipped"))
			f[len(f)-1] ^= 0xff
			return f
		}},
		{"zeros", func([]byte) []byte { return make([]byte, 4096) }},
		{"length past the end", func([]byte) []byte { return []byte{0xff, 0xff, 0xff, 0x0f, 1, 2, 3, 4, 5} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := newTestSpool(t, dir, 1<<20, 64<<10)
			appendN(t, s, 0, 50)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			ids, _ := listSegments(dir)
			path := filepath.Join(dir, segmentName(ids[len(ids)-1]))
			before, _ := os.ReadFile(path)
			tail := tc.tail(before)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tail)
			f.Close()

			if err := s.Open(t.Context()); err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(after, before) {
				t.Fatalf("segment is %d bytes after recovery, want the %d whole-frame bytes", len(after), len(before))
			}
			if got := testutil.ToFloat64(s.m.truncated); got != float64(len(tail)) {
				t.Errorf("squall_spool_truncated_bytes_total = %v, want %d", got, len(tail))
			}
			appendN(t, s, 50, 10)
			wantSequence(t, drain(t, s, 8), 0, 60)
		})
	}
}

func TestSpool_DamagedFiles(t *testing.T) {
	t.Parallel()
	// reopen writes n records to a spool in a new dir with segments of
	// segBytes, commits the first commit of them, closes it, lets damage
	// alter its files and opens it again.
	reopen := func(t *testing.T, n, commit int, segBytes int64, damage func(dir string)) *Spool {
		t.Helper()
		dir := t.TempDir()
		s := newTestSpool(t, dir, 1<<20, segBytes)
		appendN(t, s, 0, n)
		if commit > 0 {
			entries, _ := s.Read(t.Context(), commit, 1<<20)
			s.Commit(t.Context(), entries)
		}
		s.Close()
		damage(dir)
		return newTestSpool(t, dir, 1<<20, segBytes)
	}
	t.Run("position", func(t *testing.T) {
		t.Parallel()
		// A torn position write: the position is not trusted, and the
		// records are read again from the start (duplicates, no loss).
		s := reopen(t, 20, 10, 64<<10, func(dir string) {
			os.WriteFile(filepath.Join(dir, positionFile), []byte{1, 2, 3}, 0o600)
		})
		wantSequence(t, drain(t, s, 100), 0, 20)
	})
	t.Run("position off a boundary", func(t *testing.T) {
		t.Parallel()
		s := reopen(t, 20, 0, 64<<10, func(dir string) {
			ids, _ := listSegments(dir)
			b := encodePosition(Position{Segment: ids[0], Offset: headerLen + 3})
			os.WriteFile(filepath.Join(dir, positionFile), b[:], 0o600)
		})
		wantSequence(t, drain(t, s, 100), 0, 20)
	})
	t.Run("segment header", func(t *testing.T) {
		t.Parallel()
		// Damage the first segment's header: it is set aside, the rest
		// is read.
		var first string
		s := reopen(t, 60, 0, 1<<10, func(dir string) {
			ids, _ := listSegments(dir)
			if len(ids) < 3 {
				t.Fatalf("want several segments, got %v", ids)
			}
			first = filepath.Join(dir, segmentName(ids[0]))
			f, _ := os.OpenFile(first, os.O_WRONLY, 0)
			f.WriteAt([]byte("garbage!"), 0)
			f.Close()
		})
		got := drain(t, s, 100)
		if len(got) == 0 || len(got) >= 60 || got[len(got)-1] != 59 {
			t.Fatalf("got %v", got)
		}
		if _, err := os.Stat(first + ".corrupt"); err != nil {
			t.Errorf("damaged segment not set aside: %v", err)
		}
		if got := testutil.ToFloat64(s.m.corrupt); got != 1 {
			t.Errorf("squall_spool_corrupt_segments_total = %v", got)
		}
	})
	t.Run("empty last segment", func(t *testing.T) {
		t.Parallel()
		// A crash right after creating the next segment file.
		s := reopen(t, 5, 0, 64<<10, func(dir string) {
			os.WriteFile(filepath.Join(dir, segmentName(99)), nil, 0o600)
		})
		appendN(t, s, 5, 5)
		wantSequence(t, drain(t, s, 100), 0, 10)
	})
}

func TestSpool_Locked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newTestSpool(t, dir, 1<<20, 64<<10)
	s2, err := New(Config{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 64 << 10}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Open(t.Context()); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

func TestSpool_Quarantine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newTestSpool(t, dir, 1<<20, 64<<10)
	appendN(t, s, 0, 3)
	entries, _ := s.Read(t.Context(), 1, 1<<20)
	if err := s.Quarantine(t.Context(), entries[0].Payload); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), entries); err != nil {
		t.Fatal(err)
	}
	wantSequence(t, drain(t, s, 10), 1, 2)
	data, err := os.ReadFile(filepath.Join(dir, rejectedFile))
	if err != nil {
		t.Fatal(err)
	}
	res, err := scanSegment(bytes.NewReader(data), int64(len(data)), headerLen)
	if err != nil || res.records != 1 || res.end != int64(len(data)) {
		t.Fatalf("rejected.log: %+v, %v", res, err)
	}
}

func TestSpool_ConcurrentAppends(t *testing.T) {
	t.Parallel()
	s := newTestSpool(t, "", 64<<20, 16<<10)
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.Append(context.Background(), record(w*each+i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// The consumer drains while the writers write.
	seen := make(map[int]int)
	last := make([]int, writers)
	for i := range last {
		last[i] = -1
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; ; {
		entries, err := s.Read(t.Context(), 50, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			n := recordNumber(t, e.Payload)
			seen[n]++
			if w := n / each; n <= last[w] {
				t.Fatalf("writer %d: record %d after %d", w, n, last[w])
			} else {
				last[w] = n
			}
		}
		if err := s.Commit(t.Context(), entries); err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 {
			if finished {
				break
			}
			select {
			case <-s.Notify():
			case <-done:
				finished = true
			}
		}
	}
	if len(seen) != writers*each {
		t.Fatalf("read %d distinct records, want %d", len(seen), writers*each)
	}
	for n, c := range seen {
		if c != 1 {
			t.Fatalf("record %d read %d times", n, c)
		}
	}
}

// TestSpool_KillDash9 kills a process that appends to a spool in the middle of
// its work and checks that every record whose Append had returned is read back,
// once, in order per writer.
func TestSpool_KillDash9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpool_CrashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "SQUALL_SPOOL_CRASH_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := make(map[int]bool)
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(acked) < 400 {
		if n, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
			v, _ := strconv.Atoi(n)
			acked[v] = true
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if len(acked) < 400 {
		t.Fatalf("helper acknowledged only %d records", len(acked))
	}

	s := newTestSpool(t, dir, 256<<20, 256<<10)
	seen := make(map[int]int)
	last := map[int]int{}
	for _, n := range drain(t, s, 64) {
		seen[n]++
		w := n / 1_000_000
		if prev, ok := last[w]; ok && n <= prev {
			t.Fatalf("writer %d: record %d after %d", w, n, prev)
		}
		last[w] = n
	}
	for n := range acked {
		if seen[n] != 1 {
			t.Fatalf("acknowledged record %d read %d times", n, seen[n])
		}
	}
	t.Logf("%d acknowledged, %d recovered, %d bytes of torn tail cut", len(acked), len(seen), int(testutil.ToFloat64(s.m.truncated)))
}

// TestSpool_CrashHelper is the process TestSpool_KillDash9 kills: four
// writers append records of varied sizes and print each acknowledged one.
func TestSpool_CrashHelper(t *testing.T) {
	dir := os.Getenv("SQUALL_SPOOL_CRASH_DIR")
	if dir == "" {
		t.Skip("helper process for TestSpool_KillDash9")
	}
	s, err := New(Config{Dir: dir, MaxBytes: 256 << 20, SegmentBytes: 256 << 10}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(30 * time.Second) // never outlive a lost parent
	for w := range 4 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				n := w*1_000_000 + i
				p := fmt.Appendf(nil, "rec-%d-", n)
				p = append(p, bytes.Repeat([]byte{'y'}, (i*7919)%20000)...)
				if err := s.Append(context.Background(), p); err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					return
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "acked %d\n", n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
