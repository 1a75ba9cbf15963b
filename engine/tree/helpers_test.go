package tree

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/config/tornado"
)

// readFile reads a testdata file.
func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ruleFile decodes a rule fixture; rules of Tornado's v1 layout have no
// name, which came from the file name: name gives it.
func ruleFile(t testing.TB, file, name string) *config.Rule {
	t.Helper()
	r, err := config.DecodeRule(readFile(t, file))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if r.Name == "" {
		r.Name = name
	}
	return r
}

// Tornado's benchmark fixtures: a rule and an event it matches fully
// (every condition, extraction and action evaluated), a rule and an event
// whose type it refuses.
const (
	fullMatchRule  = "tornado/benches_resources/full_match/rules/rule_01.json"
	fullMatchEvent = "tornado/benches_resources/full_match/events/event_01.json"
	noMatchRule    = "tornado/benches_resources/no_match/rules/rule_01.json"
	noMatchEvent   = "tornado/benches_resources/no_match/events/event_01.json"
)

// ruleFileTree compiles a rule fixture (ruleFile) alone in a ruleset
// (rulesetTree).
func ruleFileTree(t testing.TB, file, name string) *Tree {
	t.Helper()
	return mustCompile(t, rulesetTree(ruleFile(t, file, name)))
}

// eventFile decodes an event fixture.
func eventFile(t testing.TB, file string) *Event {
	t.Helper()
	ev, err := DecodeEvent(readFile(t, file))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return ev
}

// exportFile decodes the tree of an export file.
func exportFile(t testing.TB, file string) *config.Node {
	t.Helper()
	ex, err := config.DecodeExport(readFile(t, file))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return ex.Node
}

// mustRule decodes a rule given as JSON.
func mustRule(t testing.TB, js string) *config.Rule {
	t.Helper()
	r, err := config.DecodeRule([]byte(js))
	if err != nil {
		t.Fatalf("rule %s: %v", js, err)
	}
	return r
}

// rulesetTree returns root -> ruleset "rs" holding the rules.
func rulesetTree(rules ...*config.Rule) *config.Node {
	root := config.NewRoot()
	root.Children = []*config.Node{{Kind: config.KindRuleset, Name: "rs", Rules: rules}}
	return root
}

func mustCompile(t testing.TB, n *config.Node) *Tree {
	t.Helper()
	tr, err := Compile(n)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return tr
}

func mustEvent(t testing.TB, js string) *Event {
	t.Helper()
	ev, err := DecodeEvent([]byte(js))
	if err != nil {
		t.Fatalf("event %s: %v", js, err)
	}
	return ev
}

// payloadEvent returns an event of type "test" with the given payload JSON.
func payloadEvent(t testing.TB, payload string) *Event {
	t.Helper()
	return mustEvent(t, `{"type":"test","created_ms":1554130814854,"metadata":{"tenant_id":"master"},"payload":`+payload+`}`)
}

func tornadoDir(t testing.TB, dir string) *config.Node {
	t.Helper()
	n, err := tornado.Read(os.DirFS(filepath.Join("testdata", "tornado")), dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// only returns the single ruleset result of a rulesetTree evaluation.
func onlyRuleset(t testing.TB, res *ProcessedNode) *ProcessedRules {
	t.Helper()
	if len(res.Nodes) != 1 || res.Nodes[0].Rules == nil {
		t.Fatalf("want one ruleset under the root, got %s", toJSON(t, res))
	}
	return res.Nodes[0].Rules
}

// ruleStatus processes ev with tr, a tree of one rule (rulesetTree),
// checks that the live evaluation agrees (processLive), and returns the
// rule's status and the actions.
func ruleStatus(t testing.TB, tr *Tree, ev *Event) (RuleStatus, []Action) {
	t.Helper()
	res, actions := processLive(t, tr, ev)
	return onlyRuleset(t, res).Rules[0].Status, actions
}

func toJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// processLive processes ev with tr as a test event and checks that the
// live evaluation agrees (checkLive).
func processLive(t testing.TB, tr *Tree, ev *Event) (*ProcessedNode, []Action) {
	t.Helper()
	res, actions := tr.Process(ev)
	checkLive(t, tr, ev, actions)
	return res, actions
}

// checkLive checks that live evaluation yields the same actions as test
// evaluation: the index must never change a result.
func checkLive(t testing.TB, tr *Tree, ev *Event, want []Action) {
	t.Helper()
	got := tr.Actions(ev, nil)
	if toJSON(t, got) != toJSON(t, want) {
		t.Fatalf("live actions differ from test actions:\nlive: %s\ntest: %s", toJSON(t, got), toJSON(t, want))
	}
	got, rules := tr.MatchedActions(ev, nil, nil)
	if toJSON(t, got) != toJSON(t, want) {
		t.Fatalf("MatchedActions differ from test actions:\nlive: %s\ntest: %s", toJSON(t, got), toJSON(t, want))
	}
	res, _ := tr.Process(ev)
	if w := matchedRules(res, nil); strings.Join(rules, " ") != strings.Join(w, " ") {
		t.Fatalf("MatchedActions rules %q, the result tree's matched rules %q", rules, w)
	}
}

// matchedRules appends the matched rules of a result tree, as
// "ruleset/rule", in tree order.
func matchedRules(n *ProcessedNode, dst []string) []string {
	if n == nil {
		return dst
	}
	if n.Rules != nil {
		for _, r := range n.Rules.Rules {
			if r.Status == RuleMatched {
				dst = append(dst, n.Name+"/"+r.Name)
			}
		}
	}
	for _, c := range n.Nodes {
		dst = matchedRules(c, dst)
	}
	for _, it := range n.Events {
		for _, c := range it.Nodes {
			dst = matchedRules(c, dst)
		}
	}
	return dst
}
