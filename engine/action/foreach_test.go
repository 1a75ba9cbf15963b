package action

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/jsonvalue"
)

// fixtureAction is the JSON form of an action in Tornado's fixtures.
type fixtureAction struct {
	ID        string         `json:"id"`
	CreatedMs uint64         `json:"created_ms"`
	Payload   map[string]any `json:"payload"`
}

func readFixture(t *testing.T, name string, v any) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "foreach", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestForeach_tornadoFixture(t *testing.T) {
	t.Parallel()
	var in fixtureAction
	var want []fixtureAction
	readFixture(t, "action.json", &in)
	readFixture(t, "expected.json", &want)

	rec := &recorder{}
	r, _ := newTestRegistry(t, testConfig(), Deps{Executors: map[string]Executor{"elasticsearch": rec}})
	before := jsonvalue.Clone(in.Payload)
	if err := r.Run(t.Context(), tree.Action{ID: in.ID, Payload: in.Payload, CreatedMs: in.CreatedMs}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, any(in.Payload)) {
		t.Fatal("the foreach payload was modified")
	}
	got := rec.calls()
	if len(got) != len(want) || len(want) != 7 {
		t.Fatalf("%d actions, want %d (7)", len(got), len(want))
	}
	for i := range want {
		g := fixtureAction{ID: got[i].ID, CreatedMs: got[i].CreatedMs, Payload: got[i].Payload}
		if !reflect.DeepEqual(g, want[i]) {
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(want[i])
			t.Errorf("action %d:\ngot  %s\nwant %s", i, gb, wb)
		}
	}
}

func TestItemResolver(t *testing.T) {
	t.Parallel()
	item := `{"name": "web", "port": 8443, "ratio": 0.50, "big": 1e3, "ok": true, "none": null,
		"tags": ["a", "b"], "nested": {"k": [10, {"deep": "v"}]}, "with.dot": "dotted"}`
	tests := []struct {
		name string
		in   string // a JSON value
		want string // a JSON value
	}{
		{"whole item keeps its type", `"${item}"`, item},
		{"key", `"${item.name}"`, `"web"`},
		{"number keeps its type", `"${item.port}"`, `8443`},
		{"array", `"${item.tags}"`, `["a", "b"]`},
		{"index", `"${item.tags[1]}"`, `"b"`},
		{"deep path", `"${item.nested.k[1].deep}"`, `"v"`},
		{"quoted key", `"${item.\"with.dot\"}"`, `"dotted"`},
		{"null value", `"${item.none}"`, `null`},
		{"interpolation", `"host ${item.name}:${item.port}"`, `"host web:8443"`},
		{"interpolated float and bool", `"${item.ratio}/${item.big}/${item.ok}/${item.none}"`, `"0.5/1000/true/null"`},
		{"missing key unchanged", `"${item.nope}"`, `"${item.nope}"`},
		{"index out of range unchanged", `"${item.tags[5]}"`, `"${item.tags[5]}"`},
		{"missing key in text unchanged", `"a ${item.nope} b ${item.name}"`, `"a ${item.nope} b ${item.name}"`},
		{"array in text unchanged", `"tags: ${item.tags}"`, `"tags: ${item.tags}"`},
		{"other root unchanged", `"${event.payload}"`, `"${event.payload}"`},
		{"other root in text unchanged", `"${event.type} ${item.name}"`, `"${event.type} ${item.name}"`},
		{"unknown root in text unchanged", `"${foo} ${item.name}"`, `"${foo} ${item.name}"`},
		{"invalid expression unchanged", `"${item.a]}"`, `"${item.a]}"`},
		{"unterminated unchanged", `"${item"`, `"${item"`},
		{"plain string", `"plain"`, `"plain"`},
		{"non-strings untouched", `[1, true, null, {"a": 2}]`, `[1, true, null, {"a": 2}]`},
		{"containers resolved deeply", `{"a": ["${item.name}", {"b": "${item.port}"}], "c": "x"}`, `{"a": ["web", {"b": 8443}], "c": "x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newItemResolver()
			in := decodeJSON(t, tt.in)
			before := jsonvalue.Clone(in)
			got := r.resolve(in, decodeJSON(t, item))
			if want := decodeJSON(t, tt.want); !reflect.DeepEqual(got, want) {
				t.Errorf("resolve(%s) = %#v, want %#v", tt.in, got, want)
			}
			if !reflect.DeepEqual(in, before) {
				t.Error("the input was modified")
			}
		})
	}
}

func TestForeach_Execute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload string
		want    []string // produced actions as "id payload-JSON"
		wantErr error
		wantLog string
	}{
		{
			name: "each action, then each item",
			payload: `{"target": ["first", "second"], "actions": [
				{"id": "one", "payload": {"item": "${item}", "key": []}},
				{"id": "two", "payload": {"text": "a ${item} bb <${item}>"}}]}`,
			want: []string{
				`one {"item":"first","key":[]}`,
				`one {"item":"second","key":[]}`,
				`two {"text":"a first bb \u003cfirst\u003e"}`,
				`two {"text":"a second bb \u003csecond\u003e"}`,
			},
		},
		{
			name: "invalid inner actions skipped",
			payload: `{"target": [1], "actions": [
				{"id": "one"},
				{"payload": {"a": 1}},
				{"id": 3, "payload": {}},
				{"id": "one", "payload": "x"},
				"not an object",
				{"id": "two", "payload": {"n": "${item}"}}]}`,
			want:    []string{`two {"n":1}`},
			wantLog: "payload missing or not an object",
		},
		{
			name:    "empty target",
			payload: `{"target": [], "actions": [{"id": "one", "payload": {}}]}`,
		},
		{
			name:    "target not an array",
			payload: `{"target": {"a": 1}, "actions": []}`,
			wantErr: ErrInvalidPayload,
		},
		{
			name:    "actions missing",
			payload: `{"target": [1]}`,
			wantErr: ErrInvalidPayload,
		},
		{
			name:    "a failing inner action fails the foreach, the others run",
			payload: `{"target": [1, 2], "actions": [{"id": "missing", "payload": {}}, {"id": "one", "payload": {"v": "${item}"}}]}`,
			want:    []string{`one {"v":1}`, `one {"v":2}`},
			wantErr: ErrNoExecutor,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			log, logs := newTestLogger()
			r, _ := newTestRegistry(t, testConfig(), Deps{Logger: log, Executors: map[string]Executor{"one": rec, "two": rec}})
			err := r.Run(t.Context(), tree.Action{ID: IDForeach, Payload: payload(t, tt.payload), CreatedMs: 42})
			if tt.wantErr == nil && err != nil || !errors.Is(err, tt.wantErr) || Retriable(err) {
				t.Fatalf("Run: %v, want %v (permanent)", err, tt.wantErr)
			}
			var got []string
			for _, a := range rec.calls() {
				if a.CreatedMs != 42 {
					t.Errorf("created_ms %d, want 42", a.CreatedMs)
				}
				b, _ := json.Marshal(a.Payload)
				got = append(got, a.ID+" "+string(b))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("produced\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log does not contain %q:\n%s", tt.wantLog, logs)
			}
		})
	}
}

func TestForeach_Execute_depth(t *testing.T) {
	t.Parallel()
	// A foreach whose inner action is the same foreach again, nested n deep.
	nested := func(n int) map[string]any {
		p := map[string]any{"target": []any{"x"}, "actions": []any{map[string]any{"id": "leaf", "payload": map[string]any{"v": "${item}"}}}}
		for range n - 1 {
			p = map[string]any{"target": []any{"x"}, "actions": []any{map[string]any{"id": IDForeach, "payload": p}}}
		}
		return p
	}
	for _, tt := range []struct {
		depth   int
		wantErr error
	}{{1, nil}, {3, nil}, {4, ErrTooDeep}} {
		rec := &recorder{}
		cfg := testConfig()
		cfg.Foreach.MaxDepth = 3
		r, _ := newTestRegistry(t, cfg, Deps{Executors: map[string]Executor{"leaf": rec}})
		err := r.Run(t.Context(), tree.Action{ID: IDForeach, Payload: nested(tt.depth)})
		if tt.wantErr == nil && err != nil || !errors.Is(err, tt.wantErr) || Retriable(err) {
			t.Fatalf("depth %d: %v, want %v", tt.depth, err, tt.wantErr)
		}
		if want := map[bool]int{true: 1, false: 0}[tt.wantErr == nil]; len(rec.calls()) != want {
			t.Fatalf("depth %d: %d leaf actions, want %d", tt.depth, len(rec.calls()), want)
		}
	}
}
