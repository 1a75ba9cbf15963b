package tree

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/goldentest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// run evaluates rules (as one ruleset under the root) against an event
// with the payload and checks that live evaluation agrees.
func run(t *testing.T, payload string, rules ...string) (*ProcessedRules, []Action) {
	t.Helper()
	var rs []*config.Rule
	for _, r := range rules {
		rs = append(rs, mustRule(t, r))
	}
	tr := mustCompile(t, rulesetTree(rs...))
	ev := payloadEvent(t, payload)
	res, actions := processLive(t, tr, ev)
	return onlyRuleset(t, res), actions
}

// rule writes a rule: with is the WITH object, actions the actions array.
func ruleJSON(name string, cont bool, where, with, actions string) string {
	if where == "" {
		where = "null"
	}
	if with == "" {
		with = "{}"
	}
	if actions == "" {
		actions = "[]"
	}
	return fmt.Sprintf(`{"name":%q,"description":"","continue":%v,"active":true,"constraint":{"WHERE":%s,"WITH":%s},"actions":%s}`, name, cont, where, with, actions)
}

func inactive(r string) string { return strings.Replace(r, `"active":true`, `"active":false`, 1) }

func statuses(rs *ProcessedRules) string {
	var s []string
	for _, r := range rs.Rules {
		s = append(s, r.Name+"="+string(r.Status))
	}
	return strings.Join(s, " ")
}

const always = `{"type":"equals","first":"${event.type}","second":"test"}`
const never = `{"type":"equals","first":"${event.type}","second":"nope"}`

func TestTree_fullMatchFixture(t *testing.T) {
	t.Parallel()
	st, actions := ruleStatus(t, ruleFileTree(t, fullMatchRule, ""), eventFile(t, fullMatchEvent))
	if st != RuleMatched {
		t.Fatalf("status %s", st)
	}
	want := `[{"id":"nagios","payload":{"host":"bz-outsideserverroom-sensors","host_ip":"10.65.5.31","message":"SNMPv2-SMI::enterprises.14848.2.1.1.7.0 38:10:38:30.98","room":"SNMPv2-SMI::enterprises.14848.2.1.1.2.0 \"Outside Server Room\"","service":"motion_sensor_port_4","status":"Critical"}}]`
	if got := toJSON(t, actions); got != want {
		t.Errorf("actions\n got %s\nwant %s", got, want)
	}
	if actions[0].CreatedMs != 1554130814854 {
		t.Errorf("created_ms %d", actions[0].CreatedMs)
	}
}

func TestTree_noMatchFixture(t *testing.T) {
	t.Parallel()
	st, actions := ruleStatus(t, ruleFileTree(t, noMatchRule, ""), eventFile(t, noMatchEvent))
	if st != RuleNotMatched || len(actions) != 0 {
		t.Fatalf("status %s, actions %v", st, actions)
	}
}

// Tornado's iterator fixture: 5 alerts × 3 actions.
func TestTree_iteratorFixture(t *testing.T) {
	t.Parallel()
	tr := mustCompile(t, tornadoDir(t, "v2/test_config_iterator"))
	ev := eventFile(t, "tornado/openshift_webhook_event.json")
	res, actions := processLive(t, tr, ev)
	if len(actions) != 15 {
		t.Fatalf("%d actions, want 15", len(actions))
	}
	pam := res.Nodes[0].Nodes[0]
	if res.Status != StatusMatched || res.Nodes[0].Status != StatusMatched || pam.Status != StatusMatched {
		t.Fatalf("filters: %s", toJSON(t, res))
	}
	it := pam.Nodes[0]
	if it.Kind != config.KindIterator || it.Status != StatusMatched || len(it.Events) != 5 {
		t.Fatalf("iterator: %s", toJSON(t, it))
	}
	for i, e := range it.Events {
		if got := e.Event.Iterator["iteration"]; got != json.Number(fmt.Sprint(i)) {
			t.Errorf("iteration %d: %v", i, got)
		}
	}
	if got := actions[1].Payload["data"]; got != "prometheus_alertmanager - 1712218875257 - 0" {
		t.Errorf("logger payload: %v", got)
	}
	item := actions[0].Payload["event"].(map[string]any)["item"].(map[string]any)
	if item["status"] != "firing" {
		t.Errorf("archived item: %v", item)
	}
}

// Tornado's worked example of a test-event result, as a golden file.
func TestTree_workedExampleGolden(t *testing.T) {
	t.Parallel()
	tr := mustCompile(t, exportFile(t, "worked_example.tree.json"))
	ev := eventFile(t, "worked_example.event.json")
	res, _ := processLive(t, tr, ev)
	got, err := json.MarshalIndent(map[string]any{"event": ev, "result": res}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "worked_example.golden.json", got)
}

// golden compares got with the golden file testdata/name, rewritten
// with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldentest.Check(t, filepath.Join("testdata", name), got, *update)
}

// continue and NotProcessed: docs/decisions.md decisions 1 and 3.
func TestTree_continueAndNotProcessed(t *testing.T) {
	t.Parallel()
	t.Run("continue false stops after a full match (decision 3: later rules NotProcessed)", func(t *testing.T) {
		rs, _ := run(t, `{}`, ruleJSON("r1", true, always, "", ""), ruleJSON("r2", false, always, "", ""), ruleJSON("r3", true, always, "", ""))
		if got := statuses(rs); got != "r1=Matched r2=Matched r3=NotProcessed" {
			t.Error(got)
		}
	})
	t.Run("continue false on a rule that does not match", func(t *testing.T) {
		rs, _ := run(t, `{}`, ruleJSON("r1", true, always, "", ""), ruleJSON("r2", false, never, "", ""), ruleJSON("r3", true, always, "", ""))
		if got := statuses(rs); got != "r1=Matched r2=NotMatched r3=Matched" {
			t.Error(got)
		}
	})
	t.Run("continue false on a partial match does not stop", func(t *testing.T) {
		rs, _ := run(t, `{}`, ruleJSON("r1", false, always, "", `[{"id":"a","payload":{"x":"${event.payload.missing}"}}]`), ruleJSON("r2", true, always, "", ""))
		if got := statuses(rs); got != "r1=PartiallyMatched r2=Matched" {
			t.Error(got)
		}
	})
	t.Run("inactive rules are NotProcessed (decision 3)", func(t *testing.T) {
		rs, actions := run(t, `{}`, inactive(ruleJSON("r1", true, always, "", `[{"id":"a","payload":{}}]`)), ruleJSON("r2", true, always, "", ""), inactive(ruleJSON("r3", true, always, "", "")), ruleJSON("r4", true, always, "", ""))
		if got := statuses(rs); got != "r1=NotProcessed r2=Matched r3=NotProcessed r4=Matched" {
			t.Error(got)
		}
		if len(actions) != 0 {
			t.Errorf("inactive rule ran: %v", actions)
		}
	})
	t.Run("a rule without WHERE always matches", func(t *testing.T) {
		rs, _ := run(t, `{}`, ruleJSON("r1", true, "", "", ""))
		if got := statuses(rs); got != "r1=Matched" {
			t.Error(got)
		}
	})
}

func TestTree_extractedVariables(t *testing.T) {
	t.Parallel()
	ex := func(from, re string) string {
		return fmt.Sprintf(`{"from":%q,"regex":{"match":%q,"group_match_idx":0}}`, from, re)
	}
	t.Run("missing variable: partially matched, nothing stored (item 65)", func(t *testing.T) {
		rs, actions := run(t, `{}`, ruleJSON("r1", true, always, `{"v":`+ex("${event.payload.nope}", ".*")+`}`, `[{"id":"a","payload":{}}]`))
		r := rs.Rules[0]
		if r.Status != RulePartiallyMatched || r.Message == nil || !strings.Contains(*r.Message, "[v]") || len(actions) != 0 || len(rs.ExtractedVars) != 0 {
			t.Errorf("%s", toJSON(t, rs))
		}
	})
	t.Run("unresolvable action: partially matched, variables stored (item 66)", func(t *testing.T) {
		rs, actions := run(t, `{"s":"abc"}`, ruleJSON("r1", true, always, `{"v":`+ex("${event.payload.s}", "b")+`}`,
			`[{"id":"ok","payload":{"v":"${_variables.v}"}},{"id":"bad","payload":{"x":"${_variables.missing}"}}]`))
		r := rs.Rules[0]
		if r.Status != RulePartiallyMatched || !strings.Contains(*r.Message, "[bad]") || len(actions) != 0 {
			t.Fatalf("%s", toJSON(t, rs))
		}
		if toJSON(t, r.Actions) != `[{"id":"ok","payload":{"v":"b"}}]` || toJSON(t, rs.ExtractedVars) != `{"r1":{"v":"b"}}` {
			t.Errorf("%s", toJSON(t, rs))
		}
	})
	t.Run("extraction failure keeps later rules going (items 67-68)", func(t *testing.T) {
		rs, _ := run(t, `{"email":"email"}`,
			ruleJSON("rule1_email", true, always, `{"extracted_temp":`+ex("${event.payload.email}", "[z]+")+`}`, ""),
			ruleJSON("rule2_email", true, always, `{"extracted_temp":`+ex("${event.payload.email}", "[ai]+")+`}`, ""),
			ruleJSON("rule3_email", true, always, `{"extracted_temp":`+ex("${event.payload.email}", "em")+`}`, ""))
		if got := statuses(rs); got != "rule1_email=PartiallyMatched rule2_email=Matched rule3_email=Matched" {
			t.Error(got)
		}
		if got := toJSON(t, rs.ExtractedVars); got != `{"rule2_email":{"extracted_temp":"ai"},"rule3_email":{"extracted_temp":"em"}}` {
			t.Error(got)
		}
	})
	t.Run("other rules' variables (item 70)", func(t *testing.T) {
		rs, _ := run(t, `{"s":"aaa999"}`,
			ruleJSON("rule1", true, always, `{"extracted":`+ex("${event.payload.s}", "[a]+")+`}`, ""),
			ruleJSON("rule2", true, `{"type":"equals","first":"${_variables.rule1.extracted}","second":"aaa"}`, "", ""))
		if got := statuses(rs); got != "rule1=Matched rule2=Matched" {
			t.Error(got)
		}
	})
	t.Run("a rule does not see its own variables in WHERE", func(t *testing.T) {
		rs, _ := run(t, `{"s":"aaa"}`, ruleJSON("rule1", true, `{"type":"equals","first":"${_variables.x}","second":"aaa"}`, `{"x":`+ex("${event.payload.s}", "a+")+`}`, ""))
		if got := statuses(rs); got != "rule1=NotMatched" {
			t.Error(got)
		}
	})
	t.Run("local variables win over rule names (item 71)", func(t *testing.T) {
		rs, actions := run(t, `{"s":"aaa999"}`,
			ruleJSON("collision_name", true, always, `{"VALUE":`+ex("${event.payload.s}", "[a]+")+`}`, ""),
			ruleJSON("rule2", true, always, `{"collision_name":{"from":"${event.payload.s}","regex":{"named_match":"(?P<VALUE>[0-9]+)"}}}`, `[{"id":"a","payload":{"v":"${_variables.collision_name.VALUE}"}}]`),
			ruleJSON("rule3", true, always, "", `[{"id":"a","payload":{"v":"${_variables.collision_name.VALUE}"}}]`))
		if statuses(rs) != "collision_name=Matched rule2=Matched rule3=Matched" {
			t.Fatal(statuses(rs))
		}
		if got := toJSON(t, actions); got != `[{"id":"a","payload":{"v":"999"}},{"id":"a","payload":{"v":"aaa"}}]` {
			t.Error(got)
		}
	})
	t.Run("variables are independent per ruleset (item 69)", func(t *testing.T) {
		root := config.NewRoot()
		for i, re := range []string{"[a]+", "[0-9]+"} {
			r := mustRule(t, ruleJSON("rule", true, always, `{"v":`+ex("${event.payload.s}", re)+`}`, `[{"id":"a","payload":{"v":"${_variables.v}"}}]`))
			root.Children = append(root.Children, &config.Node{Kind: config.KindRuleset, Name: fmt.Sprintf("rs%d", i), Rules: []*config.Rule{r}})
		}
		tr := mustCompile(t, root)
		ev := payloadEvent(t, `{"s":"aaa999"}`)
		_, actions := processLive(t, tr, ev)
		if got := toJSON(t, actions); got != `[{"id":"a","payload":{"v":"aaa"}},{"id":"a","payload":{"v":"999"}}]` {
			t.Error(got)
		}
	})
}

func TestTree_filters(t *testing.T) {
	t.Parallel()
	r := mustRule(t, ruleJSON("r", true, "", "", `[{"id":"a","payload":{}}]`))
	mk := func(active bool, filter string) *Tree {
		root := config.NewRoot()
		f := &config.Node{Kind: config.KindFilter, Name: "f", Active: active, Children: []*config.Node{{Kind: config.KindRuleset, Name: "rs", Rules: []*config.Rule{r}}}}
		if filter != "" {
			op, err := config.DecodeOperator([]byte(filter))
			if err != nil {
				t.Fatal(err)
			}
			f.Filter = op
		}
		root.Children = []*config.Node{f}
		return mustCompile(t, root)
	}
	tests := []struct {
		name    string
		tree    *Tree
		status  Status
		actions int
	}{
		{"inactive is Ignored (decision 2)", mk(false, always), StatusIgnored, 0},
		{"not matched", mk(true, never), StatusNotMatched, 0},
		{"matched", mk(true, always), StatusMatched, 1},
		{"empty filter matches", mk(true, ""), StatusMatched, 1},
		{"empty object filter matches", mk(true, "{}"), StatusMatched, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := payloadEvent(t, `{}`)
			res, actions := tc.tree.Process(ev)
			checkLive(t, tc.tree, ev, actions)
			f := res.Nodes[0]
			if f.Status != tc.status || len(actions) != tc.actions {
				t.Fatalf("%s", toJSON(t, res))
			}
			if tc.status != StatusMatched && !strings.Contains(toJSON(t, f), `"nodes":[]`) {
				t.Errorf("children of a filter that did not match: %s", toJSON(t, f))
			}
		})
	}
}

func TestTree_iterator(t *testing.T) {
	t.Parallel()
	r := mustRule(t, ruleJSON("r", true, `{"type":"equals","first":"${event.iterator.item.sev}","second":"crit"}`, "", `[{"id":"a","payload":{"i":"${event.iterator.iteration}","name":"${event.iterator.item.name}"}}]`))
	mk := func(active bool) *Tree {
		root := config.NewRoot()
		root.Children = []*config.Node{{Kind: config.KindIterator, Name: "it", Active: active, Target: "${event.payload.list}",
			Children: []*config.Node{{Kind: config.KindRuleset, Name: "rs", Rules: []*config.Rule{r}}}}}
		return mustCompile(t, root)
	}
	tests := []struct {
		name    string
		active  bool
		payload string
		status  Status
		events  int
		actions string
	}{
		{"array", true, `{"list":[{"sev":"crit","name":"a"},{"sev":"ok","name":"b"},{"sev":"crit","name":"c"}]}`, StatusMatched, 3, `[{"id":"a","payload":{"i":0,"name":"a"}},{"id":"a","payload":{"i":2,"name":"c"}}]`},
		{"object in key order", true, `{"list":{"z":{"sev":"crit","name":"z"},"a":{"sev":"crit","name":"a"}}}`, StatusMatched, 2, `[{"id":"a","payload":{"i":"a","name":"a"}},{"id":"a","payload":{"i":"z","name":"z"}}]`},
		{"empty array", true, `{"list":[]}`, StatusMatched, 0, `null`},
		{"missing target", true, `{}`, StatusAccessorError, 0, `null`},
		{"target not a container", true, `{"list":"x"}`, StatusTypeError, 0, `null`},
		{"inactive iterates without children", false, `{"list":[{"sev":"crit","name":"a"}]}`, StatusMatched, 1, `null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := mk(tc.active)
			ev := payloadEvent(t, tc.payload)
			res, actions := processLive(t, tr, ev)
			it := res.Nodes[0]
			if it.Status != tc.status || len(it.Events) != tc.events || toJSON(t, actions) != tc.actions {
				t.Fatalf("%s actions %s", toJSON(t, it), toJSON(t, actions))
			}
			if ev.Iterator != nil {
				t.Error("the original event was modified")
			}
		})
	}
}

func TestTree_accessorsAndInterpolation(t *testing.T) {
	t.Parallel()
	payload := `{"s":"x","n":13.0,"i":7,"b":true,"z":null,"arr":[1,{"k":"v"}],"body":{"second.with.dot":"dot","[1]":"bracket"},"list":["a","b"]}`
	tests := []struct {
		tmpl string
		want string // JSON of the resolved value; "" = cannot be resolved
	}{
		{"${event.type}", `"test"`},
		{"${event.created_ms}", `1554130814854`},
		{"${event.metadata.tenant_id}", `"master"`},
		{"${event.trace_id}", `null`},
		{"${event.payload.n}", `13.0`},
		{"${event.payload.arr[1].k}", `"v"`},
		{"${event.payload.arr[2]}", ``},
		{"${event.payload.s.x}", ``},
		{"${event.payload.list[0]}", `"a"`},
		{`${event.payload.body."second.with.dot"}`, `"dot"`},
		{"${event.payload.}", ``}, // checked separately: the whole payload
		{"${event.payload.z}", `null`},
		{"${event.nope}", ``},
		{"  ${event.type}  ", `"  test  "`},
		{"${event.type}${event.payload.i}", `"test7"`},
		{"n=${event.payload.n} b=${event.payload.b} z=${event.payload.z}", `"n=13 b=true z=null"`},
		{"arr=${event.payload.arr}", ``},
		{"x ${pippo}", ``},
		{"my body is ${item.body}!", `"my body is ${item.body}!"`},
		{"${item}", `"${item}"`},
		{"cost: ${}", `"cost: ${}"`},
		{`\${HOME}`, ``},
	}
	for _, tc := range tests {
		t.Run(tc.tmpl, func(t *testing.T) {
			rs, actions := run(t, payload, ruleJSON("r", true, "", "", fmt.Sprintf(`[{"id":"a","payload":{"v":%q}}]`, tc.tmpl)))
			if tc.tmpl == "${event.payload.}" {
				if len(actions) != 1 || toJSON(t, actions[0].Payload["v"]) != toJSON(t, payloadEvent(t, payload).Payload()) {
					t.Errorf("%s", toJSON(t, rs))
				}
				return
			}
			if tc.want == "" {
				if rs.Rules[0].Status != RulePartiallyMatched {
					t.Errorf("resolved: %s", toJSON(t, rs))
				}
				return
			}
			if len(actions) != 1 {
				t.Fatalf("%s", toJSON(t, rs))
			}
			if got := toJSON(t, actions[0].Payload["v"]); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	t.Run("${event} is the whole event", func(t *testing.T) {
		_, actions := run(t, `{"a":1}`, ruleJSON("r", true, "", "", `[{"id":"a","payload":{"v":"${event}"}}]`))
		want := `{"created_ms":1554130814854,"metadata":{"tenant_id":"master"},"payload":{"a":1},"trace_id":null,"type":"test"}`
		if got := toJSON(t, actions[0].Payload["v"]); got != want {
			t.Errorf("got %s", got)
		}
	})
}

func TestTree_actionMeta(t *testing.T) {
	t.Parallel()
	rs, _ := run(t, `{"a":"A"}`, ruleJSON("r", true, "", "", `[{"id":"a","payload":{"c":"const","v":"${event.payload.a}","m":{"x":1,"y":"${event.type}"},"l":["${event.payload}",2]}}]`))
	want := `{"actions":[{"id":"a","payload":{` +
		`"c":{"content":{"type":"Single","content":"const"},"meta":{"modified":false,"is_leaf":true}},` +
		`"l":{"content":{"type":"Array","content":[{"content":{"type":"Single","content":{"a":"A"}},"meta":{"modified":true,"is_leaf":true}},{"content":{"type":"Single","content":2},"meta":{"modified":false,"is_leaf":true}}]},"meta":{"modified":true,"is_leaf":false}},` +
		`"m":{"content":{"type":"Map","content":{"x":{"content":{"type":"Single","content":1},"meta":{"modified":false,"is_leaf":true}},"y":{"content":{"type":"Single","content":"test"},"meta":{"modified":true,"is_leaf":true}}}},"meta":{"modified":true,"is_leaf":false}},` +
		`"v":{"content":{"type":"Single","content":"A"},"meta":{"modified":true,"is_leaf":true}}}}]}`
	if got := toJSON(t, rs.Rules[0].Meta); got != want {
		t.Errorf("meta\n got %s\nwant %s", got, want)
	}
}

// Tornado's extractors and their edge cases (docs/rules.md, "Extractors").
func TestTree_extractors(t *testing.T) {
	t.Parallel()
	const url = "http://stackoverflow.com/"
	const urlRe = `(https?|ftp)://([^/\r\n]+)(/[^\r\n]*)?`
	const status = "STATUS: CRITICAL HOST: h1\nSTATUS: OK HOST: h2"
	tests := []struct {
		name  string
		input string // payload.s
		regex string // regex object JSON
		mods  string
		want  string // "" = extraction fails
	}{
		{"group 1", url, fmt.Sprintf(`{"match":%q,"group_match_idx":1}`, urlRe), "", `"http"`},
		{"group 2", url, fmt.Sprintf(`{"match":%q,"group_match_idx":2}`, urlRe), "", `"stackoverflow.com"`},
		{"group 0", url, fmt.Sprintf(`{"match":%q,"group_match_idx":0}`, urlRe), "", `"http://stackoverflow.com/"`},
		{"all matches group 1", url + "\nftp://test.com", fmt.Sprintf(`{"match":%q,"group_match_idx":1,"all_matches":true}`, urlRe), "", `["http","ftp"]`},
		{"group does not exist", url, fmt.Sprintf(`{"match":%q,"group_match_idx":10000}`, urlRe), "", ``},
		{"group does not exist, all matches", url, fmt.Sprintf(`{"match":%q,"group_match_idx":10000,"all_matches":true}`, urlRe), "", ``},
		{"all groups", url, fmt.Sprintf(`{"match":%q}`, urlRe), "", `["http://stackoverflow.com/","http","stackoverflow.com","/"]`},
		{"all groups, one did not participate", "abd", `{"match":"ab(c)*d"}`, "", ``},
		{"optional group absent", "http://x", fmt.Sprintf(`{"match":%q}`, urlRe), "", ``},
		{"no match", "zzz", `{"match":"[0-9]+"}`, "", ``},
		{"typed API form", status, `{"type":"Regex","match":"STATUS: (\\w+) HOST: (\\w+)","group_match_idx":1,"all_matches":false}`, "", `"CRITICAL"`},
		{"all matches all groups", status, `{"match":"STATUS: (\\w+) HOST: (\\w+)","all_matches":true}`, "", `[["STATUS: CRITICAL HOST: h1","CRITICAL","h1"],["STATUS: OK HOST: h2","OK","h2"]]`},
		{"named groups", "http://stackoverflow.com", `{"named_match":"(?P<PROTOCOL>https?)://(\\w+).(?P<EXTENSION>\\w+)"}`, "", `{"EXTENSION":"com","PROTOCOL":"http"}`},
		{"named groups all matches", status, `{"named_match":"STATUS: (?P<S>\\w+) HOST: (?P<H>\\w+)","all_matches":true}`, "", `[{"H":"h1","S":"CRITICAL"},{"H":"h2","S":"OK"}]`},
		{"named group missing", "ab", `{"named_match":"a(?P<x>c)?b"}`, "", ``},
		{"modifier on array fails", url, fmt.Sprintf(`{"match":%q,"all_matches":true,"group_match_idx":1}`, urlRe), `[{"type":"Trim"}]`, ``},
		{"lowercase", " To BE LOwerCASEd  ", `{"match":".*","group_match_idx":0}`, `[{"type":"Lowercase"}]`, `" to be lowercased  "`},
		{"trim", " \t x y \n", `{"match":"(?s).*","group_match_idx":0}`, `[{"type":"Trim"}]`, `"x y"`},
		{"to number int", "12", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"}]`, `12`},
		{"to number negative", "-3412", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"}]`, `-3412`},
		{"to number float", "3.14", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"}]`, `3.14`},
		{"to number exponent is a float", "1e3", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"}]`, `1000.0`},
		{"to number plus", "+5", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"}]`, `5`},
		{"to number plus the largest unsigned", "+18446744073709551615", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"}]`, `18446744073709551615`},
		{"to number NaN is null", "NaN", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"}]`, `null`},
		{"to number space", " 12", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"}]`, ``},
		{"to number text", "something", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"}]`, ``},
		{"map", "Critical", `{"match":".*","group_match_idx":0}`, `[{"type":"Map","mapping":{"Critical":"2","Warning":"1"}}]`, `"2"`},
		{"map default", "Other", `{"match":".*","group_match_idx":0}`, `[{"type":"Map","mapping":{"Critical":"2"},"default_value":"3"}]`, `"3"`},
		{"map without default", "Other", `{"match":".*","group_match_idx":0}`, `[{"type":"Map","mapping":{"Critical":"2"}}]`, ``},
		{"map on number", "12", `{"match":".*","group_match_idx":0}`, `[{"type":"ToNumber"},{"type":"Map","mapping":{"12":"x"}}]`, ``},
		{"replace literal is case sensitive", "text", `{"match":".*","group_match_idx":0}`, `[{"type":"ReplaceAll","find":"TexT","replace":"x"}]`, `"text"`},
		{"replace literal", "a-b-c", `{"match":".*","group_match_idx":0}`, `[{"type":"ReplaceAll","find":"-","replace":"+","is_regex":false}]`, `"a+b+c"`},
		{"replace not found skips the replacement", "abc", `{"match":".*","group_match_idx":0}`, `[{"type":"ReplaceAll","find":"z","replace":"${event.payload.missing}"}]`, `"abc"`},
		{"replace regex named groups", "Springsteen, Bruce", `{"match":".*","group_match_idx":0}`, `[{"type":"ReplaceAll","find":"(?P<last>[^,\\s]+),\\s+(?P<first>\\S+)","replace":"$first $last","is_regex":true}]`, `"Bruce Springsteen"`},
		{"replace regex positional", "Deacon, John", `{"match":".*","group_match_idx":0}`, `[{"type":"ReplaceAll","find":"([^,\\s]+),\\s+(\\S+)","replace":"$2 $1","is_regex":true}]`, `"John Deacon"`},
		{"replace from the event", "Deacon, John", `{"match":".*","group_match_idx":0}`, `[{"type":"ReplaceAll","find":"(?P<last>[^,\\s]+),\\s+(?P<first>\\S+)","replace":"${event.payload.role}","is_regex":true}]`, `"John Deacon: Great Bass Player"`},
		{"lowercase chain", "A to be found B", `{"match":".*","group_match_idx":0}`, `[{"type":"Lowercase"},{"type":"ReplaceAll","find":"to be found","replace":"to be replaced with"},{"type":"Trim"}]`, `"a to be replaced with b"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mods := tc.mods
			if mods == "" {
				mods = "[]"
			}
			with := fmt.Sprintf(`{"v":{"from":"${event.payload.s}","regex":%s,"modifiers_post":%s}}`, tc.regex, mods)
			payload := fmt.Sprintf(`{"s":%q,"role":"$first $last: Great Bass Player"}`, tc.input)
			rs, _ := run(t, payload, ruleJSON("r", true, "", with, ""))
			r := rs.Rules[0]
			if tc.want == "" {
				if r.Status != RulePartiallyMatched || r.Message == nil {
					t.Errorf("extracted: %s", toJSON(t, rs))
				}
				return
			}
			if r.Status != RuleMatched {
				t.Fatalf("%s", toJSON(t, rs))
			}
			if got := toJSON(t, rs.ExtractedVars["r"]["v"]); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTree_singleKeyAndDates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload string
		with    string
		want    string
	}{
		{"single key", `{"oids":{"ifDescr.1":"eth0","other":1}}`, `{"v":{"from":"${event.payload.oids}","regex":{"single_key_match":"ifDescr\\.[0-9]+"}}}`, `"eth0"`},
		{"single key typed", `{"oids":{"ifDescr.1":{"a":1},"other":1}}`, `{"v":{"from":"${event.payload.oids}","regex":{"type":"KeyRegex","single_key_match":"ifDescr"}}}`, `{"a":1}`},
		{"single key, two keys match", `{"oids":{"a1":1,"a2":2}}`, `{"v":{"from":"${event.payload.oids}","regex":{"single_key_match":"a"}}}`, ``},
		{"single key, none matches", `{"oids":{"b":1}}`, `{"v":{"from":"${event.payload.oids}","regex":{"single_key_match":"a"}}}`, ``},
		{"single key, not an object", `{"oids":"a"}`, `{"v":{"from":"${event.payload.oids}","regex":{"single_key_match":"a"}}}`, ``},
		{"seconds in London", `{"t":"1698915872"}`, dateWith("Europe/London"), `"2023-11-02 09:04:32+00:00"`},
		{"seconds in Rome", `{"t":"1698915872"}`, dateWith("Europe/Rome"), `"2023-11-02 10:04:32+01:00"`},
		{"seconds in New York", `{"t":"1698915872"}`, dateWith("America/New_York"), `"2023-11-02 05:04:32-04:00"`},
		{"milliseconds", `{"t":"1698933188760"}`, dateWith("Europe/Rome"), `"2023-11-02 14:53:08+01:00"`},
		{"nanoseconds", `{"t":"1698938840816144404"}`, dateWith("Europe/London"), `"2023-11-02 15:27:20+00:00"`},
		{"date needs a number", `{"t":"1698915872"}`, `{"v":{"from":"${event.payload.t}","regex":{"match":".*","group_match_idx":0},"modifiers_post":[{"type":"DateAndTime","timezone":"Europe/Rome"}]}}`, ``},
		{"date needs an integer", `{"t":"1.5"}`, dateWith("Europe/Rome"), ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, _ := run(t, tc.payload, ruleJSON("r", true, "", tc.with, ""))
			r := rs.Rules[0]
			if tc.want == "" {
				if r.Status != RulePartiallyMatched {
					t.Errorf("extracted: %s", toJSON(t, rs))
				}
				return
			}
			if got := toJSON(t, rs.ExtractedVars["r"]["v"]); r.Status != RuleMatched || got != tc.want {
				t.Errorf("got %s (%s), want %s", got, r.Status, tc.want)
			}
		})
	}
}

func dateWith(tz string) string {
	return fmt.Sprintf(`{"v":{"from":"${event.payload.t}","regex":{"match":".*","group_match_idx":0},"modifiers_post":[{"type":"ToNumber"},{"type":"DateAndTime","timezone":%q}]}}`, tz)
}

// Tornado's realistic rules.d: tenant filters route events.
func TestTree_tenantRouting(t *testing.T) {
	t.Parallel()
	tr := mustCompile(t, tornadoDir(t, "rules.d"))
	for _, tenant := range []string{"alpha", "beta"} {
		ev := mustEvent(t, `{"type":"something","created_ms":1,"metadata":{"tenant_id":"`+tenant+`"},"payload":{}}`)
		res, _ := processLive(t, tr, ev)
		var matched []string
		for _, n := range res.Nodes {
			if n.Kind == config.KindFilter && n.Status == StatusMatched {
				matched = append(matched, n.Name)
			}
		}
		if want := "tenant_id_" + tenant; len(matched) != 1 || matched[0] != want {
			t.Errorf("tenant %s: matched filters %v, want [%s]", tenant, matched, want)
		}
	}
}

func TestTree_testConfigFixture(t *testing.T) {
	t.Parallel()
	root := tornadoDir(t, "v2/test_config")
	if got := root.Count(); got != (config.Counts{Filters: 6, Iterators: 1, Rules: 4}) {
		t.Errorf("counts %+v", got)
	}
	tr := mustCompile(t, root)
	ev := eventFile(t, "tornado/openshift_webhook_event.json")
	processLive(t, tr, ev)
}

func TestDecodeEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"minimal", `{"type":"t","created_ms":1,"payload":{}}`, true},
		{"with metadata and trace id", `{"type":"t","created_ms":1,"payload":{},"metadata":{"a":1},"trace_id":"x","extra":1}`, true},
		{"null metadata", `{"type":"t","created_ms":1,"payload":{},"metadata":null}`, true},
		{"missing type", `{"created_ms":1,"payload":{}}`, false},
		{"type not a string", `{"type":1,"created_ms":1,"payload":{}}`, false},
		{"missing created_ms", `{"type":"t","payload":{}}`, false},
		{"negative created_ms", `{"type":"t","created_ms":-1,"payload":{}}`, false},
		{"float created_ms", `{"type":"t","created_ms":1.5,"payload":{}}`, false},
		{"missing payload", `{"type":"t","created_ms":1}`, false},
		{"payload not an object", `{"type":"t","created_ms":1,"payload":[]}`, false},
		{"metadata not an object", `{"type":"t","created_ms":1,"payload":{},"metadata":"x"}`, false},
		{"not JSON", `{"type":`, false},
		{"not an object", `[1]`, false},
		{"trailing garbage", `{"type":"t","created_ms":1,"payload":{}} x`, false},
		{"bad number", `{"type":"t","created_ms":1,"payload":{"n":01}}`, false},
		{"deep", `{"type":"t","created_ms":1,"payload":{"a":` + strings.Repeat("[", 250) + strings.Repeat("]", 250) + `}}`, true},
		{"too deep", `{"type":"t","created_ms":1,"payload":{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := DecodeEvent([]byte(tc.in))
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "invalid event") {
					t.Errorf("error %q does not say what failed", err)
				}
				return
			}
			if ev.Metadata() == nil {
				t.Error("metadata must default to {}")
			}
		})
	}
	t.Run("numbers keep their class", func(t *testing.T) {
		ev := mustEvent(t, string(readFile(t, "tornado/event_nested_01.json")))
		b, _ := json.Marshal(ev)
		for _, n := range []string{"222", "-111", "123456.789"} {
			if !strings.Contains(string(b), n) {
				t.Errorf("%s lost in %s", n, b)
			}
		}
	})
	t.Run("nulls", func(t *testing.T) {
		if _, err := DecodeEvent(readFile(t, "tornado/event_with_null_value.json")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCompile_invalid(t *testing.T) {
	t.Parallel()
	if _, err := Compile(nil); err == nil {
		t.Error("nil tree compiled")
	}
	r := mustRule(t, ruleJSON("r", true, `{"type":"regex","regex":"(","target":"${event.type}"}`, "", ""))
	_, err := Compile(rulesetTree(r))
	var ve *config.ValidationError
	if err == nil || !errors.As(err, &ve) || ve.Rule != "r" {
		t.Fatalf("err = %v", err)
	}
}
