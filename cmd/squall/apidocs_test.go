package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/calltest"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildOut  []byte
)

// squallBinary builds the binary once for the package's tests.
func squallBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "squall-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "squall")
		buildOut, buildErr = exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build: %v\n%s", buildErr, buildOut)
	}
	return builtBin
}

// startMaster starts `squall master --bootstrap` with extra args, waits
// until it is ready and returns its base URL. The process is killed when
// the test ends.
func startMaster(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	all := append([]string{"master", "--node-id", "m1", "--data-dir", filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--bootstrap"}, args...)
	p := startLogged(t, exec.Command(squallBinary(t), all...), "master started", "http_addr")
	base := "http://" + p.addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := calltest.Client().Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within 30s:\n%s", p.logs.String())
		}
		// A separate process gives no signal to wait on: poll, bounded.
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// adminTokenFile writes an unsigned admin token (authorization all at the
// root, as squall token --unsigned mints it) into a file of dir, for the
// --token-file of a binary, and returns the file and the token.
func adminTokenFile(t *testing.T, dir string) (file, token string) {
	t.Helper()
	token = strings.TrimSpace(mustRun(t, squallBinary(t), "token", "--user", "ops", "--auth", "all=root:admin", "--unsigned"))
	file = filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, token
}

// docCommands returns the curl commands of docs/api.md's sh blocks, in
// order, each with the status its "# NNN" comment expects (0: any 2xx).
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	b, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	status := regexp.MustCompile(`^# (\d{3})\b`)
	var cmds []docCommand
	for _, c := range shCommands(string(b)) {
		if !strings.Contains(c.text, "$SQUALL") {
			continue
		}
		dc := docCommand{text: c.text}
		for _, line := range c.comments {
			if m := status.FindStringSubmatch(line); m != nil {
				dc.status, _ = strconv.Atoi(m[1])
			}
		}
		cmds = append(cmds, dc)
	}
	return cmds
}

// shCommand is one command of a Markdown sh block, with the comment lines
// that follow it.
type shCommand struct {
	text     string   // continuation lines and quoted newlines included
	comments []string // the comment lines after it, up to the next command
}

// shCommands returns the commands of the sh blocks of a Markdown text, in
// order. A command spans lines ending in a backslash and newlines inside
// single quotes; blank lines are skipped.
func shCommands(text string) []shCommand {
	var cmds []shCommand
	inBlock := false
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		switch {
		case line == "```sh":
			inBlock = true
			continue
		case line == "```":
			inBlock = false
			continue
		case !inBlock:
			continue
		}
		open := strings.Count(cur.String(), "'")%2 == 1
		if !open && strings.HasPrefix(line, "#") {
			if len(cmds) > 0 {
				cmds[len(cmds)-1].comments = append(cmds[len(cmds)-1].comments, line)
			}
			continue
		}
		if !open && strings.TrimSpace(line) == "" {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if !strings.HasSuffix(line, "\\") && strings.Count(cur.String(), "'")%2 == 0 {
			cmds = append(cmds, shCommand{text: cur.String()})
			cur.Reset()
		}
	}
	return cmds
}

type docCommand struct {
	text   string
	status int
}

// TestAPIDocs runs every curl example of docs/api.md against a live master,
// in order, so that the API reference cannot drift from the server.
func TestAPIDocs(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the API examples (.ci/run installs it)")
	}
	base := startMaster(t, "--allow-unsigned-tokens")
	token := strings.TrimSpace(mustRun(t, squallBinary(t), "token", "--user", "alice", "--auth", "all=root:admin", "--unsigned"))
	work := t.TempDir()
	cmds := docCommands(t)
	if len(cmds) < 20 {
		t.Fatalf("found only %d examples in docs/api.md", len(cmds))
	}
	draft := ""
	for _, c := range cmds {
		sh := exec.CommandContext(t.Context(), "bash", "-c", strings.TrimSpace(c.text)+` -w '\n%{http_code}'`)
		sh.Dir = work
		sh.Env = append(os.Environ(), "SQUALL="+base, "TOKEN="+token, "DRAFT="+draft)
		out, err := sh.Output()
		if err != nil {
			t.Fatalf("%s: %v", c.text, err)
		}
		text := strings.TrimSpace(string(out))
		i := strings.LastIndexByte(text, '\n')
		body, code := strings.TrimSpace(text[:max(i, 0)]), text[i+1:]
		got, _ := strconv.Atoi(code)
		if c.status != 0 && got != c.status || c.status == 0 && (got < 200 || got > 299) {
			t.Fatalf("%s\nanswered %d, want %d: %s", c.text, got, c.status, body)
		}
		var created struct {
			ID string `json:"id"`
		}
		if strings.Contains(c.text, "-X POST") && strings.HasSuffix(strings.TrimSpace(strings.Split(c.text, " -H")[0]), `/config/drafts/all"`) &&
			json.Unmarshal([]byte(body), &created) == nil && created.ID != "" {
			draft = created.ID
		}
	}
	if draft == "" {
		t.Fatal("no example created a draft")
	}
}

func mustRun(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return string(out)
}

// TestImportTornadoIntoMaster migrates Tornado's rules.d into a draft of a
// live master in one command.
func TestImportTornadoIntoMaster(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	bin := squallBinary(t)
	tokenFile, token := adminTokenFile(t, t.TempDir())
	draft := strings.TrimSpace(mustRun(t, bin, "import-tornado", "testdata/rules.d", "--allow-unsupported-actions", "--master", base, "--token-file", tokenFile))
	if draft == "" {
		t.Fatal("no draft id printed")
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/api/v2_beta/config/draft/tree/children/all/"+draft+"/root", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := calltest.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var children []struct{ Name string }
	if err := json.NewDecoder(resp.Body).Decode(&children); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	var names []string
	for _, c := range children {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "SNMPTRAD,ruleset_01,tenant_id_alpha,tenant_id_beta" {
		t.Errorf("draft children %v", names)
	}
	cmd := exec.CommandContext(t.Context(), bin, "import-tornado", "testdata/rules.d", "--allow-unsupported-actions", "--force", "--master", base, "--token-file", tokenFile, "--auth", "nope")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || len(out) != 0 || !strings.Contains(string(ee.Stderr), "create a draft") || !strings.Contains(string(ee.Stderr), "nope") {
		t.Errorf("an unknown authorization: %v, stdout %q", err, out)
	}
}
