//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
)

// waitLogs waits, at most 30 s, until the process has written n log
// lines whose msg is msg.
func waitLogs(t *testing.T, p *proctest.Proc, msg string, n int) {
	t.Helper()
	if !polltest.Until(t.Context(), 30*time.Second, func() bool { return countLogs(p, msg) >= n || !p.Running() }) || countLogs(p, msg) < n {
		t.Fatalf("fewer than %d %q log lines within 30s (exited: %v):\n%s", n, msg, !p.Running(), p.Logs.String())
	}
}

func countLogs(p *proctest.Proc, msg string) int {
	n := 0
	for line := range strings.Lines(p.Logs.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			n++
		}
	}
	return n
}

// TestMasterActionsReload: a real `squall master` reloads its
// --actions-config when the file changes and on SIGHUP, without a restart;
// a bad file is logged and the current settings stay.
func TestMasterActionsReload(t *testing.T) {
	t.Parallel()
	srv, calls := countingServer(t)
	admin := unsignedToken(t, "ops", "all=root:admin")
	dir := t.TempDir()
	actions := filepath.Join(dir, "actions.json")
	replace := func(content string) { t.Helper(); replaceFile(t, actions, content) }
	replace(`{"retry": {"max_attempts": 1}}`)

	p := startRole(t, "master", squallCmd(t, nil, "master", "--node-id", "m1", "--data-dir", filepath.Join(dir, "data"),
		"--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap", "--allow-unsigned-tokens", "--actions-config", actions))
	base := p.Base
	p.WaitReady(t)
	apitest.DeployTree(t, base, admin, ssrfTree(srv.URL))
	event := `{"process_type": "Full", "event": {"type": "probe", "created_ms": 1, "metadata": {"tenant_id": "master"}, "payload": {}}}`
	send := func() int {
		t.Helper()
		code, body := apitest.Call(t.Context(), http.MethodPost, base+"/api/v2_beta/event/active/all", admin, strings.NewReader(event), "application/json")
		var a struct {
			ActionErrors []json.RawMessage `json:"action_errors"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &a) != nil {
			t.Fatalf("Full test event: %d %s", code, body)
		}
		return len(a.ActionErrors)
	}
	metric := func(result string) string {
		t.Helper()
		code, body := apitest.Call(t.Context(), http.MethodGet, base+"/metrics", "", nil, "")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		for line := range strings.Lines(string(body)) {
			if v, ok := strings.CutPrefix(line, `squall_actions_config_reloads_total{result="`+result+`"} `); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}

	if n := send(); n != 2 || calls.Load() != 0 {
		t.Fatalf("http not enabled: %d action errors, %d calls; want 2 and 0", n, calls.Load())
	}

	// The file changes: the next test event runs http.
	replace(`{"retry": {"max_attempts": 1}, "http": {"allowed_hosts": ["127.0.0.1"]}}`)
	waitLogs(t, p, "actions settings reloaded", 1)
	if n := send(); n != 0 || calls.Load() != 3 {
		t.Fatalf("after the change: %d action errors, %d calls; want 0 and 3", n, calls.Load())
	}

	// SIGHUP reloads the file, unchanged here, and the master goes on.
	p.Signal(t, syscall.SIGHUP)
	waitLogs(t, p, "actions settings reloaded", 2)
	if countLogs(p, "SIGHUP: reloading the actions settings file") != 1 {
		t.Fatalf("no SIGHUP log line:\n%s", p.Logs.String())
	}

	// A bad file is logged with the reason; the current settings stay.
	replace(`{"http": {}}`)
	waitLogs(t, p, "actions settings not reloaded; the current executors stay", 1)
	if !strings.Contains(p.Logs.String(), "http.allowed_hosts: is required") {
		t.Errorf("the log does not say why the file was refused:\n%s", p.Logs.String())
	}
	if n := send(); n != 0 || calls.Load() != 6 {
		t.Fatalf("after the bad file: %d action errors, %d calls; want 0 and 6", n, calls.Load())
	}
	if ok, bad := metric("ok"), metric("error"); ok != "2" || bad != "1" {
		t.Errorf("squall_actions_config_reloads_total ok=%q error=%q, want 2 and 1", ok, bad)
	}
}

// TestEngineActionsReload: a real `squall engine` reloads its
// --actions-config on SIGHUP and when the file changes: an event after the
// change runs http actions that the first settings did not enable.
func TestEngineActionsReload(t *testing.T) {
	t.Parallel()
	srv, calls := countingServer(t)
	base := startMaster(t, "--allow-unsigned-tokens")
	dir := t.TempDir()
	tokenFile, token := adminTokenFile(t, dir)
	apitest.DeployTree(t, base, token, ssrfTree(srv.URL))
	actions := filepath.Join(dir, "actions.json")
	replace := func(content string) { t.Helper(); replaceFile(t, actions, content) }
	replace(`{"retry": {"max_attempts": 1}}`)

	addr := kafkatest.Start(t, kafkatest.Config{Topics: []string{"squall.events", "squall.events.dlq"}, Partitions: 1}).Addr
	p := startEngine(t, []string{"SQUALL_GROUP=engines-reload"}, "--master", base, "--token-file", tokenFile, "--kafka-brokers", addr, "--actions-config", actions)

	// SIGHUP reloads the file (unchanged) and the engine goes on.
	p.Signal(t, syscall.SIGHUP)
	waitLogs(t, p, "actions settings reloaded", 1)
	if countLogs(p, "SIGHUP: reloading the actions settings file") != 1 {
		t.Fatalf("no SIGHUP log line:\n%s", p.Logs.String())
	}

	// The file changes: the next event's http actions run.
	replace(`{"retry": {"max_attempts": 1}, "http": {"allowed_hosts": ["127.0.0.1"]}}`)
	waitLogs(t, p, "actions settings reloaded", 2)
	produce(t, addr, &kgo.Record{
		Key:     []byte("master"),
		Value:   []byte(`{"type": "probe", "created_ms": 1700000000000, "metadata": {"tenant_id": "master"}, "payload": {}}`),
		Headers: []kgo.RecordHeader{{Key: "squall-event-id", Value: []byte("019a0000-0000-7000-8000-000000000002")}},
	})
	if !polltest.Until(t.Context(), 60*time.Second, func() bool { return calls.Load() == 3 }) {
		t.Fatalf("%d http calls after the reload, want 3:\n%s", calls.Load(), p.Logs.String())
	}
}

// replaceFile replaces path's content at once, by a rename, as editors and
// configuration tools do.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
