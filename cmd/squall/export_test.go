package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/cmd/squall/internal/apitest"
	"github.com/squallhq/squall/internal/filetest"
)

// TestExport runs `squall export` against a live master: the active tree,
// a subtree, the draft, to a file; and refusals with nothing on stdout.
func TestExport(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	dir := t.TempDir()
	tokenFile, token := adminTokenFile(t, dir)
	call := func(method, path, body string) string {
		t.Helper()
		return string(apitest.MustCall(t, method, base+path, token, body))
	}
	// A deployed tree with a ruleset, and a draft that differs from it.
	draft := apitest.NewDraft(t, base, token)
	apitest.AddRuleset(t, base, token, draft, "deployed_rs")
	apitest.Deploy(t, base, token, draft, "")
	apitest.AddRuleset(t, base, token, draft, "draft_only_rs")

	active := mustRun(t, "export", "--master", base, "--token-file", tokenFile)
	if !strings.Contains(active, `"deployed_rs"`) || strings.Contains(active, "draft_only_rs") || !strings.HasPrefix(active, "{") {
		t.Fatalf("active export:\n%s", active)
	}
	if again := call("GET", "/api/v2_beta/config/active/tree/export/all/root", ""); strings.TrimSpace(again) != strings.TrimSpace(active) {
		t.Errorf("squall export differs from the API's export file")
	}
	if sub := mustRun(t, "export", "--master", base, "--token-file", tokenFile, "--node-path", "root,deployed_rs"); !strings.Contains(sub, `"Ruleset"`) || strings.Contains(sub, `"Filter"`) {
		t.Errorf("subtree export:\n%s", sub)
	}
	out := filepath.Join(dir, "draft.json")
	if got := mustRun(t, "export", "--master", base, "--token-file", tokenFile, "--draft", draft, "-o", out); got != "" {
		t.Errorf("stdout with --output: %q", got)
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.Contains(b, []byte("draft_only_rs")) {
		t.Errorf("draft export file: %v\n%s", err, b)
	}
	// The export is a tree squall process reads.
	evFile := filetest.Write(t, dir, "event.json", `{"type":"t","created_ms":1,"payload":{}}`)
	if got := mustRun(t, "process", "--tree", out, "--event", evFile); !strings.Contains(got, "draft_only_rs") {
		t.Errorf("squall process on the export:\n%s", got)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--auth", "nope"}, "403"},
		{[]string{"--node-path", "root,missing"}, "NODE_NOT_FOUND"},
		{[]string{"--draft", "nope"}, "DRAFT_NOT_FOUND"},
	} {
		code, stdout, stderr := runBinary(t, append([]string{"export", "--master", base, "--token-file", tokenFile}, tc.args...)...)
		if code == 0 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}
