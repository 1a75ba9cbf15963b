package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/config"
)

// TestTreeCommands runs `squall tree` against a live master: the history
// of two deploys (one with a message), a version's tree, the diff of two
// versions, the drift of a file from the active tree (exit 2 with
// --exit-code, 0 without drift), a rollback refused while a draft exists
// and then forced, and refusals that print nothing on stdout.
func TestTreeCommands(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	dir := t.TempDir()
	tokenFile, token := adminTokenFile(t, dir)
	draft := apitest.NewDraft(t, base, token)
	apitest.AddRuleset(t, base, token, draft, "rs1")
	apitest.Deploy(t, base, token, draft, "first deploy")
	apitest.AddRuleset(t, base, token, draft, "rs2")
	apitest.Deploy(t, base, token, draft, "")

	conn := []string{"--master", base, "--token-file", tokenFile}
	tree := func(args ...string) string {
		t.Helper()
		return mustRun(t, append(append([]string{"tree"}, args...), conn...)...)
	}
	// fails runs a command expected to exit with code, and returns its
	// stdout and stderr.
	fails := func(code int, args ...string) (string, string) {
		t.Helper()
		got, stdout, stderr := runBinary(t, append(append([]string{"tree"}, args...), conn...)...)
		if got != code {
			t.Fatalf("tree %v: exit %d, want %d\nstdout %s\nstderr %s", args, got, code, stdout, stderr)
		}
		return stdout, stderr
	}

	hist := tree("history")
	lines := strings.Split(strings.TrimSpace(hist), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "2 ") || !strings.HasPrefix(lines[2], "1 ") ||
		!strings.Contains(lines[2], "first deploy") || !strings.Contains(lines[2], "ops") {
		t.Fatalf("history:\n%s", hist)
	}

	v1 := filepath.Join(dir, "v1.json")
	if out := tree("show", "1", "-o", v1); out != "" {
		t.Fatalf("show -o printed %q", out)
	}
	raw, err := os.ReadFile(v1)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := config.DecodeExport(raw)
	if err != nil || ex.Node.Child("rs1") == nil || ex.Node.Child("rs2") != nil {
		t.Fatalf("version 1's file %s: %v", raw, err)
	}
	if got := tree("diff", "1", "2"); got != "+ root.rs2\n" {
		t.Fatalf("diff 1 2: %q", got)
	}

	// Drift: the active tree has rs2, the file does not.
	if out, stderr := fails(exitDrift, "diff", "--file", v1, "--exit-code"); out != "- root.rs2\n" || !strings.Contains(stderr, "differs from") {
		t.Fatalf("drift: stdout %q, stderr %q", out, stderr)
	}
	if out := tree("diff", "--file", v1); out != "- root.rs2\n" {
		t.Fatalf("drift without --exit-code: %q", out)
	}
	active := filepath.Join(dir, "active.json")
	tree("show", "active", "-o", active)
	if out := tree("diff", "--file", active, "--exit-code"); out != "no differences\n" {
		t.Fatalf("no drift: %q", out)
	}

	// The draft still exists: refused, nothing printed; forced, done.
	if out, stderr := fails(1, "rollback", "1"); out != "" || !strings.Contains(stderr, "DRAFT_EXISTS") {
		t.Fatalf("rollback with a draft: stdout %q, stderr %q", out, stderr)
	}
	if out := tree("rollback", "1", "--force", "--message", "undo rs2"); !strings.Contains(out, "version 3") {
		t.Fatalf("rollback: %q", out)
	}
	if out := tree("diff", "--file", v1, "--exit-code"); out != "no differences\n" {
		t.Fatalf("after the rollback: %q", out)
	}
	if hist := tree("history", "--limit", "1"); !strings.Contains(hist, "[rollback to 1] undo rs2") || !strings.Contains(hist, "--before 3") {
		t.Fatalf("history after the rollback:\n%s", hist)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "99"}, "VERSION_NOT_FOUND"},
		{[]string{"rollback", "99", "--force"}, "VERSION_NOT_FOUND"},
		{[]string{"show", "x"}, "not a version number"},
		{[]string{"diff", "1"}, "two versions"},
		{[]string{"history", "--auth", "nope"}, "403"},
	} {
		if out, stderr := fails(1, tc.args...); out != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: stdout %q, stderr %q, want %q", tc.args, out, stderr, tc.want)
		}
	}
}
