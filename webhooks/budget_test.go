package webhooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// shapeString renders a shape tree compactly: Type(value; kids).
func shapeString(n *shape) string {
	s := strings.TrimPrefix(n.typ, "AST")
	if n.value != "" {
		s += " " + n.value
	}
	if len(n.kids) > 0 {
		var kids []string
		for _, k := range n.kids {
			kids = append(kids, shapeString(k))
		}
		s += "(" + strings.Join(kids, ", ") + ")"
	}
	return s
}

// TestShape pins how go-jmespath's syntax tree is read back (literals
// become their size bound).
func TestShape(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"a.b":                          `Subexpression(Field "a", Field "b")`,
		"join(',', [@, `\"x}\"`])":     `FunctionExpression "join"(Literal 5, MultiSelectList(CurrentNode, Literal 5))`,
		"`{\"abcdef\": [1, \"xyz\"]}`": `Literal 45`,
		"[*].{k: @}":                   `Projection(Identity, MultiSelectHash(KeyValPair "k"(CurrentNode)))`,
		"a[?b == `1`] | [0]":           `Pipe(FilterProjection(Field "a", Identity, Comparator(Field "b", Literal 24)), IndexExpression(Identity, Index))`,
		"map(&x, @)":                   `FunctionExpression "map"(ExpRef(Field "x"), CurrentNode)`,
		"a[]":                          `Projection(Flatten(Field "a"), Identity)`,
		"*.x || !y":                    `OrExpression(ValueProjection(Identity, Field "x"), NotExpression(Field "y"))`,
	} {
		n, err := parseShape(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := shapeString(n); got != want {
			t.Errorf("%s:\n got %s\nwant %s", src, got, want)
		}
	}
}

// doubling returns @ followed by n pipes through [@, @]: each doubles
// the value's size while the expression stays short.
func doubling(n int) string {
	return "@" + strings.Repeat(" | [@, @]", n)
}

// TestShape_boundIsAnUpperBound: for a spread of expressions and bodies,
// the JSON size of what go-jmespath returns never exceeds the bound.
func TestShape_boundIsAnUpperBound(t *testing.T) {
	t.Parallel()
	bodies := []string{
		`{}`,
		`{"a": "<&>\u2028 \n", "b": [1, 2, 3], "c": {"d": "e"}, "s": ",,", "n": -1.5e300}`,
		`{"a": ["x", "yy", "zzz", "<<<<"], "b": [[1, [2]], [3, 4], []], "c": {"d": {"e": ["f", "g"]}}, "s": "--", "k": [{"n": 3, "v": "a"}, {"n": 1, "v": "bb"}, {"n": 2, "v": "<"}]}`,
		`[[1, 2], ["a", "b"], {"x": "y"}, "str", 12345678901234567890]`,
	}
	exprs := []string{
		"@", "a", "a[0]", "a[1:]", "a[::-1]", "b[]", "b[][]", "c.d.e", "c.*", "*", "*.d", "k[*].v",
		"k[?n > `1`].v", "k[?v == 'a'] | [0]", "[a, b]", "{x: a, y: b, z: c}", "[a, a, a, a]",
		"a[*].[@, @]", "k[*].{n: n, again: @}", "join(s, a)", "join(',', a)", "join(s, [s, s, s])",
		"to_string(@)", "to_string([@, @])", "to_string(a)", "length(@)", "keys(@)", "values(@)",
		"sort(a)", "reverse(a)", "reverse(s)", "to_array(@)", "merge(c, c.d)", "map(&[@, @], a)",
		"map(&to_string(@), a)", "sort_by(k, &n)", "max_by(k, &n)", "min_by(k, &v)", "not_null(x, a)",
		"max(b[0])", "a || b", "a && b", "!a", "`{\"lit\": [1, 2, 3]}`", "'raw'", "[*][*]", "@[0][0]",
		doubling(5), "to_string(" + doubling(4) + ")", "[*].to_string([@, @, @])", "*.[@, @][]",
		"join(s, " + doubling(3) + "[][][])", "b[*][*].[@]",
	}
	for _, body := range bodies {
		var data any
		if err := json.Unmarshal([]byte(body), &data); err != nil {
			t.Fatal(err)
		}
		for _, src := range exprs {
			e, err := compileExpression(src)
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			n := e.shape
			res, err := e.search(data)
			if err != nil {
				continue // a type error: nothing built
			}
			// The output's own measure: a document with all the budget.
			d := document{budget: 1 << 40, left: 1 << 40}
			if _, err := d.output(res); err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			size := float64(d.budget - d.left)
			out, work := n.bound(float64(len(body)))
			if size > out {
				t.Errorf("%s on %s: result of %.0f bytes, bound %.0f (work %.0f)", src, body, size, out, work)
			}
		}
	}
}

// TestCollect_outputBudget: an expression that may build more than the
// budget from the body is refused before it runs, with a TemplateError
// (422) wrapping ErrOutputBudget; ordinary expressions over large bodies
// pass.
func TestCollect_outputBudget(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4<<20)                // a 4 MiB string
	many := "[" + strings.Repeat("1,", 2<<20) + "1]" // 2M elements
	records := "[" + strings.Repeat(`{"n":1,"v":"abc"},`, 100_000) + `{"n":2,"v":"d"}]`
	tests := []struct {
		name, expr, body string
		refused          bool
	}{
		{"exponential pipes", doubling(40), `{"a": 1}`, true},
		{"doubling to_string", "to_string(" + doubling(12) + ")", `{"s": "` + strings.Repeat("y", 1000) + `"}`, true},
		{"join with a large separator", "join(s, a)", `{"s": "` + big[:1<<20] + `", "a": [` + strings.Repeat(`"a",`, 1000) + `"a"]}`, true},
		{"many copies of a large string", "join('', [s, s, s, s, s, s, s, s])", `{"s": "` + big + `"}`, true},
		{"projection multiplying every element", "[*].[@, @, @, @, @, @, @, @, @, @, @, @, @, @, @, @]", many, true},
		{"a field of a large body", "s", `{"s": "` + big + `"}`, false},
		{"the whole large body", "@", many, false},
		{"a filter over records", "[?n > `1`].v", records, false},
		{"sort_by over records", "sort_by(@, &n)[0].v", records, false},
		{"a small multi-select over a large body", "{a: a, b: b, n: length(s)}", `{"a": 1, "b": 2, "s": "` + big + `"}`, false},
		{"to_string of a 1 MiB body", "to_string(@)", `{"s": "` + big[:1<<20] + `"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			expr, _ := json.Marshal("${" + tt.expr + "}")
			c := newCollector(t, `{"event_type": "e", "payload": {"v": `+string(expr)+`}}`, "")
			_, err := c.Collect([]byte(tt.body), testNow, "")
			var te *TemplateError
			if !tt.refused {
				if err != nil {
					t.Fatalf("Collect: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrOutputBudget) || !errors.As(err, &te) || te.Field != "collector_config.payload.v" ||
				!strings.Contains(err.Error(), "output budget") {
				t.Fatalf("Collect: %v, want a TemplateError wrapping ErrOutputBudget", err)
			}
		})
	}
}

// TestCollect_outputMeasured: the budget is shared by the expressions of
// a template and measured on their outputs: many copies of a large field,
// each within the budget, together exceed it.
func TestCollect_outputMeasured(t *testing.T) {
	t.Parallel()
	payload := map[string]string{}
	for i := range 8 {
		payload[fmt.Sprintf("f%d", i)] = "${s}"
	}
	tmpl, _ := json.Marshal(map[string]any{"event_type": "e", "payload": payload})
	cfg, err := decodeCollectorConfig(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxOutputSize = 10 << 20
	c, err := NewCollector(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"s": "` + strings.Repeat("x", 2<<20) + `"}`)
	if _, err := c.Collect(body, testNow, ""); !errors.Is(err, ErrOutputBudget) {
		t.Fatalf("8 copies of 2 MiB within a 10 MiB budget: %v, want ErrOutputBudget", err)
	}
	if _, err := c.Collect([]byte(`{"s": "small"}`), testNow, ""); err != nil {
		t.Fatalf("a small body: %v", err)
	}
}

// TestParse_outputBudget: a webhook's budget is twice its max_payload_size,
// at least DefaultMaxOutputSize.
func TestParse_outputBudget(t *testing.T) {
	t.Parallel()
	for size, want := range map[string]int64{`"1k"`: DefaultMaxOutputSize, `"64m"`: 128 << 20} {
		w, err := Parse(strings.NewReader(`{"id": "x", "token": "a-long-test-token", "max_payload_size": ` + size +
			`, "collector_config": {"event_type": "e", "payload": {"v": "${@}"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		if w.Collector().budget != want {
			t.Errorf("max_payload_size %s: budget %d, want %d", size, w.Collector().budget, want)
		}
	}
}

// BenchmarkShape_bound: the cost of the bound of a typical expression,
// paid once per expression and request.
func BenchmarkShape_bound(b *testing.B) {
	e, err := compileExpression("commits[?distinct].{id: id, author: author.name, files: length(modified)}")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if out, _ := e.shape.bound(8500); out <= 0 {
			b.Fatal(out)
		}
	}
}

// FuzzShape: every expression go-jmespath compiles reads back as a shape
// (no valid expression is refused at load time), and its bound holds on
// the result for the body.
func FuzzShape(f *testing.F) {
	f.Add("a.b[0].c", `{"a": {"b": [{"c": "d"}]}}`)
	f.Add("join(s, a[*].to_string(@))", `{"s": "--", "a": [1, "x", [2]]}`)
	f.Add("{k: [@, @][], v: `{\"x\": [1, \"}\"]}`} | *.to_array(@)", `[1, 2]`)
	f.Add("a[?b != 'x\\n}'] | sort_by(@, &b)[::-1]", `{"a": [{"b": "y"}, {"b": "x\n}"}]}`)
	f.Add(`"quoted key"."with \"escapes\"" || 'raw\'s'`, `{"quoted key": null}`)
	f.Fuzz(func(t *testing.T, src, body string) {
		if len(src) > MaxExpressionLen {
			return
		}
		e, err := compileExpression(src)
		if err != nil {
			if strings.Contains(err.Error(), "expression tree") {
				t.Fatalf("%q compiles but its tree does not read back: %v", src, err)
			}
			return
		}
		var data any
		if !utf8.ValidString(body) || json.Unmarshal([]byte(body), &data) != nil {
			return // Collect refuses invalid UTF-8 before evaluating
		}
		out, work := e.shape.bound(float64(len(body)))
		if max(out, work) > 1<<20 {
			return // the collector would refuse it: too large to run here
		}
		res, err := e.search(data)
		if err != nil {
			return
		}
		d := document{budget: 1 << 40, left: 1 << 40}
		if _, err := d.output(res); err != nil {
			return
		}
		if size := float64(d.budget - d.left); size > out {
			t.Fatalf("%q on %q: result of %.0f bytes, bound %.0f", src, body, size, out)
		}
	})
}
