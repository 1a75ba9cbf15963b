package webhooks

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/jmespath/go-jmespath"
)

// This file bounds what an expression may build.
//
// JMESPath has no arithmetic, but it multiplies: a multi-select [@, @]
// doubles its input, a pipe feeds that to the next one (@ | [@,@] | [@,@]
// doubles it again each time), a projection repeats its right side for
// every element, join() repeats its separator between every element, and
// to_string() and the event's encoding turn shared references into bytes.
// A 4 KiB expression over a 5 MiB body can so describe terabytes, and
// go-jmespath has no hook to stop an evaluation half way.
//
// So before evaluating an expression, the collector computes from its
// syntax tree an upper bound of the size of every value the evaluation may
// build (as JSON bytes), as a function of the body's size, and refuses the
// request when the bound exceeds the output budget (ErrOutputBudget, 422).
// The output is then measured as it is copied into the event, against the
// same budget, shared by every expression of the template. Ordinary
// expressions (fields, filters, functions over fields) are bounded by the
// body's size and always pass; the check costs a walk of the expression's
// tree, a few nanoseconds per node.
//
// go-jmespath v0.4.0 keeps its syntax tree's fields unexported; they are
// read with reflect (TestShape pins the layout: a change of the pinned
// version that moves them fails it, and every expression at load time).

// DefaultMaxOutputSize is the smallest output budget of a webhook: the
// bound on what the expressions of one request may build. A webhook's
// budget is the larger of this and twice its max_payload_size.
const DefaultMaxOutputSize int64 = 16 << 20

// ErrOutputBudget reports an expression that may build more than the
// output budget from the request body. It is always wrapped in a
// [*TemplateError], so the intake answers 422 Unprocessable Content.
var ErrOutputBudget = errors.New("output budget exceeded")

// outputBudget returns the output budget of a webhook whose bodies are at
// most maxPayload bytes.
func outputBudget(maxPayload int64) int64 {
	return max(DefaultMaxOutputSize, 2*maxPayload)
}

// shape is a node of a compiled expression's syntax tree, as far as the
// size bound needs it.
type shape struct {
	typ   string
	value string // function name, key or literal text
	kids  []*shape
	// unitOut and unitWork are bound(1): the bound for a one-byte input,
	// which projections need for every element.
	unitOut, unitWork float64
}

// astType names a go-jmespath node type, or returns "".
func astType(t int64) string {
	switch t {
	case int64(jmespath.ASTEmpty):
		return "ASTEmpty"
	case int64(jmespath.ASTComparator):
		return "ASTComparator"
	case int64(jmespath.ASTCurrentNode):
		return "ASTCurrentNode"
	case int64(jmespath.ASTExpRef):
		return "ASTExpRef"
	case int64(jmespath.ASTFunctionExpression):
		return "ASTFunctionExpression"
	case int64(jmespath.ASTField):
		return "ASTField"
	case int64(jmespath.ASTFilterProjection):
		return "ASTFilterProjection"
	case int64(jmespath.ASTFlatten):
		return "ASTFlatten"
	case int64(jmespath.ASTIdentity):
		return "ASTIdentity"
	case int64(jmespath.ASTIndex):
		return "ASTIndex"
	case int64(jmespath.ASTIndexExpression):
		return "ASTIndexExpression"
	case int64(jmespath.ASTKeyValPair):
		return "ASTKeyValPair"
	case int64(jmespath.ASTLiteral):
		return "ASTLiteral"
	case int64(jmespath.ASTMultiSelectHash):
		return "ASTMultiSelectHash"
	case int64(jmespath.ASTMultiSelectList):
		return "ASTMultiSelectList"
	case int64(jmespath.ASTOrExpression):
		return "ASTOrExpression"
	case int64(jmespath.ASTAndExpression):
		return "ASTAndExpression"
	case int64(jmespath.ASTNotExpression):
		return "ASTNotExpression"
	case int64(jmespath.ASTPipe):
		return "ASTPipe"
	case int64(jmespath.ASTProjection):
		return "ASTProjection"
	case int64(jmespath.ASTSubexpression):
		return "ASTSubexpression"
	case int64(jmespath.ASTSlice):
		return "ASTSlice"
	case int64(jmespath.ASTValueProjection):
		return "ASTValueProjection"
	}
	return ""
}

// parseShape parses src (which must compile) and returns its tree.
func parseShape(src string) (*shape, error) {
	ast, err := jmespath.NewParser().Parse(src)
	if err != nil {
		return nil, err
	}
	n, err := shapeOf(reflect.ValueOf(ast))
	if err != nil {
		return nil, fmt.Errorf("expression tree: %w", err)
	}
	n.prepare()
	return n, nil
}

// shapeOf reads one go-jmespath ASTNode (fields nodeType, value and
// children, unexported: reflect reads them without calling anything).
func shapeOf(v reflect.Value) (*shape, error) {
	typ, value, kids := v.FieldByName("nodeType"), v.FieldByName("value"), v.FieldByName("children")
	if !typ.IsValid() || !value.IsValid() || !kids.IsValid() || !typ.CanInt() || kids.Kind() != reflect.Slice {
		return nil, fmt.Errorf("unexpected node %s", v.Type())
	}
	name := astType(typ.Int())
	if name == "" {
		return nil, fmt.Errorf("unknown node type %d", typ.Int())
	}
	n := &shape{typ: name}
	if value.Kind() == reflect.Interface && !value.IsNil() {
		e := value.Elem()
		switch {
		case name == "ASTLiteral":
			n.value = strconv.Itoa(literalSize(e)) // the literal's JSON size
		case e.Kind() == reflect.String:
			n.value = strconv.Quote(e.String())
		}
	}
	for i := range kids.Len() {
		k, err := shapeOf(kids.Index(i))
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, k)
	}
	return n, nil
}

// literalSize bounds the JSON size of a decoded literal, as the output
// measures it; it is at least 5 (null, true, false).
func literalSize(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return 5
		}
		return literalSize(v.Elem())
	case reflect.String:
		return max(5, v.Len()+2)
	case reflect.Float64, reflect.Int, reflect.Int64:
		return 24 // the longest shortest form of a float64
	case reflect.Map:
		size := 2
		for it := v.MapRange(); it.Next(); {
			size += literalSize(it.Key()) + 2 + literalSize(it.Value())
		}
		return size
	case reflect.Slice, reflect.Array:
		size := 2
		for i := range v.Len() {
			size += literalSize(v.Index(i)) + 1
		}
		return size
	}
	return 5
}

// prepare computes the unit bounds of n and its descendants.
func (n *shape) prepare() {
	for _, k := range n.kids {
		k.prepare()
	}
	n.unitOut, n.unitWork = n.bound1(1)
}

// project bounds the application of n to every element of a value of at
// most size bytes: at most (size+1)/2 elements (each takes a byte and a
// comma) whose sizes add up to at most size. The bounds are convex and
// grow with their input, so the sum is largest with one element taking
// (nearly) everything and the others one byte each. Projections drop
// null results, so the one-byte elements count without the null floor.
// out is the result array; work includes it.
func (n *shape) project(size float64) (out, work float64) {
	o, w := n.bound(size)
	count := (size + 1) / 2
	out = o + count*(n.unitOut+1) + 2
	return out, w + count*n.unitWork + out
}

// each bounds the work of evaluating n on every element of a value of at
// most size bytes, keeping nothing (a filter's condition).
func (n *shape) each(size float64) (work float64) {
	_, w := n.bound(size)
	return w + (size+1)/2*n.unitWork
}

// bound returns upper bounds of the JSON size (strings counted unescaped,
// as the output is measured) of the value n evaluates to (out) and of the
// bytes its evaluation allocates along the way (work),
// for a current value of at most in bytes. Unknown nodes give +Inf. Any
// expression may give null (or a boolean): out is at least 5.
func (n *shape) bound(in float64) (out, work float64) {
	out, work = n.bound1(in)
	return max(out, 5), work
}

// bound1 is bound without the null floor.
func (n *shape) bound1(in float64) (out, work float64) {
	kid := func(i int, in float64) (float64, float64) {
		if i >= len(n.kids) {
			return 0, 0
		}
		return n.kids[i].bound(in)
	}
	switch n.typ {
	case "ASTEmpty", "ASTCurrentNode", "ASTIdentity", "ASTField", "ASTIndex":
		return in, 0
	case "ASTSlice":
		return in, in
	case "ASTLiteral":
		size, _ := strconv.Atoi(n.value)
		return float64(size), 0
	case "ASTComparator", "ASTNotExpression":
		for i := range n.kids {
			_, w := kid(i, in)
			work += w
		}
		return 5, work // true or false
	case "ASTOrExpression", "ASTAndExpression":
		o0, w0 := kid(0, in)
		o1, w1 := kid(1, in)
		return max(o0, o1), w0 + w1
	case "ASTSubexpression", "ASTIndexExpression", "ASTPipe":
		o0, w0 := kid(0, in)
		o1, w1 := kid(1, o0)
		return o1, w0 + w1
	case "ASTExpRef", "ASTKeyValPair":
		return kid(0, in)
	case "ASTProjection", "ASTValueProjection", "ASTFilterProjection":
		if len(n.kids) < 2 {
			return math.Inf(1), math.Inf(1)
		}
		o0, w0 := kid(0, in)
		out, work = n.kids[1].project(o0)
		work += w0
		if n.typ == "ASTFilterProjection" && len(n.kids) > 2 {
			work += n.kids[2].each(o0)
		}
		return out, work
	case "ASTFlatten":
		o0, w0 := kid(0, in)
		return o0, w0 + o0
	case "ASTMultiSelectList", "ASTMultiSelectHash":
		out = 2
		for i, k := range n.kids {
			o, w := kid(i, in)
			out += o + 1
			if n.typ == "ASTMultiSelectHash" {
				out += float64(len(k.value)) + 1
			}
			work += w
		}
		return out, work + out
	case "ASTFunctionExpression":
		return n.function(in)
	}
	return math.Inf(1), math.Inf(1)
}

// function bounds a function call.
func (n *shape) function(in float64) (out, work float64) {
	var args []float64 // bounds of the arguments that are not &expressions
	var refs []*shape
	sum, largest := 0.0, 0.0
	for _, k := range n.kids {
		if k.typ == "ASTExpRef" {
			refs = append(refs, k)
			continue
		}
		o, w := k.bound(in)
		args = append(args, o)
		sum += o
		largest = max(largest, o)
		work += w
	}
	// An &expression runs on every element of the array argument.
	mapped := 0.0
	for _, r := range refs {
		o, w := r.project(largest)
		mapped = max(mapped, o)
		work += w
	}
	name, err := strconv.Unquote(n.value)
	if err != nil {
		name = n.value
	}
	switch name {
	case "abs", "avg", "ceil", "floor", "length", "sum", "to_number", "type",
		"contains", "starts_with", "ends_with":
		return 32, work
	case "not_null", "max", "min", "max_by", "min_by":
		return largest, work
	case "sort_by":
		return largest, work + largest
	case "map":
		return mapped, work
	case "sort", "reverse", "to_array", "keys", "values", "merge":
		return sum + 2, work + sum + 2
	case "join":
		if len(args) != 2 {
			return math.Inf(1), math.Inf(1)
		}
		// The separator goes between every two elements.
		out = args[1] + args[1]*args[0]
		return out, work + out
	case "to_string":
		// encoding/json escapes <, > and & as \u003c: six bytes for one;
		// the event then escapes the backslash.
		out = 7*sum + 2
		return out, work + out
	}
	return math.Inf(1), math.Inf(1)
}

// budgetError reports an expression whose bound exceeds the budget left.
func budgetError(bound float64, bodySize int, budget int64) error {
	return fmt.Errorf("%w: the expression may build up to %s from this %d-byte body; the webhook's budget is %d bytes",
		ErrOutputBudget, humanBytes(bound), bodySize, budget)
}

// humanBytes renders a byte count such as "3.2 GiB".
func humanBytes(b float64) string {
	if math.IsInf(b, 0) || b > 1<<60 {
		return "more than an exbibyte"
	}
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(b, 'f', 0, 64) + " bytes"
	}
	return strconv.FormatFloat(b, 'f', 1, 64) + " " + units[i]
}
