package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/filetest"
)

// TestWebhookCheck runs the binary's squall webhook check on good and bad files: one
// line per problem naming the file and the field, exit 1, and nothing
// but ok lines and exit 0 for good files.
func TestWebhookCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hook := func(id, tokens string) string {
		return `{"id": "` + id + `", "tokens": ` + tokens + `, "collector_config": {"event_type": "e", "payload": {"data": "${@}"}}}`
	}
	filetest.Write(t, dir, "good.token", "0123456789abcdef0123\n")
	good := filetest.Write(t, dir, "good.json", hook("good", `[{"file": "good.token"}]`))
	signed := filetest.Write(t, dir, "signed.json", `{"id": "signed", "tokens": ["short"], "signature": {"scheme": "github", "secrets": [{"env": "SQUALL_TEST_HOOK_SECRET"}]},
		"collector_config": {"event_type": "e", "payload": {}}}`)
	loose := filetest.Write(t, dir, "loose.token", "0123456789abcdef0123\n")
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filetest.Write(t, dir, "bad.json", hook("bad", `[{"file": "loose.token"}, {"env": "SQUALL_TEST_UNSET"}]`))
	short := filetest.Write(t, dir, "short.json", hook("short", `["short"]`))
	dup := filetest.Write(t, dir, "dup.json", hook("good", `["0123456789abcdef0123"]`))
	notJSON := filetest.Write(t, dir, "broken.json", `{"id": `)
	wrongName := filetest.Write(t, dir, "hook.txt", hook("txt", `["0123456789abcdef0123"]`))
	check := func(args ...string) (int, string, string) {
		return runBinaryEnv(t, []string{"SQUALL_TEST_HOOK_SECRET=a-secret"}, append([]string{"webhook", "check"}, args...)...)
	}

	code, out, errOut := check(good, signed)
	if code != 0 || out != good+": ok, webhook good\n"+signed+": ok, webhook signed\n" {
		t.Fatalf("good files: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	code, out, errOut = check(good, bad, short, dup, notJSON, wrongName, filepath.Join(dir, "missing.json"))
	if code != 1 || !strings.Contains(errOut, "webhook check: 7 problems in 6 files") {
		t.Fatalf("bad files: exit %d, stderr %q", code, errOut)
	}
	want := []string{
		bad + `: tokens[0].file "loose.token": readable by group or others (mode 0644): make it readable by its owner only: chmod 600 ` + loose,
		bad + `: tokens[1].env "SQUALL_TEST_UNSET": environment variable unset or empty`,
		short + `: tokens[0]: shorter than 16 characters`,
		dup + `: id "good": duplicate id, already defined in ` + good,
		notJSON + `: (file): invalid JSON`,
		wrongName + `: (file) "hook.txt": not loaded: a webhook file's name ends in ".json"`,
		filepath.Join(dir, "missing.json") + `: `,
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d:\n%s\nwant a line starting with\n%s", i, lines[i], w)
		}
	}
	if strings.Contains(out, "0123456789abcdef0123") {
		t.Error("the output shows a token")
	}
}
