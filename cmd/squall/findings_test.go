package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
)

// TestMasterFindings runs `squall master --findings-key` and uses the
// findings API with tokens minted by `squall token`: a writer inserts, a
// reader reads, and each is refused the other's requests with 403 naming
// the missing role, as is a token scoped to the tenant without roles (the
// spec: access is limited to what the token authorizes; decision 8).
func TestMasterFindings(t *testing.T) {
	t.Parallel()
	keyFile := filetest.Write(t, t.TempDir(), "findings.key", strings.Repeat("0f", 32))
	base := startMaster(t, "--allow-unsigned-tokens", "--findings-key", keyFile)
	mint := func(auth string) string {
		return strings.TrimSpace(mustRun(t, "token", "--user", "ingest", "--auth", auth, "--unsigned"))
	}
	writer := mint("findings=root,acme:findings_write")
	reader := mint("findings=root,acme:findings_read")
	both := mint("findings=root,acme:findings_read,findings_write")
	noRoles := strings.TrimSpace(mustRun(t, "token", "--user", "ingest", "--tenant", "acme", "--auth", "x=root,acme:test_event_execute_actions", "--unsigned"))
	do := func(token, method, path, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+"/intel/api/sdk/v0"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := calltest.Client().Do(req)
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
	refused := func(token, method, path, body, role string) {
		t.Helper()
		status, m := do(token, method, path, body)
		params, _ := m["params"].(map[string]any)
		msg, _ := m["message"].(string)
		if status != http.StatusForbidden || m["code"] != "FORBIDDEN" || params["ROLE"] != role || !strings.Contains(msg, role) {
			t.Fatalf("%s %s: %d %v, want 403 FORBIDDEN naming %s", method, path, status, m, role)
		}
	}
	const finding = `{"monitored_domain_id": 1, "tool_code": "leakmon",
		"resource_url": "https://example.com/login", "username": "jane@example.com", "password": "hunter2"}`
	refused(noRoles, "PUT", "/findings/credentials", finding, "findings_write")
	refused(reader, "PUT", "/findings/credentials", finding, "findings_write")
	status, m := do(writer, "PUT", "/findings/credentials", finding)
	if status != http.StatusCreated {
		t.Fatalf("insert: %d %v", status, m)
	}
	uid, _ := m["uid"].(string)
	refused(noRoles, "GET", "/finding/"+uid, "", "findings_read")
	refused(writer, "GET", "/finding/"+uid, "", "findings_read")
	refused(writer, "GET", "/findings/credential", "", "findings_read")
	refused(writer, "PATCH", "/finding/"+uid, `{"state": "Resolved"}`, "findings_read")
	refused(reader, "PATCH", "/finding/"+uid, `{"state": "Resolved"}`, "findings_write")
	status, m = do(reader, "GET", "/finding/"+uid, "")
	fs, _ := m["findings"].([]any)
	if status != http.StatusOK || len(fs) != 1 || fs[0].(map[string]any)["plain_text"] != "hunter2" {
		t.Fatalf("get: %d %v", status, m)
	}
	if status, m = do(both, "PATCH", "/finding/"+uid, `{"state": "Resolved"}`); status != http.StatusOK {
		t.Fatalf("patch: %d %v", status, m)
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
