package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/cmd/squall/internal/proctest"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
)

// TestMasterBinaryJoinSecret forms a two-node cluster from real squall
// master processes with no secret configured on the first: it writes the
// join secret into its data dir and logs where; a join request without
// it is refused; a second node without it does not start and says where
// to find it; with a copy (SQUALL_JOIN_TOKEN_FILE) it joins as a voter.
func TestMasterBinaryJoinSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filetest.Write(t, dir, "hmac.key", "0123456789abcdef0123456789abcdef\n")
	master := func(id string, extra ...string) []string {
		return append([]string{"master", "--node-id", id, "--data-dir", filepath.Join(dir, id),
			"--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--token-hmac-key-file", keyFile}, extra...)
	}
	m1 := startRole(t, "m1", squallCmd(t, nil, master("m1", "--bootstrap")...))
	base := m1.Base
	secretFile := filepath.Join(dir, "m1", "join.token")
	secret, err := os.ReadFile(secretFile)
	if err != nil {
		t.Fatalf("no join secret in the data dir: %v\n%s", err, m1.Logs.String())
	}
	if fi, err := os.Stat(secretFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", fi.Mode(), err)
	}
	logs := m1.Logs.String()
	if !strings.Contains(logs, "generated the cluster's join secret") || !strings.Contains(logs, secretFile) {
		t.Fatalf("the log does not say where the secret is:\n%s", logs)
	}
	if strings.Contains(logs, strings.TrimSpace(string(secret))) {
		t.Fatal("the join secret is in the log")
	}
	m1.WaitReady(t)

	// A join request without the secret.
	resp, err := calltest.Client().Post(base+"/squall/v1/cluster/join", "application/json",
		strings.NewReader(`{"id":"rogue","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var apiErr struct{ Code, Message string }
	if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &apiErr) != nil || apiErr.Code != "UNAUTHORIZED" {
		t.Fatalf("join without the secret: %d %s", resp.StatusCode, body)
	}

	// A joining node without the secret does not start.
	code, stdout, stderr := runBinary(t, master("m2", "--join", base)...)
	if out := stdout + stderr; code != 1 || !strings.Contains(out, "join.token") || !strings.Contains(out, "--join-token-file") {
		t.Fatalf("join without a secret: exit %d\n%s", code, out)
	}

	// With a copy of the secret it joins.
	proctest.Start(t, "m2", squallCmd(t, []string{"SQUALL_JOIN_TOKEN_FILE=" + secretFile}, master("m2", "--join", base)...), "registered with the cluster", "url")
	tok := mustRun(t, "token", "--user", "ops", "--auth", "all=root:view", "--hmac-key-file", keyFile)
	var info struct {
		Members []struct{ ID, Suffrage string }
	}
	proctest.Wait(t, 30*time.Second, "m2 to be a voter", nil, func() bool {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/squall/v1/cluster", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := calltest.Client().Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil || len(info.Members) != 2 {
			return false
		}
		return info.Members[0].Suffrage == "voter" && info.Members[1].Suffrage == "voter"
	})
}
