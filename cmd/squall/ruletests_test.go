package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/internal/filetest"
)

// TestTestCommand runs squall test: passing and failing files, a folder of
// test files, a Tornado rules folder as the tree, --junit, and the exit
// statuses of failures (1) and bad input (2).
func TestTestCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ev := `{"type": "alertmanager", "created_ms": 1, "payload": {"alerts": [{"status": "firing", "labels": {"alertname": "DiskFull", "instance": "db9:9100", "severity": "warning"}}]}}`
	failing := filetest.Write(t, dir, "failing.json", `{"cases": [
		{"name": "passes", "event": `+ev+`, "match": ["root/alertmanager/alerts/route/disk_full"]},
		{"name": "wrong host", "event": `+ev+`, "variables": {"root/alertmanager/alerts/route/disk_full": {"host": "db1"}},
		 "no_match": ["root/alertmanager/alerts/route/disk_full"]}]}`)
	junit := filepath.Join(dir, "report.xml")
	tornadoTests := filetest.Write(t, dir, "tornado.json", `{"cases": [{"name": "archive", "event": {"type": "t", "created_ms": 1, "payload": {}},
		"no_match": ["root/ruleset_01/archive_all"]}]}`)
	bad := filetest.Write(t, dir, "bad.json", `{"cases": [{"name": "x", "event": `+ev+`, "match": ["root/a/r"], "expect": {}}]}`)

	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"example", []string{"test", "--tree", exampleTree, exampleTests + "/routing.json", exampleTests + "/quiet.json"}, 0, "ok: 5 cases passed (2 files)\n", ""},
		{"folder, verbose", []string{"test", "-v", "--tree", exampleTree, exampleTests}, 0, `ok   ../../docs/examples/config-as-code/tests/quiet.json: "resolved alerts page nobody"`, ""},
		{"failures", []string{"test", "--tree", exampleTree, failing, "--junit", junit}, 1,
			`FAIL ` + failing + `: "wrong host": root/alertmanager/alerts/route/disk_full: no_match: expected not Matched, got Matched at root/alertmanager/alerts[0]/route/disk_full
FAIL ` + failing + `: "wrong host": root/alertmanager/alerts/route/disk_full: variable host: expected "db1", got "db9"
`, "squall: test: 1 of 2 cases failed (1 file)\n"},
		{"Tornado rules folder", []string{"test", "--tree", "testdata/rules.d", tornadoTests}, 1, "FAIL " + tornadoTests + `: "archive": root/ruleset_01/archive_all: no_match: expected not Matched, got Matched` + "\n", ""},
		{"no tree", []string{"test", exampleTests}, 2, "", "--tree is required"},
		{"missing tree", []string{"test", "--tree", filepath.Join(dir, "nope.json"), exampleTests}, 2, "", "nope.json: no such file or directory"},
		{"invalid tree", []string{"test", "--tree", "testdata/bad_regex.tree.json", exampleTests}, 2, "", "tree testdata/bad_regex.tree.json: node root.rs, rule broken"},
		{"no test files", []string{"test", "--tree", exampleTree}, 2, "", "no test files"},
		{"missing test file", []string{"test", "--tree", exampleTree, filepath.Join(dir, "none.json")}, 2, "", "none.json: no such file or directory"},
		{"folder without tests", []string{"test", "--tree", exampleTree, t.TempDir()}, 2, "", "no *.json files"},
		{"bad test file", []string{"test", "--tree", exampleTree, failing, bad}, 2, "", bad + `: cases[0] ("x"): unknown field "expect"`},
		{"unknown flag", []string{"test", "--tree", exampleTree, "--junti", "x", exampleTests}, 2, "", "unknown flag: --junti"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runSquall(t, "", tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s", code, tc.code, stdout, tc.stdout, stderr, tc.stderr)
			}
			if tc.code == 2 && stdout != "" {
				t.Errorf("bad input printed results:\n%s", stdout)
			}
		})
	}

	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &report); err != nil {
		t.Fatalf("--junit wrote no XML: %v\n%s", err, b)
	}
	if report.Tests != 2 || report.Failures != 1 || len(report.Suites) != 1 || report.Suites[0].Name != failing ||
		len(report.Suites[0].Cases) != 2 || report.Suites[0].Cases[0].Failure != nil || report.Suites[0].Cases[1].Failure == nil ||
		!strings.Contains(report.Suites[0].Cases[1].Failure.Text, `variable host: expected "db1", got "db9"`) {
		t.Errorf("--junit report:\n%s", b)
	}
}

// TestRuleTestsDoc checks the examples of docs/rule-tests.md against the
// commands: the test file passes on the worked example's tree, the error
// of its misspelt field and the failure lines are what squall test prints.
func TestRuleTestsDoc(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/rule-tests.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	block := func(start string) string {
		t.Helper()
		i := strings.Index(doc, start)
		if i < 0 {
			t.Fatalf("docs/rule-tests.md has no block starting %q", start)
		}
		rest := doc[i+len(start):]
		return rest[:strings.Index(rest, "```\n")]
	}
	dir := t.TempDir()
	file := filetest.Write(t, dir, "routing.json", block("```json\n"))
	if code, stdout, stderr := runSquall(t, "", "test", "--tree", exampleTree, file); code != 0 {
		t.Errorf("the documented test file: exit %d\n%s%s", code, stdout, stderr)
	}

	misspelt := filetest.Write(t, dir, "misspelt.json", strings.Replace(block("```json\n"), `"match":`, `"matches":`, 1))
	_, _, stderr := runSquall(t, "", "test", "--tree", exampleTree, misspelt)
	want := strings.TrimSpace(strings.Replace(block("file, the case and the field:\n\n```\n"), "tests/routing.json", misspelt, 1))
	if strings.TrimSpace(stderr) != want {
		t.Errorf("strict decoding example:\n%s\nsquall test prints:\n%s", want, stderr)
	}

	const failing = "testdata/ruletests/failing.json"
	_, stdout, stderr := runSquall(t, "", "test", "--tree", exampleTree, failing)
	got := "$ squall test --tree tree.json tests/failing.json\n" + strings.ReplaceAll(stdout+stderr, failing, "tests/failing.json")
	if want := block("happened, with the reason when the engine gives one:\n\n```\n"); got != want {
		t.Errorf("docs/rule-tests.md shows:\n%s\nsquall test prints:\n%s", want, got)
	}
}
