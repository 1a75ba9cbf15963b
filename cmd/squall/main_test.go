package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/master/auth"
)

func runSquall(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestProcess(t *testing.T) {
	t.Parallel()
	request := `{"process_type":"Full","event":` + string(mustRead(t, "testdata/event.json")) + `}`
	tests := []struct {
		name      string
		stdin     string
		args      []string
		code      int
		stdout    string // substring; "" means stdout must be empty
		stderr    string // substring
		notStderr string
	}{
		{"event file", "", []string{"process", "--tree", "testdata/tree.json", "--event", "testdata/event.json"}, 0, `"msg": "alert 0: DiskFull"`, "", "action"},
		{"request on stdin with Full logs the logger action", request, []string{"process", "--tree", "testdata/tree.json", "--event", "-"}, 0, `"status": "Matched"`, `"msg":"action"`, ""},
		{"flag overrides the request", request, []string{"process", "--tree", "testdata/tree.json", "--event", "-", "--process-type", "SkipActions"}, 0, `"name": "critical_only"`, "", "action"},
		{"unknown process type", "", []string{"process", "--tree", "testdata/tree.json", "--event", "testdata/event.json", "--process-type", "Sometimes"}, 1, "", `"Sometimes"`, ""},
		{"invalid tree names the node and field", "", []string{"process", "--tree", "testdata/bad_regex.tree.json", "--event", "testdata/event.json"}, 1, "", "node root.rs, rule broken, constraint.WHERE.regex", ""},
		{"missing tree file", "", []string{"process", "--tree", "testdata/nope.json", "--event", "testdata/event.json"}, 1, "", "read tree", ""},
		{"tree is not an export file", "", []string{"process", "--tree", "testdata/event.json", "--event", "testdata/event.json"}, 1, "", "tree testdata/event.json", ""},
		{"invalid event", `{"type":"x","payload":{}}`, []string{"process", "--tree", "testdata/tree.json", "--event", "-"}, 1, "", "missing created_ms", ""},
		{"request without process_type is SkipActions", `{"event":` + string(mustRead(t, "testdata/event.json")) + `}`, []string{"process", "--tree", "testdata/tree.json", "--event", "-"}, 0, `"name": "critical_only"`, "", "action"},
		{"missing flags", "", []string{"process"}, 1, "", `required flag(s) "event", "tree" not set`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runSquall(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			if tc.stdout == "" && stdout != "" {
				t.Errorf("stdout must be empty on failure, got %s", stdout)
			}
			if !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, stdout)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr)
			}
			if tc.notStderr != "" && strings.Contains(stderr, tc.notStderr) {
				t.Errorf("stderr has %q:\n%s", tc.notStderr, stderr)
			}
			if code == 0 {
				var resp struct {
					Event  map[string]any `json:"event"`
					Result map[string]any `json:"result"`
				}
				if err := json.Unmarshal([]byte(stdout), &resp); err != nil || resp.Event["type"] != "alertmanager" || resp.Result["name"] != "root" {
					t.Errorf("stdout is not a test-event response (%v): %s", err, stdout)
				}
			}
		})
	}
}

// TestProcess_explain: --explain, or "explain": true in the request, adds
// the explanation to the answer; without either the answer has none; an
// explain that is not a boolean is refused.
func TestProcess_explain(t *testing.T) {
	t.Parallel()
	event := string(mustRead(t, "testdata/event.json"))
	tests := []struct {
		name    string
		stdin   string
		args    []string
		explain bool
	}{
		{"flag", "", []string{"--event", "testdata/event.json", "--explain"}, true},
		{"request", `{"explain": true, "event": ` + event + `}`, []string{"--event", "-"}, true},
		{"request false, flag", `{"explain": false, "event": ` + event + `}`, []string{"--event", "-", "--explain"}, true},
		{"neither", `{"explain": null, "event": ` + event + `}`, []string{"--event", "-"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runSquall(t, tc.stdin, append([]string{"process", "--tree", "testdata/tree.json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var resp struct {
				Result  map[string]any    `json:"result"`
				Explain *tree.Explanation `json:"explain"`
			}
			if err := json.Unmarshal([]byte(stdout), &resp); err != nil || resp.Result["name"] != "root" {
				t.Fatalf("not a test-event response (%v): %s", err, stdout)
			}
			if !tc.explain {
				if strings.Contains(stdout, `"explain"`) {
					t.Errorf("an explanation nobody asked for:\n%s", stdout)
				}
				return
			}
			if resp.Explain == nil || resp.Explain.Truncated {
				t.Fatalf("no explanation:\n%s", stdout)
			}
			var lines []string
			for _, e := range resp.Explain.Entries {
				lines = append(lines, e.Kind+" "+e.Path+" "+e.Rule+" "+e.Status)
			}
			want := []string{"filter root  Matched", "filter root/master  Matched", "iterator root/master/alerts  Matched",
				"rule root/master/alerts[0]/per_alert critical_only Matched", "rule root/master/alerts[1]/per_alert critical_only NotMatched"}
			if got := strings.Join(lines, "\n"); got != strings.Join(want, "\n") {
				t.Fatalf("entries:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
			}
			c := resp.Explain.Entries[4].Condition
			if c.Op != "equals" || c.Outcome || c.First.Expr != "${event.iterator.item.severity}" || string(c.First.Value) != `"warning"` {
				t.Errorf("the rule's condition: %+v %+v", c, c.First)
			}
		})
	}
	code, stdout, stderr := runSquall(t, `{"explain": "yes", "event": `+event+`}`, "process", "--tree", "testdata/tree.json", "--event", "-")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "explain") {
		t.Errorf("explain \"yes\": exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestBinary builds the real binary and runs it as a user would.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "squall")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin, "process", "--tree", "testdata/tree.json", "--event", "testdata/event.json").Output()
	if err != nil || !bytes.Contains(out, []byte(`"msg": "alert 0: DiskFull"`)) {
		t.Fatalf("process: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(t.Context(), bin, "process", "--tree", "testdata/bad_regex.tree.json", "--event", "testdata/event.json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || len(out) != 0 || !strings.Contains(stderr.String(), "invalid regular expression") {
		t.Fatalf("bad tree: err %v, stdout %q, stderr %q", err, out, stderr.String())
	}
	out, err = exec.CommandContext(t.Context(), bin, "version").Output()
	if err != nil || !bytes.HasPrefix(out, []byte("squall ")) {
		t.Fatalf("version: %v %s", err, out)
	}
	long, err := exec.CommandContext(t.Context(), bin, "--version").Output()
	if err != nil || !bytes.Equal(long, out) {
		t.Fatalf("--version: %v %q, want what version prints: %q", err, long, out)
	}
	out, err = exec.CommandContext(t.Context(), bin, "--help").Output()
	if err != nil || !bytes.Contains(out, []byte("process")) {
		t.Fatalf("help: %v %s", err, out)
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filetest.Write(t, dir, "hmac.key", "0123456789abcdef0123456789abcdef\n")
	code, out, errOut := runSquall(t, "", "token", "--user", "alice", "--auth", "all=root:admin", "--auth", "acme=root,acme:view,edit", "--tenant", "acme", "--hmac-key-file", keyFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	key, _ := auth.LoadHMACKey(keyFile)
	c, err := (&auth.Verifier{HMACKey: key}).Verify("Bearer " + strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	if c.User != "alice" || c.Tenant != "acme" || strings.Join(c.Auths["acme"].Path, ",") != "root,acme" || strings.Join(c.Auths["acme"].Roles, ",") != "view,edit" {
		t.Errorf("claims %+v", c)
	}
	code, out, _ = runSquall(t, "", "token", "--user", "bob", "--auth", "m=root,master:view", "--unsigned")
	if code != 0 {
		t.Fatal(code)
	}
	if c, err := (&auth.Verifier{AllowUnsigned: true}).Verify("Bearer " + strings.TrimSpace(out)); err != nil || c.User != "bob" {
		t.Fatalf("unsigned: %v %+v", err, c)
	}
	for _, args := range [][]string{
		{"token", "--user", "a", "--auth", "x=root:view"},
		{"token", "--user", "a", "--auth", "x=root:view", "--unsigned", "--hmac-key-file", keyFile},
		{"token", "--user", "a", "--auth", "x=root:fly", "--unsigned"},
		{"token", "--user", "a", "--auth", "x", "--unsigned"},
		{"token", "--user", "", "--unsigned"},
		{"token", "--user", "a", "--unsigned"}, // grants nothing
		{"token", "--user", "a", "--hmac-key-file", filepath.Join(dir, "missing")},
	} {
		if code, out, errOut := runSquall(t, "", args...); code != 1 || out != "" || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

func TestImportTornado(t *testing.T) {
	t.Parallel()
	code, out, errOut := runSquall(t, "", "import-tornado", "testdata/rules.d", "--allow-unsupported-actions")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The export file is a tree squall process accepts.
	file := filetest.Write(t, t.TempDir(), "tree.json", out)
	code, out, errOut = runSquall(t, `{"type":"something","created_ms":1,"metadata":{"tenant_id":"beta"},"payload":{}}`, "process", "--tree", file, "--event", "-")
	if code != 0 || !strings.Contains(out, `"name": "tenant_id_beta"`) {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if code, out, errOut := runSquall(t, "", "import-tornado", "testdata/nope"); code != 1 || out != "" || !strings.Contains(errOut, "nope") {
		t.Errorf("missing dir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
