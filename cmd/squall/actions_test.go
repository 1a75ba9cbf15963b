package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/internal/kafkatest"
)

// ssrfTree is a tree whose one rule sends an http action, and a foreach
// of http actions, to target, then logs.
func ssrfTree(target string) []byte {
	return fmt.Appendf(nil, `{"version": "1.1", "Filter": {"name": "root",
	  "filter": {"description": "", "active": true, "filter": {}},
	  "nodes": [{"Ruleset": {"name": "out", "rules": [{"name": "call", "description": "", "continue": true, "active": true,
	    "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "probe"}, "WITH": {}},
	    "actions": [
	      {"id": "http", "payload": {"url": %[1]q, "body": {"n": 1}}},
	      {"id": "foreach", "payload": {"target": ["a", "b"], "actions": [{"id": "http", "payload": {"url": "%[1]s/${item}"}}]}},
	      {"id": "logger", "payload": {"msg": "probe"}}]}]}}]}}`, target)
}

// countingServer is an HTTP server that counts the requests it receives.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1) }))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestMasterActionsByConfiguration: a real master started without
// --actions-config runs a Full test event whose rule sends http actions
// (directly and through foreach) to a reachable server: the server receives
// nothing, and the answer says that http is not enabled and how to enable
// it. With an actions file that allows the server's host, it is called.
func TestMasterActionsByConfiguration(t *testing.T) {
	t.Parallel()
	srv, calls := countingServer(t)
	admin := unsignedToken(t, "ops", "all=root:admin")
	event := `{"process_type": "Full", "event": {"type": "probe", "created_ms": 1, "metadata": {"tenant_id": "master"}, "payload": {}}}`
	type answer struct {
		Result       json.RawMessage `json:"result"`
		ActionErrors []struct {
			Index   int    `json:"index"`
			ID      string `json:"id"`
			Message string `json:"message"`
		} `json:"action_errors"`
	}
	send := func(base string) answer {
		t.Helper()
		code, body := apitest.Call(t.Context(), http.MethodPost, base+"/api/v2_beta/event/active/all", admin, strings.NewReader(event), "application/json")
		var a answer
		if code != http.StatusOK || json.Unmarshal(body, &a) != nil || a.Result == nil {
			t.Fatalf("Full test event: %d %s", code, body)
		}
		return a
	}

	base := startMaster(t, "--allow-unsigned-tokens")
	apitest.DeployTree(t, base, admin, ssrfTree(srv.URL))
	a := send(base)
	if n := calls.Load(); n != 0 {
		t.Fatalf("a master without --actions-config sent %d http requests", n)
	}
	if len(a.ActionErrors) != 2 || a.ActionErrors[0].ID != "http" || a.ActionErrors[0].Index != 0 ||
		a.ActionErrors[1].ID != "foreach" || a.ActionErrors[1].Index != 1 {
		t.Fatalf("action_errors %+v, want the http action and the foreach", a.ActionErrors)
	}
	for _, e := range a.ActionErrors {
		if !strings.Contains(e.Message, "executor not enabled") || !strings.Contains(e.Message, `set http.allowed_hosts (or "allow_any_host": true)`) {
			t.Errorf("action %s: %q does not say that http is not enabled and how to enable it", e.ID, e.Message)
		}
	}

	// The same tree on a master whose actions file allows the host.
	actions := filetest.Write(t, t.TempDir(), "actions.json", `{"http": {"allowed_hosts": ["127.0.0.1"]}}`)
	base = startMaster(t, "--allow-unsigned-tokens", "--actions-config", actions)
	apitest.DeployTree(t, base, admin, ssrfTree(srv.URL))
	if a := send(base); len(a.ActionErrors) != 0 || calls.Load() != 3 {
		t.Fatalf("with http.allowed_hosts: %d calls, action_errors %+v; want 3 calls and none", calls.Load(), a.ActionErrors)
	}
}

// TestMasterActionsConfigRefused: an actions file whose http section
// allows no host stops the master at start with a message saying what to
// set.
func TestMasterActionsConfigRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	actions := filetest.Write(t, dir, "actions.json", `{"http": {"timeout": "5s"}}`)
	// Bounded: a master that accepted the file would run until killed.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, squallBinary(t), "master", "--node-id", "m1", "--data-dir", filepath.Join(dir, "data"),
		"--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap", "--allow-unsigned-tokens", "--actions-config", actions)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `http.allowed_hosts: is required to enable the http executor`) ||
		!strings.Contains(string(out), `"allow_any_host": true`) {
		t.Fatalf("master with an http section without hosts: %v\n%s", err, out)
	}
}

// TestEngineActionsByConfiguration: a real engine started without
// --actions-config processes an event whose rule sends http actions to a
// reachable server: the server receives nothing, and the event goes to the
// dead-letter topic with an error saying that http is not enabled.
func TestEngineActionsByConfiguration(t *testing.T) {
	t.Parallel()
	srv, calls := countingServer(t)
	base := startMaster(t, "--allow-unsigned-tokens")
	tokenFile, token := adminTokenFile(t, t.TempDir())
	apitest.DeployTree(t, base, token, ssrfTree(srv.URL))

	addr := kafkatest.Start(t, kafkatest.Config{Topics: []string{"squall.events", "squall.events.dlq"}, Partitions: 1}).Addr
	p := startEngine(t, []string{"SQUALL_GROUP=engines-actions"}, "--master", base, "--token-file", tokenFile, "--kafka-brokers", addr)

	produce(t, addr, &kgo.Record{
		Key:     []byte("master"),
		Value:   []byte(`{"type": "probe", "created_ms": 1700000000000, "metadata": {"tenant_id": "master"}, "payload": {}}`),
		Headers: []kgo.RecordHeader{{Key: "squall-event-id", Value: []byte("019a0000-0000-7000-8000-000000000001")}},
	})
	dead := firstDeadLetter(t, addr, 60*time.Second, p.Logs)
	headers := map[string]string{}
	for _, h := range dead.Headers {
		headers[h.Key] = string(h.Value)
	}
	if headers["squall-error-actions"] != "0:http,1:foreach" || !strings.Contains(headers["squall-error"], "executor not enabled") ||
		!strings.Contains(headers["squall-error"], "http.allowed_hosts") {
		t.Errorf("dead letter headers %v", headers)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("an engine without --actions-config sent %d http requests", n)
	}
	if !strings.Contains(p.Logs.String(), `"msg":"action","action":"logger"`) && !strings.Contains(p.Logs.String(), `"action":"logger"`) {
		t.Errorf("the logger action did not run:\n%s", p.Logs.String())
	}
}
