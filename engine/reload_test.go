package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/internal/metrictest"
	"github.com/squallhq/squall/internal/polltest"
)

// replaceFile writes content to path through a rename, as editors and
// configuration tools do.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".new-"+filepath.Base(path))
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestService_reloadActions changes the actions settings file of a running
// engine: the next events use the new executors without a restart, a bad
// file keeps the current ones, and an action running during a reload
// finishes on the executor it started with.
func TestService_reloadActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	archiveOnly := fmt.Sprintf(`{"retry": {"max_attempts": 1},
		"archive": {"base_path": %q, "default_path": "/other.log", "paths": {"v1": "/v1/${tenant}.log"}}}`, e.archive)
	withHTTP := fmt.Sprintf(`{"retry": {"max_attempts": 1},
		"archive": {"base_path": %q, "default_path": "/other.log", "paths": {"v1": "/v1/${tenant}.log"}},
		"http": {"timeout": "10s", "allowed_hosts": ["127.0.0.1"]}}`, e.archive)
	writeFile(t, e.actions, archiveOnly)
	e.deploy("v1")
	r := startReady(t, e.config())
	reloads := func(result string) float64 {
		return metrictest.Sum(t, r.reg, "squall_actions_config_reloads_total", map[string]string{"result": result})
	}
	received := func(id string) bool {
		return slices.ContainsFunc(e.receiver.Calls(), func(c call) bool { return c.ID == id })
	}

	// http is disabled: the event's http action fails, it is dead-lettered.
	evs := orders(5, 1)
	e.produce(evs[0])
	polltest.Wait(t, "the first event dead-lettered", processTimeout, func() bool { return r.counter("squall_engine_dlq_messages_total") == 1 })

	// Enabling http in the file enables it for the next events.
	replaceFile(t, e.actions, withHTTP)
	polltest.Wait(t, "a reload", processTimeout, func() bool { return reloads("ok") == 1 })
	e.produce(evs[1])
	polltest.Wait(t, "the second event posted", processTimeout, func() bool { return received(evs[1].id) })

	// A bad file is refused and counted; http stays enabled.
	replaceFile(t, e.actions, `{"http": {}}`)
	polltest.Wait(t, "a refused reload", processTimeout, func() bool { return reloads("error") == 1 })
	e.produce(evs[2])
	polltest.Wait(t, "the third event posted", processTimeout, func() bool { return received(evs[2].id) })

	// An http action held by the receiver during a reload that disables
	// http finishes on the old executor: its event is not dead-lettered.
	release := e.receiver.hold()
	e.produce(evs[3])
	polltest.Wait(t, "the fourth event's request", processTimeout, func() bool { return received(evs[3].id) })
	replaceFile(t, e.actions, archiveOnly)
	polltest.Wait(t, "the second reload", processTimeout, func() bool { return reloads("ok") == 2 })
	release()
	polltest.Wait(t, "the fourth event processed", processTimeout, func() bool { return r.counter("squall_engine_events_processed_total") == 3 })
	if n := r.counter("squall_engine_dlq_messages_total"); n != 1 {
		t.Fatalf("%v dead letters, want 1: the action in flight did not finish on its executor", n)
	}

	// And the next event finds http disabled.
	e.produce(evs[4])
	polltest.Wait(t, "the fifth event dead-lettered", processTimeout, func() bool { return r.counter("squall_engine_dlq_messages_total") == 2 })
	if received(evs[4].id) {
		t.Error("the fifth event was posted after http was disabled")
	}

	// ReloadActions (SIGHUP) reloads an unchanged file too.
	if err := r.ReloadActions(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := reloads("ok"); got != 3 {
		t.Errorf("reloads ok = %v after ReloadActions, want 3", got)
	}
}

// TestService_reloadActionsFixed: settings given in Config.Actions (squall
// dev) are not reloaded, whatever ActionsConfig says.
func TestService_reloadActionsFixed(t *testing.T) {
	t.Parallel()
	cfg := validConfig()
	acfg := action.Default()
	cfg.Actions = &acfg
	cfg.ActionsConfig = filepath.Join(t.TempDir(), "missing.json")
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.ReloadActions(t.Context()); err != nil {
		t.Fatalf("ReloadActions with fixed settings: %v", err)
	}
}

// TestService_reloadActionsDuringWriteBatch: reloads while events stream
// through close the archive executors that workers' write batches hold
// lines for; those lines are written again through the new executors, so
// every event is archived and none dead-lettered.
func TestService_reloadActionsDuringWriteBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	e.deploy("v1")
	r := startReady(t, e.config())
	evs := orders(3000, 8)
	e.produce(evs...)
	for i := 0; i < 20 && r.counter("squall_engine_events_processed_total") < float64(len(evs)); i++ {
		if err := r.ReloadActions(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	lines := e.waitArchived(evs)
	if dlq := r.counter("squall_engine_dlq_messages_total"); dlq != 0 {
		t.Errorf("%v events dead-lettered", dlq)
	}
	t.Logf("%d lines for %d events; %v archive actions run", len(lines), len(evs),
		metrictest.Sum(t, r.reg, "squall_action_executed_total", map[string]string{"action": "archive"}))
}
