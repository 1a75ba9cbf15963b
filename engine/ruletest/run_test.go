package ruletest

import (
	"os"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
)

// newTestRunner compiles testdata/tree.json.
func newTestRunner(t testing.TB) *Runner {
	t.Helper()
	data, err := os.ReadFile("testdata/tree.json")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := config.DecodeExport(data)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(ex.Node)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Events of the test tree.
const (
	diskFull = `{"type": "alert", "created_ms": 1, "payload": {"msg": "disk full on db1 code 42", "hosts": [{"name": "a", "state": "up"}, {"name": "b", "state": "down"}]}}`
	diskOK   = `{"type": "alert", "created_ms": 1, "payload": {"msg": "all good"}}`
	notAlert = `{"type": "metric", "created_ms": 1, "payload": {"hosts": {"x/y": {"name": "x", "state": "down"}}}}`
)

// oneCase is a test file holding one case with this event and these
// expectations (JSON members).
func oneCase(event, expectations string) string {
	return `{"cases": [{"name": "c", "event": ` + event + `, ` + expectations + `}]}`
}

// TestRunner_Run runs one case per expectation kind, passing and failing,
// and checks the failure lines word for word.
func TestRunner_Run(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t)
	for _, tc := range []struct {
		name  string
		file  string
		fails []string
	}{
		{"match", oneCase(diskFull, `"match": ["root/alerts/disk/disk_full", "root/alerts/partial/needs_code"]`), nil},
		{"match in any iteration", oneCase(diskFull, `"match": ["root/hosts/per_host/down"], "no_match": ["root/hosts[0]/per_host/down"]`), nil},
		{"match in one iteration", oneCase(diskFull, `"match": ["root/hosts[1]/per_host/down"]`), nil},
		{"object iteration keys are escaped", oneCase(notAlert, `"match": ["root/hosts[x%2Fy]/per_host/down"]`), nil},
		{"not matched", oneCase(diskOK, `"match": ["root/alerts/disk/disk_full"]`), []string{
			"root/alerts/disk/disk_full: match: expected Matched, got NotMatched",
		}},
		{"partially matched", oneCase(diskOK, `"match": ["root/alerts/partial/needs_code"]`), []string{
			"root/alerts/partial/needs_code: match: expected Matched, got PartiallyMatched (The event matches the rule [needs_code] but the variable [code] cannot be extracted: the regex does not match)",
		}},
		{"stopped by an earlier rule", oneCase(diskFull, `"match": ["root/alerts/disk/after_disk_full"]`), []string{
			"root/alerts/disk/after_disk_full: match: expected Matched, got NotProcessed (rule disk_full matched before it and stops the ruleset: its continue is false)",
		}},
		{"inactive rule", oneCase(diskOK, `"match": ["root/alerts/disk/disabled"]`), []string{
			"root/alerts/disk/disabled: match: expected Matched, got NotProcessed (the rule is inactive)",
		}},
		{"filter not matched", oneCase(notAlert, `"match": ["root/alerts/disk/disk_full"]`), []string{
			"root/alerts/disk/disk_full: match: expected Matched, got not reached (filter root/alerts: NotMatched)",
		}},
		{"iterator without its target", oneCase(diskOK, `"match": ["root/hosts/per_host/down"]`), []string{
			"root/hosts/per_host/down: match: expected Matched, got not reached (iterator root/hosts: AccessorError)",
		}},
		{"no such iteration", oneCase(diskFull, `"match": ["root/hosts[7]/per_host/down"]`), []string{
			"root/hosts[7]/per_host/down: match: expected Matched, got not reached (iterator root/hosts had no iteration 7)",
		}},
		{"no iteration matched", oneCase(`{"type": "alert", "created_ms": 1, "payload": {"msg": "x", "hosts": [{"name": "a", "state": "up"}, {"name": "c", "state": "up"}]}}`, `"match": ["root/hosts/per_host/down"]`), []string{
			"root/hosts/per_host/down: match: expected Matched, got NotMatched at root/hosts[0]/per_host/down; NotMatched at root/hosts[1]/per_host/down",
		}},
		{"every iteration", oneCase(diskFull, `"no_match": ["root/hosts/per_host/down"]`), []string{
			"root/hosts/per_host/down: no_match: expected not Matched, got Matched at root/hosts[1]/per_host/down",
		}},
		{"no_match", oneCase(diskFull, `"no_match": ["root/alerts/disk/disk_full"]`), []string{
			"root/alerts/disk/disk_full: no_match: expected not Matched, got Matched",
		}},
		{"no such rule", oneCase(diskFull, `"no_match": ["root/alerts/disk/disk_ful"]`), []string{
			"root/alerts/disk/disk_ful: rule: expected a rule at this path, got none (ruleset root/alerts/disk has rules: disk_full, after_disk_full, disabled)",
		}},
		{"no such node", oneCase(diskFull, `"match": ["root/alarms/disk/disk_full"]`), []string{
			"root/alarms/disk/disk_full: rule: expected a rule at this path, got none (filter root has children: alerts, hosts)",
		}},
		{"another top node", oneCase(diskFull, `"match": ["tree/alerts/disk/disk_full"]`), []string{
			"tree/alerts/disk/disk_full: rule: expected a rule at this path, got none (the tree's top node is root)",
		}},
		{"not an iterator", oneCase(diskFull, `"match": ["root/alerts[0]/disk/disk_full"]`), []string{
			"root/alerts[0]/disk/disk_full: rule: expected an iterator at root/alerts (an iteration is given), got a Filter",
		}},
		{"variables", oneCase(diskFull, `"variables": {"root/alerts/disk/disk_full": {"host": "db1"}, "root/alerts/partial/needs_code": {"code": "42"}}`), nil},
		{"variable differs", oneCase(diskFull, `"variables": {"root/alerts/disk/disk_full": {"host": "db2", "port": 1}}`), []string{
			`root/alerts/disk/disk_full: variable host: expected "db2", got "db1"`,
			`root/alerts/disk/disk_full: variable port: expected 1, got no such variable (extracted: host)`,
		}},
		{"no variables", oneCase(diskOK, `"variables": {"root/alerts/disk/disk_full": {"host": "db1"}}`), []string{
			`root/alerts/disk/disk_full: variables: expected {"host":"db1"}, got no variables extracted: NotMatched`,
		}},
		{"actions subset", oneCase(diskFull, `"actions": {"root/alerts/disk/disk_full": [{"id": "archive"}, {"id": "logger", "payload": {"msg": "disk full on db1", "count": 1.0}}]}`), nil},
		{"actions of iterations", oneCase(diskFull, `"actions": {"root/hosts/per_host/down": [{"id": "logger", "payload": {"host": "b"}}]}`), nil},
		{"action payload differs", oneCase(diskFull, `"actions": {"root/alerts/disk/disk_full": [{"id": "logger", "payload": {"msg": "disk full on db2", "tags": ["disk"], "extra": true}}]}`), []string{
			`root/alerts/disk/disk_full: action logger payload.extra: expected true, got no such field`,
			`root/alerts/disk/disk_full: action logger payload.msg: expected "disk full on db2", got "disk full on db1"`,
			`root/alerts/disk/disk_full: action logger payload.tags: expected ["disk"], got ["disk","ops"]`,
		}},
		{"action missing", oneCase(diskFull, `"actions": {"root/alerts/disk/disk_full": [{"id": "email"}]}`), []string{
			`root/alerts/disk/disk_full: action email: expected an action email, got actions logger, archive`,
		}},
		{"action twice", oneCase(diskFull, `"actions": {"root/alerts/disk/disk_full": [{"id": "logger"}, {"id": "logger"}]}`), []string{
			`root/alerts/disk/disk_full: action logger: expected an action logger, got actions logger, archive`,
		}},
		{"no actions", oneCase(diskOK, `"actions": {"root/alerts/disk/disk_full": [{"id": "logger", "payload": {"level": "critical"}}]}`), []string{
			`root/alerts/disk/disk_full: action logger: expected an action logger with payload {"level":"critical"}, got no actions: NotMatched`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := Decode("t.json", []byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			res := r.Run(f)
			if len(res.Cases) != 1 || res.Cases[0].Name != "c" || res.File != "t.json" {
				t.Fatalf("result %+v", res)
			}
			var got []string
			for _, fl := range res.Cases[0].Failures {
				got = append(got, fl.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.fails, "\n") {
				t.Errorf("failures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.fails, "\n"))
			}
			if res.Cases[0].Passed() != (len(tc.fails) == 0) || res.Failed() != min(len(tc.fails), 1) {
				t.Errorf("passed %v, failed %d", res.Cases[0].Passed(), res.Failed())
			}
		})
	}
}

// TestRunner_sameAsEngine checks that a case passes exactly when the
// engines' live evaluation (tree.Actions, with its index) resolves the
// actions it expects.
func TestRunner_sameAsEngine(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t)
	for _, ev := range []string{diskFull, diskOK, notAlert} {
		f, err := Decode("t.json", []byte(oneCase(ev, `"match": ["root/alerts/disk/disk_full"]`)))
		if err != nil {
			t.Fatal(err)
		}
		passed := r.Run(f).Cases[0].Passed()
		live := false
		for _, a := range r.tree.Actions(f.Cases[0].Event, nil) {
			live = live || strings.HasPrefix(a.Position, "root/alerts/disk/disk_full/")
		}
		if passed != live {
			t.Errorf("event %s: the case passed %v, the live evaluation matched %v", ev, passed, live)
		}
	}
}

// TestNew_invalidTree checks that a tree the compiler refuses is an error.
func TestNew_invalidTree(t *testing.T) {
	t.Parallel()
	root := config.NewRoot()
	root.Children = []*config.Node{{Kind: config.KindRuleset, Name: "bad name"}}
	if _, err := New(root); err == nil {
		t.Fatal("New accepted a tree with an invalid name")
	}
}
