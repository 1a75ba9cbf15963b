package tree

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/squallhq/squall/config"
)

// Explaining a test event is a walk of its own over the compiled tree,
// beside the evaluator rather than inside it: the evaluator stays as it is
// for live traffic, and the explanation says, for every filter, iterator
// and rule the event reaches, why it came out as it did. The oracle
// (oracle_test.go) checks that it agrees with Process and with the
// reference evaluator on every status and every condition.

// ExplainLimits bounds an explanation: a tree may hold thousands of rules.
type ExplainLimits struct {
	// MaxEntries is the number of entries (filters, iterators, rules).
	MaxEntries int
	// MaxBytes is the size of the entries' JSON, summed.
	MaxBytes int
	// MaxValueBytes is the size of the JSON of one value shown; a larger
	// value is shown as the start of its JSON, in a string.
	MaxValueBytes int
}

// DefaultExplainLimits are the limits of the test-event API and of
// squall process: 2,000 entries, 1 MiB, values of 1 KiB.
func DefaultExplainLimits() ExplainLimits {
	return ExplainLimits{MaxEntries: 2000, MaxBytes: 1 << 20, MaxValueBytes: 1 << 10}
}

// Explanation says why an event was processed as it was: one entry per
// filter, iterator and rule the event reached, in tree order.
type Explanation struct {
	Entries []ExplainEntry `json:"entries"`
	// Truncated is true when a limit stopped the explanation; Note then
	// says which. The result tree is complete either way.
	Truncated bool   `json:"truncated"`
	Note      string `json:"note,omitempty"`
}

// The kinds of explanation entries.
const (
	ExplainFilter   = "filter"
	ExplainIterator = "iterator"
	ExplainRule     = "rule"
)

// ExplainEntry explains one filter, iterator or rule.
type ExplainEntry struct {
	// Kind is filter, iterator or rule.
	Kind string `json:"kind"`
	// Path is the node's path from the result's root, names joined by
	// "/", an iterator's followed by its iteration in brackets as in
	// action positions; a rule's is its ruleset's.
	Path string `json:"path"`
	Rule string `json:"rule,omitempty"`
	// Status is the node's or rule's status in the result tree.
	Status string `json:"status"`
	// Reason says in words why.
	Reason string `json:"reason"`
	// Condition is a filter's condition or a rule's WHERE, as evaluated.
	Condition *ExplainCond `json:"condition,omitempty"`
	// Target is an iterator's target and what it resolved to.
	Target *ExplainOperand `json:"target,omitempty"`
	// Iterations is the number of an iterator's iterations.
	Iterations *int `json:"iterations,omitempty"`
	// Variables are a rule's WITH extractions, in name order, up to the
	// first that failed.
	Variables []ExplainVariable `json:"variables,omitempty"`
}

// ExplainCond is a condition as evaluated. AND, OR and NOT list their
// operands (every one, evaluated, even those the evaluator skips once the
// outcome is known); a comparison its two operands; regex its pattern and
// target.
type ExplainCond struct {
	Op       string          `json:"op"`
	Outcome  bool            `json:"outcome"`
	Operands []*ExplainCond  `json:"operands,omitempty"`
	First    *ExplainOperand `json:"first,omitempty"`
	Second   *ExplainOperand `json:"second,omitempty"`
	Regex    *string         `json:"regex,omitempty"`
	Target   *ExplainOperand `json:"target,omitempty"`
}

// ExplainOperand is an operand and what it resolved to: its expression
// (absent for a constant), and its value or, when the accessor reaches
// nothing (or an interpolation cannot be rendered), missing.
type ExplainOperand struct {
	Expr string
	// Value is the value's JSON; when Truncated, a JSON string holding
	// the start of it.
	Value     json.RawMessage
	Missing   bool
	Truncated bool
}

// MarshalJSON writes {"expr", "value"} or {"expr", "missing": true};
// "value_truncated": true marks a value cut to its start.
func (o *ExplainOperand) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	if o.Expr != "" {
		e, _ := json.Marshal(o.Expr)
		b = append(append(b, `"expr":`...), e...)
		b = append(b, ',')
	}
	if o.Missing {
		return append(b, `"missing":true}`...), nil
	}
	b = append(append(b, `"value":`...), o.Value...)
	if o.Truncated {
		b = append(b, `,"value_truncated":true`...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (o *ExplainOperand) UnmarshalJSON(b []byte) error {
	var w struct {
		Expr      string          `json:"expr"`
		Value     json.RawMessage `json:"value"`
		Missing   bool            `json:"missing"`
		Truncated bool            `json:"value_truncated"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*o = ExplainOperand{Expr: w.Expr, Value: w.Value, Missing: w.Missing, Truncated: w.Truncated}
	return nil
}

// ExplainVariable is a WITH extraction: its input, whether the regex
// matched (for KeyRegex, whether a key matched), and the value it
// extracted (after the modifiers) or why it failed.
type ExplainVariable struct {
	Variable string          `json:"variable"`
	From     *ExplainOperand `json:"from"`
	Kind     string          `json:"kind"`
	Regex    string          `json:"regex"`
	Matched  bool            `json:"matched"`
	// Value is the JSON of the variable's value, cut as an operand's
	// (ValueTruncated); absent when the extraction failed.
	Value          json.RawMessage `json:"value,omitempty"`
	ValueTruncated bool            `json:"value_truncated,omitempty"`
	Error          string          `json:"error,omitempty"`
}

// Explain evaluates an event as Process does and explains every filter,
// iterator and rule it reaches, within the limits. It is meant for test
// events: it records far more than evaluation needs.
func (t *Tree) Explain(ev *Event, lim ExplainLimits) *Explanation {
	x := &explainer{lim: lim, out: &Explanation{Entries: []ExplainEntry{}}}
	x.node(t.root, ev, "")
	return x.out
}

// explainer holds one explanation.
type explainer struct {
	lim   ExplainLimits
	out   *Explanation
	bytes int
	full  bool
}

// add appends an entry, unless a limit is reached: then the explanation
// stops, marked truncated.
func (x *explainer) add(e ExplainEntry) {
	if x.full {
		return
	}
	// Its values are JSON already: an entry always encodes.
	b, _ := json.Marshal(e)
	switch {
	case len(x.out.Entries) >= x.lim.MaxEntries:
		x.stop(fmt.Sprintf("the explanation stops at %d entries", x.lim.MaxEntries))
	case x.bytes+len(b) > x.lim.MaxBytes:
		x.stop(fmt.Sprintf("the explanation stops before %d bytes", x.lim.MaxBytes))
	default:
		x.bytes += len(b)
		x.out.Entries = append(x.out.Entries, e)
	}
}

func (x *explainer) stop(why string) {
	x.full = true
	x.out.Truncated = true
	x.out.Note = why + ", at " + strconv.Itoa(len(x.out.Entries)) + " entries; the result tree is complete"
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "/" + name
}

func (x *explainer) node(n *node, ev *Event, parent string) {
	if x.full {
		return
	}
	switch n.kind {
	case config.KindFilter:
		x.filter(n, ev, joinPath(parent, n.name))
	case config.KindIterator:
		x.iterator(n, ev, parent)
	default:
		x.ruleset(n, ev, joinPath(parent, n.name))
	}
}

func (x *explainer) children(n *node, ev *Event, path string) {
	for _, c := range n.children {
		x.node(c, ev, path)
	}
}

func (x *explainer) filter(n *node, ev *Event, path string) {
	e := ExplainEntry{Kind: ExplainFilter, Path: path, Status: string(StatusMatched)}
	switch {
	case !n.active:
		e.Status, e.Reason = string(StatusIgnored), "the filter is inactive: it and the nodes below it are skipped"
	case n.filter == nil:
		e.Reason = "the filter has no condition: every event passes"
	default:
		e.Condition = x.cond(n.filter, &scope{ev: ev})
		if e.Condition.Outcome {
			e.Reason = "the condition is true: the nodes below are evaluated"
		} else {
			e.Status, e.Reason = string(StatusNotMatched), "the condition is false: the nodes below are skipped"
		}
	}
	x.add(e)
	if e.Status == string(StatusMatched) {
		x.children(n, ev, path)
	}
}

func (x *explainer) iterator(n *node, ev *Event, parent string) {
	path := joinPath(parent, n.name)
	v, ok := n.target.get(&scope{ev: ev})
	e := ExplainEntry{Kind: ExplainIterator, Path: path, Status: string(StatusMatched), Target: x.operand(n.target.text, v, ok)}
	var labels []string
	var items []any
	var iterations []any
	what := ""
	switch t := v.(type) {
	case []any:
		what = "array"
		for i, item := range t {
			labels = append(labels, strconv.Itoa(i))
			iterations = append(iterations, json.Number(strconv.Itoa(i)))
			items = append(items, item)
		}
	case map[string]any:
		what = "object"
		for _, k := range slices.Sorted(keysOf(t)) {
			labels = append(labels, url.QueryEscape(k))
			iterations = append(iterations, k)
			items = append(items, t[k])
		}
	default:
		if ok {
			e.Status, e.Reason = string(StatusTypeError), fmt.Sprintf("the target %s is %s, not an array or an object: nothing to iterate", n.target.text, kindOf(v))
		} else {
			e.Status, e.Reason = string(StatusAccessorError), fmt.Sprintf("the target %s is missing: nothing to iterate", n.target.text)
		}
	}
	if what != "" {
		count := len(labels)
		e.Iterations = &count
		switch {
		case count == 0:
			e.Reason = fmt.Sprintf("the target is an empty %s: nothing to iterate", what)
		case what == "array":
			e.Reason = fmt.Sprintf("the target is an array of %d elements: one iteration each", count)
		default:
			e.Reason = fmt.Sprintf("the target is an object of %d keys: one iteration each, in key order", count)
		}
		if !n.active && count > 0 {
			e.Reason += "; the iterator is inactive: the nodes below are skipped"
		}
	}
	x.add(e)
	if !n.active {
		return
	}
	for i, label := range labels {
		x.children(n, ev.withIteration(iterations[i], items[i]), path+"["+label+"]")
	}
}

// kindOf names the JSON type of a value.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}

func (x *explainer) ruleset(n *node, ev *Event, path string) {
	s := &scope{ev: ev}
	stoppedBy := ""
	for i := range n.rules {
		if x.full {
			return
		}
		r := &n.rules[i]
		e := ExplainEntry{Kind: ExplainRule, Path: path, Rule: r.name, Status: string(RuleNotProcessed)}
		switch {
		case !r.active:
			e.Reason = "the rule is inactive"
		case stoppedBy != "":
			e.Reason = fmt.Sprintf("rule %s matched and does not continue: the rules after it are skipped", stoppedBy)
		default:
			s.rule = r.name
			x.rule(r, s, &e)
			if e.Status == string(RuleMatched) && !r.cont {
				stoppedBy = r.name
			}
		}
		x.add(e)
	}
}

// rule explains one active rule, as evaluator.rule evaluates it.
func (x *explainer) rule(r *rule, s *scope, e *ExplainEntry) {
	e.Status = string(RuleNotMatched)
	where := "the rule has no WHERE"
	if r.where != nil {
		e.Condition = x.cond(r.where, s)
		if !e.Condition.Outcome {
			e.Reason = "the WHERE condition is false"
			return
		}
		where = "the WHERE condition is true"
	}
	if len(r.extractors) > 0 {
		vals := make([]any, len(r.extractors))
		for i, xt := range r.extractors {
			ve, v, err := x.variable(xt, s)
			e.Variables = append(e.Variables, ve)
			if err != nil {
				e.Status, e.Reason = string(RulePartiallyMatched), extractMessage(r.name, xt.name, err)
				return
			}
			vals[i] = v
		}
		s.vars = append(s.vars, varSet{rule: r.name, names: r.varNames, values: vals})
	}
	for i := range r.actions {
		a := &r.actions[i]
		if _, err := a.payload.resolve(s); err != nil {
			e.Status, e.Reason = string(RulePartiallyMatched), actionMessage(r.name, a.id, err)
			return
		}
	}
	e.Status = string(RuleMatched)
	e.Reason = where + plural(len(r.extractors), "; %d variable extracted", "; %d variables extracted") +
		plural(len(r.actions), "; %d action resolved", "; %d actions resolved")
	if len(r.actions) == 0 {
		e.Reason += "; the rule has no action"
	}
}

func plural(n int, one, many string) string {
	switch n {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(one, n)
	}
	return fmt.Sprintf(many, n)
}

// variable explains one extraction; its value and error are extract's.
func (x *explainer) variable(xt *extractor, s *scope) (ExplainVariable, any, error) {
	in, ok := xt.from.eval(s)
	ve := ExplainVariable{Variable: xt.name, From: x.operand(exprText(xt.from), in, ok), Kind: xt.kind.String(), Regex: xt.re.String()}
	switch v := in.(type) {
	case string:
		ve.Matched = xt.kind != config.RegexSingleKey && (xt.line != lineNone || xt.re.MatchString(v))
	case map[string]any:
		if xt.kind == config.RegexSingleKey {
			for k := range v {
				if xt.re.MatchString(k) {
					ve.Matched = true
					break
				}
			}
		}
	}
	v, err := xt.extract(s)
	if err != nil {
		ve.Error = err.Error()
		return ve, nil, err
	}
	o := x.operand("", v, true)
	ve.Value, ve.ValueTruncated = o.Value, o.Truncated
	return ve, v, nil
}

// exprText is the text of an expression, empty for a non-string constant.
func exprText(e *expr) string {
	if e.kind == config.ExprConstant {
		return ""
	}
	return e.text
}

// cond explains a compiled condition. Comparisons take their outcome from
// the compiled operator itself.
func (x *explainer) cond(c cond, s *scope) *ExplainCond {
	switch c := c.(type) {
	case andCond:
		out := &ExplainCond{Op: string(config.OpAnd), Outcome: true, Operands: make([]*ExplainCond, 0, len(c))}
		for _, o := range c {
			oc := x.cond(o, s)
			out.Operands = append(out.Operands, oc)
			out.Outcome = out.Outcome && oc.Outcome
		}
		return out
	case orCond:
		out := &ExplainCond{Op: string(config.OpOr), Operands: make([]*ExplainCond, 0, len(c))}
		for _, o := range c {
			oc := x.cond(o, s)
			out.Operands = append(out.Operands, oc)
			out.Outcome = out.Outcome || oc.Outcome
		}
		return out
	case notCond:
		oc := x.cond(c.c, s)
		return &ExplainCond{Op: string(config.OpNot), Outcome: !oc.Outcome, Operands: []*ExplainCond{oc}}
	case *binCond:
		a, aok := c.first.eval(s)
		b, bok := c.second.eval(s)
		return &ExplainCond{Op: string(c.op), Outcome: c.fn(a, b, aok, bok),
			First: x.operand(exprText(c.first), a, aok), Second: x.operand(exprText(c.second), b, bok)}
	case *equalsString:
		v, ok := c.acc.eval(s)
		return &ExplainCond{Op: string(config.OpEquals), Outcome: c.eval(s),
			First: x.operand(exprText(c.acc), v, ok), Second: x.operand("", c.value, true)}
	case *containsString:
		v, ok := c.first.eval(s)
		return &ExplainCond{Op: string(config.OpContains), Outcome: c.eval(s),
			First: x.operand(exprText(c.first), v, ok), Second: x.operand("", c.value, true)}
	case *regexCond:
		v, ok := c.target.eval(s)
		pattern := c.re.String()
		return &ExplainCond{Op: string(config.OpRegex), Outcome: c.eval(s), Regex: &pattern,
			Target: x.operand(exprText(c.target), v, ok)}
	}
	// A condition type this walk does not know: its outcome still.
	return &ExplainCond{Op: fmt.Sprintf("%T", c), Outcome: c.eval(s)}
}

// operand shows a resolved value, cut to MaxValueBytes of JSON.
func (x *explainer) operand(text string, v any, ok bool) *ExplainOperand {
	o := &ExplainOperand{Expr: text}
	if !ok {
		o.Missing = true
		return o
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(fmt.Sprint(v))
	}
	if len(b) > x.lim.MaxValueBytes {
		cut := max(x.lim.MaxValueBytes, 0)
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		b, _ = json.Marshal(strings.ToValidUTF8(string(b[:cut]), "") + "…")
		o.Truncated = true
	}
	o.Value = b
	return o
}
