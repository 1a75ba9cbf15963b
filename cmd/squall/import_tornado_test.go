package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/master"
)

// writeTree writes files (path relative to dir -> content) and returns dir.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rules.d")
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestImportTornadoBinary_unsupportedActions checks that actions no executor
// handles are listed with their ruleset and rule, and fail the conversion
// unless --allow-unsupported-actions.
func TestImportTornadoBinary_unsupportedActions(t *testing.T) {
	t.Parallel()
	wantLines := []string{
		`action "icinga2" in ruleset root.ruleset_01, rule icinga_process_check_result`,
		`action "director" in ruleset root.ruleset_01, rule director`,
		`action "smart_monitoring_check_result" in ruleset root.ruleset_01, rule smart_monitoring_check_result`,
	}
	code, stdout, stderr := runBinary(t, "import-tornado", "testdata/rules.d")
	if code == 0 || stdout != "" {
		t.Fatalf("exit %d, stdout %q: want a failure and nothing printed", code, stdout)
	}
	for _, want := range append(wantLines, "3 actions have no executor", "--allow-unsupported-actions") {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, `"elasticsearch"`) || strings.Contains(stderr, `"foreach"`) {
		t.Errorf("stderr lists a supported action:\n%s", stderr)
	}

	// A trailing slash names the same folder.
	code, stdout, stderr = runBinary(t, "import-tornado", "testdata/rules.d/", "--allow-unsupported-actions")
	if code != 0 {
		t.Fatalf("with --allow-unsupported-actions: exit %d: %s", code, stderr)
	}
	for _, want := range append(wantLines, "warning") {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	exp, err := config.DecodeExport([]byte(stdout))
	if err != nil {
		t.Fatalf("the export file does not decode: %v", err)
	}
	if rs := exp.Node.Find([]string{"ruleset_01"}); rs == nil || len(rs.Rules) != 8 {
		t.Errorf("ruleset_01 of the export: %+v", rs)
	}

	// An action inside a foreach is checked too; a tree of supported
	// actions converts without a word.
	rule := func(name, actions string) string {
		return `{"name": "` + name + `", "description": "", "continue": true, "active": true,
			"constraint": {"WHERE": null, "WITH": {}}, "actions": ` + actions + `}`
	}
	files := map[string]string{
		"version.json":           `{"version": "2.0"}`,
		"rs/ruleset.json":        `{"type": "ruleset", "name": "rs"}`,
		"rs/rules/010_log.json":  rule("log", `[{"id": "logger", "payload": {}}]`),
		"rs/rules/020_each.json": rule("each", `[{"id": "foreach", "payload": {"target": "${event.payload.xs}", "actions": [{"id": "logger", "payload": {}}, {"id": "nagios", "payload": {}}]}}]`),
	}
	code, stdout, stderr = runBinary(t, "import-tornado", writeTree(t, files))
	if code == 0 || stdout != "" || !strings.Contains(stderr, `1 action has no executor`) || !strings.Contains(stderr, `action "nagios" in ruleset root.rs, rule each`) || strings.Contains(stderr, `"logger"`) {
		t.Errorf("nested unsupported action: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	files["rs/rules/020_each.json"] = rule("each", `[{"id": "foreach", "payload": {"target": "${event.payload.xs}", "actions": [{"id": "logger", "payload": {}}]}}]`)
	code, stdout, stderr = runBinary(t, "import-tornado", writeTree(t, files))
	if code != 0 || stderr != "" || !strings.Contains(stdout, `"foreach"`) {
		t.Errorf("supported actions only: exit %d, stderr %q", code, stderr)
	}
}

// TestImportTornadoBinary_notAFolder checks the messages for a folder that
// does not exist, a file, and a folder without version.json.
func TestImportTornadoBinary_notAFolder(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "rules.d")
	file := filetest.Write(t, t.TempDir(), "rules.json", "{}")
	noVersion := writeTree(t, map[string]string{"rs/ruleset.json": `{"type": "ruleset", "name": "rs"}`})
	for _, tc := range []struct{ dir, want string }{
		{missing, `import-tornado: no Tornado rules folder at "` + missing + `" (expected the rules.d directory: version.json and one folder per node holding filter.json, iterator.json or ruleset.json)`},
		{file, `import-tornado: "` + file + `" is a file, not a Tornado rules folder (expected the rules.d directory`},
		{noVersion, "rules.d has no version.json"},
	} {
		code, stdout, stderr := runBinary(t, "import-tornado", tc.dir)
		if code == 0 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q", tc.dir, code, stdout, stderr, tc.want)
		}
		if strings.Contains(stderr, "read .") {
			t.Errorf("%s: the message names the folder as '.': %s", tc.dir, stderr)
		}
	}
}

// TestImportTornadoBinary_existingDraft checks that --master does not
// replace another draft unless --force, and names its owner.
func TestImportTornadoBinary_existingDraft(t *testing.T) {
	t.Parallel()
	base := startMaster(t, "--allow-unsigned-tokens")
	dir := t.TempDir()
	tokenOf := func(user string) string {
		p := filepath.Join(dir, user+".token")
		if err := os.WriteFile(p, []byte(mustRun(t, "token", "--user", user, "--auth", "all=root:edit", "--unsigned")), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	alice, bob := tokenOf("alice"), tokenOf("bob")
	current := func() *master.DraftInfo {
		t.Helper()
		tok, _ := os.ReadFile(alice)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/squall/v1/draft", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := calltest.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d *master.DraftInfo
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /squall/v1/draft: %d %v", resp.StatusCode, err)
		}
		return d
	}
	importAs := func(token string, extra ...string) (int, string, string) {
		return runBinary(t, append([]string{"import-tornado", "testdata/rules.d", "--allow-unsupported-actions", "--master", base, "--token-file", token}, extra...)...)
	}

	code, stdout, stderr := importAs(alice)
	aliceDraft := strings.TrimSpace(stdout)
	if code != 0 || aliceDraft == "" {
		t.Fatalf("first import: exit %d, stdout %q: %s", code, stdout, stderr)
	}
	if d := current(); d == nil || d.ID != aliceDraft || d.Owner != "alice" {
		t.Fatalf("draft %+v, want %s of alice", d, aliceDraft)
	}

	code, stdout, stderr = importAs(bob)
	if code == 0 || stdout != "" {
		t.Fatalf("bob replaced alice's draft: exit %d, stdout %q", code, stdout)
	}
	for _, want := range []string{`owned by "alice"`, aliceDraft, "--force"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, stderr)
		}
	}
	if d := current(); d == nil || d.ID != aliceDraft || d.Owner != "alice" {
		t.Fatalf("after a refused import the draft is %+v, want %s of alice", d, aliceDraft)
	}

	// Into alice's draft by id: the master refuses bob (NOT_OWNER).
	code, stdout, stderr = importAs(bob, "--draft", aliceDraft)
	if code == 0 || stdout != "" || !strings.Contains(stderr, "NOT_OWNER") || !strings.Contains(stderr, "alice") {
		t.Errorf("bob imported into alice's draft: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}

	code, stdout, stderr = importAs(bob, "--force")
	bobDraft := strings.TrimSpace(stdout)
	if code != 0 || bobDraft == "" || bobDraft == aliceDraft {
		t.Fatalf("--force: exit %d, stdout %q: %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "replacing draft "+aliceDraft+` owned by "alice"`) {
		t.Errorf("--force gave no warning: %s", stderr)
	}
	if d := current(); d == nil || d.ID != bobDraft || d.Owner != "bob" {
		t.Errorf("after --force the draft is %+v, want %s of bob", d, bobDraft)
	}
}
