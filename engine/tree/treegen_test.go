package tree

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/squallhq/squall/config"
)

// treeGen generates random valid processing trees and events for the
// oracle. Its vocabulary is small on purpose: the trees' accessors,
// constants and patterns meet the events' keys and values often, so that
// conditions are true as often as false, extractions succeed and fail, and
// every construct is reached: filters (active or not, with or without a
// condition), iterators over arrays, objects and what is neither,
// rulesets, rules with continue and active, nested AND/OR/NOT of every
// operator over every value type, accessors (missing, nested, indexed,
// quoted, _variables of the rule and of another rule), extractors of
// every kind with modifiers, and actions with interpolated payloads.
type treeGen struct {
	r *rand.Rand
	// names numbers the nodes, so that siblings never share a name.
	names int
}

func newTreeGen(seed uint64) *treeGen {
	return &treeGen{r: rand.New(rand.NewPCG(seed, 0x5eed))}
}

func (g *treeGen) pick(list []string) string { return list[g.r.IntN(len(list))] }

func (g *treeGen) chance(percent int) bool { return g.r.IntN(100) < percent }

// The events' vocabulary.
var (
	genTypes   = []string{"a", "b", "email", "trap"}
	genStrings = []string{"a", "b", "A", "x", "", "host-1", "HOST-22", "a-1 b-22", "10.0.0.1",
		"  padded  ", "Straße", "ſ", "s", "K", "\u212a", "line1\nline2", "12", "-3412", "3.14",
		"1e3", "+5", "+18446744073709551615", "0x10", "1_0", "NaN", "inf", "1698915872",
		"Springsteen, Bruce", "$first $last", "a.b", "/"}
	genNumbers = []string{"0", "1", "-1", "2", "1000", "1000.0", "1e3", "1.5", "-2.5", "12",
		"1698915872", "1698933188760", "1698938840816144404", "18446744073709551615",
		"9223372036854775807", "-9223372036854775808", "9007199254740993", "9007199254740992.0"}
	genPayloadKeys = []string{"a", "b", "host", "n", "s", "flag", "list", "obj", "x.y"}
)

// genValue returns a random JSON value, nested up to depth.
func (g *treeGen) genValue(depth int) any {
	switch k := g.r.IntN(10); {
	case k < 4:
		return g.pick(genStrings)
	case k < 7:
		return json.Number(g.pick(genNumbers))
	case k == 7:
		if g.chance(30) {
			return nil
		}
		return g.chance(50)
	case k == 8 && depth > 0:
		arr := []any{}
		for range g.r.IntN(4) {
			arr = append(arr, g.genValue(depth-1))
		}
		return arr
	case depth > 0:
		obj := map[string]any{}
		for range g.r.IntN(4) {
			obj[g.pick([]string{"k", "n", "a", "S", "s"})] = g.genValue(depth - 1)
		}
		return obj
	}
	return g.pick(genStrings)
}

// event returns the JSON of a random valid event.
func (g *treeGen) event() []byte {
	payload := map[string]any{}
	for _, k := range genPayloadKeys {
		if !g.chance(70) {
			continue
		}
		switch {
		case g.chance(20):
			payload[k] = g.genValue(2)
		case k == "n":
			payload[k] = json.Number(g.pick(genNumbers))
		case k == "flag":
			payload[k] = g.genValue(0)
		case k == "list":
			list := []any{}
			for range g.r.IntN(4) {
				if g.chance(50) {
					list = append(list, map[string]any{"k": g.pick(genStrings), "n": json.Number(g.pick(genNumbers))})
				} else {
					list = append(list, g.genValue(1))
				}
			}
			payload[k] = list
		case k == "obj":
			obj := map[string]any{}
			for _, ok := range []string{"k", "n", "a", "S"} {
				if g.chance(60) {
					obj[ok] = g.genValue(1)
				}
			}
			payload[k] = obj
		default:
			payload[k] = g.pick(genStrings)
		}
	}
	ev := map[string]any{
		"type":       g.pick(genTypes),
		"created_ms": json.Number(g.pick([]string{"0", "1", "1554130814854", "1698915872"})),
		"payload":    payload,
	}
	if g.chance(80) {
		md := map[string]any{}
		if g.chance(80) {
			md["tenant_id"] = g.pick([]string{"master", "alpha", "a"})
		}
		ev["metadata"] = md
	}
	switch g.r.IntN(3) {
	case 0:
		ev["trace_id"] = g.pick(genStrings)
	case 1:
		ev["trace_id"] = nil
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return b
}

// The trees' vocabulary.
var (
	genEventAccessors = []string{"${event.type}", "${event.created_ms}", "${event.trace_id}",
		"${event.metadata.tenant_id}", "${event.payload.a}", "${event.payload.b}", "${event.payload.host}",
		"${event.payload.n}", "${event.payload.s}", "${event.payload.flag}", "${event.payload.list}",
		"${event.payload.list[0]}", "${event.payload.list[1].k}", "${event.payload.obj}",
		"${event.payload.obj.k}", "${event.payload.obj.n}", `${event.payload."x.y"}`,
		"${event.payload.missing}", "${event.payload}", "${event.metadata}", "${event}",
		"${event.payload.list[7]}", "${event.payload.a.b}"}
	genIteratorAccessors = []string{"${event.iterator.item}", "${event.iterator.item.k}",
		"${event.iterator.item.n}", "${event.iterator.iteration}", "${event.iterator}"}
	genVariableAccessors = []string{"${_variables.v0}", "${_variables.v1}", "${_variables.r0.v0}",
		"${_variables.r1.v1}", "${_variables.r0}", "${_variables.v0[0]}", "${_variables.v1.S}",
		"${_variables.r0.v1[1]}"}
	genTargets  = []string{"${event.payload.list}", "${event.payload.obj}", "${event.payload.s}", "${event.payload.missing}", "${event.payload}"}
	genPatterns = []string{"^a", "[0-9]+", `host-\d`, "(?i)a", "", "x", "^$", "b$", `\.`}
	// Indexed extraction patterns, by number of groups.
	genMatchPatterns = []string{"[a-z]+", ".*", "(.*)", "(?s).*", "([a-z]+)", "([a-z]+)-([0-9]+)",
		"(a)|(b)", "(x)?[a-z]", "([0-9])([0-9])?", `(\w+)\s(\w+)`}
	genNamedPatterns = []string{"(?P<S>[a-z]+)", "(?P<S>[a-zA-Z]+)-(?P<N>[0-9]+)", "(?P<S>a)|(?P<T>b)", "(?P<S>[0-9]+)([a-z])?"}
	genKeyPatterns   = []string{"^k$", "^[an]", ".", "^S$", "x"}
	genZones         = []string{"UTC", "Europe/Rome", "America/New_York", "Asia/Kolkata"}
)

// genCtx says where an expression is: under an iterator, in a rule.
type genCtx struct {
	inIterator, inRule bool
}

func (g *treeGen) accessor(c genCtx) string {
	switch {
	case c.inIterator && g.chance(30):
		return g.pick(genIteratorAccessors)
	case c.inRule && g.chance(25):
		return g.pick(genVariableAccessors)
	}
	return g.pick(genEventAccessors)
}

// expr returns a configuration string: an accessor, an interpolation, a
// constant, or text holding ${item...}.
func (g *treeGen) expr(c genCtx) string {
	switch k := g.r.IntN(10); {
	case k < 5:
		return g.accessor(c)
	case k < 7:
		return g.pick([]string{"x ", "", "host=", "${event.type}/"}) + g.accessor(c) + g.pick([]string{"", " y", "-${event.created_ms}"})
	case k == 7:
		return g.pick([]string{"item ${item}", "${item.name}", "cost: ${}", "${unknown.root} x"})
	}
	return g.pick(genStrings)
}

// arg returns an operator argument: an expression or a constant of any type.
func (g *treeGen) arg(c genCtx) any {
	if g.chance(60) {
		return g.expr(c)
	}
	return g.genValue(1)
}

func (g *treeGen) operator(c genCtx, depth int) *config.Operator {
	ops := []config.OpType{config.OpEquals, config.OpNotEquals, config.OpEqualsIgnoreCase, config.OpContains,
		config.OpContainsIgnoreCase, config.OpGreaterEqual, config.OpGreater, config.OpLessEqual, config.OpLess, config.OpRegex}
	k := g.r.IntN(10)
	switch {
	case depth > 0 && k < 2:
		op := &config.Operator{Type: config.OpAnd, Operators: []*config.Operator{}}
		if g.chance(50) {
			op.Type = config.OpOr
		}
		for range g.r.IntN(4) {
			op.Operators = append(op.Operators, g.operator(c, depth-1))
		}
		return op
	case depth > 0 && k == 2:
		return &config.Operator{Type: config.OpNot, Operator: g.operator(c, depth-1)}
	case k < 6:
		// The shape guards and indexes look for: an accessor equals a
		// string, in either order.
		acc, val := g.accessor(c), any(g.pick(genStrings[:6]))
		if g.chance(60) {
			acc, val = g.pick([]string{"${event.type}", "${event.payload.a}", "${event.metadata.tenant_id}"}), g.pick(genTypes)
		}
		if g.chance(20) {
			return &config.Operator{Type: config.OpEquals, First: val, Second: acc}
		}
		return &config.Operator{Type: config.OpEquals, First: acc, Second: val}
	}
	t := ops[g.r.IntN(len(ops))]
	if t == config.OpRegex {
		return &config.Operator{Type: t, Regex: g.pick(genPatterns), Target: g.expr(c)}
	}
	return &config.Operator{Type: t, First: g.arg(c), Second: g.arg(c)}
}

func (g *treeGen) modifier(c genCtx) *config.Modifier {
	switch g.r.IntN(7) {
	case 0:
		return &config.Modifier{Type: config.ModLowercase}
	case 1:
		return &config.Modifier{Type: config.ModTrim}
	case 2, 3:
		return &config.Modifier{Type: config.ModToNumber}
	case 4:
		m := &config.Modifier{Type: config.ModMap, Mapping: map[string]string{"a": "A", "host": "H", "12": "twelve"}}
		if g.chance(50) {
			d := g.pick(genStrings)
			m.DefaultValue = &d
		}
		return m
	case 5:
		if g.chance(50) {
			return &config.Modifier{Type: config.ModReplaceAll, Find: g.pick([]string{"a", "-", "", "host"}), Replace: g.expr(c)}
		}
		return &config.Modifier{Type: config.ModReplaceAll, IsRegex: true,
			Find:    g.pick([]string{"([a-z]+)-([0-9]+)", `(?P<last>[^,\s]+),\s+(?P<first>\S+)`, "[0-9]"}),
			Replace: g.pick([]string{"$2_$1", "$first $last", "#", "${event.payload.s}", "$1a"})}
	}
	return &config.Modifier{Type: config.ModDateAndTime, Timezone: g.pick(genZones)}
}

func (g *treeGen) extractor(c genCtx) *config.Extractor {
	ex := &config.Extractor{From: g.expr(c)}
	switch g.r.IntN(5) {
	case 0:
		ex.Regex = config.ExtractorRegex{Kind: config.RegexNamed, Pattern: g.pick(genNamedPatterns), AllMatches: g.chance(40)}
	case 1:
		ex.From = g.pick([]string{"${event.payload.obj}", "${event.payload}", "${event.payload.list[1]}", "${event.iterator.item}"})
		if !c.inIterator && ex.From == "${event.iterator.item}" {
			ex.From = "${event.payload.obj}"
		}
		ex.Regex = config.ExtractorRegex{Kind: config.RegexSingleKey, Pattern: g.pick(genKeyPatterns)}
	default:
		ex.Regex = config.ExtractorRegex{Kind: config.RegexIndexed, Pattern: g.pick(genMatchPatterns), AllMatches: g.chance(30)}
		if g.chance(70) {
			idx := []int{0, 0, 1, 1, 2, 5}[g.r.IntN(6)]
			ex.Regex.GroupMatchIdx = &idx
		}
	}
	for range g.r.IntN(3) {
		ex.Modifiers = append(ex.Modifiers, g.modifier(c))
	}
	return ex
}

// payloadValue returns an action payload value.
func (g *treeGen) payloadValue(c genCtx, depth int) any {
	switch k := g.r.IntN(10); {
	case k < 6:
		return g.expr(c)
	case k < 8 || depth == 0:
		return g.genValue(0)
	case k == 8:
		arr := []any{}
		for range g.r.IntN(3) {
			arr = append(arr, g.payloadValue(c, depth-1))
		}
		return arr
	}
	obj := map[string]any{}
	for range g.r.IntN(3) {
		obj[g.pick([]string{"msg", "v", "raw"})] = g.payloadValue(c, depth-1)
	}
	return obj
}

func (g *treeGen) rule(name string, c genCtx) *config.Rule {
	c.inRule = true
	r := &config.Rule{Name: name, Continue: g.chance(60), Active: g.chance(85), With: map[string]*config.Extractor{}}
	if g.chance(85) {
		r.Where = g.operator(c, 3)
	}
	for i := range g.r.IntN(3) {
		r.With["v"+strconv.Itoa(i)] = g.extractor(c)
	}
	for range g.r.IntN(3) {
		a := &config.Action{ID: g.pick([]string{"logger", "archive", "a_1"}), Payload: map[string]any{}}
		for range g.r.IntN(4) {
			a.Payload[g.pick([]string{"msg", "v", "raw", "nested", "list"})] = g.payloadValue(c, 2)
		}
		r.Actions = append(r.Actions, a)
	}
	return r
}

func (g *treeGen) name() string {
	g.names++
	return "n" + strconv.Itoa(g.names)
}

// node returns a random node below depth levels of filters.
func (g *treeGen) node(c genCtx, depth int) *config.Node {
	switch k := g.r.IntN(10); {
	case depth >= 3 || k < 4:
		rs := &config.Node{Kind: config.KindRuleset, Name: g.name()}
		for i := range g.r.IntN(5) {
			rs.Rules = append(rs.Rules, g.rule("r"+strconv.Itoa(i), c))
		}
		if len(rs.Rules) > 0 && g.chance(40) {
			// A ruleset whose rules all require the same equality:
			// what rulesetGuard indexes.
			val := g.pick(genTypes)
			for _, r := range rs.Rules {
				eq := &config.Operator{Type: config.OpEquals, First: "${event.type}", Second: val}
				if r.Where != nil && g.chance(60) {
					eq = &config.Operator{Type: config.OpAnd, Operators: []*config.Operator{eq, r.Where}}
				}
				r.Where = eq
				val = g.pick([]string{val, val, g.pick(genTypes)})
			}
		}
		return rs
	case k < 5 && !c.inIterator:
		it := &config.Node{Kind: config.KindIterator, Name: g.name(), Active: g.chance(80), Target: g.pick(genTargets)}
		ic := c
		ic.inIterator = true
		for range g.r.IntN(3) {
			it.Children = append(it.Children, g.node(ic, depth+1))
		}
		return it
	}
	f := &config.Node{Kind: config.KindFilter, Name: g.name(), Active: g.chance(85)}
	if g.chance(75) {
		f.Filter = g.operator(c, 2)
	}
	for range g.r.IntN(4) {
		f.Children = append(f.Children, g.node(c, depth+1))
	}
	return f
}

// tree returns a random valid tree under the implicit root.
func (g *treeGen) tree() *config.Node {
	g.names = 0
	root := config.NewRoot()
	for range 1 + g.r.IntN(4) {
		root.Children = append(root.Children, g.node(genCtx{}, 1))
	}
	if err := config.Validate(root); err != nil {
		panic(fmt.Sprintf("the generator made an invalid tree: %v", err))
	}
	return root
}
