package config

import (
	"encoding/json"
	"math"
	"testing"
)

func TestAppendText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   any
		want string
		ok   bool
	}{
		{"x", "x", true},
		{true, "true", true},
		{nil, "null", true},
		{json.Number("13.0"), "13", true},
		{json.Number("0.1"), "0.1", true},
		{json.Number("1e21"), "1000000000000000000000", true},
		{json.Number("-7"), "-7", true},
		{json.Number("18446744073709551615"), "18446744073709551615", true},
		{1.5, "1.5", true},
		{7, "7", true},
		{int64(-2), "-2", true},
		{math.NaN(), "", false},
		{[]any{1}, "", false},
		{map[string]any{}, "", false},
	}
	for _, tc := range tests {
		got, ok := AppendText([]byte("<"), tc.in)
		if ok != tc.ok || ok && string(got) != "<"+tc.want {
			t.Errorf("AppendText(%#v) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestWalk(t *testing.T) {
	t.Parallel()
	v := map[string]any{"a": []any{nil, map[string]any{"b": "x"}}}
	segs, _ := ParsePath("a[1].b")
	if got, ok := Walk(v, segs); !ok || got != "x" {
		t.Errorf("got %v %v", got, ok)
	}
	segs, _ = ParsePath("a[0]")
	if got, ok := Walk(v, segs); !ok || got != nil {
		t.Errorf("null is a value: %v %v", got, ok)
	}
	for _, p := range []string{"a[2]", "a.b", "a[1].b.c", "z"} {
		segs, _ := ParsePath(p)
		if _, ok := Walk(v, segs); ok {
			t.Errorf("%s resolved", p)
		}
	}
}
