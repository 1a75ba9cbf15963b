//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitLogs waits, at most 30 s, until the process has written n log
// lines whose msg is msg.
func waitLogs(t *testing.T, p *started, msg string, n int) {
	t.Helper()
	if !waitUntil(t.Context(), 30*time.Second, func() bool { return countLogs(p, msg) >= n }) {
		t.Fatalf("fewer than %d %q log lines within 30s:\n%s", n, msg, p.logs.String())
	}
}

func countLogs(p *started, msg string) int {
	n := 0
	for line := range strings.Lines(p.logs.String()) {
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
	admin := strings.TrimSpace(mustRun(t, squallBinary(t), "token", "--user", "ops", "--auth", "all=root:admin", "--unsigned"))
	dir := t.TempDir()
	actions := filepath.Join(dir, "actions.json")
	replace := func(content string) {
		t.Helper()
		tmp := filepath.Join(dir, ".actions.json.new")
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, actions); err != nil {
			t.Fatal(err)
		}
	}
	replace(`{"retry": {"max_attempts": 1}}`)

	cmd := exec.Command(squallBinary(t), "master", "--node-id", "m1", "--data-dir", filepath.Join(dir, "data"),
		"--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap", "--allow-unsigned-tokens", "--actions-config", actions)
	p := startLogged(t, cmd, "master started", "http_addr")
	base := "http://" + p.addr
	waitFor(t, 30*time.Second, "the master ready", nil, func() bool {
		code, _ := apiCall(t.Context(), http.MethodGet, base+"/readyz", "", nil, "")
		return code == http.StatusOK
	})
	deployTree(t, base, admin, ssrfTree(srv.URL))
	event := `{"process_type": "Full", "event": {"type": "probe", "created_ms": 1, "metadata": {"tenant_id": "master"}, "payload": {}}}`
	send := func() int {
		t.Helper()
		code, body := apiCall(t.Context(), http.MethodPost, base+"/api/v2_beta/event/active/all", admin, strings.NewReader(event), "application/json")
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
		code, body := apiCall(t.Context(), http.MethodGet, base+"/metrics", "", nil, "")
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
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogs(t, p, "actions settings reloaded", 2)
	if countLogs(p, "SIGHUP: reloading the actions settings file") != 1 {
		t.Fatalf("no SIGHUP log line:\n%s", p.logs.String())
	}

	// A bad file is logged with the reason; the current settings stay.
	replace(`{"http": {}}`)
	waitLogs(t, p, "actions settings not reloaded; the current executors stay", 1)
	if !strings.Contains(p.logs.String(), "http.allowed_hosts: is required") {
		t.Errorf("the log does not say why the file was refused:\n%s", p.logs.String())
	}
	if n := send(); n != 0 || calls.Load() != 6 {
		t.Fatalf("after the bad file: %d action errors, %d calls; want 0 and 6", n, calls.Load())
	}
	if ok, bad := metric("ok"), metric("error"); ok != "2" || bad != "1" {
		t.Errorf("squall_actions_config_reloads_total ok=%q error=%q, want 2 and 1", ok, bad)
	}
}
