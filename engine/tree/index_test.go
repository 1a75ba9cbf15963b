package tree

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/squallhq/squall/config"
)

// randomTree builds trees that mix indexable conditions (equalities on
// event fields) with others, nested filters, iterators and inactive nodes.
type randomTree struct {
	r *rand.Rand
	t *testing.T
	n int
}

var randomAccessors = []string{"${event.type}", "${event.payload.k}", "${event.metadata.tenant_id}"}
var randomValues = []string{"a", "b", "c"}

func (g *randomTree) cond() string {
	acc := randomAccessors[g.r.IntN(len(randomAccessors))]
	val := randomValues[g.r.IntN(len(randomValues))]
	eq := fmt.Sprintf(`{"type":"equals","first":%q,"second":%q}`, acc, val)
	switch g.r.IntN(6) {
	case 0:
		return fmt.Sprintf(`{"type":"AND","operators":[%s,{"type":"contains","first":"${event.payload.s}","second":"x"}]}`, eq)
	case 1:
		return fmt.Sprintf(`{"type":"OR","operators":[%s,{"type":"equals","first":"${event.payload.k}","second":"c"}]}`, eq)
	case 2:
		return fmt.Sprintf(`{"type":"equals","first":%q,"second":%q}`, val, acc)
	case 3:
		return fmt.Sprintf(`{"type":"ne","first":%q,"second":%q}`, acc, val)
	}
	return eq
}

func (g *randomTree) name() string {
	g.n++
	return fmt.Sprintf("n%d", g.n)
}

func (g *randomTree) node(depth int, inIterator bool) *config.Node {
	switch k := g.r.IntN(4); {
	case depth >= 3 || k == 0:
		rs := &config.Node{Kind: config.KindRuleset, Name: g.name()}
		for i := range g.r.IntN(4) {
			where := g.cond()
			if g.r.IntN(5) == 0 {
				where = "null"
			}
			rs.Rules = append(rs.Rules, mustRule(g.t, fmt.Sprintf(`{"name":"r%d","description":"","continue":%v,"active":%v,
				"constraint":{"WHERE":%s,"WITH":{"v":{"from":"${event.payload.s}","regex":{"match":"[a-z]","group_match_idx":0}}}},
				"actions":[{"id":"a","payload":{"node":%q,"rule":%d,"v":"${_variables.v}","item":"${event.iterator.iteration}"}}]}`,
				i, g.r.IntN(3) > 0, g.r.IntN(5) > 0, where, rs.Name, i)))
		}
		return rs
	case k == 1 && !inIterator:
		it := &config.Node{Kind: config.KindIterator, Name: g.name(), Active: g.r.IntN(5) > 0, Target: "${event.payload.list}"}
		for range 1 + g.r.IntN(3) {
			it.Children = append(it.Children, g.node(depth+1, true))
		}
		return it
	default:
		f := &config.Node{Kind: config.KindFilter, Name: g.name(), Active: g.r.IntN(6) > 0}
		if g.r.IntN(4) > 0 {
			op, err := config.DecodeOperator([]byte(g.cond()))
			if err != nil {
				g.t.Fatal(err)
			}
			f.Filter = op
		}
		for range g.r.IntN(5) {
			f.Children = append(f.Children, g.node(depth+1, inIterator))
		}
		return f
	}
}

// TestActions_indexAgreesWithFullEvaluation checks on random trees and
// events that live evaluation, which skips branches through the index,
// yields exactly the actions of the full evaluation.
func TestActions_indexAgreesWithFullEvaluation(t *testing.T) {
	t.Parallel()
	for seed := range uint64(200) {
		g := &randomTree{r: rand.New(rand.NewPCG(seed, 7)), t: t}
		root := config.NewRoot()
		for range 1 + g.r.IntN(6) {
			root.Children = append(root.Children, g.node(1, false))
		}
		tr := mustCompile(t, root)
		for range 20 {
			ev := mustEvent(t, fmt.Sprintf(`{"type":%q,"created_ms":1,"metadata":{"tenant_id":%q},"payload":{"k":%q,"s":%q,"list":[{"k":"a"},{"k":"b"}]}}`,
				randomValues[g.r.IntN(3)], randomValues[g.r.IntN(3)], randomValues[g.r.IntN(3)], []string{"x", "y", "1"}[g.r.IntN(3)]))
			_, want := tr.Process(ev)
			checkLive(t, tr, ev, want)
		}
	}
}

// Nested indexed filters share the evaluator's scratch space.
func TestActions_nestedIndexes(t *testing.T) {
	t.Parallel()
	op := func(acc, val string) *config.Operator {
		o, err := config.DecodeOperator(fmt.Appendf(nil, `{"type":"equals","first":%q,"second":%q}`, acc, val))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	rs := func(name string) *config.Node {
		return &config.Node{Kind: config.KindRuleset, Name: name, Rules: []*config.Rule{mustRule(t, `{"name":"r","description":"","continue":true,"active":true,"constraint":{"WHERE":null,"WITH":{}},"actions":[{"id":"`+name+`","payload":{}}]}`)}}
	}
	root := config.NewRoot()
	for _, v := range []string{"a", "b"} {
		f := &config.Node{Kind: config.KindFilter, Name: "f" + v, Active: true, Filter: op("${event.type}", v)}
		for _, k := range []string{"x", "y"} {
			f.Children = append(f.Children, &config.Node{Kind: config.KindFilter, Name: "g" + k, Active: true, Filter: op("${event.payload.k}", k), Children: []*config.Node{rs("rs_" + v + k)}})
		}
		f.Children = append(f.Children, rs("rs_"+v))
		root.Children = append(root.Children, f)
	}
	root.Children = append(root.Children, rs("rs_any"))
	tr := mustCompile(t, root)
	ev := mustEvent(t, `{"type":"a","created_ms":1,"payload":{"k":"y"}}`)
	got := tr.Actions(ev, nil)
	if s := toJSON(t, got); s != `[{"id":"rs_ay","payload":{}},{"id":"rs_a","payload":{}},{"id":"rs_any","payload":{}}]` {
		t.Errorf("actions %s", s)
	}
}
