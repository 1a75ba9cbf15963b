package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/filetest"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/api"
	"github.com/squallhq/squall/master/findings"
	"github.com/squallhq/squall/master/mastertest"
	"github.com/squallhq/squall/master/node"
)

// The worked example of docs: a tree and its tests.
const (
	exampleDir   = "../../docs/examples/config-as-code"
	exampleTree  = exampleDir + "/tree.json"
	exampleTests = exampleDir + "/tests"
)

// applyMaster is a one-node master cluster with an admin token file.
type applyMaster struct {
	c         *mastertest.Cluster
	url       string
	tokenFile string
}

func newApplyMaster(t *testing.T) *applyMaster {
	t.Helper()
	c := mastertest.TestCluster(t, 1, mastertest.WithSetup(func(_ int, s *master.Server) {
		// The APIs of squall master: configuration, versions, draft tests.
		if err := node.MountAPIs(s, api.Default(), findings.Default(), nil, nil); err != nil {
			t.Fatal(err)
		}
	}))
	tokenFile := filetest.Write(t, t.TempDir(), "token", c.AdminToken)
	return &applyMaster{c: c, url: c.URL(c.Leader()), tokenFile: tokenFile}
}

// args are the flags naming the master.
func (m *applyMaster) args() []string {
	return []string{"--master", m.url, "--token-file", m.tokenFile, "--auth", "root"}
}

// active returns the master's active tree as an export file.
func (m *applyMaster) active(t *testing.T) []byte {
	t.Helper()
	resp, body := m.c.Get(m.c.Leader(), "/api/v2_beta/config/active/tree/export/root/root", m.c.AdminToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("export the active tree: %d %s", resp.StatusCode, body)
	}
	return body
}

// draft returns the master's draft information: "null" without one.
func (m *applyMaster) draft(t *testing.T) string {
	t.Helper()
	resp, body := m.c.Get(m.c.Leader(), "/squall/v1/draft", m.c.AdminToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /squall/v1/draft: %d %s", resp.StatusCode, body)
	}
	return strings.TrimSpace(string(body))
}

// sameTree reports whether an export file holds the tree of the file at path.
func sameTree(t *testing.T, export []byte, path string) bool {
	t.Helper()
	got, err := config.DecodeExport(export)
	if err != nil {
		t.Fatal(err)
	}
	want, err := loadTree(path)
	if err != nil {
		t.Fatal(err)
	}
	return config.NodeEqual(got.Node, want)
}

// breakTree writes a copy of the example tree whose disk_full rule pages
// another team: its tests fail.
func breakTree(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(exampleTree)
	if err != nil {
		t.Fatal(err)
	}
	broken := bytes.Replace(b, []byte(`"team": "storage"`), []byte(`"team": "dba"`), 1)
	if bytes.Equal(broken, b) {
		t.Fatal("the example tree has no storage team to replace")
	}
	return filetest.Write(t, t.TempDir(), "tree.json", string(broken))
}

// TestTreeApply applies the worked example to a real master: --dry-run
// changes nothing, apply deploys with the changes printed, a second apply
// has nothing to do, failing tests refuse before anything changes, an
// existing draft is left alone, and bad input exits 2.
func TestTreeApply(t *testing.T) {
	t.Parallel()
	m := newApplyMaster(t)
	before := m.active(t)

	code, stdout, stderr := runSquall(t, "", append([]string{"tree", "apply", "--file", exampleTree, "--tests", exampleTests, "--dry-run"}, m.args()...)...)
	if code != 0 {
		t.Fatalf("--dry-run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"tests: ok: 5 cases passed (2 files)",
		"would change: 1 change to the active tree:\n  + root.alertmanager\n",
		"dry run: nothing was changed",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--dry-run output lacks %q:\n%s", want, stdout)
		}
	}
	if after := m.active(t); !bytes.Equal(after, before) {
		t.Errorf("--dry-run changed the active tree:\n%s", after)
	}
	if d := m.draft(t); d != "null" {
		t.Errorf("--dry-run left a draft: %s", d)
	}

	// Failing tests: nothing changes, not even a draft.
	code, stdout, stderr = runSquall(t, "", append([]string{"tree", "apply", "--file", breakTree(t), "--tests", exampleTests}, m.args()...)...)
	if code != 1 || !strings.Contains(stdout, `FAIL ../../docs/examples/config-as-code/tests/routing.json: "a full disk pages the storage team with the host": root/alertmanager/alerts/route/disk_full: action logger payload.team: expected "storage", got "dba"`) ||
		!strings.Contains(stderr, "a rule test failed: 1 of 5 cases failed (2 files); nothing was changed") {
		t.Errorf("failing tests: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if after := m.active(t); !bytes.Equal(after, before) {
		t.Errorf("a failed apply changed the active tree:\n%s", after)
	}
	if d := m.draft(t); d != "null" {
		t.Errorf("a failed apply left a draft: %s", d)
	}

	code, stdout, stderr = runSquall(t, "", append([]string{"tree", "apply", "--file", exampleTree, "--tests", exampleTests, "--message", "route alerts"}, m.args()...)...)
	if code != 0 || !strings.Contains(stdout, "applying: 1 change to the active tree:\n  + root.alertmanager\n") || !strings.Contains(stdout, "deployed draft ") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !sameTree(t, m.active(t), exampleTree) {
		t.Errorf("the active tree is not the file's:\n%s", m.active(t))
	}
	// The masters keep the tests with the version.
	if !strings.Contains(stdout, "tests: attached 2 test files (5 cases) to draft ") {
		t.Errorf("apply did not attach the tests:\n%s", stdout)
	}
	resp, body := m.c.Get(m.c.Leader(), api.VersionsPath+"/active/tests", m.c.AdminToken)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"cases":5`) {
		t.Errorf("the active tree's tests: %d %s", resp.StatusCode, body)
	}
	if d := m.draft(t); d != "null" {
		t.Errorf("apply left a draft: %s", d)
	}
	deployed := m.active(t)

	code, stdout, _ = runSquall(t, "", append([]string{"tree", "apply", "--file", exampleTree}, m.args()...)...)
	if code != 0 || !strings.Contains(stdout, "the active tree is already the file's: nothing to deploy") {
		t.Errorf("second apply: exit %d\n%s", code, stdout)
	}
	if d := m.draft(t); d != "null" {
		t.Errorf("a second apply left a draft: %s", d)
	}

	// A change shows as such; the broken tree's change, without tests.
	code, stdout, _ = runSquall(t, "", append([]string{"tree", "apply", "--file", breakTree(t), "--dry-run"}, m.args()...)...)
	if code != 0 || !strings.Contains(stdout, "would change: 1 change to the active tree:\n  ~ root.alertmanager.alerts.route: rules changed disk_full\n") {
		t.Errorf("dry run of a change: exit %d\n%s", code, stdout)
	}

	// Someone's draft is not replaced without --force.
	resp, body = m.c.Do(m.c.Leader(), http.MethodPost, "/api/v2_beta/config/drafts/root", m.c.AdminToken, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create a draft: %d %s", resp.StatusCode, body)
	}
	draft := m.draft(t)
	code, _, stderr = runSquall(t, "", append([]string{"tree", "apply", "--file", breakTree(t)}, m.args()...)...)
	if code != 1 || !strings.Contains(stderr, "the master already has a draft") || !strings.Contains(stderr, "--force") {
		t.Errorf("apply over a draft: exit %d\n%s", code, stderr)
	}
	code, stdout, _ = runSquall(t, "", append([]string{"tree", "apply", "--file", breakTree(t), "--dry-run"}, m.args()...)...)
	if code != 0 || !strings.Contains(stdout, "apply would stop, or replace it with --force") {
		t.Errorf("dry run over a draft: exit %d\n%s", code, stdout)
	}
	if d := m.draft(t); d != draft {
		t.Errorf("the draft changed: %s, was %s", d, draft)
	}
	// That draft started with the active tree's tests, which pass on it.
	code, stdout, stderr = runSquall(t, "", append([]string{"tree", "tests", "run"}, m.args()...)...)
	if code != 0 || !strings.Contains(stdout, ": 5 cases passed") {
		t.Errorf("tree tests run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runSquall(t, "", append([]string{"tree", "tests", "put", filepath.Join(exampleTests, "quiet.json")}, m.args()...)...)
	if code != 0 || !strings.Contains(stdout, "1 test file, 3 cases") {
		t.Errorf("tree tests put: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if after := m.active(t); !bytes.Equal(after, deployed) {
		t.Errorf("a refused apply changed the active tree:\n%s", after)
	}
}

// TestTreeApply_badInput checks that bad input exits 2, names the file,
// and changes nothing.
func TestTreeApply_badInput(t *testing.T) {
	t.Parallel()
	m := newApplyMaster(t)
	before := m.active(t)
	dir := t.TempDir()
	subtree := filetest.Write(t, dir, "subtree.json", `{"version": "1.1", "Ruleset": {"name": "rs", "rules": []}}`)
	badTests := filepath.Join(dir, "tests")
	if err := os.Mkdir(badTests, 0o755); err != nil {
		t.Fatal(err)
	}
	filetest.Write(t, badTests, "bad.json", `{"cases": [{"name": "x", "event": {"type": "t", "created_ms": 1, "payload": {}}, "match": ["root/r"], "extra": 1}]}`)
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"missing file", []string{"--file", filepath.Join(dir, "nope.json")}, "nope.json: no such file"},
		{"not a whole tree", []string{"--file", subtree}, `subtree.json holds the Ruleset "rs", not a whole tree`},
		{"bad test file", []string{"--file", exampleTree, "--tests", badTests}, `bad.json: cases[0] ("x"): unknown field "extra"`},
		{"no --file", nil, "--file is required"},
		{"unknown flag", []string{"--file", exampleTree, "--mesage", "x"}, "unknown flag: --mesage"},
	} {
		code, stdout, stderr := runSquall(t, "", append(append([]string{"tree", "apply"}, tc.args...), m.args()...)...)
		if code != 2 || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%s: exit %d, stderr %q, want 2 and %q\n%s", tc.name, code, stderr, tc.stderr, stdout)
		}
	}
	if after := m.active(t); !bytes.Equal(after, before) {
		t.Errorf("bad input changed the active tree:\n%s", after)
	}
	if d := m.draft(t); d != "null" {
		t.Errorf("bad input left a draft: %s", d)
	}
}

// TestTreeApply_tornadoFolder applies a Tornado rules folder.
func TestTreeApply_tornadoFolder(t *testing.T) {
	t.Parallel()
	m := newApplyMaster(t)
	code, stdout, stderr := runSquall(t, "", append([]string{"tree", "apply", "--file", "testdata/rules.d"}, m.args()...)...)
	if code != 0 || !strings.Contains(stdout, "deployed draft ") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Its actions without an executor are deployed, with a warning.
	if !strings.Contains(stderr, "tree apply: warning: 3 actions have no executor in Squall") || !strings.Contains(stderr, `action "icinga2" in ruleset root.ruleset_01`) {
		t.Errorf("no warning of the unsupported actions:\n%s", stderr)
	}
	if !sameTree(t, m.active(t), "testdata/rules.d") {
		t.Errorf("the active tree is not the folder's:\n%s", m.active(t))
	}
}

// TestConfigAsCodeExample runs the worked example of
// docs/examples/config-as-code as its CI job does: the job's script, with
// the squall binary on PATH, against a master started from the binary.
// check tests and shows the changes, apply deploys; a change that breaks a
// test fails check and is refused by apply.
func TestConfigAsCodeExample(t *testing.T) {
	t.Parallel()
	bin := squallBinary(t)
	base := startMaster(t, "--allow-unsigned-tokens")
	tokenFile, token := adminTokenFile(t, t.TempDir())
	repo := t.TempDir()
	if err := os.CopyFS(repo, os.DirFS(exampleDir)); err != nil {
		t.Fatal(err)
	}
	job := func(mode string) (int, string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "sh", filepath.Join(repo, "ci", "squall-ci.sh"), mode)
		cmd.Env = append(os.Environ(),
			"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"SQUALL_MASTER="+base, "SQUALL_TOKEN_FILE="+tokenFile, "SQUALL_MESSAGE=example")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			return exit.ExitCode(), string(out)
		case err != nil:
			t.Fatalf("ci/squall-ci.sh %s: %v\n%s", mode, err, out)
		}
		return 0, string(out)
	}
	active := func() []byte {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v2_beta/config/active/tree/export/all/root", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, body := calltest.Do(t, calltest.Client().Do, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("export: %d %s", resp.StatusCode, body)
		}
		return body
	}
	before := active()

	code, out := job("check")
	if code != 0 || !strings.Contains(out, "ok: 5 cases passed (2 files)") || !strings.Contains(out, "+ root.alertmanager\n") || !strings.Contains(out, "dry run: nothing was changed") {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "rule-tests.xml")); err != nil || xml.Unmarshal(b, new(struct{})) != nil || !bytes.Contains(b, []byte(`tests="5" failures="0"`)) {
		t.Errorf("JUnit report: %v\n%s", err, b)
	}
	if !bytes.Equal(active(), before) {
		t.Errorf("check changed the active tree")
	}

	if code, out := job("apply"); code != 0 || !strings.Contains(out, "deployed draft") {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if !sameTree(t, active(), exampleTree) {
		t.Fatalf("the active tree is not the example's:\n%s", active())
	}
	deployed := active()

	// A change that breaks a test: check fails, apply refuses.
	b, err := os.ReadFile(filepath.Join(repo, "tree.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "tree.json"), bytes.Replace(b, []byte(`"second": "DiskFull"`), []byte(`"second": "DiskFul"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = job("check")
	if code != 1 || !strings.Contains(out, `FAIL tests/routing.json: "a full disk pages the storage team with the host": root/alertmanager/alerts/route/disk_full: match: expected Matched, got NotMatched at root/alertmanager/alerts[0]/route/disk_full`) {
		t.Errorf("check of a broken tree: exit %d\n%s", code, out)
	}
	code, out = job("apply")
	if code != 1 || !strings.Contains(out, "nothing was changed") {
		t.Errorf("apply of a broken tree: exit %d\n%s", code, out)
	}
	if !bytes.Equal(active(), deployed) {
		t.Errorf("a refused apply changed the active tree:\n%s", active())
	}

	// The CI configuration runs the same script.
	yml, err := os.ReadFile(filepath.Join(exampleDir, "ci", "gitlab-ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ci/squall-ci.sh check", "ci/squall-ci.sh apply", "junit: rule-tests.xml"} {
		if !bytes.Contains(yml, []byte(want)) {
			t.Errorf("ci/gitlab-ci.yml lacks %q", want)
		}
	}
}
