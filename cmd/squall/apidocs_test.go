package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/calltest"
)

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
	token := unsignedToken(t, "alice", "all=root:admin")
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

// TestImportTornadoIntoMaster migrates Tornado's rules.d into a draft of a
// live master in one command.
func TestImportTornadoIntoMaster(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	tokenFile, token := adminTokenFile(t, t.TempDir())
	draft := strings.TrimSpace(mustRun(t, "import-tornado", "testdata/rules.d", "--allow-unsupported-actions", "--master", base, "--token-file", tokenFile))
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
	code, stdout, stderr := runBinary(t, "import-tornado", "testdata/rules.d", "--allow-unsupported-actions", "--force", "--master", base, "--token-file", tokenFile, "--auth", "nope")
	if code == 0 || stdout != "" || !strings.Contains(stderr, "create a draft") || !strings.Contains(stderr, "nope") {
		t.Errorf("an unknown authorization: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
