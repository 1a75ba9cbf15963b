package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/polltest"
)

// TestService_CachedTree: an engine with a data directory keeps the tree
// it installed; started again while its master is stopped, it runs that
// tree (ready, with a warning naming its index) and processes events with
// it; once the master is back it switches to the master's newer tree. A
// corrupt cache file is logged and ignored.
func TestService_CachedTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	v1 := e.deploy("v1")
	cfg := e.config()
	cfg.DataDir = filepath.Join(t.TempDir(), "engine")

	a := startReady(t, cfg)
	evs := orders(40, 4)
	e.produce(evs[:10]...)
	e.waitArchived(evs[:10])
	a.stop()
	if ct, err := (&treeCache{dir: cfg.DataDir}).load(); err != nil || ct.Index != v1 {
		t.Fatalf("cache after engine a: %+v, %v; want index %d", ct, err, v1)
	}

	// A deploy the stopped engine did not see, then the master stops.
	v2 := e.deploy("v2")
	e.masters.Stop(0)
	b := startReady(t, cfg)
	if got := b.TreeIndex(); got != v1 {
		t.Fatalf("engine b runs tree %d, want the cached %d", got, v1)
	}
	_, st := b.readyz()
	if w := strings.Join(st.Warnings, "\n"); !strings.Contains(w, "cached tree of index "+strconv.FormatUint(v1, 10)) {
		t.Errorf("readyz warnings %q: want the cached tree's index", st.Warnings)
	}
	e.produce(evs[10:20]...)
	for _, l := range e.waitArchived(evs[:20]) {
		if l.version != "v1" {
			t.Errorf("event %s archived by %s, want v1 (the cached tree)", l.id, l.version)
		}
	}

	e.masters.Restart(0)
	polltest.Wait(t, "engine b to install the master's tree", readyTimeout, func() bool { return b.TreeIndex() == v2 })
	_, st = b.readyz()
	if w := strings.Join(st.Warnings, "\n"); strings.Contains(w, "cached tree") {
		t.Errorf("readyz warnings %q after the master answered", st.Warnings)
	}
	e.produce(evs[20:30]...)
	e.waitArchived(evs[:30])
	versions := map[string]string{}
	for _, l := range e.archivedEvents() {
		versions[l.id] = l.version
	}
	for _, ev := range evs[20:30] {
		if versions[ev.id] != "v2" {
			t.Errorf("event %s archived by %q, want v2", ev.id, versions[ev.id])
		}
	}
	b.stop()
	if ct, err := (&treeCache{dir: cfg.DataDir}).load(); err != nil || ct.Index != v2 {
		t.Fatalf("cache after engine b: %+v, %v; want index %d", ct, err, v2)
	}

	t.Run("corrupt cache", func(t *testing.T) {
		path := filepath.Join(cfg.DataDir, treeCacheFile)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// One byte of the tree changed: the hash no longer matches.
		i := strings.Index(string(b), `"tree":"v2"`)
		if i < 0 {
			t.Fatalf("no tree v2 in the cache file %s", b)
		}
		b[i+len(`"tree":"v`)] = '3'
		writeFile(t, path, string(b))
		e.masters.Stop(0)
		defer e.masters.Restart(0)
		c := start(t, cfg)
		polltest.Wait(t, "engine c to try its cache", readyTimeout, func() bool {
			return strings.Contains(c.log.String(), "cached tree ignored")
		})
		if !strings.Contains(c.log.String(), "does not match its sha256") {
			t.Errorf("engine c log: want the hash mismatch named")
		}
		if code, st := c.readyz(); code == 200 || c.TreeIndex() != 0 {
			t.Errorf("engine c with a corrupt cache: readyz %d %q, tree %d; want not ready, no tree", code, st.Reasons, c.TreeIndex())
		}
		c.stop()
	})
}

// TestTreeCache covers the cache file alone: round trip, atomic
// replacement, and the files it refuses.
func TestTreeCache(t *testing.T) {
	t.Parallel()
	c := &treeCache{dir: filepath.Join(t.TempDir(), "a", "b")}
	if _, err := c.load(); !errors.Is(err, errNoCachedTree) {
		t.Fatalf("load of an empty directory: %v, want errNoCachedTree", err)
	}
	now := time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC)
	raw := []byte(`{"version": "1.1", "x": "<&>"}`)
	for _, idx := range []uint64{3, 7} {
		if err := c.save(idx, raw, now); err != nil {
			t.Fatal(err)
		}
	}
	ct, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	if ct.Index != 7 || !ct.SavedAt.Equal(now) || string(ct.Tree) != `{"version":"1.1","x":"<&>"}` {
		t.Errorf("loaded %+v", ct)
	}
	entries, _ := os.ReadDir(c.dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d files, want the cache file alone", len(entries))
	}
	good, err := os.ReadFile(c.path())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, content, want string }{
		{"not JSON", "{", "corrupt"},
		{"truncated", string(good[:len(good)/2]), "corrupt"},
		{"tree changed", strings.Replace(string(good), `"x"`, `"y"`, 1), "does not match"},
		{"other format", strings.Replace(string(good), `"format":1`, `"format":2`, 1), "format 2"},
		{"unknown field", strings.Replace(string(good), `{"format"`, `{"extra":1,"format"`, 1), "corrupt"},
	} {
		writeFile(t, c.path(), tt.content)
		if _, err := c.load(); err == nil || errors.Is(err, errNoCachedTree) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: load: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}
