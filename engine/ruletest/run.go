package ruletest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/textlist"
)

// Runner runs test cases against one compiled tree. It is safe for
// concurrent use.
type Runner struct {
	tree *tree.Tree
	// rules maps the rule paths of the tree, without iterations, to their
	// rules.
	rules map[string]*config.Rule
	// nodes maps the node paths of the tree to their nodes.
	nodes map[string]*config.Node
	// top is the name of the tree's top node.
	top string
	// now measures durations; time.Now unless a test sets it.
	now func() time.Time
}

// New compiles root with the engines' compiler and returns a runner for it.
// root is the tree's top node (the root filter of a whole tree, or the top
// node of an exported subtree); rule paths start with its name.
func New(root *config.Node) (*Runner, error) {
	t, err := tree.Compile(root)
	if err != nil {
		return nil, err
	}
	r := &Runner{tree: t, rules: map[string]*config.Rule{}, nodes: map[string]*config.Node{}, top: root.Name, now: time.Now}
	root.Walk(func(path []string, n *config.Node) bool {
		p := strings.Join(path, "/")
		r.nodes[p] = n
		for _, rule := range n.Rules {
			r.rules[p+"/"+rule.Name] = rule
		}
		return true
	})
	return r, nil
}

// FileResult is the outcome of a test file.
type FileResult struct {
	File  string
	Cases []CaseResult
}

// Failed returns how many of the file's cases failed.
func (f FileResult) Failed() int {
	n := 0
	for _, c := range f.Cases {
		if !c.Passed() {
			n++
		}
	}
	return n
}

// CaseResult is the outcome of a case: passed when it has no failures.
type CaseResult struct {
	Name     string
	Failures []Failure
	Duration time.Duration
}

// Passed reports whether every expectation of the case held.
func (c CaseResult) Passed() bool { return len(c.Failures) == 0 }

// Failure is an expectation that did not hold.
type Failure struct {
	// Rule is the rule's path as the case writes it.
	Rule string
	// Expectation is what was checked: "match", "no_match", "rule" (the
	// path names no rule of the tree), "variable NAME", "action ID" or
	// "action ID payload.FIELD".
	Expectation string
	// Expected and Got say what was expected and what happened.
	Expected, Got string
}

// String writes the failure on one line:
// "root/alerts/notify: match: expected Matched, got NotMatched".
func (f Failure) String() string {
	return fmt.Sprintf("%s: %s: expected %s, got %s", f.Rule, f.Expectation, f.Expected, f.Got)
}

// Run runs every case of f.
func (r *Runner) Run(f *File) FileResult {
	res := FileResult{File: f.Name, Cases: make([]CaseResult, 0, len(f.Cases))}
	for _, c := range f.Cases {
		res.Cases = append(res.Cases, r.RunCase(c))
	}
	return res
}

// RunCase runs one case.
func (r *Runner) RunCase(c *Case) CaseResult {
	start := r.now()
	result, _ := r.tree.Process(c.Event)
	ch := checker{r: r, result: result}
	ch.walk(result, nil)
	for _, p := range c.Match {
		ch.match(p)
	}
	for _, p := range c.NoMatch {
		ch.noMatch(p)
	}
	for _, v := range c.Variables {
		ch.variables(v)
	}
	for _, a := range c.Actions {
		ch.actions(a)
	}
	return CaseResult{Name: c.Name, Failures: ch.failures, Duration: r.now().Sub(start)}
}

// outcome is what happened to one rule in one evaluation (a rule below an
// iterator has one outcome per iteration).
type outcome struct {
	segs    []segment
	status  tree.RuleStatus
	message string
	// vars are the variables the rule extracted, nil when it extracted none.
	vars    map[string]any
	actions []tree.Action
	// stoppedBy is, for a rule not processed, the matched rule before it
	// that stopped its ruleset.
	stoppedBy string
}

// label writes the outcome's path with its iterations.
func (o *outcome) label() string {
	parts := make([]string, len(o.segs))
	for i, s := range o.segs {
		parts[i] = s.name
		if s.iterated {
			parts[i] += "[" + s.iteration + "]"
		}
	}
	return strings.Join(parts, "/")
}

// iterated reports whether the outcome is one of several iterations.
func (o *outcome) iterated() bool {
	return slices.ContainsFunc(o.segs, func(s segment) bool { return s.iterated })
}

// describe writes the outcome's status, where it happened when the rule
// is below an iterator, and its explanation.
func (o *outcome) describe(r *Runner) string {
	out := string(o.status)
	if o.iterated() {
		out += " at " + o.label()
	}
	switch o.status {
	case tree.RulePartiallyMatched:
		out += " (" + o.message + ")"
	case tree.RuleNotProcessed:
		if o.stoppedBy != "" {
			out += " (rule " + o.stoppedBy + " matched before it and stops the ruleset: its continue is false)"
		} else if rule := r.rules[strings.Join(pathNames(o.segs), "/")]; rule != nil && !rule.Active {
			out += " (the rule is inactive)"
		}
	}
	return out
}

func pathNames(segs []segment) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = s.name
	}
	return out
}

// checker checks the expectations of one case against one result.
type checker struct {
	r        *Runner
	result   *tree.ProcessedNode
	outcomes []*outcome
	failures []Failure
}

func (ch *checker) fail(p Path, expectation, expected, got string) {
	ch.failures = append(ch.failures, Failure{Rule: p.raw, Expectation: expectation, Expected: expected, Got: got})
}

// walk collects the outcomes of every rule below n, whose parents' path is
// prefix.
func (ch *checker) walk(n *tree.ProcessedNode, prefix []segment) {
	path := append(prefix[:len(prefix):len(prefix)], segment{name: n.Name})
	switch n.Kind {
	case config.KindFilter:
		for _, c := range n.Nodes {
			ch.walk(c, path)
		}
	case config.KindIterator:
		for _, it := range n.Events {
			ipath := slices.Clone(path)
			ipath[len(ipath)-1] = segment{name: n.Name, iteration: it.Event.IterationLabel(), iterated: true}
			for _, c := range it.Nodes {
				ch.walk(c, ipath)
			}
		}
	case config.KindRuleset:
		if n.Rules == nil {
			return
		}
		stopper := ""
		for _, pr := range n.Rules.Rules {
			o := &outcome{
				segs:    append(path[:len(path):len(path)], segment{name: pr.Name}),
				status:  pr.Status,
				actions: pr.Actions,
				vars:    n.Rules.ExtractedVars[pr.Name],
			}
			if pr.Message != nil {
				o.message = *pr.Message
			}
			if pr.Status == tree.RuleNotProcessed {
				o.stoppedBy = stopper
			}
			if pr.Status == tree.RuleMatched && stopper == "" {
				if rule := ch.r.rules[strings.Join(pathNames(o.segs), "/")]; rule != nil && !rule.Continue {
					stopper = pr.Name
				}
			}
			ch.outcomes = append(ch.outcomes, o)
		}
	}
}

// find returns the outcomes of the rule p names; when p names no rule of
// the tree, it records the failure and returns false.
func (ch *checker) find(p Path) ([]*outcome, bool) {
	names := p.names()
	if ch.r.rules[strings.Join(names, "/")] == nil {
		ch.fail(p, "rule", "a rule at this path", ch.closest(names))
		return nil, false
	}
	for i, s := range p.segs {
		if !s.iterated {
			continue
		}
		if n := ch.r.nodes[strings.Join(names[:i+1], "/")]; n.Kind != config.KindIterator {
			ch.fail(p, "rule", "an iterator at "+strings.Join(names[:i+1], "/")+" (an iteration is given)", "a "+n.Kind.String())
			return nil, false
		}
	}
	var out []*outcome
	for _, o := range ch.outcomes {
		if p.matches(o.segs) {
			out = append(out, o)
		}
	}
	return out, true
}

// matches reports whether the path names a rule at segs: the same names,
// and the same iterations where the path gives them.
func (p Path) matches(segs []segment) bool {
	if len(segs) != len(p.segs) {
		return false
	}
	for i, s := range p.segs {
		if s.name != segs[i].name || (s.iterated && s.iteration != segs[i].iteration) {
			return false
		}
	}
	return true
}

// closest says what the tree has where a path names nothing: the deepest
// node of the path that exists, and what lies below it.
func (ch *checker) closest(names []string) string {
	for i := len(names) - 1; i > 0; i-- {
		p := strings.Join(names[:i], "/")
		n := ch.r.nodes[p]
		if n == nil {
			continue
		}
		var below []string
		if n.Kind == config.KindRuleset {
			for _, r := range n.Rules {
				below = append(below, r.Name)
			}
			return fmt.Sprintf("none (ruleset %s has rules: %s)", p, listOrNone(below))
		}
		for _, c := range n.Children {
			below = append(below, c.Name)
		}
		return fmt.Sprintf("none (%s %s has children: %s)", strings.ToLower(n.Kind.String()), p, listOrNone(below))
	}
	return fmt.Sprintf("none (the tree's top node is %s)", ch.r.top)
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	const maxListed = 10
	if len(names) > maxListed {
		return strings.Join(names[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}

// got describes what happened to a rule that did not match: its statuses,
// or why the evaluation did not reach it.
func (ch *checker) got(p Path, occ []*outcome) string {
	if len(occ) == 0 {
		return "not reached (" + ch.unreached(p) + ")"
	}
	return textlist.Join(occ, 5, "; ", func(o *outcome) string { return o.describe(ch.r) })
}

// unreached says why the evaluation reached no ruleset at p: a filter that
// did not match or is inactive, an iterator without iterations.
func (ch *checker) unreached(p Path) string {
	n := ch.result
	var at []string
	for i, s := range p.segs[:len(p.segs)-1] {
		if n == nil || n.Name != s.name {
			break
		}
		at = append(at, s.name)
		where := strings.Join(at, "/")
		if i == len(p.segs)-2 {
			break
		}
		next := p.segs[i+1].name
		switch n.Kind {
		case config.KindFilter:
			if n.Status != tree.StatusMatched {
				if n.Status == tree.StatusIgnored {
					return fmt.Sprintf("filter %s is inactive", where)
				}
				return fmt.Sprintf("filter %s: %s", where, n.Status)
			}
			n = childNamed(n.Nodes, next)
		case config.KindIterator:
			if n.Status != tree.StatusMatched {
				return fmt.Sprintf("iterator %s: %s", where, n.Status)
			}
			if cn := ch.r.nodes[strings.Join(p.names()[:i+1], "/")]; cn != nil && !cn.Active {
				return fmt.Sprintf("iterator %s is inactive", where)
			}
			if len(n.Events) == 0 {
				return fmt.Sprintf("iterator %s had no iterations", where)
			}
			it := n.Events[0]
			if s.iterated {
				j := slices.IndexFunc(n.Events, func(e tree.ProcessedIteration) bool { return e.Event.IterationLabel() == s.iteration })
				if j < 0 {
					return fmt.Sprintf("iterator %s had no iteration %s", where, s.iteration)
				}
				it = n.Events[j]
			}
			at[len(at)-1] = s.name + "[" + it.Event.IterationLabel() + "]"
			n = childNamed(it.Nodes, next)
		default:
			n = nil
		}
	}
	return "below " + strings.Join(at, "/")
}

func childNamed(nodes []*tree.ProcessedNode, name string) *tree.ProcessedNode {
	for _, c := range nodes {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (ch *checker) match(p Path) {
	occ, ok := ch.find(p)
	if !ok {
		return
	}
	if slices.ContainsFunc(occ, func(o *outcome) bool { return o.status == tree.RuleMatched }) {
		return
	}
	ch.fail(p, "match", string(tree.RuleMatched), ch.got(p, occ))
}

func (ch *checker) noMatch(p Path) {
	occ, ok := ch.find(p)
	if !ok {
		return
	}
	var matched []string
	for _, o := range occ {
		if o.status == tree.RuleMatched {
			matched = append(matched, o.label())
		}
	}
	switch {
	case len(matched) == 0:
	case len(occ) == 1 && !occ[0].iterated():
		ch.fail(p, "no_match", "not "+string(tree.RuleMatched), string(tree.RuleMatched))
	default:
		ch.fail(p, "no_match", "not "+string(tree.RuleMatched), string(tree.RuleMatched)+" at "+listOrNone(matched))
	}
}

func (ch *checker) variables(v VariablesExpectation) {
	occ, ok := ch.find(v.Rule)
	if !ok {
		return
	}
	var first map[string]any
	for _, o := range occ {
		if o.vars == nil {
			continue
		}
		got := normalize(o.vars).(map[string]any)
		if first == nil {
			first = got
		}
		if len(mismatches("", v.Values, got)) == 0 {
			return
		}
	}
	if first == nil {
		ch.fail(v.Rule, "variables", compact(v.Values), "no variables extracted: "+ch.got(v.Rule, occ))
		return
	}
	for _, name := range sortedKeys(v.Values) {
		gv, present := first[name]
		if !present {
			ch.fail(v.Rule, "variable "+name, compact(v.Values[name]), "no such variable (extracted: "+listOrNone(sortedKeys(first))+")")
			continue
		}
		for _, m := range mismatches("", v.Values[name], gv) {
			ch.fail(v.Rule, "variable "+name+m.path, m.want, m.got)
		}
	}
}

func (ch *checker) actions(ae ActionsExpectation) {
	occ, ok := ch.find(ae.Rule)
	if !ok {
		return
	}
	var got []any // normalized {id, payload} objects
	var ids []string
	for _, o := range occ {
		for _, a := range o.actions {
			got = append(got, normalize(a))
			ids = append(ids, a.ID)
		}
	}
	used := make([]bool, len(got))
	for _, want := range ae.Actions {
		label := "action " + want.ID
		if len(got) == 0 {
			ch.fail(ae.Rule, label, describeAction(want), "no actions: "+ch.got(ae.Rule, occ))
			continue
		}
		wantObj := map[string]any{"id": want.ID}
		if want.Payload != nil {
			wantObj["payload"] = want.Payload
		}
		found, sameID := -1, -1
		for i, g := range got {
			if used[i] || ids[i] != want.ID {
				continue
			}
			if sameID < 0 {
				sameID = i
			}
			if len(mismatches("", wantObj, g)) == 0 {
				found = i
				break
			}
		}
		switch {
		case found >= 0:
			used[found] = true
		case sameID < 0:
			ch.fail(ae.Rule, label, describeAction(want), "actions "+strings.Join(ids, ", "))
		default:
			for _, m := range mismatches("", wantObj, got[sameID]) {
				ch.fail(ae.Rule, label+" "+strings.TrimPrefix(m.path, "."), m.want, m.got)
			}
		}
	}
}

func describeAction(a ExpectedAction) string {
	if a.Payload == nil {
		return "an action " + a.ID
	}
	return "an action " + a.ID + " with payload " + compact(a.Payload)
}

// normalize turns a value of the evaluation into the form of decoded JSON
// (maps, slices, json.Number...), as expectations are.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	out, err := decodeValue(b)
	if err != nil {
		return string(b)
	}
	return out
}
