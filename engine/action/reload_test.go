package action

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/internal/metrictest"
)

// Settings files of the reload tests.
const (
	settingsLoggerOnly = `{"retry": {"max_attempts": 1}}`
	settingsHTTP       = `{"retry": {"max_attempts": 1}, "http": {"allowed_hosts": ["127.0.0.1"]}}`
	settingsBad        = `{"retry": {"max_attempts": 1}, "http": {}}`
	settingsSecretGone = `{"elasticsearch": {"default_endpoint": "http://127.0.0.1:9", "password_file": "/nonexistent/es-password", "username": "u"}}`
)

// writeAtomically replaces path by a rename, as editors and config
// management tools do.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// newTestReloader builds a Reloader on the file and its own Prometheus
// registry, closed when the test ends.
func newTestReloader(t *testing.T, file string, deps Deps) (*Reloader, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	deps.Registerer = reg
	r, err := NewReloader(ReloaderConfig{File: file, Debounce: 20 * time.Millisecond}, deps)
	if err != nil {
		t.Fatalf("NewReloader: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r, reg
}

func reloads(t *testing.T, reg prometheus.Gatherer, result string) float64 {
	t.Helper()
	return metrictest.Sum(t, reg, "squall_actions_config_reloads_total", map[string]string{"result": result})
}

func httpAction(url string) tree.Action {
	return tree.Action{ID: IDHTTP, Payload: map[string]any{"url": url}}
}

func TestReloader_Reload(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	file := filepath.Join(t.TempDir(), "actions.json")
	writeAtomically(t, file, settingsLoggerOnly)
	log, logs := newTestLogger()
	r, reg := newTestReloader(t, file, Deps{Logger: log})

	if err := r.Run(t.Context(), httpAction(rc.URL)); !errors.Is(err, ErrNotEnabled) {
		t.Fatalf("http before the reload: %v, want ErrNotEnabled", err)
	}
	firstHash := r.Hash()

	// Enabling http takes effect at the next action, without a restart.
	writeAtomically(t, file, settingsHTTP)
	if err := r.Reload(t.Context()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if err := r.Run(t.Context(), httpAction(rc.URL)); err != nil {
		t.Fatalf("http after the reload: %v", err)
	}
	if len(rc.received()) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(rc.received()))
	}
	if got := strings.Join(r.IDs(), ","); got != "foreach,http,logger" {
		t.Errorf("IDs = %s", got)
	}
	if r.Hash() == firstHash || len(r.Hash()) != 64 {
		t.Errorf("hash %q after the reload, was %q", r.Hash(), firstHash)
	}
	if got := reloads(t, reg, "ok"); got != 1 {
		t.Errorf("reloads ok = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), `"added":["http"]`) || !strings.Contains(logs.String(), `"enabled":["foreach","http","logger"]`) {
		t.Errorf("the reload log does not say what changed:\n%s", logs)
	}
	// The action metrics survive the reload: one registration, one count.
	if got := metrictest.Sum(t, reg, "squall_action_executed_total", map[string]string{"action": IDHTTP}); got != 1 {
		t.Errorf("executed{http} = %v, want 1", got)
	}

	// A bad file (invalid, unreadable, a secret file missing) keeps the
	// current executors and counts an error.
	for i, bad := range []string{settingsBad, "{not json", settingsSecretGone, ""} {
		if bad == "" {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		} else {
			writeAtomically(t, file, bad)
		}
		if err := r.Reload(t.Context()); err == nil {
			t.Fatalf("Reload of bad file %d: no error", i)
		}
		if err := r.Run(t.Context(), httpAction(rc.URL)); err != nil {
			t.Fatalf("http after bad file %d: %v; the previous executors must stay", i, err)
		}
		if got := reloads(t, reg, "error"); got != float64(i+1) {
			t.Errorf("reloads error = %v, want %d", got, i+1)
		}
	}
	if got := reloads(t, reg, "ok"); got != 1 {
		t.Errorf("reloads ok = %v after bad files, want 1", got)
	}
	if !strings.Contains(logs.String(), "actions settings not reloaded") || !strings.Contains(logs.String(), "es-password") {
		t.Errorf("the error log does not give the reason:\n%s", logs)
	}

	// Disabling http takes effect too.
	writeAtomically(t, file, settingsLoggerOnly)
	if err := r.Reload(t.Context()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if err := r.Run(t.Context(), httpAction(rc.URL)); !errors.Is(err, ErrNotEnabled) {
		t.Fatalf("http after disabling it: %v, want ErrNotEnabled", err)
	}
	if !strings.Contains(logs.String(), `"removed":["http"]`) {
		t.Errorf("the reload log does not say http was removed:\n%s", logs)
	}
}

func TestReloader_secretsNotLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pw := filetest.Write(t, dir, "es-password", "hunter2-secret")
	file := filepath.Join(dir, "actions.json")
	writeAtomically(t, file, settingsLoggerOnly)
	log, logs := newTestLogger()
	r, _ := newTestReloader(t, file, Deps{Logger: log})
	writeAtomically(t, file, `{"elasticsearch": {"default_endpoint": "http://127.0.0.1:9", "username": "u", "password_file": "`+pw+`"}}`)
	if err := r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"added":["elasticsearch"]`) {
		t.Fatalf("no reload log:\n%s", logs)
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("a secret was logged:\n%s", logs)
	}
}

func TestReloader_Watch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup creates the file with content and returns a function
		// that replaces it.
		setup func(t *testing.T, dir, content string) (file string, replace func(content string))
	}{
		{
			name: "rename over the file",
			setup: func(t *testing.T, dir, content string) (string, func(string)) {
				file := filepath.Join(dir, "actions.json")
				writeAtomically(t, file, content)
				return file, func(c string) { writeAtomically(t, file, c) }
			},
		},
		{
			name: "write in place",
			setup: func(t *testing.T, dir, content string) (string, func(string)) {
				file := filepath.Join(dir, "actions.json")
				writeAtomically(t, file, content)
				return file, func(c string) {
					if err := os.WriteFile(file, []byte(c), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			},
		},
		{
			// A Kubernetes ConfigMap volume: actions.json -> ..data/actions.json,
			// ..data -> ..<version>, swapped by renaming a new symbolic link
			// over ..data; actions.json itself never changes.
			name: "configmap symlink swap",
			setup: func(t *testing.T, dir, content string) (string, func(string)) {
				version := 0
				publish := func(c string) {
					version++
					v := filepath.Join(dir, "..v"+string(rune('0'+version)))
					if err := os.Mkdir(v, 0o700); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(v, "actions.json"), []byte(c), 0o600); err != nil {
						t.Fatal(err)
					}
					tmp := filepath.Join(dir, "..data_tmp")
					if err := os.Symlink(filepath.Base(v), tmp); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
						t.Fatal(err)
					}
				}
				publish(content)
				file := filepath.Join(dir, "actions.json")
				if err := os.Symlink(filepath.Join("..data", "actions.json"), file); err != nil {
					t.Fatal(err)
				}
				return file, publish
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t)
			file, replace := tt.setup(t, t.TempDir(), settingsLoggerOnly)
			r, reg := newTestReloader(t, file, Deps{})
			watchErr := make(chan error, 1)
			ctx := t.Context()
			go func() { watchErr <- r.Watch(ctx) }()
			t.Cleanup(func() {
				// t.Context is canceled before Cleanup runs.
				if err := <-watchErr; err != nil {
					t.Errorf("Watch: %v", err)
				}
			})

			// A change before the watch is in place is read by the watch's
			// first read; one after it, through the directory's events. A
			// write in place may be read half done (an error), then whole.
			want := sha256.Sum256([]byte(settingsHTTP))
			waitReload(t, r, func() bool { return r.Hash() == hex.EncodeToString(want[:]) }, func() { replace(settingsHTTP) })
			if err := r.Run(t.Context(), httpAction(rc.URL)); err != nil {
				t.Fatalf("http after the watched change: %v", err)
			}
			if got := reloads(t, reg, "ok"); got != 1 {
				t.Errorf("reloads ok = %v, want 1", got)
			}

			// A bad file is counted and the executors stay.
			waitReload(t, r, func() bool { return reloads(t, reg, "error") > 0 }, func() { replace(settingsBad) })
			if err := r.Run(t.Context(), httpAction(rc.URL)); err != nil {
				t.Fatalf("http after the bad file: %v", err)
			}
			if r.Hash() != hex.EncodeToString(want[:]) {
				t.Errorf("hash %s after the bad file, want the previous one", r.Hash())
			}
		})
	}
}

// waitReload calls change, then waits for reload attempts until cond holds.
func waitReload(t *testing.T, r *Reloader, cond func() bool, change func()) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	done := r.Reloaded()
	change()
	for !cond() {
		select {
		case <-done:
			done = r.Reloaded()
		case <-deadline:
			t.Fatal("the watch did not reload the changed file")
		}
	}
}

// TestReloader_inFlight shows that an action running during a reload
// finishes on the registry it started with, which is closed only after it.
func TestReloader_inFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		block := ExecutorFunc(func(context.Context, tree.Action) error {
			entered <- struct{}{}
			<-release
			return nil
		})
		file := filepath.Join(t.TempDir(), "actions.json")
		writeAtomically(t, file, settingsHTTP)
		r, _ := newTestReloader(t, file, Deps{Executors: map[string]Executor{"block": block}})
		old := r.cur.Load()

		result := make(chan error, 1)
		go func() { result <- r.Run(t.Context(), tree.Action{ID: "block"}) }()
		<-entered

		writeAtomically(t, file, settingsLoggerOnly)
		if err := r.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := r.Run(t.Context(), httpAction("http://127.0.0.1:9/")); !errors.Is(err, ErrNotEnabled) {
			t.Fatalf("new http action after the reload: %v, want ErrNotEnabled", err)
		}
		synctest.Wait() // the retiring goroutine waits for the action
		if old.reg.closed.Load() {
			t.Fatal("the replaced registry was closed while an action ran on it")
		}
		close(release)
		if err := <-result; err != nil {
			t.Fatalf("the action in flight: %v", err)
		}
		synctest.Wait()
		if !old.reg.closed.Load() {
			t.Fatal("the replaced registry is not closed once its actions finished")
		}
		if r.cur.Load().reg.closed.Load() {
			t.Fatal("the current registry is closed")
		}
	})
}

func TestReloader_Close(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	r, err := NewReloader(ReloaderConfig{}, Deps{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(t.Context(), tree.Action{ID: IDLogger}); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(t.Context()); err != nil {
		t.Fatalf("Reload without a file: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(t.Context(), tree.Action{ID: IDLogger}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d metrics still registered after Close (%v)", n, err)
	}
	// A bad file at the start is an error, as before reloads existed.
	file := filepath.Join(t.TempDir(), "actions.json")
	writeAtomically(t, file, settingsBad)
	if _, err := NewReloader(ReloaderConfig{File: file}, Deps{Registerer: reg}); err == nil {
		t.Fatal("NewReloader accepted a bad file")
	}
}
