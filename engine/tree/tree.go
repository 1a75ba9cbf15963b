package tree

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/panics"
)

// Tree is a compiled processing tree. It is immutable and safe for
// concurrent use.
type Tree struct {
	root *node
	// pool recycles the scratch space of live evaluations.
	pool sync.Pool
	// layout describes the counted nodes and rules (counters.go).
	layout layout
}

type node struct {
	kind     config.Kind
	name     string
	active   bool
	filter   cond // nil matches everything
	target   *accessor
	children []*node
	rules    []rule
	// index selects the children worth visiting in live evaluation.
	index *childIndex
	// guard, when set, must hold for this node to produce any action.
	guard *nodeGuard
	// never is true when the node can never produce an action.
	never bool
	// nsets and nvals size the variables of a ruleset evaluation: the
	// rules that extract, and their extractors.
	nsets, nvals int
	// id is the node's position in the tree's preorder (counters.go).
	id int32
}

// compiler holds what compilation shares across the tree: rules often
// repeat the same patterns, and one compiled regexp serves them all.
type compiler struct {
	regexps map[string]*regexp.Regexp
	// exprs are immutable too: rules read the same fields again and again,
	// and shared expressions stay in the CPU caches.
	exprs map[string]*expr
	// pos is the position of the node being compiled, one name each, an
	// iterator's followed by posBreak.
	pos []string
	// conds, extractors, templates and nameLists share what rules repeat
	// (intern.go), by key.
	conds      map[string]cond
	extractors map[string]*extractor
	templates  map[string]*template
	nameLists  map[string][]string
	// layout collects the nodes and rules in preorder, as ids are given.
	layout layout
}

func newCompiler() *compiler {
	return &compiler{regexps: map[string]*regexp.Regexp{}, exprs: map[string]*expr{},
		conds: map[string]cond{}, extractors: map[string]*extractor{}, templates: map[string]*template{}, nameLists: map[string][]string{}}
}

func (cc *compiler) regexp(pattern string) (*regexp.Regexp, error) {
	return shared(cc.regexps, pattern, func() (*regexp.Regexp, error) { return regexp.Compile(pattern) })
}

type rule struct {
	// id is the rule's position among the tree's rules, from 1
	// (counters.go).
	id         int32
	name       string
	active     bool
	cont       bool
	where      cond // nil matches everything
	extractors []*extractor
	// varNames are the extractors' names, in order.
	varNames []string
	actions  []actionTemplate

	// The parts of a small rule that are its own, in the rule's memory:
	// evaluating it touches a few adjacent cache lines (decision 36).
	ext1   [1]*extractor
	where2 [2]cond
	eq     equalsString
	act1   [1]actionTemplate
}

// rulesetNode is a ruleset of one rule in one allocation.
type rulesetNode struct {
	node
	rule1 [1]rule
}

// Compile validates the tree rooted at root and compiles it. The root may
// be of any kind; the result of evaluation starts there.
func Compile(root *config.Node) (*Tree, error) {
	if root == nil {
		return nil, fmt.Errorf("compile: no tree")
	}
	if err := config.Validate(root); err != nil {
		return nil, err
	}
	cc := newCompiler()
	n, err := cc.node(nil, root)
	if err != nil {
		return nil, err
	}
	t := &Tree{root: n, layout: cc.layout}
	t.pool.New = func() any { return &evaluator{} }
	return t, nil
}

// CompileError is a node of a valid tree that the compiler could not
// compile: a bug of the compiler, which a deploy must refuse and an
// engine must survive. A panic of the compiler is one too: its Err is
// then a *panics.Error with the stack.
type CompileError struct {
	// Path names the node, from the root.
	Path []string
	Err  error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("compile node %s: %v", config.PathString(e.Path), e.Err)
}

func (e *CompileError) Unwrap() error { return e.Err }

func (cc *compiler) node(parent []string, cn *config.Node) (n *node, err error) {
	path := append(parent[:len(parent):len(parent)], cn.Name)
	defer func() {
		// The innermost node being compiled names the panic.
		if v := recover(); v != nil {
			n, err = nil, &CompileError{Path: path, Err: panics.Recovered(v)}
		}
	}()
	// pos is the path as an action position ([Action.Position]): an
	// iterator's name ends a piece of it, its iteration goes in between.
	pos := append(cc.pos[:len(cc.pos):len(cc.pos)], cn.Name)
	if cn.Kind == config.KindIterator {
		pos[len(pos)-1] += posBreak
	}
	cc.pos = pos
	defer func() { cc.pos = pos[:len(pos)-1] }()
	n = &node{}
	if cn.Kind == config.KindRuleset && len(cn.Rules) == 1 {
		rn := &rulesetNode{}
		n, n.rules = &rn.node, rn.rule1[:]
	}
	n.kind, n.name, n.active = cn.Kind, cn.Name, cn.Active
	cc.count(n, path, cn)
	defer cc.uncount()
	wrap := func(err error) error { return &CompileError{Path: path, Err: err} }
	switch cn.Kind {
	case config.KindFilter:
		if cn.Filter != nil {
			c, err := cc.operator(cn.Filter)
			if err != nil {
				return nil, wrap(err)
			}
			n.filter = c
			if g := guard(c); g != nil {
				n.guard = &nodeGuard{acc: g.acc, values: []string{g.value}}
			}
		}
		n.never = !cn.Active
	case config.KindIterator:
		acc, err := config.ParseTarget(cn.Target)
		if err != nil {
			return nil, wrap(err)
		}
		n.target = newAccessor(acc)
		n.never = !cn.Active
	case config.KindRuleset:
		if n.rules == nil {
			n.rules = make([]rule, len(cn.Rules))
		}
		rpos := strings.Join(pos, "/")
		for i, cr := range cn.Rules {
			if err := cc.rule(rpos, cr, &n.rules[i]); err != nil {
				return nil, wrap(fmt.Errorf("rule %s: %w", cr.Name, err))
			}
		}
		n.never, n.guard = rulesetGuard(n.rules)
		for i := range n.rules {
			if r := &n.rules[i]; len(r.extractors) > 0 {
				n.nsets++
				n.nvals += len(r.extractors)
			}
		}
		return n, nil
	}
	for _, c := range cn.Children {
		child, err := cc.node(path, c)
		if err != nil {
			return nil, err
		}
		n.children = append(n.children, child)
	}
	n.index = buildIndex(n.children)
	return n, nil
}

func (cc *compiler) rule(rulesetPos string, cr *config.Rule, r *rule) error {
	r.name, r.active, r.cont = cr.Name, cr.Active, cr.Continue
	r.id = cc.countRule(cr)
	if cr.Where != nil {
		c, err := cc.operator(cr.Where)
		if err != nil {
			return fmt.Errorf("WHERE: %w", err)
		}
		r.where = r.own(c)
	}
	if len(cr.With) > 0 {
		names := make([]string, 0, len(cr.With))
		for name := range cr.With {
			names = append(names, name)
		}
		sort.Strings(names)
		r.extractors = r.ext1[:0]
		for _, name := range names {
			x, err := cc.extractor(name, cr.With[name])
			if err != nil {
				return fmt.Errorf("WITH %s: %w", name, err)
			}
			r.extractors = append(r.extractors, x)
		}
		r.varNames = cc.names(names)
	}
	r.actions = r.act1[:0]
	for _, a := range cr.Actions {
		t, err := cc.action(a)
		if err != nil {
			return err
		}
		r.actions = append(r.actions, t)
	}
	for i := range r.actions {
		a := &r.actions[i]
		pos := rulesetPos + "/" + cr.Name + "/" + strconv.Itoa(i)
		if strings.Contains(pos, posBreak) {
			a.pos = strings.Split(pos, posBreak)
		} else {
			a.pos1[0] = pos
			a.pos = a.pos1[:]
		}
	}
	return nil
}

// own copies into the rule the parts of its condition that are its own:
// an AND of at most two conditions, and its string equality.
//
// Conditions are interfaces whose dynamic types include slices (andCond,
// orCond): they are told apart by type, never compared with ==.
func (r *rule) own(c cond) cond {
	if eq, ok := c.(*equalsString); ok {
		r.eq = *eq
		return &r.eq
	}
	and, ok := c.(andCond)
	if !ok || len(and) > len(r.where2) {
		return c
	}
	n := copy(r.where2[:], and)
	for i, x := range r.where2[:n] {
		if eq, ok := x.(*equalsString); ok {
			r.eq = *eq
			r.where2[i] = &r.eq
			break
		}
	}
	return andCond(r.where2[:n])
}

// nodeGuard is an equality a node requires before it can produce any
// action: the event-rooted accessor must equal one of the values.
type nodeGuard struct {
	acc    *expr
	values []string
}

// rulesetGuard finds the accessor that every active rule of a ruleset
// compares for equality with a string: the ruleset can only produce actions
// for events where it equals one of those strings. A ruleset without active
// rules never produces any.
func rulesetGuard(rules []rule) (never bool, g *nodeGuard) {
	var acc *expr
	values := map[string]bool{}
	active := 0
	for i := range rules {
		r := &rules[i]
		if !r.active {
			continue
		}
		active++
		if r.where == nil {
			return false, nil
		}
		rg := guard(r.where)
		if rg == nil || acc != nil && rg.acc.text != acc.text {
			return false, nil
		}
		acc = rg.acc
		values[rg.value] = true
	}
	if active == 0 {
		return true, nil
	}
	return false, &nodeGuard{acc: acc, values: slices.Sorted(keysOf(values))}
}

// childIndex groups children by the equality they require, so that live
// evaluation visits only the children that can match the event.
type childIndex struct {
	// always lists children without a guard, by position.
	always []int
	groups []*indexGroup
}

type indexGroup struct {
	acc *expr
	// byValue maps a string to the child that requires it, or, as -1-k,
	// to multi[k], the children that require it.
	byValue map[string]int32
	multi   [][]int
}

func buildIndex(children []*node) *childIndex {
	guarded := 0
	for _, c := range children {
		if c.never || c.guard != nil {
			guarded++
		}
	}
	if guarded == 0 {
		return nil
	}
	idx := &childIndex{}
	byAcc := map[string]*indexGroup{}
	for i, c := range children {
		switch {
		case c.never:
		case c.guard == nil:
			idx.always = append(idx.always, i)
		default:
			g := byAcc[c.guard.acc.text]
			if g == nil {
				g = &indexGroup{acc: c.guard.acc, byValue: map[string]int32{}}
				byAcc[c.guard.acc.text] = g
				idx.groups = append(idx.groups, g)
			}
			for _, v := range c.guard.values {
				k, ok := g.byValue[v]
				switch {
				case !ok:
					g.byValue[v] = int32(i)
				case k >= 0:
					g.byValue[v] = int32(-1 - len(g.multi))
					g.multi = append(g.multi, []int{int(k), i})
				default:
					g.multi[-1-k] = append(g.multi[-1-k], i)
				}
			}
		}
	}
	return idx
}

// candidates appends to dst, in order, the positions of the children that
// may produce actions for the event.
func (idx *childIndex) candidates(s *scope, dst []int) []int {
	start := len(dst)
	out := append(dst, idx.always...)
	for _, g := range idx.groups {
		str, isStr, _ := g.acc.evalString(s)
		if !isStr {
			continue
		}
		switch k, ok := g.byValue[str]; {
		case !ok:
		case k >= 0:
			out = append(out, int(k))
		default:
			out = append(out, g.multi[-1-k]...)
		}
	}
	if len(idx.groups) > 1 || len(idx.always) > 0 {
		slices.Sort(out[start:])
		out = append(out[:start], slices.Compact(out[start:])...)
	}
	return out
}

// ProcessType says whether the actions of a test event are executed.
type ProcessType string

// The process types of test events.
const (
	SkipActions ProcessType = "SkipActions"
	Full        ProcessType = "Full"
)

// Actions evaluates an event for live traffic and appends the actions of
// every matched rule to dst, in tree order. It builds no result tree and
// visits only the branches that can match.
func (t *Tree) Actions(ev *Event, dst []Action) []Action {
	return t.actions(ev, dst, nil, 0)
}

// actions is [Tree.Actions] counted in c (nil: not counted).
func (t *Tree) actions(ev *Event, dst []Action, c *Counters, now int64) []Action {
	e := t.pool.Get().(*evaluator)
	e.actions, e.cnt, e.now = dst, c, now
	if c != nil {
		c.events.Add(1)
	}
	e.node(t.root, ev)
	out := e.actions
	e.actions, e.cnt = nil, nil
	e.sc = scope{}
	clear(e.vals)
	t.pool.Put(e)
	return out
}

// MatchedActions is [Tree.Actions] that also appends to rules the matched
// rules, in tree order, each as "ruleset/rule"; for traces and logs.
func (t *Tree) MatchedActions(ev *Event, dst []Action, rules []string) ([]Action, []string) {
	return t.matchedActions(ev, dst, rules, nil, 0)
}

// matchedActions is [Tree.MatchedActions] counted in c (nil: not counted).
func (t *Tree) matchedActions(ev *Event, dst []Action, rules []string, c *Counters, now int64) ([]Action, []string) {
	e := t.pool.Get().(*evaluator)
	e.actions, e.rules, e.wantRules, e.cnt, e.now = dst, rules, true, c, now
	if c != nil {
		c.events.Add(1)
	}
	e.node(t.root, ev)
	out, matched := e.actions, e.rules
	e.actions, e.rules, e.wantRules, e.cnt = nil, nil, false, nil
	e.sc = scope{}
	clear(e.vals)
	t.pool.Put(e)
	return out, matched
}

// Process evaluates an event as a test event: it returns the processed
// result tree, with every node's status and every rule's outcome, and the
// actions of every matched rule.
func (t *Tree) Process(ev *Event) (*ProcessedNode, []Action) {
	e := evaluator{record: true}
	res := e.node(t.root, ev)
	return res, e.actions
}

// evaluator holds the state of one evaluation.
type evaluator struct {
	record  bool
	actions []Action
	// rules receives the matched rules when wantRules is set.
	rules     []string
	wantRules bool
	// stack holds the candidate children of the indexed nodes being visited.
	stack []int
	// sets and vals are reused by every ruleset of the evaluation.
	sets []varSet
	vals []any
	sc   scope
	// iters are the iterations of the iterators being visited, outermost
	// first, as they appear in action positions.
	iters []string
	// cnt, when set, counts what the evaluation does; now is the time of
	// its matches (counters.go).
	cnt *Counters
	now int64
}

func (e *evaluator) node(n *node, ev *Event) *ProcessedNode {
	switch n.kind {
	case config.KindFilter:
		return e.filter(n, ev)
	case config.KindIterator:
		return e.iterator(n, ev)
	}
	return e.ruleset(n, ev)
}

func (e *evaluator) children(n *node, ev *Event) []*ProcessedNode {
	if e.record {
		out := make([]*ProcessedNode, 0, len(n.children))
		for _, c := range n.children {
			out = append(out, e.node(c, ev))
		}
		return out
	}
	if n.index == nil {
		for _, c := range n.children {
			e.node(c, ev)
		}
		return nil
	}
	start := len(e.stack)
	e.sc = scope{ev: ev}
	e.stack = n.index.candidates(&e.sc, e.stack)
	for i := start; i < len(e.stack); i++ {
		e.node(n.children[e.stack[i]], ev)
	}
	e.stack = e.stack[:start]
	return nil
}

func (e *evaluator) filter(n *node, ev *Event) *ProcessedNode {
	var res *ProcessedNode
	if e.record {
		res = &ProcessedNode{Kind: config.KindFilter, Name: n.name, Nodes: []*ProcessedNode{}}
	}
	status := StatusMatched
	switch {
	case !n.active:
		status = StatusIgnored
	case n.filter != nil && !e.evalFilter(n.filter, ev):
		status = StatusNotMatched
	}
	if status == StatusMatched {
		if e.cnt != nil {
			e.cnt.nodes[n.id].entered.Add(1)
		}
		nodes := e.children(n, ev)
		if res != nil {
			res.Nodes = nodes
		}
	}
	if res != nil {
		res.Status = status
	}
	return res
}

func (e *evaluator) evalFilter(c cond, ev *Event) bool {
	e.sc = scope{ev: ev}
	return c.eval(&e.sc)
}

func (e *evaluator) iterator(n *node, ev *Event) *ProcessedNode {
	var res *ProcessedNode
	if e.record {
		res = &ProcessedNode{Kind: config.KindIterator, Name: n.name, Status: StatusMatched, Events: []ProcessedIteration{}}
	} else if !n.active {
		return nil
	}
	e.sc = scope{ev: ev}
	v, ok := n.target.get(&e.sc)
	each := func(iteration, item any, label string) {
		iev := ev.withIteration(iteration, item)
		var nodes []*ProcessedNode
		if n.active {
			if e.cnt != nil {
				e.cnt.nodes[n.id].entered.Add(1)
			}
			e.iters = append(e.iters, label)
			nodes = e.children(n, iev)
			e.iters = e.iters[:len(e.iters)-1]
		}
		if res != nil {
			if nodes == nil {
				nodes = []*ProcessedNode{}
			}
			res.Events = append(res.Events, ProcessedIteration{Event: iev, Nodes: nodes})
		}
	}
	if e.cnt != nil {
		switch v.(type) {
		case []any, map[string]any:
			e.cnt.nodes[n.id].matched.Add(1)
		}
	}
	switch x := v.(type) {
	case []any:
		for i, item := range x {
			label := strconv.Itoa(i)
			each(json.Number(label), item, label)
		}
	case map[string]any:
		for _, k := range slices.Sorted(keysOf(x)) {
			// Escaped: a key may hold "/", "[" or "]".
			each(k, x[k], url.QueryEscape(k))
		}
	default:
		if res != nil {
			res.Status = StatusTypeError
			if !ok {
				res.Status = StatusAccessorError
			}
		}
	}
	return res
}

func (e *evaluator) ruleset(n *node, ev *Event) *ProcessedNode {
	if cap(e.sets) < n.nsets {
		e.sets = make([]varSet, 0, n.nsets)
	}
	if cap(e.vals) < n.nvals {
		e.vals = make([]any, n.nvals)
	}
	e.sc = scope{ev: ev, vars: e.sets[:0]}
	s := &e.sc
	used := 0
	var res *ProcessedNode
	if e.record {
		res = &ProcessedNode{Kind: config.KindRuleset, Name: n.name, Rules: &ProcessedRules{Rules: make([]ProcessedRule, 0, len(n.rules))}}
	}
	stopped, matched := false, false
	for i := range n.rules {
		r := &n.rules[i]
		if !r.active || stopped {
			if res != nil {
				res.Rules.Rules = append(res.Rules.Rules, ProcessedRule{Name: r.name, Status: RuleNotProcessed, Actions: []Action{}, Meta: &RuleMeta{Actions: []ActionMeta{}}})
			}
			continue
		}
		s.rule = r.name
		pr := e.rule(r, s, e.vals[used:used+len(r.extractors):used+len(r.extractors)])
		used += len(r.extractors)
		if pr.Status == RuleMatched {
			stopped, matched = !r.cont, true
			if e.cnt != nil {
				e.cnt.matchedRule(r, e.now)
			}
			if e.wantRules {
				e.rules = append(e.rules, n.name+"/"+r.name)
			}
		}
		if res != nil {
			res.Rules.Rules = append(res.Rules.Rules, pr)
		}
	}
	if matched && e.cnt != nil {
		e.cnt.nodes[n.id].matched.Add(1)
	}
	if res != nil {
		res.Rules.ExtractedVars = make(map[string]map[string]any, len(s.vars))
		for i := range s.vars {
			res.Rules.ExtractedVars[s.vars[i].rule] = s.vars[i].object()
		}
	}
	return res
}

// rule evaluates one rule. In live mode only Status is meaningful.
func (e *evaluator) rule(r *rule, s *scope, vars []any) ProcessedRule {
	pr := ProcessedRule{Name: r.name, Status: RuleNotMatched}
	if e.record {
		pr.Actions = []Action{}
		pr.Meta = &RuleMeta{Actions: []ActionMeta{}}
	}
	if r.where != nil && !r.where.eval(s) {
		return pr
	}
	if len(r.extractors) > 0 {
		for i, x := range r.extractors {
			v, err := x.extract(s)
			if err != nil {
				pr.Status = RulePartiallyMatched
				msg := extractMessage(r.name, x.name, err)
				pr.Message = &msg
				return pr
			}
			vars[i] = v
		}
		s.vars = append(s.vars, varSet{rule: r.name, names: r.varNames, values: vars})
	}
	start := len(e.actions)
	for i := range r.actions {
		a := &r.actions[i]
		v, err := a.payload.resolve(s)
		if err != nil {
			// Only matched rules execute their actions.
			e.actions = e.actions[:start]
			pr.Status = RulePartiallyMatched
			msg := actionMessage(r.name, a.id, err)
			pr.Message = &msg
			return pr
		}
		act := Action{ID: a.id, Payload: v.(map[string]any), CreatedMs: s.ev.CreatedMs, Position: a.position(e.iters), rule: r.id}
		e.actions = append(e.actions, act)
		if e.record {
			pr.Actions = append(pr.Actions, act)
			pr.Meta.Actions = append(pr.Meta.Actions, a.meta(act.Payload))
		}
	}
	pr.Status = RuleMatched
	return pr
}

// extractMessage is the message of a rule whose variable cannot be extracted.
func extractMessage(rule, variable string, err error) string {
	return fmt.Sprintf("The event matches the rule [%s] but the variable [%s] cannot be extracted: %v", rule, variable, err)
}

// actionMessage is the message of a rule whose action cannot be resolved.
func actionMessage(rule, action string, err error) string {
	return fmt.Sprintf("The event matches the rule [%s] and all variables are extracted; however, the action [%s] cannot be resolved: %v", rule, action, err)
}
