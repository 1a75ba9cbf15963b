package tree

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
)

// unlimited are limits no test tree reaches.
var unlimited = ExplainLimits{MaxEntries: 1 << 30, MaxBytes: 1 << 40, MaxValueBytes: 1 << 30}

// checkExplain is the oracle's part for explanations: for one event, the
// explanation must say what Process and the reference evaluator say. The
// entries are the filters, iterators and rules of the result tree, in
// order, with the same statuses (the compiled evaluator's); every
// condition has the reference's outcome, operands and values, at every
// level of nesting, and its outcome follows from its operands; the
// matched rules are the live evaluation's; every
// extraction has the reference's input, match, value or failure, and a
// matched rule's variables are Process's; and cut short by a limit, an
// explanation is the start of the whole one, marked truncated.
func checkExplain(t testing.TB, c oracleCase, ev *Event, res *ProcessedNode, live []string, trace []refTrace, fail func(what, got, want string)) {
	t.Helper()
	exp := c.tr.Explain(ev, unlimited)
	if exp.Truncated {
		fail("explain truncated without limits", exp.Note, "")
	}
	var got, want, compiled []string
	for _, e := range exp.Entries {
		got = append(got, explainLine(e))
		compiled = append(compiled, e.Kind+" "+e.Path+" "+e.Rule+" "+e.Status)
		checkExplainConsistent(t, e, fail)
	}
	for _, tr := range trace {
		want = append(want, refTraceLine(tr))
	}
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		fail("the explanation (against the reference)", g, w)
	}
	if g, w := strings.Join(compiled, "\n"), strings.Join(resultLines(res, ""), "\n"); g != w {
		fail("the explanation's statuses (against Process)", g, w)
	}
	checkExplainVars(t, exp, res, fail)
	// The matched rules are the live evaluation's too (MatchedActions,
	// through the index and the guards).
	var matched []string
	for _, e := range exp.Entries {
		if e.Kind == ExplainRule && e.Status == string(RuleMatched) {
			matched = append(matched, e.Path[strings.LastIndexByte(e.Path, '/')+1:]+"/"+e.Rule)
		}
	}
	if g, w := strings.Join(matched, " "), strings.Join(live, " "); g != w {
		fail("the explanation's matched rules (against MatchedActions)", g, w)
	}
	b, err := json.Marshal(exp)
	if err != nil {
		t.Fatalf("explanation does not encode: %v", err)
	}
	if n := len(exp.Entries); n > 1 {
		cut := c.tr.Explain(ev, ExplainLimits{MaxEntries: n / 2, MaxBytes: len(b), MaxValueBytes: 1 << 30})
		if !cut.Truncated || len(cut.Entries) != n/2 || cut.Note == "" {
			fail("an explanation cut at half its entries", fmt.Sprintf("%d entries, truncated %v", len(cut.Entries), cut.Truncated), fmt.Sprintf("%d entries, truncated", n/2))
		}
		for i := range cut.Entries {
			if g, w := explainLine(cut.Entries[i]), got[i]; g != w {
				fail(fmt.Sprintf("entry %d of a cut explanation", i), g, w)
			}
		}
	}
}

// explainLine writes an entry as refTraceLine writes the reference's
// trace: it is written through the trace form.
func explainLine(e ExplainEntry) string {
	tr := refTrace{Kind: e.Kind, Path: e.Path, Rule: e.Rule, Status: e.Status}
	if e.Condition != nil {
		tr.Cond = explainCond(e.Condition)
	}
	for _, v := range e.Variables {
		tr.Vars = append(tr.Vars, refVar{Name: v.Variable, From: operandText(v.From), Matched: v.Matched, Value: "=" + string(v.Value), Failed: v.Error != ""})
	}
	return refTraceLine(tr)
}

// explainCond is an explained condition in the trace form: its operands
// as "expr=value" or "expr missing", and its regex.
func explainCond(c *ExplainCond) *refCond {
	out := &refCond{Op: c.Op, Outcome: c.Outcome}
	for _, o := range []*ExplainOperand{c.First, c.Second, c.Target} {
		if o != nil {
			out.Args = append(out.Args, operandText(o))
		}
	}
	if c.Regex != nil {
		out.Args = append(out.Args, "regex "+*c.Regex)
	}
	for _, o := range c.Operands {
		out.Operands = append(out.Operands, explainCond(o))
	}
	return out
}

func operandText(o *ExplainOperand) string {
	if o.Missing {
		return o.Expr + " missing"
	}
	return o.Expr + "=" + string(o.Value)
}

func refTraceLine(tr refTrace) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s", tr.Kind, tr.Path, tr.Rule, tr.Status)
	if tr.Cond != nil {
		b.WriteString(" where ")
		writeRefCond(&b, tr.Cond)
	}
	for _, v := range tr.Vars {
		value := "failed"
		if !v.Failed {
			value = v.Value
		}
		fmt.Fprintf(&b, " with %s from %s matched %v: %s", v.Name, v.From, v.Matched, value)
	}
	return b.String()
}

func writeRefCond(b *strings.Builder, c *refCond) {
	args := slices.Sorted(slices.Values(c.Args))
	fmt.Fprintf(b, "%s=%v%q(", c.Op, c.Outcome, args)
	for _, o := range c.Operands {
		writeRefCond(b, o)
	}
	b.WriteString(")")
}

// resultLines lists the filters, iterators and rules of a result tree in
// order, as explanation entries name them.
func resultLines(n *ProcessedNode, parent string) []string {
	path := joinPath(parent, n.Name)
	switch n.Kind {
	case config.KindFilter:
		out := []string{"filter " + path + "  " + string(n.Status)}
		for _, c := range n.Nodes {
			out = append(out, resultLines(c, path)...)
		}
		return out
	case config.KindIterator:
		out := []string{"iterator " + path + "  " + string(n.Status)}
		for _, it := range n.Events {
			for _, c := range it.Nodes {
				out = append(out, resultLines(c, path+"["+it.Event.IterationLabel()+"]")...)
			}
		}
		return out
	}
	var out []string
	for _, r := range n.Rules.Rules {
		out = append(out, "rule "+path+" "+r.Name+" "+string(r.Status))
	}
	return out
}

// checkExplainConsistent checks that every outcome of an entry follows
// from what it shows: AND, OR and NOT from their operands, the entry's
// status from its condition and its variables.
func checkExplainConsistent(t testing.TB, e ExplainEntry, fail func(what, got, want string)) {
	t.Helper()
	var check func(c *ExplainCond)
	check = func(c *ExplainCond) {
		want := c.Outcome
		switch c.Op {
		case string(config.OpAnd):
			want = !slices.ContainsFunc(c.Operands, func(o *ExplainCond) bool { return !o.Outcome })
		case string(config.OpOr):
			want = slices.ContainsFunc(c.Operands, func(o *ExplainCond) bool { return o.Outcome })
		case string(config.OpNot):
			want = len(c.Operands) == 1 && !c.Operands[0].Outcome
		}
		if c.Outcome != want {
			fail("an explained condition's outcome", fmt.Sprint(c.Outcome), fmt.Sprint(want))
		}
		for _, o := range c.Operands {
			check(o)
		}
	}
	if e.Condition != nil {
		check(e.Condition)
		falseStatus := string(RuleNotMatched)
		if e.Kind == ExplainFilter {
			falseStatus = string(StatusNotMatched)
		}
		if !e.Condition.Outcome != (e.Status == falseStatus) {
			fail("an entry's status and its condition", e.Status, fmt.Sprint(e.Condition.Outcome))
		}
	}
	if e.Reason == "" {
		fail("an entry's reason", "", "a reason")
	}
	for i, v := range e.Variables {
		if v.Error != "" && (i != len(e.Variables)-1 || e.Status != string(RulePartiallyMatched)) {
			fail("a variable's failure and its rule's status", e.Status, "PartiallyMatched after the last variable")
		}
	}
}

// checkExplainVars checks that a matched rule's variables are the ones
// Process extracted.
func checkExplainVars(t testing.TB, exp *Explanation, res *ProcessedNode, fail func(what, got, want string)) {
	t.Helper()
	extracted := map[string]map[string]map[string]any{}
	var walk func(n *ProcessedNode, parent string)
	walk = func(n *ProcessedNode, parent string) {
		path := joinPath(parent, n.Name)
		if n.Rules != nil {
			extracted[path] = n.Rules.ExtractedVars
		}
		for _, c := range n.Nodes {
			walk(c, path)
		}
		for _, it := range n.Events {
			for _, c := range it.Nodes {
				walk(c, path+"["+it.Event.IterationLabel()+"]")
			}
		}
	}
	walk(res, "")
	for _, e := range exp.Entries {
		if e.Kind != ExplainRule || e.Status != string(RuleMatched) {
			continue
		}
		vars := extracted[e.Path][e.Rule]
		for _, v := range e.Variables {
			want, _ := json.Marshal(vars[v.Variable])
			if string(v.Value) != string(want) {
				fail("variable "+v.Variable+" of rule "+e.Rule, string(v.Value), string(want))
			}
		}
		if len(vars) != len(e.Variables) {
			fail("the variables of rule "+e.Rule, fmt.Sprint(len(e.Variables)), fmt.Sprint(len(vars)))
		}
	}
}

// TestTree_Explain explains an event that meets every kind of entry
// (testdata/explain): filters true, false and inactive, an iterator over
// an array and one whose target is missing, a nested WHERE, extractions
// that match, one that fails, a rule that stops its ruleset, an inactive
// rule; the explanation is compared with its golden file.
func TestTree_Explain(t *testing.T) {
	t.Parallel()
	root := exportFile(t, "explain/tree.json")
	tr := mustCompile(t, root)
	ev := mustEvent(t, string(readFile(t, "explain/event.json")))
	exp := tr.Explain(ev, DefaultExplainLimits())
	got, err := json.MarshalIndent(exp, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "explain/explain.golden.json", got)
	checkOracle(t, newReference(), oracleCase{name: "explain", root: root, tr: tr}, readFile(t, "explain/event.json"))
}

// TestTree_ExplainLimits: an explanation of a tree of many rules stops at
// the entry limit or the byte limit, marked truncated with a note; a
// large value is cut to its start, marked.
func TestTree_ExplainLimits(t *testing.T) {
	t.Parallel()
	var rules []*config.Rule
	for i := range 50 {
		rules = append(rules, mustRule(t, fmt.Sprintf(`{"name":"r%d","description":"","continue":true,"active":true,
			"constraint":{"WHERE":{"type":"equals","first":"${event.payload.big}","second":"x"},"WITH":{}},"actions":[]}`, i)))
	}
	tr := mustCompile(t, rulesetTree(rules...))
	ev := payloadEvent(t, `{"big":"`+strings.Repeat("é", 5000)+`"}`)
	tests := []struct {
		name    string
		lim     ExplainLimits
		entries int
		note    string
	}{
		{"entries", ExplainLimits{MaxEntries: 10, MaxBytes: 1 << 20, MaxValueBytes: 100}, 10, "stops at 10 entries, at 10 entries"},
		{"bytes", ExplainLimits{MaxEntries: 1000, MaxBytes: 2000, MaxValueBytes: 100}, 0, "stops before 2000 bytes"},
		{"everything", ExplainLimits{MaxEntries: 51, MaxBytes: 1 << 20, MaxValueBytes: 100}, 51, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exp := tr.Explain(ev, tc.lim)
			b, err := json.Marshal(exp)
			if err != nil {
				t.Fatal(err)
			}
			if tc.entries > 0 && len(exp.Entries) != tc.entries {
				t.Errorf("%d entries, want %d", len(exp.Entries), tc.entries)
			}
			if exp.Truncated != (tc.note != "") || !strings.Contains(exp.Note, tc.note) {
				t.Errorf("truncated %v, note %q; want %q", exp.Truncated, exp.Note, tc.note)
			}
			if len(b) > 2*tc.lim.MaxBytes+200 {
				t.Errorf("%d bytes of JSON, limit %d", len(b), tc.lim.MaxBytes)
			}
			last := exp.Entries[len(exp.Entries)-1]
			if last.Kind == ExplainRule {
				v := last.Condition.First
				var s string
				if err := json.Unmarshal(v.Value, &s); err != nil || !v.Truncated || !strings.HasSuffix(s, "…") || len(v.Value) > 110 {
					t.Errorf("the large value is not cut: %s (truncated %v)", v.Value, v.Truncated)
				}
			}
		})
	}
}
