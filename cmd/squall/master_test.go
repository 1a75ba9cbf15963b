package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/internal/filetest"
)

func TestBindEnv(t *testing.T) {
	t.Parallel()
	newCmd := func() (*cobra.Command, *string, *bool, *[]string, *time.Duration) {
		var (
			id   string
			boot bool
			join []string
			wait time.Duration
		)
		cmd := &cobra.Command{Use: "x"}
		cmd.Flags().StringVar(&id, "node-id", "", "")
		cmd.Flags().BoolVar(&boot, "bootstrap", false, "")
		cmd.Flags().StringSliceVar(&join, "join", nil, "")
		cmd.Flags().DurationVar(&wait, "leader-wait", time.Second, "")
		return cmd, &id, &boot, &join, &wait
	}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}

	cmd, id, boot, join, wait := newCmd()
	if err := cmd.ParseFlags([]string{"--node-id", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	err := bindEnv(cmd, env(map[string]string{
		"SQUALL_NODE_ID": "from-env", "SQUALL_BOOTSTRAP": "true",
		"SQUALL_JOIN": "http://a:1,http://b:2", "SQUALL_LEADER_WAIT": "",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if *id != "from-flag" || !*boot || strings.Join(*join, " ") != "http://a:1 http://b:2" || *wait != time.Second {
		t.Fatalf("id %q boot %v join %v wait %v", *id, *boot, *join, *wait)
	}

	cmd, _, _, _, _ = newCmd()
	err = bindEnv(cmd, env(map[string]string{"SQUALL_BOOTSTRAP": "maybe", "SQUALL_LEADER_WAIT": "soon"}))
	if err == nil || !strings.Contains(err.Error(), "SQUALL_BOOTSTRAP") || !strings.Contains(err.Error(), "SQUALL_LEADER_WAIT") {
		t.Fatalf("bad values: %v", err)
	}
	if envName("token-hmac-key-file") != "SQUALL_TOKEN_HMAC_KEY_FILE" {
		t.Fatal(envName("token-hmac-key-file"))
	}
}

func TestMasterFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"master"}, "--node-id (or SQUALL_NODE_ID) is required"},
		{[]string{"master", "--node-id", "n"}, "--data-dir (or SQUALL_DATA_DIR) is required"},
		{[]string{"master", "--node-id", "n", "--data-dir", "d"}, "HMAC key file"},
		{[]string{"master", "--node-id", "n", "--data-dir", "d", "--allow-unsigned-tokens", "--bootstrap", "--join", "http://a:1"}, "exclude each other"},
		{[]string{"master", "--node-id", "n", "--data-dir", "d", "--allow-unsigned-tokens", "--log-level", "loud"}, "--log-level"},
		{[]string{"master", "--node-id", "n", "--data-dir", "d", "--allow-unsigned-tokens", "--webhooks-dir", "w", "--kafka-sasl-password-file", "/nonexistent/squall-password"}, "--kafka-sasl-password-file"},
	} {
		code, out, errOut := runSquall(t, "", tc.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestMasterBinary runs squall master as a user would: a bootstrap node
// on free ports configured partly through SQUALL_* variables, a token
// from squall token, the cluster endpoint and the API, then SIGTERM.
func TestMasterBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filetest.Write(t, dir, "hmac.key", "0123456789abcdef0123456789abcdef\n")
	p := startRole(t, "master", squallCmd(t, []string{
		"SQUALL_DATA_DIR=" + filepath.Join(dir, "data"),
		"SQUALL_TOKEN_HMAC_KEY_FILE=" + keyFile,
		"SQUALL_NODE_ID=ignored-the-flag-wins",
	}, "master", "--node-id", "m1", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap"))

	// The bound HTTP address is logged at start.
	httpAddr := p.Addr
	get := func(path, token string) (int, []byte) {
		return apitest.Call(t.Context(), http.MethodGet, p.Base+path, token, nil, "")
	}
	p.WaitReady(t)

	token := strings.TrimSpace(mustRun(t, "token", "--user", "ops", "--auth", "all=root:view", "--hmac-key-file", keyFile))
	code, body := get("/squall/v1/cluster", token)
	var info struct {
		NodeID   string `json:"node_id"`
		LeaderID string `json:"leader_id"`
		Members  []struct {
			ID       string `json:"id"`
			HTTPAddr string `json:"http_addr"`
		} `json:"members"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &info) != nil || info.NodeID != "m1" || info.LeaderID != "m1" ||
		len(info.Members) != 1 || info.Members[0].HTTPAddr != httpAddr {
		t.Fatalf("cluster: %d %s", code, body)
	}
	if code, body := get("/squall/v1/cluster", ""); code != http.StatusUnauthorized {
		t.Fatalf("cluster without a token: %d %s", code, body)
	}
	if code, body := get("/api/v2_beta/config/active/tree/info/all", token); code != http.StatusOK {
		t.Fatalf("config API: %d %s", code, body)
	}

	if err := p.End(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Logs.String())
	}
	if !strings.Contains(p.Logs.String(), `"msg":"master stopped"`) {
		t.Fatalf("no clean shutdown in the log:\n%s", p.Logs.String())
	}
}

// TestMasterUnsignedWarning: a master that accepts unsigned tokens says so
// in its log, and one that verifies signatures does not.
func TestMasterUnsignedWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filetest.Write(t, dir, "token.key", "0123456789abcdef0123456789abcdef")
	for _, tc := range []struct {
		flag string
		want bool
	}{{"--allow-unsigned-tokens", true}, {"--token-hmac-key-file=" + key, false}} {
		args := []string{"master", "--node-id", "m1", "--data-dir", filepath.Join(t.TempDir(), "data"), "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap", tc.flag}
		p := startRole(t, "master", squallCmd(t, nil, args...))
		if got := strings.Contains(p.Logs.String(), "unsigned tokens are accepted"); got != tc.want {
			t.Errorf("%s: warning logged %v, want %v:\n%s", tc.flag, got, tc.want, p.Logs.String())
		}
	}
}
