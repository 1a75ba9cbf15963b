package jsonvalue

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestClone: the copy equals the original, and changing any container of
// the copy leaves the original as it was.
func TestClone(t *testing.T) {
	t.Parallel()
	var v any
	if err := json.Unmarshal([]byte(`{"a": [1, {"b": "c"}, [true, null]], "d": {"e": 2.5}}`), &v); err != nil {
		t.Fatal(err)
	}
	var orig any
	_ = json.Unmarshal([]byte(`{"a": [1, {"b": "c"}, [true, null]], "d": {"e": 2.5}}`), &orig)
	c := Clone(v)
	if !reflect.DeepEqual(c, v) {
		t.Fatalf("clone %v, want %v", c, v)
	}
	m := c.(map[string]any)
	m["x"] = 1
	a := m["a"].([]any)
	a[0] = "changed"
	a[1].(map[string]any)["b"] = "changed"
	a[2].([]any)[0] = false
	m["d"].(map[string]any)["e"] = 0
	if !reflect.DeepEqual(v, orig) {
		t.Errorf("the original changed with its clone: %v", v)
	}
	for _, s := range []any{nil, "s", 1.5, true, json.Number("7")} {
		if got := Clone(s); got != s {
			t.Errorf("Clone(%v) = %v", s, got)
		}
	}
}
