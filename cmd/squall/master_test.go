package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/internal/calltest"
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
	bin := filepath.Join(dir, "squall")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	keyFile := filetest.Write(t, dir, "hmac.key", "0123456789abcdef0123456789abcdef\n")

	cmd := exec.Command(bin, "master", "--node-id", "m1", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap")
	cmd.Env = append(os.Environ(),
		"SQUALL_DATA_DIR="+filepath.Join(dir, "data"),
		"SQUALL_TOKEN_HMAC_KEY_FILE="+keyFile,
		"SQUALL_NODE_ID=ignored-the-flag-wins",
	)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	logs := make(chan map[string]any, 256)
	var logText lockedBuffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logText.Write(append(sc.Bytes(), '\n'))
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				select {
				case logs <- rec:
				default:
				}
			}
		}
		close(logs)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	// The bound HTTP address is logged at start.
	var httpAddr string
	deadline := time.After(30 * time.Second)
	for httpAddr == "" {
		select {
		case rec, ok := <-logs:
			if !ok {
				t.Fatalf("squall master exited: %v\n%s", <-exited, logText.String())
			}
			if rec["msg"] == "master started" {
				httpAddr, _ = rec["http_addr"].(string)
			}
		case <-deadline:
			t.Fatal("no \"master started\" log line within 30s")
		}
	}
	base := "http://" + httpAddr
	get := func(path, token string) (int, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := calltest.Client().Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	// A separate process gives no signal to wait on: poll, bounded.
	ready := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if code, _ := get("/readyz", ""); code == http.StatusOK {
			break
		}
		select {
		case <-tick.C:
		case <-ready:
			t.Fatalf("not ready within 30s:\n%s", logText.String())
		}
	}

	out, err := exec.CommandContext(t.Context(), bin, "token", "--user", "ops", "--auth", "all=root:view", "--hmac-key-file", keyFile).Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	token := strings.TrimSpace(string(out))
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

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) || err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logText.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("squall master did not exit within 30s of SIGTERM")
	}
	if !strings.Contains(logText.String(), `"msg":"master stopped"`) {
		t.Fatalf("no clean shutdown in the log:\n%s", logText.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and other readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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
		p := startLogged(t, exec.Command(squallBinary(t), args...), "master started", "http_addr")
		if got := strings.Contains(p.logs.String(), "unsigned tokens are accepted"); got != tc.want {
			t.Errorf("%s: warning logged %v, want %v:\n%s", tc.flag, got, tc.want, p.logs.String())
		}
	}
}
