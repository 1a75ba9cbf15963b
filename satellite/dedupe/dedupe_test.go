package dedupe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	bolt "go.etcd.io/bbolt"
)

var t0 = time.Now().Truncate(time.Millisecond)

// uid returns a UUID (an event id) numbered i.
func uid(i int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012x", i) }

// newStore opens a store in a temporary folder, closed at the end of the
// test.
func newStore(t testing.TB, cfg Config, reg prometheus.Registerer) *Store {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), FileName)
	}
	s, err := New(cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context(), t0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// claim claims a delivery, failing if it is a duplicate.
func claim(t testing.TB, s *Store, hook, id string, now time.Time) *Claim {
	t.Helper()
	c, err := s.Begin(t.Context(), hook, id, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Duplicate {
		t.Fatalf("%s/%s: duplicate of %s", hook, id, c.EventID)
	}
	return c
}

// accept claims and commits a delivery, failing if it is a duplicate.
func accept(t testing.TB, s *Store, hook, id, eventID string, now time.Time, window time.Duration) {
	t.Helper()
	claim(t, s, hook, id, now).Commit(eventID, now.Add(window))
}

// seen returns the event id of a duplicate, or "" with a claim aborted.
func seen(t testing.TB, s *Store, hook, id string, now time.Time) string {
	t.Helper()
	c, err := s.Begin(t.Context(), hook, id, now)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Duplicate {
		c.Abort()
		return ""
	}
	return c.EventID
}

// flush waits until the commits so far are written.
func flush(t testing.TB, s *Store) {
	t.Helper()
	s.flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.inflight); n != 0 {
		t.Fatalf("%d commits not written after flush", n)
	}
}

func TestStore_Duplicate(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{}, nil)
	accept(t, s, "h", "d1", uid(1), t0, time.Hour)
	if got := seen(t, s, "h", "d1", t0.Add(time.Minute)); got != uid(1) {
		t.Errorf("before the write: duplicate of %q, want ev-1", got)
	}
	flush(t, s)
	if got := seen(t, s, "h", "d1", t0.Add(59*time.Minute)); got != uid(1) {
		t.Errorf("after the write: duplicate of %q, want ev-1", got)
	}
	// Another webhook, another id: not duplicates.
	if got := seen(t, s, "other", "d1", t0); got != "" {
		t.Errorf("another webhook's id is a duplicate of %s", got)
	}
	if got := seen(t, s, "h", "d2", t0); got != "" {
		t.Errorf("another id is a duplicate of %s", got)
	}
	// After the window: a new delivery.
	if got := seen(t, s, "h", "d1", t0.Add(time.Hour)); got != "" {
		t.Errorf("after the window: duplicate of %s", got)
	}
	accept(t, s, "h", "d1", uid(2), t0.Add(time.Hour), time.Hour)
	flush(t, s)
	if got := seen(t, s, "h", "d1", t0.Add(90*time.Minute)); got != uid(2) {
		t.Errorf("second window: duplicate of %q, want ev-2", got)
	}
	if n := s.Len(); n != 1 {
		t.Errorf("entries = %d, want 1", n)
	}
}

func TestStore_Abort(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{}, nil)
	c := claim(t, s, "h", "d", t0)
	c.Abort()
	c.Abort() // no-op
	c.Commit(uid(99), t0.Add(time.Hour))
	accept(t, s, "h", "d", uid(1), t0, time.Hour)
	flush(t, s)
	if got := seen(t, s, "h", "d", t0); got != uid(1) {
		t.Errorf("duplicate of %q, want ev-1", got)
	}
}

func TestStore_Concurrent(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{}, nil)
	// 16 calls with the same id: the first claim fails, and exactly one
	// of the others produces the event; all the rest see it.
	first := claim(t, s, "h", "same", t0)
	var owners atomic.Int32
	results := make(chan string, 16)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			c, err := s.Begin(t.Context(), "h", "same", t0)
			if err != nil {
				t.Error(err)
				return
			}
			if c.Duplicate {
				results <- c.EventID
				return
			}
			owners.Add(1)
			id := uid(i)
			c.Commit(id, t0.Add(time.Hour))
			results <- id
		})
	}
	first.Abort()
	wg.Wait()
	close(results)
	if n := owners.Load(); n != 1 {
		t.Fatalf("%d calls produced an event, want 1", n)
	}
	var ids []string
	for id := range results {
		ids = append(ids, id)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("answers differ: %v", ids)
		}
	}
}

func TestStore_WaitCanceled(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{}, nil)
	defer claim(t, s, "h", "d", t0).Abort()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Begin(ctx, "h", "d", t0); !errors.Is(err, context.Canceled) {
		t.Errorf("Begin while another call holds the id, ctx canceled: %v", err)
	}
}

func TestStore_Restart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := New(Config{Path: path}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context(), t0); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		window := time.Hour
		if i%2 == 1 {
			window = time.Minute
		}
		accept(t, s, "h", fmt.Sprint(i), uid(i), t0, window)
	}
	if err := s.Close(); err != nil { // writes the queue
		t.Fatal(err)
	}
	if _, err := s.Begin(t.Context(), "h", "1", t0); !errors.Is(err, ErrClosed) {
		t.Errorf("Begin after Close: %v", err)
	}

	// Reopened two minutes later: the short windows are over and pruned.
	reg := prometheus.NewRegistry()
	s = newStore(t, Config{Path: path}, reg)
	_ = s.Close()
	s, _ = New(Config{Path: path}, nil, nil)
	if err := s.Open(t.Context(), t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if n := s.Len(); n != 50 {
		t.Errorf("entries after reopen = %d, want 50", n)
	}
	for i := range 100 {
		got := seen(t, s, "h", fmt.Sprint(i), t0.Add(2*time.Minute))
		want := ""
		if i%2 == 0 {
			want = uid(i)
		}
		if got != want {
			t.Errorf("delivery %d: duplicate of %q, want %q", i, got, want)
		}
	}
}

func TestStore_MaxEntries(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s := newStore(t, Config{MaxEntries: 10}, reg)
	s.now = func() time.Time { return t0 }
	for i := range 25 {
		// Later deliveries expire later: the first ones are evicted.
		accept(t, s, "h", fmt.Sprint(i), uid(i), t0, time.Hour+time.Duration(i)*time.Second)
		flush(t, s)
	}
	if n := s.Len(); n != 10 {
		t.Errorf("entries = %d, want 10", n)
	}
	if got := seen(t, s, "h", "24", t0); got != uid(24) {
		t.Errorf("the newest entry: %q", got)
	}
	if got := seen(t, s, "h", "0", t0); got != "" {
		t.Errorf("the oldest entry was kept: %q", got)
	}
	if got := testutil.ToFloat64(s.m.evicted); got != 15 {
		t.Errorf("evicted = %g, want 15", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader("# HELP squall_dedupe_entries Delivery ids remembered for the webhooks' dedupe.\n# TYPE squall_dedupe_entries gauge\nsquall_dedupe_entries 10\n"), "squall_dedupe_entries"); err != nil {
		t.Error(err)
	}
}

func TestStore_CorruptFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte("not a bbolt file, not at all, but long enough to be read"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, Config{Path: path}, nil)
	accept(t, s, "h", "d", uid(0), t0, time.Hour)
	matches, _ := filepath.Glob(path + ".corrupt-*")
	if len(matches) != 1 {
		t.Errorf("set-aside files: %v", matches)
	}
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}, nil, nil); err == nil {
		t.Error("no path: no error")
	}
	if _, err := New(Config{Path: "x", MaxEntries: -1}, nil, nil); err == nil {
		t.Error("negative max_entries: no error")
	}
}

// TestStore_Size measures the file size per entry (logged; go test -v).
func TestStore_Size(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes 20,000 entries")
	}
	s := newStore(t, Config{}, nil)
	const n = 20_000
	for i := range n {
		// Expiries grow with time, as they do when calls come in.
		accept(t, s, "github", fmt.Sprintf("delivery-%08d-%s", i, "72d3162e-cc78-11e3-81ab-4c9367dc0958"), uid(i), t0.Add(time.Duration(i/4)*time.Millisecond), time.Hour)
	}
	flush(t, s)
	var size int64
	if err := s.db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	st := s.db.Stats()
	used := size - int64(st.FreePageN+st.PendingPageN)*int64(s.db.Info().PageSize)
	per := float64(used) / n
	t.Logf("%d entries: %d bytes of pages in use (%.0f per entry), %d with free pages", n, used, per, size)
	if per > 100 {
		t.Errorf("%.0f bytes per entry, above the 70 documented (with margin)", per)
	}
}

// BenchmarkStore claims and commits new delivery ids from 64 goroutines,
// as a busy intake does: the cost per accepted call, the writer's
// transactions and fsyncs included.
func BenchmarkStore(b *testing.B) {
	s := newStore(b, Config{}, nil)
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprint("delivery-", seq.Add(1))
			c, err := s.Begin(context.Background(), "hook", id, t0)
			if err != nil {
				b.Error(err)
				return
			}
			c.Commit("019a6a3c-6f1e-7c4b-9a61-3b2f0c8d1e2a", time.Now().Add(time.Hour))
		}
	})
	s.flush()
}

func TestUUID(t *testing.T) {
	t.Parallel()
	const id = "019a6a3c-6f1e-7c4b-9a61-3b2f0c8d1e2a"
	u, ok := parseUUID(id)
	if !ok || formatUUID(u) != id {
		t.Errorf("round trip of %s: %x %t", id, u, ok)
	}
	if u, ok := parseUUID("019A6A3C-6F1E-7C4B-9A61-3B2F0C8D1E2A"); !ok || formatUUID(u) != id {
		t.Error("upper case")
	}
	for _, bad := range []string{"", "ev-1", "019a6a3c-6f1e-7c4b-9a61-3b2f0c8d1e2", "019a6a3c06f1e-7c4b-9a61-3b2f0c8d1e2a", "019a6a3c-6f1e-7c4b-9a61-3b2f0c8d1e2z"} {
		if _, ok := parseUUID(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	// A non-UUID event id is not remembered (the intake's always are).
	s := newStore(t, Config{}, nil)
	accept(t, s, "h", "d", "not-a-uuid", t0, time.Hour)
	if got := seen(t, s, "h", "d", t0); got != "" {
		t.Errorf("duplicate of %q", got)
	}
}
