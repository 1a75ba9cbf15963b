package tree

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/squallhq/squall/config"
)

// cond is a compiled operator.
type cond interface {
	eval(s *scope) bool
}

type andCond []cond

func (c andCond) eval(s *scope) bool {
	for _, x := range c {
		if !x.eval(s) {
			return false
		}
	}
	return true
}

type orCond []cond

func (c orCond) eval(s *scope) bool {
	for _, x := range c {
		if x.eval(s) {
			return true
		}
	}
	return false
}

type notCond struct{ c cond }

func (c notCond) eval(s *scope) bool { return !c.c.eval(s) }

// binCond is a binary operator over two resolved arguments; present tells
// whether each side resolved.
type binCond struct {
	first, second *expr
	fn            func(a, b any, aok, bok bool) bool
	// op names the operator, for explanations (explain.go).
	op config.OpType
}

func (c *binCond) eval(s *scope) bool {
	a, aok := c.first.eval(s)
	b, bok := c.second.eval(s)
	return c.fn(a, b, aok, bok)
}

// equalsString is the common equals between an accessor and a string
// constant, without the generic dispatch.
type equalsString struct {
	acc   *expr
	value string
}

func (c *equalsString) eval(s *scope) bool {
	str, isStr, _ := c.acc.evalString(s)
	return isStr && str == c.value
}

// containsString is contains with a string constant: on a string it is a
// substring test, on anything else the generic operator.
type containsString struct {
	first   *expr
	value   string
	generic *binCond
}

func (c *containsString) eval(s *scope) bool {
	str, isStr, ok := c.first.evalString(s)
	switch {
	case !ok:
		return false
	case isStr:
		return strings.Contains(str, c.value)
	}
	return c.generic.eval(s)
}

type regexCond struct {
	re     *regexp.Regexp
	target *expr
}

func (c *regexCond) eval(s *scope) bool {
	str, isStr, _ := c.target.evalString(s)
	return isStr && c.re.MatchString(str)
}

func opEquals(a, b any, aok, bok bool) bool {
	if !aok || !bok {
		return !aok && !bok
	}
	return equal(a, b)
}

func opNotEquals(a, b any, aok, bok bool) bool { return !opEquals(a, b, aok, bok) }

func opEqualsIgnoreCase(a, b any, aok, bok bool) bool {
	x, ok1 := a.(string)
	y, ok2 := b.(string)
	return aok && bok && ok1 && ok2 && sameLowercase(x, y)
}

// sameLowercase reports whether two strings have the same lowercase form,
// which is how Tornado ignores case. Unicode case folding says more
// strings are equal ("ſ" and "s", "K" and the Kelvin sign): it is used
// only where the two agree, on ASCII.
func sameLowercase(x, y string) bool {
	if isASCII(x) && isASCII(y) {
		return strings.EqualFold(x, y)
	}
	//lint:ignore SA6005 Tornado compares lowercase forms; EqualFold says more strings are equal.
	return strings.ToLower(x) == strings.ToLower(y)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func opContains(a, b any, aok, bok bool) bool {
	if !aok || !bok {
		return false
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && strings.Contains(x, y)
	case []any:
		for _, e := range x {
			if equal(e, b) {
				return true
			}
		}
	case map[string]any:
		y, ok := b.(string)
		if ok {
			_, found := x[y]
			return found
		}
	}
	return false
}

func opContainsIgnoreCase(a, b any, aok, bok bool) bool {
	y, ok := b.(string)
	if !aok || !bok || !ok {
		return false
	}
	switch x := a.(type) {
	case string:
		return strings.Contains(strings.ToLower(x), strings.ToLower(y))
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok && sameLowercase(s, y) {
				return true
			}
		}
	case map[string]any:
		for k := range x {
			if sameLowercase(k, y) {
				return true
			}
		}
	}
	return false
}

func ordering(test func(int) bool) func(a, b any, aok, bok bool) bool {
	return func(a, b any, aok, bok bool) bool {
		if !aok || !bok {
			return false
		}
		c, ok := compare(a, b)
		return ok && test(c)
	}
}

var binaryOps = map[config.OpType]func(a, b any, aok, bok bool) bool{
	config.OpEquals:             opEquals,
	config.OpNotEquals:          opNotEquals,
	config.OpEqualsIgnoreCase:   opEqualsIgnoreCase,
	config.OpContains:           opContains,
	config.OpContainsIgnoreCase: opContainsIgnoreCase,
	config.OpGreaterEqual:       ordering(func(c int) bool { return c >= 0 }),
	config.OpGreater:            ordering(func(c int) bool { return c > 0 }),
	config.OpLessEqual:          ordering(func(c int) bool { return c <= 0 }),
	config.OpLess:               ordering(func(c int) bool { return c < 0 }),
}

// operator compiles a validated operator, sharing it with every
// identical one of the tree.
func (cc *compiler) operator(op *config.Operator) (cond, error) {
	return shared(cc.conds, string(appendOperatorKey(nil, op)), func() (cond, error) { return cc.compileOperator(op) })
}

// compileOperator compiles a validated operator.
func (cc *compiler) compileOperator(op *config.Operator) (cond, error) {
	switch op.Type {
	case config.OpAnd, config.OpOr:
		cs := make([]cond, 0, len(op.Operators))
		for _, o := range op.Operators {
			c, err := cc.operator(o)
			if err != nil {
				return nil, err
			}
			cs = append(cs, c)
		}
		if op.Type == config.OpAnd {
			return andCond(cs), nil
		}
		return orCond(cs), nil
	case config.OpNot:
		c, err := cc.operator(op.Operator)
		if err != nil {
			return nil, err
		}
		return notCond{c}, nil
	case config.OpRegex:
		re, err := cc.regexp(op.Regex)
		if err != nil {
			return nil, err
		}
		t, err := cc.expr(op.Target)
		if err != nil {
			return nil, err
		}
		return &regexCond{re: re, target: t}, nil
	}
	fn, ok := binaryOps[op.Type]
	if !ok {
		return nil, fmt.Errorf("unknown operator %q", op.Type)
	}
	first, err := cc.value(op.First)
	if err != nil {
		return nil, err
	}
	second, err := cc.value(op.Second)
	if err != nil {
		return nil, err
	}
	if op.Type == config.OpEquals {
		if g := stringEquality(first, second); g != nil {
			return g, nil
		}
	}
	generic := &binCond{first: first, second: second, fn: fn, op: op.Type}
	if op.Type == config.OpContains && first.kind != config.ExprConstant && second.kind == config.ExprConstant {
		if str, ok := second.constant.(string); ok {
			return &containsString{first: first, value: str, generic: generic}, nil
		}
	}
	return generic, nil
}

// stringEquality recognizes `accessor equals "constant"` in either order.
func stringEquality(a, b *expr) *equalsString {
	if a.kind == config.ExprConstant {
		a, b = b, a
	}
	if a.kind == config.ExprConstant || b.kind != config.ExprConstant {
		return nil
	}
	s, ok := b.constant.(string)
	if !ok {
		return nil
	}
	return &equalsString{acc: a, value: s}
}

// guard returns an equality an operator requires to be true: the operator
// can only be true when the event-rooted accessor equals the string. AND
// yields the guard of its first guarded child.
func guard(c cond) *equalsString {
	switch x := c.(type) {
	case *equalsString:
		if x.acc.kind == config.ExprSingle && x.acc.acc.root == config.RootEvent {
			return x
		}
	case andCond:
		for _, ch := range x {
			if g := guard(ch); g != nil {
				return g
			}
		}
	}
	return nil
}
