package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/metrictest"
	"github.com/squallhq/squall/master/mastertest"
)

// appliedCommands returns how many commands of type cmd node i's state
// machine applied with outcome ok.
func appliedCommands(t *testing.T, c *mastertest.Cluster, i int, cmd string) float64 {
	t.Helper()
	return metrictest.Sum(t, c.Registry(i), "squall_store_fsm_commands_total", map[string]string{"command": cmd, "result": "ok"})
}

// TestDraftEditsReplicateAsEdits checks that node and rule edits of a
// large draft travel through raft as the edit, not as the whole tree
// (issue 13 item 6): every node applies a draft_edit command, none an
// edit_draft, and every node ends with the same draft.
func TestDraftEditsReplicateAsEdits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	c := e.cluster
	// 2,000 rules in master,big.
	big := &config.Node{Kind: config.KindRuleset, Name: "big"}
	for i := range 2000 {
		big.Rules = append(big.Rules, &config.Rule{Name: fmt.Sprintf("r%d", i), Active: true, Continue: true,
			Actions: []*config.Action{{ID: "logger", Payload: map[string]any{"msg": "rule " + strings.Repeat("x", 64)}}}})
	}
	leader := c.Server(c.Leader()).Store()
	root, _ := leader.Active()
	root.Child("master").Children = append(root.Child("master").Children, big)
	c.ReplaceActive(root)
	id := e.newDraft()
	c.WaitConverged()
	nodes := c.Running()
	before := map[int][2]float64{}
	for _, i := range nodes {
		before[i] = [2]float64{appliedCommands(t, c, i, "draft_edit"), appliedCommands(t, c, i, "edit_draft")}
	}
	rules := cfgPath + "/draft/rule/details/m/" + id + "/master,big"
	e.expect(e.send("PUT", rules+"/r1000", alice, `{"name":"r1000","description":"edited","continue":true,"active":false,"constraint":{"WHERE":null,"WITH":{}},"actions":[]}`), 200, "")
	e.expect(e.send("POST", rules, alice, `{"name":"r_new","description":"","continue":true,"active":true,"constraint":{"WHERE":null,"WITH":{}},"actions":[]}`), 200, "")
	e.expect(e.send("PUT", cfgPath+"/draft/rule/move/m/"+id+"/master,big/r_new", alice, `{"position":0}`), 200, "")
	e.expect(e.do("DELETE", rules+"/r5", alice, "", nil), 200, "")
	e.expect(e.send("POST", cfgPath+"/draft/tree/details/m/"+id+"/master", alice, `{"type":"Ruleset","name":"small"}`), 200, "")
	c.WaitConverged()
	for _, i := range nodes {
		if got := appliedCommands(t, c, i, "draft_edit") - before[i][0]; got != 5 {
			t.Errorf("node %d applied %v draft_edit commands, want 5", i, got)
		}
		if got := appliedCommands(t, c, i, "edit_draft") - before[i][1]; got != 0 {
			t.Errorf("node %d applied %v whole-tree edit_draft commands, want 0", i, got)
		}
	}
	want, err := leader.Draft()
	if err != nil {
		t.Fatal(err)
	}
	rs := want.Tree.Find([]string{"master", "big"})
	if len(rs.Rules) != 2000 || rs.Rules[0].Name != "r_new" || rs.Rules[1000].Description != "edited" {
		t.Fatalf("draft after the edits: %d rules, first %s", len(rs.Rules), rs.Rules[0].Name)
	}
	for _, i := range nodes {
		d, err := c.Server(i).Store().Draft()
		if err != nil {
			t.Fatal(err)
		}
		if !config.NodeEqual(d.Tree, want.Tree) {
			t.Errorf("node %d has another draft", i)
		}
	}
}

// TestTreeLimits checks that the limits of docs/rules.md are enforced with
// an error naming the limit, and change nothing.
func TestTreeLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	id := e.newDraft()
	before := e.exportOf(id, "master")
	long := strings.Repeat("n", 70000)
	for _, tc := range []struct {
		name, method, path, body, limit string
	}{
		{"node name", "POST", "/draft/tree/details/m/" + id + "/master", `{"type":"Ruleset","name":"` + long + `"}`, config.LimitNodeNameLength},
		{"node rename", "PUT", "/draft/tree/details/m/" + id + "/master,archive", `{"type":"Ruleset","name":"` + long + `"}`, config.LimitNodeNameLength},
		{"rule name", "POST", "/draft/rule/details/m/" + id + "/master,archive", `{"name":"` + long + `","description":"","continue":true,"active":true,"constraint":{"WHERE":null,"WITH":{}},"actions":[]}`, config.LimitRuleNameLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.send(tc.method, cfgPath+tc.path, alice, tc.body)
			e.expect(r, 409, "LIMIT_EXCEEDED")
			p := r.json(t)["params"].(map[string]any)
			if p["LIMIT"] != tc.limit || p["MAX"] != fmt.Sprint(config.MaxNameLength) || p["VALUE"] != "70000" {
				t.Errorf("params %v", p)
			}
			if len(r.body) > 4096 {
				t.Errorf("an answer of %d bytes", len(r.body))
			}
			if e.exportOf(id, "master") != before {
				t.Error("a refused edit changed the draft")
			}
		})
	}
	t.Run("import of too many nodes", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`{"version":"1.1","Filter":{"name":"many","filter":{"description":"","active":true,"filter":null},"nodes":[`)
		for i := range config.MaxNodes {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"Ruleset":{"name":"r%d","rules":[]}}`, i)
		}
		b.WriteString(`]}}`)
		body, ct := multipartBody(t, "file", []byte(b.String()))
		r := e.do("POST", cfgPath+"/draft/tree/import/m/"+id+"/master", alice, ct, body)
		e.expect(r, 409, "LIMIT_EXCEEDED")
		if p := r.json(t)["params"].(map[string]any); p["LIMIT"] != config.LimitNodes || p["MAX"] != fmt.Sprint(config.MaxNodes) {
			t.Errorf("params %v", p)
		}
		if e.exportOf(id, "master") != before {
			t.Error("a refused import changed the draft")
		}
	})
}

// TestDraftRules_FieldParam: a refused rule or node names the field at
// fault in params.FIELD, as a path inside the body sent, whether the body
// did not decode (400) or did not validate (409).
func TestDraftRules_FieldParam(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	id := e.newDraft()
	rules := cfgPath + "/draft/rule/details/m/" + id + "/master,archive"
	nodes := cfgPath + "/draft/tree/details/m/" + id + "/master"
	rule := func(where, with, actions string) string {
		return `{"name":"r","description":"","continue":true,"active":true,"constraint":{"WHERE":` + where + `,"WITH":` + with + `},"actions":` + actions + `}`
	}
	const where = `{"type":"AND","operators":[{"type":"equals","first":"${event.type}","second":"x"},{"type":"regex","regex":"a","target":"${event.type}"}]}`
	const with = `{"v":{"from":"${event.type}","regex":{"type":"Regex","match":"(.*)","group_match_idx":1,"all_matches":false},"modifiers_post":[]}}`
	const actions = `[{"id":"logger","payload":{"v":"${_variables.v}"}}]`
	cases := []struct {
		name, url, body string
		status          int
		field           string
	}{
		{"unknown operator", rules, rule(strings.Replace(where, `"equals"`, `"sameAs"`, 1), with, actions), 400, "constraint.WHERE.operators[0].type"},
		{"unterminated accessor", rules, rule(strings.Replace(where, `"${event.type}","second"`, `"${event.type","second"`, 1), with, actions), 409, "constraint.WHERE.operators[0].first"},
		{"bad regex", rules, rule(strings.Replace(where, `"regex":"a"`, `"regex":"("`, 1), with, actions), 409, "constraint.WHERE.operators[1].regex"},
		{"bad extractor regex", rules, rule(where, strings.Replace(with, "(.*)", "(", 1), actions), 409, "constraint.WITH.v.regex"},
		{"bad payload accessor", rules, rule(where, with, strings.Replace(actions, "${_variables.v}", "${_variables.v", 1)), 409, "actions[0].payload.v"},
		{"bad action id", rules, rule(where, with, strings.Replace(actions, "logger", "log-ger", 1)), 409, "actions[0].id"},
		{"unknown field", rules, strings.Replace(rule(where, with, actions), `"active":true`, `"active":true,"colour":"red"`, 1), 400, "colour"},
		{"duplicate name", rules, strings.Replace(rule(where, with, actions), `"name":"r"`, `"name":"a1"`, 1), 409, ""},
		{"node filter", nodes, `{"type":"Filter","name":"f","description":"","active":true,"filter":{"type":"equals","first":"${pippo}","second":"x"}}`, 409, "filter.first"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.send("POST", tc.url, alice, tc.body)
			e.expect(r, tc.status, "")
			params, _ := r.json(t)["params"].(map[string]any)
			if got, _ := params["FIELD"].(string); got != tc.field {
				t.Errorf("params.FIELD %q, want %q: %s", got, tc.field, r.body)
			}
		})
	}
}
