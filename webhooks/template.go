package webhooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jmespath/go-jmespath"
	"github.com/squallhq/squall/internal/jsonvalue"
)

// MaxExpressionLen bounds the length of one ${…} expression, in bytes.
const MaxExpressionLen = 4096

// knownFunction reports whether name is one of the JMESPath built-in
// functions, all of which go-jmespath provides. Expressions are checked at
// load time; go-jmespath itself only notices an unknown function when it
// evaluates the call.
func knownFunction(name string) bool {
	switch name {
	case "abs", "avg", "ceil", "contains", "ends_with", "floor", "join", "keys",
		"length", "map", "max", "max_by", "merge", "min", "min_by", "not_null",
		"reverse", "sort", "sort_by", "starts_with", "sum", "to_array",
		"to_number", "to_string", "type", "values":
		return true
	}
	return false
}

type nodeKind uint8

const (
	kindLiteral nodeKind = iota // lit, copied as is (scalars only)
	kindExpr                    // ${…}
	kindObject
	kindArray
)

// node is a compiled template value.
type node struct {
	kind nodeKind
	path string // JSON path in the webhook file, for errors
	lit  any
	expr *expression
	keys []string // kindObject: keys in sorted order, matching kids
	kids []node   // kindObject values, kindArray elements
}

// expression is one compiled ${…} expression.
type expression struct {
	src      string
	compiled *jmespath.JMESPath
	// isolated marks expressions that may call sort_by, which sorts its
	// argument in place: they run on a private copy of the body, and are
	// parsed afresh for every call so that a sorted literal is never shared
	// between goroutines.
	isolated bool
	// shape bounds what the expression may build (budget.go).
	shape *shape
}

// isExpression reports whether the template string s is a ${…} expression:
// it starts with "${" and ends with "}".
func isExpression(s string) bool {
	return len(s) >= 3 && strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}")
}

// compile compiles a template value decoded from JSON (numbers as
// json.Number, though float64 and Go integers are accepted too).
func compile(v any, path string) (node, error) {
	switch v := v.(type) {
	case nil, bool, json.Number:
		return node{kind: kindLiteral, path: path, lit: v}, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return node{}, &ValidationError{Field: path, Err: errors.New("number is not finite")}
		}
		return node{kind: kindLiteral, path: path, lit: json.Number(appendNumber(nil, v))}, nil
	case int:
		return node{kind: kindLiteral, path: path, lit: json.Number(strconv.Itoa(v))}, nil
	case int64:
		return node{kind: kindLiteral, path: path, lit: json.Number(strconv.FormatInt(v, 10))}, nil
	case string:
		if !isExpression(v) {
			return node{kind: kindLiteral, path: path, lit: v}, nil
		}
		e, err := compileExpression(v[2 : len(v)-1])
		if err != nil {
			return node{}, &ValidationError{Field: path, Value: v, Err: err}
		}
		return node{kind: kindExpr, path: path, expr: e}, nil
	case map[string]any:
		n := node{kind: kindObject, path: path, keys: make([]string, 0, len(v))}
		for k := range v {
			n.keys = append(n.keys, k)
		}
		slices.Sort(n.keys)
		var errs []error
		for _, k := range n.keys {
			kid, err := compile(v[k], memberPath(path, k))
			errs = append(errs, err)
			n.kids = append(n.kids, kid)
		}
		return n, errors.Join(errs...)
	case []any:
		n := node{kind: kindArray, path: path, kids: make([]node, len(v))}
		var errs []error
		for i, e := range v {
			var err error
			n.kids[i], err = compile(e, path+"["+strconv.Itoa(i)+"]")
			errs = append(errs, err)
		}
		return n, errors.Join(errs...)
	}
	return node{}, &ValidationError{Field: path, Err: fmt.Errorf("unsupported value of type %T", v)}
}

// memberPath appends key to a JSON path, quoting keys that are not plain
// identifiers.
func memberPath(path, key string) string {
	plain := key != ""
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			plain = false
			break
		}
	}
	if plain {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// compileExpression compiles the inner text of a ${…} expression.
func compileExpression(src string) (_ *expression, err error) {
	if len(src) > MaxExpressionLen {
		return nil, fmt.Errorf("expression longer than %d bytes", MaxExpressionLen)
	}
	defer func() {
		// go-jmespath v0.4.0 panics on some malformed input (for example
		// an identifier followed by U+0080).
		if r := recover(); r != nil {
			err = fmt.Errorf("invalid JMESPath expression: %v", r)
		}
	}()
	c, err := jmespath.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("invalid JMESPath expression: %w", err)
	}
	for _, name := range calledFunctions(src) {
		if !knownFunction(name) {
			return nil, fmt.Errorf("invalid JMESPath expression: unknown function %s()", name)
		}
	}
	sh, err := parseShape(src)
	if err != nil {
		return nil, fmt.Errorf("invalid JMESPath expression: %w", err)
	}
	return &expression{src: src, compiled: c, isolated: strings.Contains(src, "sort_by"), shape: sh}, nil
}

// calledFunctions returns the names of the functions that the JMESPath
// expression src calls: unquoted identifiers followed by "(", outside quoted
// identifiers, raw strings and JSON literals. src must have compiled.
func calledFunctions(src string) []string {
	var names []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i++
			for i < len(src) && src[i] != c {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_':
			start := i
			for i < len(src) && (src[i] >= 'a' && src[i] <= 'z' || src[i] >= 'A' && src[i] <= 'Z' || src[i] >= '0' && src[i] <= '9' || src[i] == '_') {
				i++
			}
			name := src[start:i]
			for i < len(src) && strings.IndexByte(" \t\r\n", src[i]) >= 0 {
				i++
			}
			if i < len(src) && src[i] == '(' {
				names = append(names, name)
			}
		default:
			i++
		}
	}
	return names
}

// eval evaluates the template against the document; the result holds new
// containers and json.Number numbers only.
func (n *node) eval(doc *document) (any, error) {
	switch n.kind {
	case kindExpr:
		return n.expr.eval(doc, n.path)
	case kindObject:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			v, err := n.kids[i].eval(doc)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case kindArray:
		s := make([]any, len(n.kids))
		for i := range n.kids {
			v, err := n.kids[i].eval(doc)
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		return s, nil
	}
	return n.lit, nil
}

// eval evaluates the expression; see numbers.go for numbers.
func (e *expression) eval(doc *document, path string) (any, error) {
	out, work := e.shape.bound(doc.size)
	if e.isolated {
		work += doc.size // the private copy of the body
	}
	if b := max(out, work); b > float64(doc.left) {
		return nil, &TemplateError{Field: path, Err: budgetError(b, int(doc.size), doc.budget)}
	}
	r, err := e.search(doc.data)
	if err == nil {
		r, err = doc.output(r)
	}
	if err != nil {
		return nil, &TemplateError{Field: path, Err: err}
	}
	return r, nil
}

// search runs the expression on data, turning a go-jmespath panic (it has
// unchecked type assertions, for example merge() of a number) into an error.
func (e *expression) search(data any) (_ any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("JMESPath evaluation failed: %v", r)
		}
	}()
	if e.isolated {
		return jmespath.Search(e.src, jsonvalue.Clone(data))
	}
	return e.compiled.Search(data)
}
