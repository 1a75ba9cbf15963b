package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// testNow is the creation time of the events in tests.
var testNow = time.UnixMilli(1554130814854)

// newCollector compiles a collector_config given as JSON.
func newCollector(t testing.TB, config string, tenantID string) *Collector {
	t.Helper()
	cfg, err := decodeCollectorConfig(json.RawMessage(config))
	if err != nil {
		t.Fatalf("collector_config: %v", err)
	}
	c, err := NewCollector(cfg, tenantID)
	if err != nil {
		t.Fatalf("NewCollector: %v", err)
	}
	return c
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tornadoCases are the collector fixtures in testdata/jmespath.
var tornadoCases = []string{"01", "02", "github_webhook_01"}

// collectTornado collects the event of the Tornado fixture name: its
// collector config and its input.
func collectTornado(t *testing.T, name string) Event {
	t.Helper()
	dir := filepath.Join("testdata", "jmespath")
	c := newCollector(t, string(readFile(t, filepath.Join(dir, name+"_config.json"))), "")
	ev, err := c.Collect(readFile(t, filepath.Join(dir, name+"_input.json")), testNow, "")
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return ev
}

// forTornadoEvents runs f, as parallel subtests, with the event of each
// Tornado fixture.
func forTornadoEvents(t *testing.T, f func(t *testing.T, name string, ev Event)) {
	t.Helper()
	for _, name := range tornadoCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, name, collectTornado(t, name))
		})
	}
}

// TestCollector_Tornado checks the events against Tornado's expected outputs,
// by value: Tornado writes the config literal 123 as 123.0, Squall as 123.
func TestCollector_Tornado(t *testing.T) {
	t.Parallel()
	forTornadoEvents(t, func(t *testing.T, name string, ev Event) {
		got := byValue(t, ev)
		want := byValue(t, json.RawMessage(readFile(t, filepath.Join("testdata", "jmespath", name+"_output.json"))))
		// Tornado's webhook collector sets no metadata; Squall always
		// sets the tenant (DESIGN decision 12).
		if md := got["metadata"]; !reflect.DeepEqual(md, map[string]any{"tenant_id": "master"}) {
			t.Errorf("metadata = %v", md)
		}
		for _, m := range []map[string]any{got, want} {
			delete(m, "created_ms")
			delete(m, "trace_id")
			delete(m, "metadata")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event\n got %v\nwant %v", got, want)
		}
	})
}

// byValue round-trips v through JSON into float64 numbers.
func byValue(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCollector_Golden pins the exact JSON of the events of the Tornado
// fixtures: number texts included.
func TestCollector_Golden(t *testing.T) {
	t.Parallel()
	forTornadoEvents(t, func(t *testing.T, name string, ev Event) {
		got, err := json.MarshalIndent(ev, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		golden := filepath.Join("testdata", "golden", name+".golden.json")
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if want := readFile(t, golden); !bytes.Equal(got, want) {
			t.Errorf("event differs from %s (rerun with -update if intended)\n got %s\nwant %s", golden, got, want)
		}
	})

	// The two number rules on the GitHub fixture, spelled out.
	ev := collectTornado(t, "github_webhook_01")
	inner := ev.Payload["inner_map"].(map[string]any)
	if n := inner["map"].(map[string]any)["number"]; n != json.Number("123") {
		t.Errorf("config literal 123 became %#v, want it kept as written", n)
	}
	if id := inner["array"].([]any)[3]; id != json.Number("960885") {
		t.Errorf("body integer 960885 became %#v", id)
	}
}

func TestCollector_Collect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		expr string // payload template value, as JSON
		body string
		want string // payload value, as JSON
	}{
		{"whole body", `"${@}"`, `{"a": [1, "x", null, true, {"b": 2.5}]}`, `{"a":[1,"x",null,true,{"b":2.5}]}`},
		{"whole body, not an object", `"${@}"`, `[1, 2]`, `[1,2]`},
		{"whole body, a string", `"${@}"`, `"text"`, `"text"`},
		{"field", `"${a.b}"`, `{"a": {"b": "x"}}`, `"x"`},
		{"missing field", `"${a.c}"`, `{"a": {"b": "x"}}`, `null`},
		{"field of a non-object", `"${a.b.c}"`, `{"a": {"b": "x"}}`, `null`},
		{"index", `"${a[0]}"`, `{"a": ["x", "y"]}`, `"x"`},
		{"negative index", `"${a[-1]}"`, `{"a": ["x", "y"]}`, `"y"`},
		{"index out of range", `"${a[5]}"`, `{"a": ["x", "y"]}`, `null`},
		{"quoted key", `"${\"@timestamp\"}"`, `{"@timestamp": "2018-11-01"}`, `"2018-11-01"`},
		{"object result", `"${a}"`, `{"a": {"b": [1, {"c": null}]}}`, `{"b":[1,{"c":null}]}`},
		{"projection", `"${a[*].n}"`, `{"a": [{"n": 1}, {"n": 2}, {"m": 3}]}`, `[1,2]`},
		{"flatten", `"${a[]}"`, `{"a": [[1, 2], [3]]}`, `[1,2,3]`},
		{"multiselect hash", `"${{x: a, y: b}}"`, `{"a": 1, "b": "B"}`, `{"x":1,"y":"B"}`},
		{"multiselect list", `"${[a, b]}"`, `{"a": 1, "b": "B"}`, `[1,"B"]`},
		{"pipe", `"${a | [0]}"`, `{"a": ["x"]}`, `"x"`},
		{"or", `"${a || b}"`, `{"b": "B"}`, `"B"`},
		{"json literal", "\"${`{\\\"k\\\": [1.5]}`}\"", `{}`, `{"k":[1.5]}`},
		{"raw string literal", `"${'lit'}"`, `{}`, `"lit"`},

		// Numbers: evaluated as float64, written with the body's text.
		{"length of object", `"${length(@)}"`, `{"a": 1, "b": 2}`, `2`},
		{"length of string counts runes", `"${length(s)}"`, `{"s": "héllo"}`, `5`},
		{"filter with number comparison", "\"${a[?x > `1`].x}\"", `{"a": [{"x": 1}, {"x": 2}, {"x": 3}]}`, `[2,3]`},
		{"filter with equality", "\"${a[?x == `2`].y}\"", `{"a": [{"x": 2, "y": "two"}, {"x": 3, "y": "three"}]}`, `["two"]`},
		{"number equality between fields", `"${a == b}"`, `{"a": 2, "b": 2.0}`, `true`},
		{"sort_by number", `"${sort_by(a, &n)[*].n}"`, `{"a": [{"n": 3}, {"n": 1}, {"n": 2}]}`, `[1,2,3]`},
		{"max", `"${max(a)}"`, `{"a": [3, 10, 2]}`, `10`},
		{"sum", `"${sum(a)}"`, `{"a": [1, 2, 3.5]}`, `6.5`},
		{"avg", `"${avg(a)}"`, `{"a": [1, 2]}`, `1.5`},
		{"abs", `"${abs(a)}"`, `{"a": -4}`, `4`},
		{"to_number", `"${to_number(s)}"`, `{"s": "42"}`, `42`},
		{"to_string of number", `"${to_string(a)}"`, `{"a": 42}`, `"42"`},
		{"type of number", `"${type(a)}"`, `{"a": 42}`, `"number"`},
		{"integer text kept", `"${a}"`, `{"a": 960885}`, `960885`},
		{"big integer kept", `"${a}"`, `{"a": 12345678901234567890}`, `12345678901234567890`},
		{"big integer kept through filter", "\"${a[?x > `1`].x}\"", `{"a": [{"x": 12345678901234567890}, {"x": 0}]}`, `[12345678901234567890]`},
		{"big integer kept through max", `"${max(a)}"`, `{"a": [12345678901234567890, 1]}`, `12345678901234567890`},
		{"float text kept", `"${a}"`, `{"a": [1.0, 1e3, 0.10, -0.0, 1E+2]}`, `[1.0,1e3,0.10,-0.0,1E+2]`},
		{"same value written twice", `"${a}"`, `{"a": [1, 1.0]}`, `[1,1]`},
		{"huge number kept", `"${a}"`, `{"a": 1e400}`, `1e400`},
		{"computed overflow is null", `"${sum(a)}"`, `{"a": [1e308, 1e308]}`, `null`},
		{"canonical floats", `"${a}"`, `{"a": [0.000001, 1e-7, 1e+21, 123456789.125]}`, `[0.000001,1e-7,1e+21,123456789.125]`},
		{"computed numbers in shortest form", `"${[abs(a), abs(b), abs(c), avg(d)]}"`, `{"a": -0.000001, "b": -1e-7, "c": -1e+21, "d": [1, 2]}`, `[0.000001,1e-7,1e+21,1.5]`},

		// Template values that are not expressions.
		{"no interpolation", `"Hello ${name}"`, `{"name": "x"}`, `"Hello ${name}"`},
		{"dollar brace only", `"${"`, `{}`, `"${"`},
		{"brace at end only", `"a}"`, `{}`, `"a}"`},
		{"literal number kept as written", `123`, `{}`, `123`},
		{"literal float kept as written", `99.90`, `{}`, `99.90`},
		{"literal null", `null`, `{}`, `null`},
		{"literal bool", `false`, `{}`, `false`},
		{"nested template", `{"m": {"n": 1, "e": "${a}"}, "l": [true, "${b}", "t"]}`, `{"a": "A", "b": 2}`, `{"l":[true,2,"t"],"m":{"e":"A","n":1}}`},
		{"empty object and array", `{"o": {}, "l": []}`, `{}`, `{"l":[],"o":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCollector(t, `{"event_type": "test", "payload": {"v": `+tt.expr+`}}`, "")
			ev, err := c.Collect([]byte(tt.body), testNow, "")
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			got, err := json.Marshal(ev.Payload["v"])
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("payload.v = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCollector_Event(t *testing.T) {
	t.Parallel()
	c := newCollector(t, `{"event_type": "${kind}", "payload": {"k": "${kind}"}}`, "")
	ev, err := c.Collect([]byte(`{"kind": "push"}`), testNow, "tenant_a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"push","created_ms":1554130814854,"metadata":{"tenant_id":"tenant_a"},"payload":{"k":"push"}}`
	if string(b) != want {
		t.Errorf("event = %s\nwant    %s", b, want)
	}

	// An empty payload template gives an empty object, never null.
	c = newCollector(t, `{"event_type": "e", "payload": {}}`, "")
	ev, err = c.Collect([]byte(`{}`), testNow, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(ev.Payload); string(b) != "{}" {
		t.Errorf("payload = %s", b)
	}
}

func TestCollector_Tenant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		webhook string // tenant_id of the webhook file
		caller  string // tenant given to Collect
		want    string
	}{
		{"webhook tenant wins", "tenant_a", "intake", "tenant_a"},
		{"webhook tenant without caller tenant", "tenant_a", "", "tenant_a"},
		{"caller tenant", "", "intake", "intake"},
		{"default", "", "", DefaultTenant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tenant := ""
			if tt.webhook != "" {
				tenant = fmt.Sprintf(`"tenant_id": %q,`, tt.webhook)
			}
			w := mustParse(t, `{"id": "h", "token": "a-long-test-token", `+tenant+` "collector_config": {"event_type": "e", "payload": {}}}`)
			ev, err := w.Collector().Collect([]byte(`{}`), testNow, tt.caller)
			if err != nil {
				t.Fatal(err)
			}
			if got := ev.Metadata["tenant_id"]; got != tt.want {
				t.Errorf("tenant_id = %v, want %s", got, tt.want)
			}
		})
	}
}

func TestCollector_Errors(t *testing.T) {
	t.Parallel()
	const (
		notJSON   = "body not JSON"
		template  = "template"
		eventType = "event type"
	)
	tests := []struct {
		name    string
		config  string
		body    string
		kind    string
		field   string // TemplateError.Field
		message string // substring of the error
	}{
		{"empty body", `{"event_type": "${a}", "payload": {}}`, ``, notJSON, "", "not valid JSON"},
		{"truncated body", `{"event_type": "${a}", "payload": {}}`, `{"a": `, notJSON, "", "unexpected EOF"},
		{"two values", `{"event_type": "${a}", "payload": {}}`, `{"a": "x"} {}`, notJSON, "", "unexpected data"},
		{"not JSON", `{"event_type": "${a}", "payload": {}}`, `a=1&b=2`, notJSON, "", "invalid character"},
		{"invalid UTF-8", `{"event_type": "${a}", "payload": {}}`, "{\"a\": \"\xff\"}", notJSON, "", "invalid UTF-8"},
		{"not JSON, constant template", `{"event_type": "e", "payload": {"c": 1}}`, `{`, notJSON, "", "not valid JSON"},
		{"invalid UTF-8, constant template", `{"event_type": "e", "payload": {}}`, "\"\xc3\"", notJSON, "", "invalid UTF-8"},
		{"event type is a number", `{"event_type": "${a}", "payload": {}}`, `{"a": 1}`, eventType, "collector_config.event_type", "got number"},
		{"event type is missing", `{"event_type": "${a}", "payload": {}}`, `{}`, eventType, "collector_config.event_type", "got null"},
		{"event type is an object", `{"event_type": "${@}", "payload": {}}`, `{}`, eventType, "collector_config.event_type", "got object"},
		{"event type is empty", `{"event_type": "${a}", "payload": {}}`, `{"a": ""}`, eventType, "collector_config.event_type", "got empty string"},
		{"function type error", `{"event_type": "e", "payload": {"n": "${length(a)}"}}`, `{"a": 5}`, template, "collector_config.payload.n", "Invalid type"},
		{"function arity error", `{"event_type": "e", "payload": {"n": {"m": ["${abs(a, b)}"]}}}`, `{"a": 5}`, template, "collector_config.payload.n.m[0]", "incorrect number of args"},
		{"jmespath panic", `{"event_type": "e", "payload": {"n": "${merge(@)}"}}`, `1`, template, "collector_config.payload.n", "JMESPath evaluation failed"},
		{"expression reference result", `{"event_type": "e", "payload": {"n": "${&a}"}}`, `{}`, template, "collector_config.payload.n", "not JSON"},
		{"error in event type expression", `{"event_type": "${abs(a)}", "payload": {}}`, `{"a": "x"}`, template, "collector_config.event_type", "Invalid type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCollector(t, tt.config, "")
			_, err := c.Collect([]byte(tt.body), testNow, "")
			if err == nil {
				t.Fatal("Collect succeeded")
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not contain %q", err, tt.message)
			}
			var te *TemplateError
			isTemplate := errors.As(err, &te)
			if got := errors.Is(err, ErrBodyNotJSON); got != (tt.kind == notJSON) {
				t.Errorf("errors.Is(%v, ErrBodyNotJSON) = %v", err, got)
			}
			if isTemplate != (tt.kind != notJSON) {
				t.Errorf("errors.As(%v, *TemplateError) = %v", err, isTemplate)
			}
			if got := errors.Is(err, ErrEventType); got != (tt.kind == eventType) {
				t.Errorf("errors.Is(%v, ErrEventType) = %v", err, got)
			}
			if isTemplate && te.Field != tt.field {
				t.Errorf("TemplateError.Field = %q, want %q", te.Field, tt.field)
			}
		})
	}

	// An error that quotes the body is truncated.
	c := newCollector(t, `{"event_type": "e", "payload": {"n": "${abs(@)}"}}`, "")
	_, err := c.Collect([]byte(`"`+strings.Repeat("x", 10000)+`"`), testNow, "")
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("error of %d bytes: %.400v", len(fmt.Sprint(err)), err)
	}
}

func TestCollector_DeepAndHugeBodies(t *testing.T) {
	t.Parallel()
	whole := newCollector(t, `{"event_type": "e", "payload": {"all": "${@}", "n": "${length(@)}"}}`, "")

	t.Run("deep", func(t *testing.T) {
		t.Parallel()
		const depth = 9000 // encoding/json accepts up to 10000 levels
		body := strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
		ev, err := whole.Collect([]byte(body), testNow, "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(ev.Payload["all"])
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != body {
			t.Error("deep body not copied unchanged")
		}
	})
	t.Run("too deep", func(t *testing.T) {
		t.Parallel()
		const depth = 1 << 20
		body := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		_, err := whole.Collect([]byte(body), testNow, "")
		if !errors.Is(err, ErrBodyNotJSON) || !strings.Contains(err.Error(), "exceeded max depth") {
			t.Errorf("err = %v", err)
		}
		constant := newCollector(t, `{"event_type": "e", "payload": {}}`, "")
		if _, err := constant.Collect([]byte(body), testNow, ""); !errors.Is(err, ErrBodyNotJSON) {
			t.Errorf("constant template: err = %v", err)
		}
	})
	t.Run("huge", func(t *testing.T) {
		t.Parallel()
		const n = 500_000 // about 5 MiB of numbers
		var b bytes.Buffer
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d", 1000000+i)
		}
		b.WriteByte(']')
		ev, err := whole.Collect(b.Bytes(), testNow, "")
		if err != nil {
			t.Fatal(err)
		}
		if ev.Payload["n"] != json.Number(fmt.Sprint(n)) {
			t.Errorf("length = %v", ev.Payload["n"])
		}
		got, err := json.Marshal(ev.Payload["all"])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b.Bytes()) {
			t.Error("huge body not copied unchanged")
		}
	})
}

// TestCollector_Isolation checks that events share no data with each other,
// with the body, or with the collector, and that sort_by (which sorts in
// place inside go-jmespath) does not disturb the other expressions.
func TestCollector_Isolation(t *testing.T) {
	t.Parallel()
	c := newCollector(t, `{"event_type": "e", "payload": {
		"a_sorted": "${sort_by(items, &n)[*].n}",
		"b_items": "${items[*].n}",
		"c_lit": "${`+"`[{\\\"n\\\": 2}, {\\\"n\\\": 1}]`"+` | sort_by(@, &n)[*].n}",
		"d_all": "${@}",
		"e_all": "${@}",
		"f_const": {"list": [1, 2]}
	}}`, "")
	body := []byte(`{"items": [{"n": 3}, {"n": 1}, {"n": 2}]}`)
	ev, err := c.Collect(body, testNow, "")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(ev.Payload)
	const want = `{"a_sorted":[1,2,3],"b_items":[3,1,2],"c_lit":[1,2],` +
		`"d_all":{"items":[{"n":3},{"n":1},{"n":2}]},"e_all":{"items":[{"n":3},{"n":1},{"n":2}]},"f_const":{"list":[1,2]}}`
	if string(got) != want {
		t.Fatalf("payload = %s\nwant      %s", got, want)
	}

	// Scribble over the first event; the second must not notice.
	ev.Payload["d_all"].(map[string]any)["items"] = nil
	ev.Payload["f_const"].(map[string]any)["list"].([]any)[0] = "changed"
	ev2, err := c.Collect(body, testNow, "")
	if err != nil {
		t.Fatal(err)
	}
	got2, _ := json.Marshal(ev2.Payload)
	if string(got2) != want {
		t.Errorf("second payload = %s", got2)
	}
	if ev.Payload["e_all"].(map[string]any)["items"] == nil {
		t.Error("d_all and e_all share data")
	}
}

// TestCollector_Concurrent runs one collector from many goroutines; run it
// with -race.
func TestCollector_Concurrent(t *testing.T) {
	t.Parallel()
	c := newCollector(t, string(readFile(t, "testdata/jmespath/github_webhook_01_config.json")), "")
	sorted := newCollector(t, `{"event_type": "e", "payload": {"s": "${`+"`[3, 1, 2]`"+` | sort_by(@, &@)}", "t": "${sort_by(a, &@)}"}}`, "")
	body := readFile(t, "testdata/jmespath/github_webhook_01_input.json")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := c.Collect(body, testNow, ""); err != nil {
					t.Error(err)
					return
				}
				ev, err := sorted.Collect([]byte(`{"a": [2, 1]}`), testNow, "")
				if err != nil {
					t.Error(err)
					return
				}
				if b, _ := json.Marshal(ev.Payload); string(b) != `{"s":[1,2,3],"t":[1,2]}` {
					t.Errorf("payload = %s", b)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestNewCollector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  CollectorConfig
		want string // error substring; "" for success
	}{
		{"go values", CollectorConfig{EventType: "e", Payload: map[string]any{"i": 1, "i64": int64(2), "f": 1.5, "l": []any{"${a}"}}}, ""},
		{"no event type", CollectorConfig{Payload: map[string]any{}}, "collector_config.event_type: required"},
		{"no payload", CollectorConfig{EventType: "e"}, "collector_config.payload: required"},
		{"non-finite float", CollectorConfig{EventType: "e", Payload: map[string]any{"f": 1 / zero()}}, "collector_config.payload.f: number is not finite"},
		{"unsupported type", CollectorConfig{EventType: "e", Payload: map[string]any{"t": time.Second}}, "collector_config.payload.t: unsupported value of type time.Duration"},
		{"empty expression", CollectorConfig{EventType: "${}", Payload: map[string]any{}}, "collector_config.event_type"},
		{"unknown function in sub-expression", CollectorConfig{EventType: "e", Payload: map[string]any{"x": "${a.nope(@)}"}}, "unknown function nope()"},
		{"function name inside literals is not a call", CollectorConfig{EventType: "e", Payload: map[string]any{"x": "${['nope(', `\"nope(\"`, \"nope(\"]}"}}, ""},
		{"space before parenthesis", CollectorConfig{EventType: "e", Payload: map[string]any{"x": "${length (@)}"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewCollector(tt.cfg, "")
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("NewCollector: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("NewCollector error = %v, want it to contain %q", err, tt.want)
			}
		})
	}

	c, err := NewCollector(tests[0].cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := c.Collect([]byte(`{"a": "A"}`), testNow, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(ev.Payload); string(b) != `{"f":1.5,"i":1,"i64":2,"l":["A"]}` {
		t.Errorf("payload = %s", b)
	}
}

func zero() float64 { return 0 }

func BenchmarkCollect(b *testing.B) {
	c := newCollector(b, string(readFile(b, "testdata/jmespath/github_webhook_01_config.json")), "")
	body := readFile(b, "testdata/jmespath/github_webhook_01_input.json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Collect(body, testNow, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
