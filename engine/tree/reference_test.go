package tree

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/squallhq/squall/config"
)

// This file is the reference evaluator: the most direct reading of the
// processing tree's semantics (docs/rules.md and docs/concepts.md,
// and docs/decisions.md decisions 1 to 3, 14 and 18),
// written without anything the compiled evaluator does for speed: no
// compilation, no index, no guards, no sharing or interning, no document
// parser. It walks the configuration model itself and reads the event as
// encoding/json decodes it. It is slow and meant to be obviously right;
// the oracle (oracle_test.go) checks that the compiled tree gives the same
// result on every status, variable and action.
//
// Its output is the JSON form of a test event's result, built as plain
// maps and slices, and the flat list of actions in tree order.

// refAction is an action the reference produces.
type refAction struct {
	ID        string
	Payload   map[string]any
	CreatedMs uint64
	Position  string
}

// refEvent is an event as the reference reads it.
type refEvent struct {
	typ      string
	created  uint64
	traceID  any
	payload  map[string]any
	metadata map[string]any
	// iterator is {"iteration", "item"} inside an iterator's branch.
	iterator map[string]any
}

// refDecodeEvent decodes an event with encoding/json. It reports false
// for what is not an event.
func refDecodeEvent(data []byte) (*refEvent, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	ev := &refEvent{metadata: map[string]any{}}
	typ, ok := m["type"].(string)
	if !ok {
		return nil, fmt.Errorf("type is not a string")
	}
	ev.typ = typ
	n, ok := m["created_ms"].(json.Number)
	if !ok {
		return nil, fmt.Errorf("created_ms is not a number")
	}
	created, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("created_ms: %w", err)
	}
	ev.created = created
	if ev.payload, ok = m["payload"].(map[string]any); !ok {
		return nil, fmt.Errorf("payload is not an object")
	}
	if md, present := m["metadata"]; present && md != nil {
		if ev.metadata, ok = md.(map[string]any); !ok {
			return nil, fmt.Errorf("metadata is not an object")
		}
	}
	switch tr := m["trace_id"].(type) {
	case nil, string:
		ev.traceID = tr
	default:
		return nil, fmt.Errorf("trace_id is not a string")
	}
	return ev, nil
}

// value is the event as ${event} reads it.
func (e *refEvent) value() map[string]any {
	v := map[string]any{
		"type":       e.typ,
		"created_ms": json.Number(strconv.FormatUint(e.created, 10)),
		"trace_id":   e.traceID,
		"payload":    e.payload,
		"metadata":   e.metadata,
	}
	if e.iterator != nil {
		v["iterator"] = e.iterator
	}
	return v
}

// echo is the event as a test event's result writes it.
func (e *refEvent) echo() refEcho {
	return refEcho{Type: e.typ, CreatedMs: e.created, Metadata: e.metadata, Payload: e.payload, Iterator: e.iterator}
}

// reference evaluates events against a configuration tree.
type reference struct {
	// regexps only saves compiling a pattern again; it decides nothing.
	regexps map[string]*regexp.Regexp
}

func newReference() *reference {
	return &reference{regexps: map[string]*regexp.Regexp{}}
}

func (r *reference) re(pattern string) *regexp.Regexp {
	re, ok := r.regexps[pattern]
	if !ok {
		re = regexp.MustCompile(pattern)
		r.regexps[pattern] = re
	}
	return re
}

// refRun is one evaluation.
type refRun struct {
	ref     *reference
	actions []refAction
	// matched are the matched rules, "ruleset/rule", in tree order.
	matched []string
	// trace is what an explanation must say (explain.go): every filter,
	// iterator and rule reached, in tree order.
	trace []refTrace
}

// evaluate runs the event through the tree: the result tree's JSON form,
// the actions of the matched rules, the matched rules, and the trace an
// explanation must match.
func (r *reference) evaluate(root *config.Node, ev *refEvent) (any, []refAction, []string, []refTrace) {
	run := &refRun{ref: r}
	res := run.node(root, ev, nil)
	return res, run.actions, run.matched, run.trace
}

// refScope is what expressions read: the event, and in a rule the
// variables its ruleset extracted so far and the rule's name.
type refScope struct {
	ev   *refEvent
	vars map[string]map[string]any
	rule string
}

// path is the position of the node's parent: names, an iterator's with its
// iteration in brackets.
func (run *refRun) node(n *config.Node, ev *refEvent, path []string) any {
	switch n.Kind {
	case config.KindFilter:
		return run.filter(n, ev, append(slices.Clip(path), n.Name))
	case config.KindIterator:
		return run.iterator(n, ev, path)
	}
	return run.ruleset(n, ev, append(slices.Clip(path), n.Name))
}

func (run *refRun) filter(n *config.Node, ev *refEvent, path []string) any {
	status := "Matched"
	nodes := []any{}
	tr := refTrace{Kind: "filter", Path: strings.Join(path, "/")}
	switch {
	case !n.Active:
		status = "Ignored"
	case n.Filter != nil:
		sc := &refScope{ev: ev}
		tr.Cond = run.traceCond(n.Filter, sc)
		if !run.cond(n.Filter, sc) {
			status = "NotMatched"
		}
	}
	tr.Status = status
	run.trace = append(run.trace, tr)
	if status == "Matched" {
		for _, c := range n.Children {
			nodes = append(nodes, run.node(c, ev, path))
		}
	}
	return refFilterResult{"Filter", n.Name, refStatus{status}, nodes}
}

func (run *refRun) iterator(n *config.Node, ev *refEvent, path []string) any {
	out := refIteratorResult{Type: "Iterator", Name: n.Name, Iterator: refStatus{"Matched"}, Events: []refIteration{}}
	acc, err := config.ParseTarget(n.Target)
	if err != nil {
		panic(err) // validated
	}
	target, ok := refGet(acc, &refScope{ev: ev})
	tr := refTrace{Kind: "iterator", Path: strings.Join(append(slices.Clip(path), n.Name), "/"), Status: "Matched"}
	switch target.(type) {
	case []any, map[string]any:
	default:
		tr.Status = "TypeError"
		if !ok {
			tr.Status = "AccessorError"
		}
	}
	run.trace = append(run.trace, tr)
	one := func(iteration, item any, label string) {
		iev := *ev
		iev.iterator = map[string]any{"iteration": iteration, "item": item}
		nodes := []any{}
		if n.Active {
			ipath := append(slices.Clip(path), n.Name+"["+label+"]")
			for _, c := range n.Children {
				nodes = append(nodes, run.node(c, &iev, ipath))
			}
		}
		out.Events = append(out.Events, refIteration{iev.echo(), nodes})
	}
	switch x := target.(type) {
	case []any:
		for i, item := range x {
			one(json.Number(strconv.Itoa(i)), item, strconv.Itoa(i))
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			one(k, x[k], url.QueryEscape(k))
		}
	default:
		status := "TypeError"
		if !ok {
			status = "AccessorError"
		}
		out.Iterator.Status = status
	}
	return out
}

func (run *refRun) ruleset(n *config.Node, ev *refEvent, path []string) any {
	vars := map[string]map[string]any{}
	rules := []refRuleOutcome{}
	stopped := false
	for _, rule := range n.Rules {
		tr := refTrace{Kind: "rule", Path: strings.Join(path, "/"), Rule: rule.Name, Status: "NotProcessed"}
		if !rule.Active || stopped {
			run.trace = append(run.trace, tr)
			rules = append(rules, refRuleResult(rule.Name, "NotProcessed", nil, nil, nil))
			continue
		}
		status, actions, metas, message := run.rule(rule, &refScope{ev: ev, vars: vars, rule: rule.Name}, strings.Join(path, "/"), &tr)
		tr.Status = status
		run.trace = append(run.trace, tr)
		if status == "Matched" {
			run.actions = append(run.actions, actions...)
			run.matched = append(run.matched, n.Name+"/"+rule.Name)
			stopped = !rule.Continue
		}
		if message != nil {
			// The oracle compares only whether there is a message: the
			// wording is the compiled evaluator's own.
			message = oracleMessage
		}
		rules = append(rules, refRuleResult(rule.Name, status, actions, metas, message))
	}
	extracted := map[string]any{}
	for k, v := range vars {
		extracted[k] = v
	}
	return refRulesetResult{"Ruleset", n.Name, refRules{rules, extracted}}
}

func refRuleResult(name, status string, actions []refAction, metas []any, message any) refRuleOutcome {
	list := []refIDPayload{}
	for _, a := range actions {
		list = append(list, refIDPayload{a.ID, a.Payload})
	}
	if metas == nil {
		metas = []any{}
	}
	// The actions appear twice, as "action" and "actions" (decision 18).
	return refRuleOutcome{Action: list, Name: name, Status: status, Actions: list, Message: message, Meta: refMeta{metas}}
}

// The result tree's JSON form, with its fields in the order the API
// writes them, so that the oracle compares the two as bytes.
type (
	refStatus struct {
		Status string `json:"status"`
	}
	refFilterResult struct {
		Type   string    `json:"type"`
		Name   string    `json:"name"`
		Filter refStatus `json:"filter"`
		Nodes  []any     `json:"nodes"`
	}
	refIteratorResult struct {
		Type     string         `json:"type"`
		Name     string         `json:"name"`
		Iterator refStatus      `json:"iterator"`
		Events   []refIteration `json:"events"`
	}
	refIteration struct {
		Event refEcho `json:"event"`
		Nodes []any   `json:"nodes"`
	}
	refEcho struct {
		Type      string         `json:"type"`
		CreatedMs uint64         `json:"created_ms"`
		Metadata  map[string]any `json:"metadata"`
		Payload   map[string]any `json:"payload"`
		Iterator  map[string]any `json:"iterator,omitempty"`
	}
	refRulesetResult struct {
		Type  string   `json:"type"`
		Name  string   `json:"name"`
		Rules refRules `json:"rules"`
	}
	refRules struct {
		Rules         []refRuleOutcome `json:"rules"`
		ExtractedVars map[string]any   `json:"extracted_vars"`
	}
	refRuleOutcome struct {
		Action  []refIDPayload `json:"action"`
		Name    string         `json:"name"`
		Status  string         `json:"status"`
		Actions []refIDPayload `json:"actions"`
		Message any            `json:"message"`
		Meta    refMeta        `json:"meta"`
	}
	refIDPayload struct {
		ID      string         `json:"id"`
		Payload map[string]any `json:"payload"`
	}
	refMeta struct {
		Actions []any `json:"actions"`
	}
	refActionMeta struct {
		ID      string                 `json:"id"`
		Payload map[string]refEnriched `json:"payload"`
	}
)

// rule evaluates one active rule: its status, the actions it resolved
// (all of them when Matched), their meta entries, and its message when
// PartiallyMatched.
func (run *refRun) rule(rule *config.Rule, sc *refScope, rulesetPos string, tr *refTrace) (string, []refAction, []any, any) {
	if rule.Where != nil {
		tr.Cond = run.traceCond(rule.Where, sc)
		if !run.cond(rule.Where, sc) {
			return "NotMatched", nil, nil, nil
		}
	}
	if len(rule.With) > 0 {
		got := map[string]any{}
		// In name order, as the explanation lists them.
		for _, name := range slices.Sorted(maps.Keys(rule.With)) {
			ex := rule.With[name]
			v, err := run.extract(ex, sc)
			tr.Vars = append(tr.Vars, run.traceVar(name, ex, sc, v, err))
			if err != nil {
				return "PartiallyMatched", nil, nil, fmt.Sprintf("variable %s: %v", name, err)
			}
			got[name] = v
		}
		sc.vars[rule.Name] = got
	}
	var actions []refAction
	var metas []any
	for i, a := range rule.Actions {
		tmpl := any(a.Payload)
		if a.Payload == nil {
			tmpl = map[string]any{}
		}
		v, err := run.resolve(tmpl, sc)
		if err != nil {
			return "PartiallyMatched", actions, metas, fmt.Sprintf("action %s: %v", a.ID, err)
		}
		payload := v.(map[string]any)
		actions = append(actions, refAction{ID: a.ID, Payload: payload, CreatedMs: sc.ev.created,
			Position: rulesetPos + "/" + rule.Name + "/" + strconv.Itoa(i)})
		metas = append(metas, refActionMeta{a.ID, refEnrich(tmpl, payload).Content.Content.(map[string]refEnriched)})
	}
	return "Matched", actions, metas, nil
}

// resolve computes an action payload value: every string is an expression.
func (run *refRun) resolve(tmpl any, sc *refScope) (any, error) {
	switch x := tmpl.(type) {
	case string:
		v, ok := refExpr(x, sc)
		if !ok {
			return nil, fmt.Errorf("%s cannot be resolved", x)
		}
		return v, nil
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			v, err := run.resolve(e, sc)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case []any:
		out := []any{}
		for _, e := range x {
			v, err := run.resolve(e, sc)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return tmpl, nil
}

// refEnriched is a value of meta.actions.
type refEnriched struct {
	Content struct {
		Type    string `json:"type"`
		Content any    `json:"content"`
	} `json:"content"`
	Meta struct {
		Modified bool `json:"modified"`
		IsLeaf   bool `json:"is_leaf"`
	} `json:"meta"`
}

// refEnrich is the meta form of a resolved value: it follows the template.
func refEnrich(tmpl, v any) refEnriched {
	var e refEnriched
	switch x := tmpl.(type) {
	case map[string]any:
		vm, _ := v.(map[string]any)
		content := map[string]refEnriched{}
		for k, t := range x {
			c := refEnrich(t, vm[k])
			content[k] = c
			e.Meta.Modified = e.Meta.Modified || c.Meta.Modified
		}
		e.Content.Type, e.Content.Content = "Map", content
	case []any:
		va, _ := v.([]any)
		content := []refEnriched{}
		for i, t := range x {
			var item any
			if i < len(va) {
				item = va[i]
			}
			c := refEnrich(t, item)
			content = append(content, c)
			e.Meta.Modified = e.Meta.Modified || c.Meta.Modified
		}
		e.Content.Type, e.Content.Content = "Array", content
	case string:
		parsed, err := config.ParseExpr(x)
		if err != nil {
			panic(err)
		}
		e.Content.Type, e.Content.Content = "Single", v
		e.Meta.Modified, e.Meta.IsLeaf = !parsed.IsConstant(), true
	default:
		e.Content.Type, e.Content.Content = "Single", v
		e.Meta.IsLeaf = true
	}
	return e
}

// refExpr resolves a configuration string: a constant is itself, a single
// accessor the value it reads, an interpolation the text it renders.
// ${item...} is kept as written. ok is false when it cannot be resolved.
func refExpr(s string, sc *refScope) (any, bool) {
	e, err := config.ParseExpr(s)
	if err != nil {
		panic(err) // validated
	}
	if e.IsConstant() {
		return s, true
	}
	if e.Kind == config.ExprSingle {
		return refGet(e.Accessor, sc)
	}
	var b strings.Builder
	for _, p := range e.Parts {
		if p.Accessor == nil || p.Accessor.Root == config.RootItem {
			b.WriteString(p.Text)
			continue
		}
		v, ok := refGet(p.Accessor, sc)
		if !ok {
			return nil, false
		}
		text, ok := refText(v)
		if !ok {
			return nil, false
		}
		b.WriteString(text)
	}
	return b.String(), true
}

// refText renders a value inside an interpolation.
func refText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case nil:
		return "null", true
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return strconv.FormatInt(i, 10), true
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return strconv.FormatUint(u, 10), true
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			// JSON has no infinite numbers; a number too large for a
			// float is written as it came.
			return string(x), true
		}
		return strconv.FormatFloat(f, 'f', -1, 64), true
	}
	return "", false
}

// refGet reads an accessor. In a rule, ${_variables.X...} reads the rule's
// own variable X first, then the variables of the rule named X.
func refGet(acc *config.Accessor, sc *refScope) (any, bool) {
	switch acc.Root {
	case config.RootEvent:
		return refWalk(sc.ev.value(), acc.Path)
	case config.RootVariables:
		if own, ok := sc.vars[sc.rule]; ok {
			if v, ok := refWalk(own, acc.Path); ok {
				return v, true
			}
		}
		all := map[string]any{}
		for k, v := range sc.vars {
			all[k] = v
		}
		return refWalk(all, acc.Path)
	}
	return nil, false
}

func refWalk(v any, path []config.Segment) (any, bool) {
	for _, seg := range path {
		if seg.IsIndex {
			arr, ok := v.([]any)
			if !ok || seg.Index < 0 || seg.Index >= len(arr) {
				return nil, false
			}
			v = arr[seg.Index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		next, ok := m[seg.Key]
		if !ok {
			return nil, false
		}
		v = next
	}
	return v, true
}

// refArg resolves an operator argument: strings are expressions, any
// other JSON value a constant.
func refArg(v any, sc *refScope) (any, bool) {
	if s, ok := v.(string); ok {
		return refExpr(s, sc)
	}
	return v, true
}

func (run *refRun) cond(op *config.Operator, sc *refScope) bool {
	switch op.Type {
	case config.OpAnd:
		for _, o := range op.Operators {
			if !run.cond(o, sc) {
				return false
			}
		}
		return true
	case config.OpOr:
		for _, o := range op.Operators {
			if run.cond(o, sc) {
				return true
			}
		}
		return false
	case config.OpNot:
		return !run.cond(op.Operator, sc)
	case config.OpRegex:
		v, ok := refExpr(op.Target, sc)
		s, isStr := v.(string)
		return ok && isStr && run.ref.re(op.Regex).MatchString(s)
	}
	a, aok := refArg(op.First, sc)
	b, bok := refArg(op.Second, sc)
	switch op.Type {
	case config.OpEquals:
		if !aok || !bok {
			return !aok && !bok
		}
		return refEqual(a, b)
	case config.OpNotEquals:
		if !aok || !bok {
			return aok != bok
		}
		return !refEqual(a, b)
	}
	if !aok || !bok {
		return false
	}
	switch op.Type {
	case config.OpEqualsIgnoreCase:
		x, ok1 := a.(string)
		y, ok2 := b.(string)
		//lint:ignore SA6005 the semantics compare lowercase forms, which EqualFold does not.
		return ok1 && ok2 && strings.ToLower(x) == strings.ToLower(y)
	case config.OpContains:
		switch x := a.(type) {
		case string:
			y, ok := b.(string)
			return ok && strings.Contains(x, y)
		case []any:
			return slices.ContainsFunc(x, func(e any) bool { return refEqual(e, b) })
		case map[string]any:
			y, ok := b.(string)
			_, found := x[y]
			return ok && found
		}
		return false
	case config.OpContainsIgnoreCase:
		y, ok := b.(string)
		if !ok {
			return false
		}
		y = strings.ToLower(y)
		switch x := a.(type) {
		case string:
			return strings.Contains(strings.ToLower(x), y)
		case []any:
			return slices.ContainsFunc(x, func(e any) bool { s, ok := e.(string); return ok && strings.ToLower(s) == y })
		case map[string]any:
			for k := range x {
				if strings.ToLower(k) == y {
					return true
				}
			}
		}
		return false
	}
	c, ok := refCompare(a, b)
	if !ok {
		return false
	}
	switch op.Type {
	case config.OpGreaterEqual:
		return c >= 0
	case config.OpGreater:
		return c > 0
	case config.OpLessEqual:
		return c <= 0
	case config.OpLess:
		return c < 0
	}
	panic("unknown operator " + op.Type)
}

// refNumber is a JSON number as Tornado holds it: an integer when it is
// written as one and fits 64 bits (signed or unsigned), else a float.
func refNumber(n json.Number) (i *big.Int, f float64) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if v, ok := new(big.Int).SetString(s, 10); ok && v.IsInt64() || v != nil && v.IsUint64() {
			return v, 0
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		panic(fmt.Sprintf("not a JSON number: %q", s))
	}
	return nil, f
}

// refNumCompare compares two numbers by value (decision 14): integers
// exactly, anything with a float as floats.
func refNumCompare(x, y json.Number) int {
	xi, xf := refNumber(x)
	yi, yf := refNumber(y)
	if xi != nil && yi != nil {
		return xi.Cmp(yi)
	}
	if xi != nil {
		xf, _ = new(big.Float).SetInt(xi).Float64()
	}
	if yi != nil {
		yf, _ = new(big.Float).SetInt(yi).Float64()
	}
	switch {
	case xf < yf:
		return -1
	case xf > yf:
		return 1
	}
	return 0
}

// refEqual is deep JSON equality, numbers compared by value.
func refEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && refNumCompare(x, y) == 0
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, refEqual)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !refEqual(v, w) {
				return false
			}
		}
		return true
	case string, bool, nil:
		return a == b
	}
	panic(fmt.Sprintf("not a JSON value: %T", a))
}

// refCompare orders two values of the same type; objects and mixed types
// are not ordered.
func refCompare(a, b any) (int, bool) {
	switch x := a.(type) {
	case json.Number:
		if y, ok := b.(json.Number); ok {
			return refNumCompare(x, y), true
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case bool:
		if y, ok := b.(bool); ok {
			bit := func(v bool) int {
				if v {
					return 1
				}
				return 0
			}
			return bit(x) - bit(y), true
		}
	case nil:
		return 0, b == nil
	case []any:
		y, ok := b.([]any)
		if !ok {
			return 0, false
		}
		for i := range min(len(x), len(y)) {
			c, ok := refCompare(x[i], y[i])
			if !ok {
				return 0, false
			}
			if c != 0 {
				return c, true
			}
		}
		return len(x) - len(y), true
	}
	return 0, false
}

// extract computes a WITH variable.
func (run *refRun) extract(ex *config.Extractor, sc *refScope) (any, error) {
	in, ok := refExpr(ex.From, sc)
	if !ok {
		return nil, fmt.Errorf("from cannot be resolved")
	}
	re := run.ref.re(ex.Regex.Pattern)
	var v any
	switch ex.Regex.Kind {
	case config.RegexSingleKey:
		m, ok := in.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("not an object")
		}
		var found []any
		for k, e := range m {
			if re.MatchString(k) {
				found = append(found, e)
			}
		}
		if len(found) != 1 {
			return nil, fmt.Errorf("%d keys match", len(found))
		}
		v = found[0]
	case config.RegexIndexed, config.RegexNamed:
		s, ok := in.(string)
		if !ok {
			return nil, fmt.Errorf("not a string")
		}
		one := func(groups []string, took []bool) (any, error) {
			return refGroups(ex, re, groups, took)
		}
		if ex.Regex.AllMatches {
			all := re.FindAllStringSubmatchIndex(s, -1)
			if len(all) == 0 {
				return nil, fmt.Errorf("no match")
			}
			list := []any{}
			for _, loc := range all {
				g, err := one(refSubmatches(s, loc))
				if err != nil {
					return nil, err
				}
				list = append(list, g)
			}
			v = list
		} else {
			loc := re.FindStringSubmatchIndex(s)
			if loc == nil {
				return nil, fmt.Errorf("no match")
			}
			g, err := one(refSubmatches(s, loc))
			if err != nil {
				return nil, err
			}
			v = g
		}
	default:
		panic("unknown regex kind")
	}
	for _, m := range ex.Modifiers {
		var err error
		if v, err = run.modify(m, v, sc); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// refSubmatches returns the groups of one match and whether each took
// part in it.
func refSubmatches(s string, loc []int) ([]string, []bool) {
	groups := make([]string, len(loc)/2)
	took := make([]bool, len(loc)/2)
	for i := range groups {
		if loc[2*i] >= 0 {
			groups[i], took[i] = s[loc[2*i]:loc[2*i+1]], true
		}
	}
	return groups, took
}

// refGroups is the value of one match: the selected group, every group,
// or the named groups; a group needed that did not take part fails.
func refGroups(ex *config.Extractor, re *regexp.Regexp, groups []string, took []bool) (any, error) {
	if ex.Regex.Kind == config.RegexNamed {
		out := map[string]any{}
		for i, name := range re.SubexpNames() {
			if name == "" {
				continue
			}
			if !took[i] {
				return nil, fmt.Errorf("group %s did not take part", name)
			}
			out[name] = groups[i]
		}
		return out, nil
	}
	if idx := ex.Regex.GroupMatchIdx; idx != nil {
		if *idx >= len(groups) || !took[*idx] {
			return nil, fmt.Errorf("no group %d", *idx)
		}
		return groups[*idx], nil
	}
	out := []any{}
	for i, g := range groups {
		if !took[i] {
			return nil, fmt.Errorf("group %d did not take part", i)
		}
		out = append(out, g)
	}
	return out, nil
}

// refFloatSyntax is what Rust's f64 parser accepts.
var refFloatSyntax = regexp.MustCompile(`^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))$`)

// refFloat writes a float as a JSON number that reads back as a float
// (13.0); NaN and infinities become null.
func refFloat(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return json.Number(s)
}

func (run *refRun) modify(m *config.Modifier, v any, sc *refScope) (any, error) {
	s, isStr := v.(string)
	switch m.Type {
	case config.ModLowercase:
		if !isStr {
			return nil, fmt.Errorf("Lowercase: not a string")
		}
		return strings.ToLower(s), nil
	case config.ModTrim:
		if !isStr {
			return nil, fmt.Errorf("Trim: not a string")
		}
		return strings.TrimSpace(s), nil
	case config.ModToNumber:
		if n, ok := v.(json.Number); ok {
			return n, nil
		}
		if !isStr {
			return nil, fmt.Errorf("ToNumber: not a string")
		}
		// Unsigned 64-bit first (Rust's parser takes one leading +),
		// then signed, then a float.
		if u, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, 64); err == nil {
			return json.Number(strconv.FormatUint(u, 10)), nil
		}
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		if !refFloatSyntax.MatchString(s) {
			return nil, fmt.Errorf("ToNumber: %q", s)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !math.IsInf(f, 0) {
			return nil, fmt.Errorf("ToNumber: %q: %w", s, err)
		}
		return refFloat(f), nil
	case config.ModMap:
		if !isStr {
			return nil, fmt.Errorf("Map: not a string")
		}
		if out, ok := m.Mapping[s]; ok {
			return out, nil
		}
		if m.DefaultValue != nil {
			return *m.DefaultValue, nil
		}
		return nil, fmt.Errorf("Map: no mapping")
	case config.ModReplaceAll:
		if !isStr {
			return nil, fmt.Errorf("ReplaceAll: not a string")
		}
		var re *regexp.Regexp
		if m.IsRegex {
			re = run.ref.re(m.Find)
			if !re.MatchString(s) {
				return s, nil
			}
		} else if !strings.Contains(s, m.Find) {
			return s, nil
		}
		rv, ok := refExpr(m.Replace, sc)
		repl, isStr := rv.(string)
		if !ok || !isStr {
			return nil, fmt.Errorf("ReplaceAll: replace is not a string")
		}
		if re != nil {
			return re.ReplaceAllString(s, repl), nil
		}
		return strings.ReplaceAll(s, m.Find, repl), nil
	case config.ModDateAndTime:
		n, ok := v.(json.Number)
		if !ok || strings.ContainsAny(string(n), ".eE") {
			return nil, fmt.Errorf("DateAndTime: not an integer")
		}
		t, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || t == math.MinInt64 {
			return nil, fmt.Errorf("DateAndTime: out of range")
		}
		loc, err := time.LoadLocation(strings.TrimSpace(m.Timezone))
		if err != nil {
			panic(err) // validated
		}
		abs := max(t, -t)
		var tm time.Time
		switch {
		case abs <= 100_000_000_000:
			tm = time.Unix(t, 0)
		case abs <= 100_000_000_000_000:
			tm = time.UnixMilli(t)
		case abs <= 100_000_000_000_000_000:
			tm = time.UnixMicro(t)
		default:
			tm = time.Unix(0, t)
		}
		return tm.In(loc).Format("2006-01-02 15:04:05-07:00"), nil
	}
	panic("unknown modifier " + m.Type)
}

// refTrace is what an explanation says of one filter, iterator or rule:
// its status, its condition as evaluated, and its extractions.
type refTrace struct {
	Kind, Path, Rule, Status string
	Cond                     *refCond
	Vars                     []refVar
}

// refCond is a condition as evaluated: every operand of AND, OR and NOT
// evaluated, the operands of a comparison as "expr=value" or "expr
// missing" (expr empty for a constant).
type refCond struct {
	Op       string
	Outcome  bool
	Operands []*refCond
	Args     []string
}

// refVar is an extraction: its input, whether the regex matched (a key,
// for KeyRegex), and its value or that it failed.
type refVar struct {
	Name, From string
	Matched    bool
	Value      string
	Failed     bool
}

// traceCond evaluates a condition, every operand of it, and checks that
// the outcome it finds is cond's.
func (run *refRun) traceCond(op *config.Operator, sc *refScope) *refCond {
	out := &refCond{Op: string(op.Type)}
	switch op.Type {
	case config.OpAnd, config.OpOr:
		out.Outcome = op.Type == config.OpAnd
		for _, o := range op.Operators {
			c := run.traceCond(o, sc)
			out.Operands = append(out.Operands, c)
			if op.Type == config.OpAnd {
				out.Outcome = out.Outcome && c.Outcome
			} else {
				out.Outcome = out.Outcome || c.Outcome
			}
		}
	case config.OpNot:
		c := run.traceCond(op.Operator, sc)
		out.Operands, out.Outcome = []*refCond{c}, !c.Outcome
	case config.OpRegex:
		v, ok := refExpr(op.Target, sc)
		out.Args = []string{refOperandText(op.Target, v, ok), "regex " + op.Regex}
		out.Outcome = run.cond(op, sc)
	default:
		a, aok := refArg(op.First, sc)
		b, bok := refArg(op.Second, sc)
		out.Args = []string{refOperandText(op.First, a, aok), refOperandText(op.Second, b, bok)}
		out.Outcome = run.cond(op, sc)
	}
	if out.Outcome != run.cond(op, sc) {
		panic(fmt.Sprintf("the reference's trace of %s disagrees with its evaluation", op.Type))
	}
	return out
}

// refOperandText writes an operand as the oracle compares it: its
// expression (none for a constant) and its value's JSON, or "missing".
func refOperandText(arg, v any, ok bool) string {
	expr := ""
	if s, isStr := arg.(string); isStr {
		if e, err := config.ParseExpr(s); err == nil && !e.IsConstant() {
			expr = s
		}
	}
	if !ok {
		return expr + " missing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return expr + "=" + string(b)
}

// traceVar is the trace of an extraction whose value and error are v and err.
func (run *refRun) traceVar(name string, ex *config.Extractor, sc *refScope, v any, err error) refVar {
	in, ok := refExpr(ex.From, sc)
	out := refVar{Name: name, From: refOperandText(ex.From, in, ok), Failed: err != nil}
	re := run.ref.re(ex.Regex.Pattern)
	switch x := in.(type) {
	case string:
		out.Matched = ex.Regex.Kind != config.RegexSingleKey && re.MatchString(x)
	case map[string]any:
		out.Matched = ex.Regex.Kind == config.RegexSingleKey && slices.ContainsFunc(slices.Collect(maps.Keys(x)), re.MatchString)
	}
	if err == nil {
		out.Value = refOperandText(nil, v, true)
	}
	return out
}
