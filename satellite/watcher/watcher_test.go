package watcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tokenPad makes the short names of the tests' tokens long enough for a
// webhook without a signature (webhooks.MinTokenLen).
const tokenPad = "-0123456789abcdef"

// hook is the content of a valid webhook file; its token is token+tokenPad.
func hook(id, token string) string {
	return fmt.Sprintf(`{"id": %q, "token": %q, "collector_config": {"event_type": "ev_%s", "payload": {"all": "${@}"}}}`, id, token+tokenPad, id)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startWatcher runs a watcher of dir until the end of the test, and waits
// for its first snapshot.
func startWatcher(t *testing.T, cfg Config) *Watcher {
	t.Helper()
	w, err := New(cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	})
	select {
	case <-w.Loaded():
	case err := <-done:
		t.Fatalf("watcher stopped: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no first snapshot")
	}
	return w
}

// waitFor waits, at most 5 s, for a snapshot for which cond holds. It waits on
// the watcher's change notifications, not on a timer.
func waitFor(t *testing.T, w *Watcher, what string, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		ch := w.Changed()
		if s := w.Snapshot(); s != nil && cond(s) {
			return s
		}
		select {
		case <-ch:
		case <-deadline.C:
			s := w.Snapshot()
			t.Fatalf("timed out waiting for %s; current: %d webhooks %v, problems %v", what, len(s.Webhooks), ids(s), s.Problems)
		}
	}
}

func ids(s *Snapshot) []string {
	var out []string
	for id := range s.Webhooks {
		out = append(out, id)
	}
	return out
}

// has reports whether the snapshot serves id with token+tokenPad.
func has(id, token string) func(*Snapshot) bool {
	return func(s *Snapshot) bool {
		w := s.Webhooks[id]
		return w != nil && w.CheckToken(token+tokenPad)
	}
}

func fastConfig(dir string) Config {
	return Config{Dir: dir, Debounce: 20 * time.Millisecond, RescanInterval: time.Hour}
}

func TestWatcher_HotReload(t *testing.T) {
	t.Parallel()

	t.Run("add change remove", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		write(t, filepath.Join(dir, "a.json"), hook("a", "ta"))
		w := startWatcher(t, fastConfig(dir))
		if s := w.Snapshot(); s.Generation != 1 || !has("a", "ta")(s) {
			t.Fatalf("first snapshot: %+v", s)
		}
		write(t, filepath.Join(dir, "b.json"), hook("b", "tb"))
		waitFor(t, w, "b added", has("b", "tb"))
		write(t, filepath.Join(dir, "b.json"), hook("b", "tb2"))
		waitFor(t, w, "b's token changed", has("b", "tb2"))
		os.Remove(filepath.Join(dir, "a.json"))
		s := waitFor(t, w, "a removed", func(s *Snapshot) bool { return w.Lookup("a") == nil })
		if !has("b", "tb2")(s) || len(s.Webhooks) != 1 {
			t.Fatalf("after removal: %v", ids(s))
		}
	})

	t.Run("token and secret files", func(t *testing.T) {
		t.Parallel()
		dir, secrets := t.TempDir(), t.TempDir()
		tokenFile := filepath.Join(secrets, "token")
		write(t, tokenFile, "t1"+tokenPad+"\n")
		if err := os.Chmod(tokenFile, 0o640); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "good.json"), hook("good", "t"))
		write(t, filepath.Join(dir, "a.json"), `{"id": "a", "tokens": [{"file": "`+tokenFile+`"}],
			"collector_config": {"event_type": "e", "payload": {}}}`)
		w := startWatcher(t, fastConfig(dir))
		if s := w.Snapshot(); len(s.Problems) != 1 || !strings.Contains(s.Problems[0].Error(), "readable by group or others (mode 0640)") {
			t.Fatalf("problems %v", s.Problems)
		}
		// The token file is outside the watched folder: the rescan (here
		// asked for, else periodic) sees its mode and content change.
		if err := os.Chmod(tokenFile, 0o600); err != nil {
			t.Fatal(err)
		}
		w.Rescan()
		waitFor(t, w, "token file made private", has("a", "t1"))
		write(t, tokenFile, "t2"+tokenPad)
		w.Rescan()
		s := waitFor(t, w, "token rotated", has("a", "t2"))
		if has("a", "t1")(s) || !has("good", "t")(s) {
			t.Fatalf("after rotation: %v", ids(s))
		}
		// A rescan that finds nothing new publishes nothing.
		scans := testutil.ToFloat64(w.m.scans)
		w.Rescan()
		waitForCounter(t, w.m.scans, scans+1)
		if g := w.Snapshot().Generation; g != s.Generation {
			t.Errorf("generation %d after %d: a rescan without change reloaded", g, s.Generation)
		}
	})

	t.Run("bad and duplicate files", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		write(t, filepath.Join(dir, "good.json"), hook("good", "t"))
		w := startWatcher(t, fastConfig(dir))
		write(t, filepath.Join(dir, "broken.json"), `{"id": "broken", "token": `)
		write(t, filepath.Join(dir, "no_type.json"), `{"id": "nt", "token": "x", "collector_config": {"payload": {}}}`)
		write(t, filepath.Join(dir, "z_dup.json"), hook("good", "other"))
		s := waitFor(t, w, "three problems", func(s *Snapshot) bool { return len(s.Problems) == 3 })
		if !has("good", "t")(s) || len(s.Webhooks) != 1 {
			t.Fatalf("the good webhook must stay, and win over the later duplicate: %v", ids(s))
		}
		got := map[string]string{}
		for _, p := range s.Problems {
			got[p.Name] = p.Err.Error()
		}
		if !strings.Contains(got["z_dup.json"], "duplicate id") || !strings.Contains(got["no_type.json"], "event_type") || got["broken.json"] == "" {
			t.Fatalf("problems: %v", got)
		}
		for reason, want := range map[string]float64{reasonInvalid: 2, reasonDuplicate: 1} {
			if got := testutil.ToFloat64(w.m.fileErrors.WithLabelValues(reason)); got != want {
				t.Errorf("squall_webhooks_file_errors_total{reason=%s} = %v, want %v", reason, got, want)
			}
		}
		// Fixing a file brings it in.
		write(t, filepath.Join(dir, "broken.json"), hook("broken", "b"))
		waitFor(t, w, "fixed file", has("broken", "b"))
	})

	t.Run("ignored names", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		w := startWatcher(t, fastConfig(dir))
		write(t, filepath.Join(dir, ".hidden.json"), hook("hidden", "t"))
		write(t, filepath.Join(dir, "notes.txt"), hook("txt", "t"))
		write(t, filepath.Join(dir, "x.json.swp"), hook("swp", "t"))
		os.Mkdir(filepath.Join(dir, "sub.json"), 0o700)
		write(t, filepath.Join(dir, "real.json"), hook("real", "t"))
		s := waitFor(t, w, "real", has("real", "t"))
		if len(s.Webhooks) != 1 || len(s.Problems) != 0 {
			t.Fatalf("webhooks %v problems %v", ids(s), s.Problems)
		}
	})

	t.Run("rename-over save", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, "gh.json")
		write(t, path, hook("gh", "v1"))
		w := startWatcher(t, fastConfig(dir))
		tmp := filepath.Join(dir, ".gh.json.swp")
		write(t, tmp, hook("gh", "v2"))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		waitFor(t, w, "v2", has("gh", "v2"))
		// vim with backupcopy=no: rename to a backup, write anew, remove
		// the backup.
		os.Rename(path, path+"~")
		write(t, path, hook("gh", "v3"))
		os.Remove(path + "~")
		s := waitFor(t, w, "v3", has("gh", "v3"))
		if len(s.Problems) != 0 {
			t.Fatalf("problems: %v", s.Problems)
		}
	})

	t.Run("configmap symlink swap", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		// The layout of a Kubernetes ConfigMap volume.
		os.Mkdir(filepath.Join(dir, "..2026_v1"), 0o700)
		write(t, filepath.Join(dir, "..2026_v1", "gh.json"), hook("gh", "v1"))
		os.Symlink("..2026_v1", filepath.Join(dir, "..data"))
		os.Symlink(filepath.Join("..data", "gh.json"), filepath.Join(dir, "gh.json"))
		w := startWatcher(t, fastConfig(dir))
		if !has("gh", "v1")(w.Snapshot()) {
			t.Fatal("v1 not loaded through the symlinks")
		}
		// The kubelet's atomic swap: new timestamped folder, new ..data
		// link renamed over the old one, old folder removed. No event
		// names gh.json.
		os.Mkdir(filepath.Join(dir, "..2026_v2"), 0o700)
		write(t, filepath.Join(dir, "..2026_v2", "gh.json"), hook("gh", "v2"))
		write(t, filepath.Join(dir, "..2026_v2", "new.json"), hook("new", "n"))
		os.Symlink("..2026_v2", filepath.Join(dir, "..data_tmp"))
		os.Symlink(filepath.Join("..data", "new.json"), filepath.Join(dir, "new.json"))
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(filepath.Join(dir, "..2026_v1"))
		s := waitFor(t, w, "v2 and new", func(s *Snapshot) bool { return has("gh", "v2")(s) && has("new", "n")(s) })
		if len(s.Problems) != 0 {
			t.Fatalf("problems: %v", s.Problems)
		}
	})

	t.Run("half-written file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		write(t, filepath.Join(dir, "other.json"), hook("other", "o"))
		w := startWatcher(t, fastConfig(dir))
		content := hook("slow", "s")
		f, err := os.Create(filepath.Join(dir, "slow.json"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.WriteString(content[:len(content)/2])
		s := waitFor(t, w, "the half file seen", func(s *Snapshot) bool { return len(s.Problems) == 1 })
		if !has("other", "o")(s) {
			t.Fatal("a half-written file took another webhook down")
		}
		f.WriteString(content[len(content)/2:])
		s = waitFor(t, w, "the whole file", has("slow", "s"))
		if len(s.Problems) != 0 || !has("other", "o")(s) {
			t.Fatalf("problems %v webhooks %v", s.Problems, ids(s))
		}
	})

	t.Run("directory replaced", func(t *testing.T) {
		t.Parallel()
		parent := t.TempDir()
		dir := filepath.Join(parent, "hooks")
		os.Mkdir(dir, 0o700)
		write(t, filepath.Join(dir, "a.json"), hook("a", "t"))
		cfg := fastConfig(dir)
		cfg.RescanInterval = 50 * time.Millisecond
		w := startWatcher(t, cfg)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		// The folder is gone: the current set stays.
		waitForCounter(t, w.m.reloads.WithLabelValues(resultError), 1)
		if !has("a", "t")(w.Snapshot()) {
			t.Fatal("webhooks dropped when the folder vanished")
		}
		os.Mkdir(dir, 0o700)
		write(t, filepath.Join(dir, "b.json"), hook("b", "t"))
		waitFor(t, w, "b in the new folder", func(s *Snapshot) bool { return has("b", "t")(s) && w.Lookup("a") == nil })
		// The new folder is watched: an event, not the tick, brings c.
		write(t, filepath.Join(dir, "c.json"), hook("c", "t"))
		waitFor(t, w, "c", has("c", "t"))
	})

	t.Run("rescan on request", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		w := startWatcher(t, Config{Dir: dir, Debounce: time.Hour, RescanInterval: time.Hour})
		write(t, filepath.Join(dir, "a.json"), hook("a", "t"))
		w.Rescan()
		waitFor(t, w, "a", has("a", "t"))
	})
}

// waitForCounter waits, at most 5 s, until c reaches want. The counter has
// no notification, so this polls.
func waitForCounter(t *testing.T, c prometheus.Counter, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for testutil.ToFloat64(c) < want {
		if time.Now().After(deadline) {
			t.Fatalf("counter at %v, want %v", testutil.ToFloat64(c), want)
		}
		<-tick.C
	}
}

func TestWatcher_Run(t *testing.T) {
	t.Parallel()
	w, err := New(Config{Dir: filepath.Join(t.TempDir(), "missing")}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(t.Context()); err == nil {
		t.Fatal("Run on a missing folder succeeded")
	}
	if w.Lookup("x") != nil || w.Snapshot() != nil {
		t.Fatal("snapshot without a read")
	}
	if _, err := New(Config{}, nil, nil); err == nil || !strings.Contains(err.Error(), "dir: required") {
		t.Fatalf("New without a folder: %v", err)
	}
	if _, err := New(Config{Dir: "x", Debounce: -1, RescanInterval: -1}, nil, nil); err == nil {
		t.Fatal("negative durations accepted")
	}
}

// TestWatcher_Debounce drives the event loop with a fake clock.
func TestWatcher_Debounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		w, err := New(Config{Dir: dir, Debounce: 200 * time.Millisecond, RescanInterval: time.Minute}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.scan(); err != nil {
			t.Fatal(err)
		}
		events := make(chan fsnotify.Event)
		errs := make(chan error)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- w.loop(ctx, events, errs, func() {}) }()
		var step string
		scans := func() int { synctest.Wait(); return int(testutil.ToFloat64(w.m.scans)) }
		event := func(name string) {
			write(t, filepath.Join(dir, name), hook(strings.TrimSuffix(name, ".json"), "t"))
			events <- fsnotify.Event{Name: filepath.Join(dir, name), Op: fsnotify.Write}
		}

		step = "quiet period"
		{
			event("a.json")
			time.Sleep(199 * time.Millisecond)
			if n := scans(); n != 1 {
				t.Fatalf("%s: read after %d scans before the quiet period ended", step, n)
			}
			time.Sleep(time.Millisecond)
			if n := scans(); n != 2 || w.Lookup("a") == nil {
				t.Fatalf("%s: scans %d, a loaded: %v", step, n, w.Lookup("a") != nil)
			}
		}
		step = "events restart the quiet period"
		{
			for i := range 4 {
				event(fmt.Sprintf("b%d.json", i))
				time.Sleep(150 * time.Millisecond)
			}
			if n := scans(); n != 2 {
				t.Fatalf("%s: scans %d during the burst", step, n)
			}
			time.Sleep(50 * time.Millisecond)
			if n := scans(); n != 3 || len(w.Snapshot().Webhooks) != 5 {
				t.Fatalf("%s: scans %d, webhooks %v", step, n, ids(w.Snapshot()))
			}
		}
		step = "a stream of events is read every 5×debounce"
		{
			start := scans()
			for i := range 20 { // 2 s of events every 100 ms
				event(fmt.Sprintf("c%d.json", i))
				time.Sleep(100 * time.Millisecond)
			}
			if n := scans() - start; n != 2 {
				t.Fatalf("%s: %d reads during 2 s of events, want 2 (at 1 s and 2 s)", step, n)
			}
			time.Sleep(200 * time.Millisecond)
			if got := len(w.Snapshot().Webhooks); got != 25 {
				t.Fatalf("%s: webhooks %d, want 25", step, got)
			}
		}
		step = "overflow reads at once"
		{
			start := scans()
			write(t, filepath.Join(dir, "d.json"), hook("d", "t"))
			errs <- fsnotify.ErrEventOverflow
			if n := scans() - start; n != 1 || w.Lookup("d") == nil {
				t.Fatalf("%s: reads %d after overflow", step, n)
			}
			errs <- errors.New("some watch error")
			time.Sleep(200 * time.Millisecond)
			if n := scans() - start; n != 2 {
				t.Fatalf("%s: reads %d after a watch error", step, n)
			}
		}
		step = "periodic rescan"
		{
			gen := w.Snapshot().Generation
			write(t, filepath.Join(dir, "e.json"), hook("e", "t")) // no event
			time.Sleep(time.Minute)
			synctest.Wait()
			if w.Lookup("e") == nil || w.Snapshot().Generation != gen+1 {
				t.Fatalf("%s: the periodic rescan missed a change", step)
			}
			// Nothing changed: a rescan publishes nothing.
			time.Sleep(time.Minute)
			synctest.Wait()
			if w.Snapshot().Generation != gen+1 {
				t.Fatalf("%s: a rescan without change published a snapshot", step)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
