package config

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// addFiles seeds f with every file matching the patterns.
func addFiles(f *testing.F, patterns ...string) {
	f.Helper()
	for _, p := range patterns {
		files, err := filepath.Glob(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}

// FuzzDecodeExport checks that decoding never panics and that whatever
// decodes survives Validate, EncodeExport and a second DecodeExport unchanged.
func FuzzDecodeExport(f *testing.F) {
	addFiles(f, "testdata/export/*.json", "testdata/bad/*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		ex, err := DecodeExport(data)
		if err != nil {
			return
		}
		verr := Validate(ex.Node)
		out, err := EncodeExport(ex.Node)
		if err != nil {
			t.Fatalf("EncodeExport of a decoded tree: %v", err)
		}
		back, err := DecodeExport(out)
		if err != nil {
			t.Fatalf("DecodeExport of EncodeExport output: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back.Node, ex.Node) {
			t.Fatalf("tree changed across EncodeExport/DecodeExport:\n%s", out)
		}
		again, err := EncodeExport(back.Node)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("EncodeExport is not a fixed point (%v):\n%s\n%s", err, out, again)
		}
		if verr2 := Validate(back.Node); (verr == nil) != (verr2 == nil) || (verr != nil && verr.Error() != verr2.Error()) {
			t.Fatalf("Validate changed across a round trip: %v / %v", verr, verr2)
		}
		if c := ex.Node.Clone(); !reflect.DeepEqual(c, ex.Node) {
			t.Fatal("Clone differs from the tree")
		}
	})
}

// exprSeeds are strings from the expression tests and the fixtures.
var exprSeeds = []string{
	"", "email", "${event}", "${event.type}", "${event.payload.}", "${.}", "${}", "cost: ${}",
	`${event.payload.body."second.with.dot"}`, `${event.payload.hello."world[11]".inner[0]}`,
	`${event.payload.one."[1]"}`, `${event.payload.o"ne}`, `${event.payload.one."two}`,
	"${item}", "${item...}", "my body is ${item[0].body}!", "x ${pippo}", "${pippo}", "${events.types}",
	"${event[0]}", "${_variables}", "${_variables[0]}", "${_variables.rule.var[0].field}",
	"${event.payload.list[x]}", "  ${event.type}  ", "${event.type}${event.created_ms}",
	`rm \${HOME}p`, "$${a}}", "${a${b}", "${[0]}", "${event.payload.l[99999999999999999999]}",
}

// FuzzParseExpr checks that parsing never panics and that what parses
// accounts for every byte of its input.
func FuzzParseExpr(f *testing.F) {
	for _, s := range exprSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseExpr(s)
		if err != nil {
			return
		}
		e.IsConstant()
		if e.Text != s {
			t.Fatalf("Text = %q, want %q", e.Text, s)
		}
		switch e.Kind {
		case ExprConstant:
			if strings.Contains(s, "${") && len(findExpressions(s)) > 0 {
				t.Fatalf("constant %q holds an expression", s)
			}
		case ExprSingle:
			if e.Accessor == nil || e.Accessor.Text != s || e.Accessor.Root == RootUnknown {
				t.Fatalf("single %q: accessor %+v", s, e.Accessor)
			}
			checkAccessor(t, e.Accessor)
		case ExprInterpolated:
			var b strings.Builder
			n := 0
			for _, p := range e.Parts {
				b.WriteString(p.Text)
				if p.Accessor != nil {
					n++
					if p.Accessor.Text != p.Text {
						t.Fatalf("part %q has accessor %q", p.Text, p.Accessor.Text)
					}
					checkAccessor(t, p.Accessor)
				}
			}
			if b.String() != s || n == 0 {
				t.Fatalf("parts %+v (%d accessors) do not rebuild %q", e.Parts, n, s)
			}
		default:
			t.Fatalf("kind %d", e.Kind)
		}
	})
}

// checkAccessor writes the accessor's path back with Segment.String and
// parses it again: the segments must come back the same. Keys holding a
// quote or looking like [N] cannot be written, and are skipped.
func checkAccessor(t *testing.T, a *Accessor) {
	t.Helper()
	inner := a.Text[2 : len(a.Text)-1]
	segs, err := ParsePath(inner)
	if err != nil || len(segs) == 0 {
		t.Fatalf("ParsePath(%q) = %v, %v for a parsed accessor", inner, segs, err)
	}
	var parts []string
	for _, s := range segs {
		if !s.IsIndex && (strings.Contains(s.Key, `"`) || strings.HasPrefix(s.Key, "[")) {
			return
		}
		parts = append(parts, s.String())
	}
	again, err := ParsePath(strings.Join(parts, "."))
	if err != nil || !reflect.DeepEqual(again, segs) {
		t.Fatalf("%q: rewritten as %q parses to %v, %v; want %v", a.Text, strings.Join(parts, "."), again, err, segs)
	}
}

// treeGen builds random trees shaped as DecodeExport returns them (nil
// versus empty slices as the decoder makes them), with awkward strings and
// numbers everywhere, for TestExport_RandomRoundTrip.
type treeGen struct{ r *rand.Rand }

var genRunes = []rune("ab_Z09 .[]\"\\/<>&${}\u00e9\u2028\x00\x7f\ufffd\n\t")

func (g treeGen) str() string {
	n := g.r.IntN(8)
	b := make([]rune, n)
	for i := range b {
		b[i] = genRunes[g.r.IntN(len(genRunes))]
	}
	return string(b)
}

var genNumbers = []json.Number{"0", "-0", "1", "1.0", "1000.0", "1e3", "-12.5E-3", "18446744073709551616"}

func (g treeGen) value(depth int) any {
	switch k := g.r.IntN(8); {
	case k == 0:
		return nil
	case k == 1:
		return g.r.IntN(2) == 0
	case k == 2:
		return genNumbers[g.r.IntN(len(genNumbers))]
	case k == 3 && depth > 0:
		l := make([]any, g.r.IntN(3))
		for i := range l {
			l[i] = g.value(depth - 1)
		}
		return l
	case k == 4 && depth > 0:
		return g.object(depth - 1)
	}
	return g.str()
}

func (g treeGen) object(depth int) map[string]any {
	m := map[string]any{}
	for range g.r.IntN(3) {
		m[g.str()] = g.value(depth)
	}
	return m
}

func (g treeGen) operator(depth int) *Operator {
	types := []OpType{OpEquals, OpNotEquals, OpEqualsIgnoreCase, OpContains, OpContainsIgnoreCase, OpGreaterEqual, OpGreater, OpLessEqual, OpLess, OpRegex}
	if depth > 0 {
		types = append(types, OpAnd, OpOr, OpNot)
	}
	op := &Operator{Type: types[g.r.IntN(len(types))]}
	switch op.Type {
	case OpAnd, OpOr:
		op.Operators = []*Operator{}
		for range g.r.IntN(3) {
			op.Operators = append(op.Operators, g.operator(depth-1))
		}
	case OpNot:
		op.Operator = g.operator(depth - 1)
	case OpRegex:
		op.Regex, op.Target = g.str(), g.str()
	default:
		op.First, op.Second = g.value(2), g.value(2)
	}
	return op
}

func (g treeGen) rule() *Rule {
	r := &Rule{Name: g.str(), Description: g.str(), Continue: g.r.IntN(2) == 0, Active: g.r.IntN(2) == 0,
		With: map[string]*Extractor{}, Actions: []*Action{}}
	if g.r.IntN(2) == 0 {
		r.Where = g.operator(3)
	}
	for range g.r.IntN(3) {
		ex := &Extractor{From: g.str(), Regex: ExtractorRegex{Kind: RegexKind(1 + g.r.IntN(3)), Pattern: g.str()}}
		if ex.Regex.Kind != RegexSingleKey {
			ex.Regex.AllMatches = g.r.IntN(2) == 0
		}
		if ex.Regex.Kind == RegexIndexed && g.r.IntN(2) == 0 {
			i := g.r.IntN(5)
			ex.Regex.GroupMatchIdx = &i
		}
		for range g.r.IntN(3) {
			ex.Modifiers = append(ex.Modifiers, g.modifier())
		}
		r.With[g.str()] = ex
	}
	for range g.r.IntN(3) {
		r.Actions = append(r.Actions, &Action{ID: g.str(), Payload: g.object(2)})
	}
	return r
}

func (g treeGen) modifier() *Modifier {
	types := []ModifierType{ModLowercase, ModTrim, ModToNumber, ModMap, ModReplaceAll, ModDateAndTime}
	m := &Modifier{Type: types[g.r.IntN(len(types))]}
	switch m.Type {
	case ModMap:
		m.Mapping = map[string]string{}
		for range g.r.IntN(3) {
			m.Mapping[g.str()] = g.str()
		}
		if g.r.IntN(2) == 0 {
			d := g.str()
			m.DefaultValue = &d
		}
	case ModReplaceAll:
		m.Find, m.Replace, m.IsRegex = g.str(), g.str(), g.r.IntN(2) == 0
	case ModDateAndTime:
		m.Timezone = g.str()
	}
	return m
}

func (g treeGen) node(depth int) *Node {
	kind := KindRuleset
	if depth > 0 {
		kind = Kind(1 + g.r.IntN(3))
	}
	n := &Node{Kind: kind, Name: g.str()}
	if kind == KindRuleset {
		for range g.r.IntN(3) {
			n.Rules = append(n.Rules, g.rule())
		}
		return n
	}
	n.Description, n.Active = g.str(), g.r.IntN(2) == 0
	if kind == KindIterator {
		n.Target = g.str()
	} else if g.r.IntN(2) == 0 {
		n.Filter = g.operator(3)
	}
	for range g.r.IntN(4) {
		n.Children = append(n.Children, g.node(depth-1))
	}
	return n
}

func TestExport_RandomRoundTrip(t *testing.T) {
	t.Parallel()
	g := treeGen{rand.New(rand.NewPCG(1, 2))}
	for i := range 300 {
		n := g.node(4)
		out, err := EncodeExport(n)
		if err != nil {
			t.Fatalf("tree %d: EncodeExport: %v", i, err)
		}
		back, err := DecodeExport(out)
		if err != nil {
			t.Fatalf("tree %d: DecodeExport: %v\n%s", i, err, out)
		}
		if !reflect.DeepEqual(back.Node, n) {
			t.Fatalf("tree %d changed across EncodeExport/DecodeExport:\n%s", i, out)
		}
		if c := n.Clone(); !reflect.DeepEqual(c, n) {
			t.Fatalf("tree %d: Clone differs", i)
		}
		_ = Validate(n) // must not panic
		for _, r := range n.Rules {
			api, err := EncodeRule(r, FormAPI)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := DecodeRule(api); err != nil || !reflect.DeepEqual(back, r) {
				t.Fatalf("tree %d: rule changed across EncodeRule/DecodeRule (%v):\n%s", i, err, api)
			}
		}
	}
}
