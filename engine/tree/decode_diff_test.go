package tree

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
)

// probeRules read the payload and the metadata every way an accessor can:
// whole objects, nested keys, array elements, missing paths, numbers,
// interpolations, and the operators on them. Every rule continues, so
// that one rule's outcome does not hide the next one's.
var probeRules = []string{
	ruleJSON("whole", true, "", "", `[{"id":"a","payload":{"event":"${event}","payload":"${event.payload}","metadata":"${event.metadata}","type":"${event.type}","created":"${event.created_ms}","trace":"${event.trace_id}"}}]`),
	ruleJSON("path_a", true, "", "", `[{"id":"a","payload":{"a":"${event.payload.a}"}}]`),
	ruleJSON("path_ab", true, "", "", `[{"id":"b","payload":{"b":"${event.payload.a.b}"}}]`),
	ruleJSON("path_a0", true, "", "", `[{"id":"c","payload":{"c":"${event.payload.a[0]}"}}]`),
	ruleJSON("path_items1s", true, "", "", `[{"id":"d","payload":{"d":"${event.payload.items[1].s}"}}]`),
	ruleJSON("path_items", true, "", "", `[{"id":"d","payload":{"d":"${event.payload.items}"}}]`),
	ruleJSON("path_tenant", true, "", "", `[{"id":"e","payload":{"e":"${event.metadata.tenant_id}"}}]`),
	ruleJSON("path_unicode", true, "", "", `[{"id":"f","payload":{"f":"${event.payload.é}"}}]`),
	ruleJSON("path_quoted", true, "", "", `[{"id":"g","payload":{"g":"${event.payload.\"a.b\"}"}}]`),
	ruleJSON("path_n", true, "", "", `[{"id":"n","payload":{"n":"${event.payload.n}","s":"${event.payload.s}"}}]`),
	ruleJSON("text", true, "", "", `[{"id":"t","payload":{"t":"s=${event.payload.s} n=${event.payload.n} b=${event.payload.b} x=${event.payload.items[0]}"}}]`),
	ruleJSON("equals", true, `{"type":"equals","first":"${event.payload.n}","second":1000}`, "", `[{"id":"eq","payload":{}}]`),
	ruleJSON("equals_str", true, `{"type":"OR","operators":[{"type":"equals","first":"${event.payload.s}","second":"x"},{"type":"equals","first":"${event.payload.a}","second":"${event.payload.s}"}]}`, "", `[{"id":"eqs","payload":{}}]`),
	ruleJSON("contains", true, `{"type":"OR","operators":[{"type":"contains","first":"${event.payload.items}","second":"x"},{"type":"contains","first":"${event.payload.a}","second":"b"},{"type":"containsIgnoreCase","first":"${event.payload.s}","second":"X"}]}`, "", `[{"id":"ct","payload":{}}]`),
	ruleJSON("order", true, `{"type":"AND","operators":[{"type":"gt","first":"${event.payload.n}","second":1.5},{"type":"le","first":"${event.payload.n}","second":18446744073709551616}]}`, "", `[{"id":"gt","payload":{}}]`),
	ruleJSON("regex", true, `{"type":"regex","regex":"^[a-z]","target":"${event.payload.s}"}`, `{"v":{"from":"${event.payload.s}","regex":{"match":"(.*)","group_match_idx":1}},"k":{"from":"${event.payload.a}","regex":{"single_key_match":"^b"}}}`, `[{"id":"re","payload":{"v":"${_variables.v}","k":"${_variables.k}"}}]`),
	ruleJSON("tonumber", true, "", `{"n":{"from":"${event.payload.s}","regex":{"match":".*","group_match_idx":0},"modifiers_post":[{"type":"Trim"},{"type":"ToNumber"}]}}`, `[{"id":"tn","payload":{"n":"${_variables.n}"}}]`),
}

// probeTree is the probe rules at the root, and again under iterators
// over the payload's items and over its object a.
func probeTree(tb testing.TB) *config.Node {
	var rules []*config.Rule
	for _, r := range probeRules {
		rules = append(rules, mustRule(tb, r))
	}
	root := config.NewRoot()
	rs := func() *config.Node { return &config.Node{Kind: config.KindRuleset, Name: "probe", Rules: rules} }
	root.Children = []*config.Node{
		rs(),
		{Kind: config.KindIterator, Name: "items", Active: true, Target: "${event.payload.items}", Children: []*config.Node{rs()}},
		{Kind: config.KindIterator, Name: "keys", Active: true, Target: "${event.payload.a}", Children: []*config.Node{rs()}},
	}
	return root
}

// conformanceTrees are the trees the differential tests evaluate.
func conformanceTrees(tb testing.TB) []*Tree {
	return []*Tree{
		mustCompile(tb, probeTree(tb)),
		ruleFileTree(tb, fullMatchRule, ""),
		mustCompile(tb, tornadoDir(tb, "v2/test_config_iterator")),
		mustCompile(tb, tornadoDir(tb, "v2/test_config")),
		mustCompile(tb, tornadoDir(tb, "rules.d")),
		mustCompile(tb, exportFile(tb, "worked_example.tree.json")),
	}
}

// checkSameAsMaps decodes data with DecodeEvent and with the map-based
// decoder: both accept it or both refuse it, and when they accept it, the
// event's fields, its JSON form, and for every tree the processed tree
// and the actions are the same.
func checkSameAsMaps(t *testing.T, trees []*Tree, data []byte) {
	t.Helper()
	ev, err := DecodeEvent(data)
	old, oldErr := decodeEventMaps(data)
	if (err == nil) != (oldErr == nil) {
		t.Fatalf("%q: DecodeEvent error %v, map-based decoder error %v", data, err, oldErr)
	}
	if err != nil {
		return
	}
	if ev.Type != old.Type || ev.CreatedMs != old.CreatedMs || ev.TraceID != old.TraceID ||
		!reflect.DeepEqual(ev.Payload(), old.Payload()) || !reflect.DeepEqual(ev.Metadata(), old.Metadata()) {
		t.Fatalf("%q: decoded %+v %#v %#v, map-based %+v %#v %#v", data, ev, ev.Payload(), ev.Metadata(), old, old.Payload(), old.Metadata())
	}
	if a, b := toJSON(t, ev), toJSON(t, old); a != b {
		t.Fatalf("%q: JSON %s, map-based %s", data, a, b)
	}
	for i, tr := range trees {
		// A fresh event each time: Payload() caches its map, and the
		// accessors must not depend on it having been called.
		ev, _ := DecodeEvent(data)
		got := tr.Actions(ev, nil)
		want := tr.Actions(old, nil)
		if a, b := toJSON(t, got), toJSON(t, want); a != b {
			t.Fatalf("%q, tree %d: actions\n%s\nmap-based\n%s", data, i, a, b)
		}
		res, actions := tr.Process(ev)
		oldRes, oldActions := tr.Process(old)
		if a, b := toJSON(t, res), toJSON(t, oldRes); a != b {
			t.Fatalf("%q, tree %d: processed tree\n%s\nmap-based\n%s", data, i, a, b)
		}
		if a, b := toJSON(t, actions), toJSON(t, oldActions); a != b {
			t.Fatalf("%q, tree %d: test actions\n%s\nmap-based\n%s", data, i, a, b)
		}
	}
}

var diffSeeds = []string{
	`{"type":"t","created_ms":1,"payload":{"a":"x\u00e9\"\\","b":[1,2.5e3,true,null,{"c":"\ud83d\ude00"}]},"metadata":{"k":"v"}}`,
	`{"type":"t","created_ms":1,"payload":{"a":"","":0,"dup":1,"dup":"2"}}`,
	`{"type":"t","created_ms":1,"payload":{"s":"\ud800","t":"\udc00\u0041","u":"\ud800\u0041","v":"\ud800\udc00","w":"\u12","x":"\uZZZZ","y":"\q\/\b\f\n\r\t","z":"\u00"}}`,
	`{"type":"t","created_ms":1,"payload":{"n":-0,"m":1E400,"k":18446744073709551616,"j":-9223372036854775809,"i":0.1e-2}}`,
	`{"type":"t","created_ms":1,"payload":{"n":nan}}`,
	`{"type":"t","created_ms":1,"payload":{},"other":nan,"x":-inf,"y":+1,"z":[tru]}`,
	`{"type":"t","created_ms":1,"payload":{},"other":[1,-,+,.,e]}`,
	`{"type":"t","created_ms":007,"payload":{}}`,
	`{"type":"t","created_ms":18446744073709551615,"payload":{}}`,
	`{"type":"t","created_ms":18446744073709551616,"payload":{}}`,
	`{"type":"t","created_ms":1.0,"payload":{}}`,
	`{"type":"t","created_ms":1,"payload":{},"payload":{"a":1},"metadata":{"x":1},"metadata":null}`,
	`{"type":"t","created_ms":1,"payload":{"a":1},"payload":[]}`,
	`{"typ\u0065":"t","created_ms":1,"payload":{"k\"ey":1},"trace_id":"abc"}`,
	`{"type":"t","created_ms":1,"payload":{},"trace_id":1}`,
	` {"type" : "t" ,	"created_ms":1 ,"payload":{ "a" : [ ] , "b" : { } }}  ` + "\n",
	`{"type":"t","created_ms":1,"payload":{}} x`,
	`{"type":"t","created_ms":1,"payload":{},}`,
	`{"type":"t","created_ms":1,"payload":{"a":[1,]}}`,
	`{"type":"t","created_ms":1,"payload":{"a":"x` + "\x00\xff" + `"}}`,
	`{"type":"t","created_ms":1,"payload":{"items":["x",{"s":"y"}],"a":{"b":"c","bb":[1]},"s":"x","n":1000.0,"b":true}}`,
	`{"type":"t","created_ms":1,"payload":{"items":{"k":1},"a":["b"],"s":"X\nY","n":1.6}}`,
	`[]`, `"x"`, ``, `{`, `{"type":"t","created_ms":1,"payload":{"a":"x}}`,
	`{"type":"t","created_ms":1,"payload":` + strings.Repeat(`[`, 298) + strings.Repeat(`]`, 298) + `}`,
	`{"type":"t","created_ms":1,"payload":` + strings.Repeat(`[`, 299) + strings.Repeat(`]`, 299) + `}`,
	`{"type":"t","created_ms":1,"payload":{"a":` + strings.Repeat(`{"a":`, 297) + `1` + strings.Repeat(`}`, 298) + `}`,
	`{"type":"t","created_ms":1,"payload":{"a":` + strings.Repeat(`{"a":`, 298) + `1` + strings.Repeat(`}`, 299) + `}`,
}

// FuzzDecodeDifferential: DecodeEvent and evaluation on its document
// agree with the map-based decoder on any input, escapes and invalid text
// included.
//
//	go test ./engine/tree -run '^$' -fuzz FuzzDecodeDifferential -fuzztime 60s
func FuzzDecodeDifferential(f *testing.F) {
	for _, s := range diffSeeds {
		f.Add([]byte(s))
	}
	for _, file := range []string{fullMatchEvent, noMatchEvent, "tornado/openshift_webhook_event.json", "tornado/event_nested_01.json", "tornado/event_with_null_value.json", "worked_example.event.json"} {
		f.Add(readFile(f, file))
	}
	trees := conformanceTrees(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameAsMaps(t, trees, data)
	})
}

// TestDecode_sameAsMaps runs checkSameAsMaps on the seeds and on random
// events, some of them mutated byte by byte.
func TestDecode_sameAsMaps(t *testing.T) {
	t.Parallel()
	trees := conformanceTrees(t)
	for _, s := range diffSeeds {
		checkSameAsMaps(t, trees, []byte(s))
	}
	r := rand.New(rand.NewPCG(17, 4))
	g := &eventGen{r: r}
	for range 250 {
		data := g.event()
		if r.IntN(4) == 0 {
			data = g.mutate(data)
		}
		checkSameAsMaps(t, trees, data)
	}
}

// eventGen writes random events whose payloads mix the values the probe
// tree reads.
type eventGen struct {
	r *rand.Rand
	b []byte
}

func (g *eventGen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

func (g *eventGen) ws() {
	if g.r.IntN(4) == 0 {
		g.b = append(g.b, g.pick(" ", "\n", "\t ", "\r\n")...)
	}
}

func (g *eventGen) event() []byte {
	g.b = g.b[:0]
	g.ws()
	g.b = append(g.b, '{')
	fields := []string{"type", "created_ms", "payload", "metadata", "trace_id", "other"}
	g.r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	first := true
	for _, f := range fields {
		if g.r.IntN(40) == 0 {
			continue
		}
		if !first {
			g.b = append(g.b, ',')
		}
		first = false
		g.ws()
		g.b = fmt.Appendf(g.b, "%q:", f)
		g.ws()
		switch f {
		case "type":
			g.b = append(g.b, g.pick(`"trap"`, `"test"`, `"alertmanager"`, `"t\u0072ap"`, `"trap"`, `"test"`, `"alertmanager"`, `1`)...)
		case "created_ms":
			if g.r.IntN(10) == 0 {
				g.b = append(g.b, g.pick(`1.0`, `-1`, `"1"`, `1e3`, `18446744073709551616`)...)
			} else {
				g.b = append(g.b, g.pick(`1554130814854`, `0`, `007`, `18446744073709551615`)...)
			}
		case "payload":
			g.object(0)
		case "metadata":
			if g.r.IntN(4) == 0 {
				g.b = append(g.b, g.pick(`null`, `null`, `null`, `[]`, `"m"`)...)
			} else {
				g.object(1)
			}
		case "trace_id":
			g.b = append(g.b, g.pick(`null`, `"abc"`, `"abc"`, `7`)...)
		default:
			g.value(1)
		}
		g.ws()
	}
	g.b = append(g.b, '}')
	g.ws()
	return g.b
}

var genKeys = []string{"a", "b", "s", "n", "items", "x", "é", "a.b", "host_ip", "line_5", "line_6", "line_9", "line_11", "alerts", "tenant_id", `k\"ey`, `\u0061`}

func (g *eventGen) object(depth int) {
	g.b = append(g.b, '{')
	for i := range g.r.IntN(6) {
		if i > 0 {
			g.b = append(g.b, ',')
		}
		g.ws()
		g.b = append(g.b, '"')
		g.b = append(g.b, genKeys[g.r.IntN(len(genKeys))]...)
		g.b = append(g.b, '"', ':')
		g.ws()
		g.value(depth + 1)
	}
	g.b = append(g.b, '}')
}

func (g *eventGen) value(depth int) {
	n := 10
	if depth > 3 {
		n = 7
	}
	switch g.r.IntN(n) {
	case 0, 1:
		g.b = append(g.b, g.pick(`"x"`, `"X"`, `"srv-12.example.com"`, `"10.65.5.31"`, `"Sensor 4"`, `" 1"`, `"b"`, `"12"`, `" 3.5 "`, `"\u00e9\n\"q\""`, `"\ud83d\ude00"`, `"\ud800"`, `"line\nnext"`, `""`, `"a\/b\\"`)...)
	case 2, 3:
		g.b = append(g.b, g.pick(`0`, `-0`, `1000`, `1000.0`, `1e3`, `1.5`, `1.6`, `-7`, `18446744073709551615`, `18446744073709551616`, `9223372036854775808`, `1E400`, `0.1e-2`)...)
	case 4:
		g.b = append(g.b, g.pick(`true`, `false`, `null`)...)
	case 5:
		if g.r.IntN(10) > 0 {
			g.b = append(g.b, g.pick(`"x"`, `2`, `"a"`)...)
			return
		}
		g.b = append(g.b, g.pick(`01`, `1.`, `+1`, `nan`, `-Inf`, `--1`, `1e`)...)
	case 6:
		g.b = append(g.b, g.pick(`"trap"`, `"SNMPv2-SMI::enterprises.14848.2.1.1.7.0 38:10:38:30.98"`)...)
	case 7, 8:
		g.object(depth)
	default:
		g.b = append(g.b, '[')
		for i := range g.r.IntN(4) {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.ws()
			g.value(depth + 1)
		}
		g.b = append(g.b, ']')
	}
}

// mutate changes, inserts or deletes a few bytes.
func (g *eventGen) mutate(data []byte) []byte {
	const alphabet = "{}[]\",:\\u0123456789abcdefABCDEF.eE+-ntrlsN \t\n\x00\xff"
	b := append([]byte(nil), data...)
	for range 1 + g.r.IntN(3) {
		if len(b) == 0 {
			break
		}
		i := g.r.IntN(len(b))
		c := alphabet[g.r.IntN(len(alphabet))]
		switch g.r.IntN(3) {
		case 0:
			b[i] = c
		case 1:
			b = append(b[:i], append([]byte{c}, b[i:]...)...)
		default:
			b = append(b[:i], b[i+1:]...)
		}
	}
	return b
}
