package tree

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"github.com/squallhq/squall/config"
)

// scope is what expressions can read while one event is evaluated.
type scope struct {
	ev *Event
	// vars holds the variables extracted so far in the current ruleset
	// evaluation, one set per rule that extracted any.
	vars []varSet
	// rule is the name of the rule being evaluated.
	rule string
}

// varSet is the variables one rule extracted. names is shared with the
// compiled rule; values are in the same order.
type varSet struct {
	rule   string
	names  []string
	values []any
}

func (v *varSet) get(name string) (any, bool) {
	for i, n := range v.names {
		if n == name {
			return v.values[i], true
		}
	}
	return nil, false
}

// object returns the variables as a JSON object.
func (v *varSet) object() map[string]any {
	m := make(map[string]any, len(v.names))
	for i, n := range v.names {
		m[n] = v.values[i]
	}
	return m
}

// varSet returns the variables extracted by the named rule, or nil.
func (s *scope) varSet(rule string) *varSet {
	for i := range s.vars {
		if s.vars[i].rule == rule {
			return &s.vars[i]
		}
	}
	return nil
}

// accessor is a compiled ${...}.
type accessor struct {
	root config.Root
	path []config.Segment
	text string
}

func newAccessor(a *config.Accessor) *accessor {
	return &accessor{root: a.Root, path: a.Path, text: a.Text}
}

// get resolves the accessor; ok is false when the value is missing. A
// present JSON null is a value.
func (a *accessor) get(s *scope) (any, bool) {
	switch a.root {
	case config.RootEvent:
		if len(a.path) == 0 {
			return s.ev.Value(), true
		}
		return s.ev.lookup(a.path[0].Key, a.path[1:])
	case config.RootVariables:
		name := a.path[0].Key
		if own := s.varSet(s.rule); own != nil {
			if v, ok := own.get(name); ok {
				if v, ok := config.Walk(v, a.path[1:]); ok {
					return v, true
				}
			}
		}
		other := s.varSet(name)
		if other == nil {
			return nil, false
		}
		if len(a.path) == 1 {
			return other.object(), true
		}
		if a.path[1].IsIndex {
			return nil, false
		}
		v, ok := other.get(a.path[1].Key)
		if !ok {
			return nil, false
		}
		return config.Walk(v, a.path[2:])
	}
	return nil, false
}

// expr is a compiled configuration string or constant value.
type expr struct {
	kind config.ExprKind
	// constant is the value of a constant (any JSON value for non-string arguments).
	constant any
	acc      *accessor
	parts    []part
	text     string
}

type part struct {
	text string
	acc  *accessor // nil for literal text and ignored ${item...}
}

// compileValue compiles an operator argument: strings are expressions,
// everything else is a constant.
func (cc *compiler) value(v any) (*expr, error) {
	if s, ok := v.(string); ok {
		return cc.expr(s)
	}
	return &expr{kind: config.ExprConstant, constant: normalize(v)}, nil
}

// expr compiles an expression string, sharing it with every other use of the same text.
func (cc *compiler) expr(s string) (*expr, error) {
	return shared(cc.exprs, s, func() (*expr, error) { return compileString(s) })
}

// compileString compiles an expression string.
func compileString(s string) (*expr, error) {
	e, err := config.ParseExpr(s)
	if err != nil {
		return nil, err
	}
	if e.IsConstant() {
		return &expr{kind: config.ExprConstant, constant: s, text: s}, nil
	}
	out := &expr{kind: e.Kind, text: s}
	switch e.Kind {
	case config.ExprSingle:
		out.acc = newAccessor(e.Accessor)
	case config.ExprInterpolated:
		for _, p := range e.Parts {
			cp := part{text: p.Text}
			if p.Accessor != nil && p.Accessor.Root != config.RootItem {
				cp.acc = newAccessor(p.Accessor)
			}
			out.parts = append(out.parts, cp)
		}
	}
	return out, nil
}

// eval resolves the expression. ok is false when the value is missing or
// an interpolation cannot be rendered.
func (e *expr) eval(s *scope) (any, bool) {
	switch e.kind {
	case config.ExprConstant:
		return e.constant, true
	case config.ExprSingle:
		return e.acc.get(s)
	}
	str, ok := e.interpolate(s)
	if !ok {
		return nil, false
	}
	return str, true
}

// interpolate renders an interpolated expression.
func (e *expr) interpolate(s *scope) (string, bool) {
	var buf [128]byte
	b := buf[:0]
	for _, p := range e.parts {
		if p.acc == nil {
			b = append(b, p.text...)
			continue
		}
		v, ok := p.acc.get(s)
		if !ok {
			return "", false
		}
		if b, ok = config.AppendText(b, v); !ok {
			return "", false
		}
	}
	return string(b), true
}

// evalString is eval for readers that want a string: ok is false when
// the value is missing, isStr when it is not a string. It reads the
// event's strings without making them Go values.
func (e *expr) evalString(s *scope) (str string, isStr, ok bool) {
	switch e.kind {
	case config.ExprInterpolated:
		str, ok = e.interpolate(s)
		return str, ok, ok
	case config.ExprSingle:
		if a := e.acc; a.root == config.RootEvent && len(a.path) > 0 {
			return s.ev.lookupString(a.path[0].Key, a.path[1:])
		}
	}
	v, ok := e.eval(s)
	str, isStr = v.(string)
	return str, isStr, ok
}

// describe names the expression in messages.
func (e *expr) describe() string {
	if e.text != "" {
		return e.text
	}
	b, _ := json.Marshal(e.constant)
	return string(b)
}

// normalize turns Go numbers in constants into json.Number, so that
// trees built in Go compare like trees decoded from JSON.
func normalize(v any) any {
	switch x := v.(type) {
	case nil, string, bool, json.Number:
		return v
	case float64:
		return floatNumber(x)
	case float32:
		return floatNumber(float64(x))
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = normalize(e)
		}
		return s
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return json.Number(strconv.FormatUint(rv.Uint(), 10))
	}
	// Anything else went through JSON to get here or is not JSON at all.
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	if err := unmarshalNumber(b, &out); err != nil {
		return fmt.Sprint(v)
	}
	return out
}

func unmarshalNumber(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
