package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/filetest"
)

// TestMasterFindings runs `squall master --findings-key` and uses the
// findings API with a token minted by `squall token --tenant`.
func TestMasterFindings(t *testing.T) {
	t.Parallel()
	keyFile := filetest.Write(t, t.TempDir(), "findings.key", strings.Repeat("0f", 32))
	base := startMaster(t, "--allow-unsigned-tokens", "--findings-key", keyFile)
	token := strings.TrimSpace(mustRun(t, squallBinary(t), "token", "--user", "ingest", "--tenant", "acme", "--unsigned"))
	do := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+"/intel/api/sdk/v0"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	status, m := do("PUT", "/findings/credentials", `{"monitored_domain_id": 1, "tool_code": "leakmon",
		"resource_url": "https://example.com/login", "username": "jane@example.com", "password": "hunter2"}`)
	if status != http.StatusCreated {
		t.Fatalf("insert: %d %v", status, m)
	}
	uid, _ := m["uid"].(string)
	status, m = do("GET", "/finding/"+uid, "")
	fs, _ := m["findings"].([]any)
	if status != http.StatusOK || len(fs) != 1 || fs[0].(map[string]any)["plain_text"] != "hunter2" {
		t.Fatalf("get: %d %v", status, m)
	}
}

// TestMasterFindingsBadKey: a master with an unusable findings key does
// not start.
func TestMasterFindingsBadKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filetest.Write(t, dir, "findings.key", "not a key")
	code, stdout, stderr := runSquall(t, "", "master", "--node-id", "m1", "--data-dir", filepath.Join(dir, "data"),
		"--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap", "--allow-unsigned-tokens", "--findings-key", keyFile)
	if code == 0 || !strings.Contains(stderr, "findings key") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
