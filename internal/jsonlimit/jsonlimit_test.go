package jsonlimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name   string
		body   string
		limits Limits
		reason string // "" accepted
	}{
		{name: "flat", body: `{"a": 1, "b": [1, 2, {"c": null}]}`},
		{name: "at the limit", body: deep(DefaultMaxDepth)},
		{name: "over the limit", body: deep(DefaultMaxDepth + 1), reason: ReasonDepth},
		{name: "unclosed flood", body: strings.Repeat("[", 1<<20), reason: ReasonDepth},
		{name: "objects over a limit of 3", body: `{"a":{"a":{"a":{"a":1}}}}`, limits: Limits{MaxDepth: 3}, reason: ReasonDepth},
		{name: "brackets in strings do not count", body: `["` + strings.Repeat("[{", 500) + `"]`, limits: Limits{MaxDepth: 2}},
		{name: "escaped quote in a string", body: `["\"[[[[", 1]`, limits: Limits{MaxDepth: 1}},
		{name: "invalid UTF-8 allowed", body: "{\"a\": \"\xff\"}"},
		{name: "invalid UTF-8 refused", body: "{\"a\": \"\xff\"}", limits: Limits{ValidUTF8: true}, reason: ReasonUTF8},
		{name: "duplicate key allowed", body: `{"a": 1, "a": 2}`},
		{name: "duplicate key refused", body: `{"a": 1, "a": 2}`, limits: Limits{UniqueKeys: true}, reason: ReasonDuplicate},
		{name: "escaped duplicate refused", body: `{"a": 1, "\u0061": 2}`, limits: Limits{UniqueKeys: true}, reason: ReasonDuplicate},
		{name: "nested duplicate refused", body: `[{"x": {"a": 1, "b": 2, "a": 3}}]`, limits: Limits{UniqueKeys: true}, reason: ReasonDuplicate},
		{name: "same key in sibling objects", body: `[{"a": 1}, {"a": 2}, {"a": {"a": 3}}]`, limits: Limits{UniqueKeys: true}},
		{name: "value equal to a key", body: `{"a": "a", "b": ["a", "a"]}`, limits: Limits{UniqueKeys: true}},
		{name: "duplicate among many keys", body: manyKeys(40, "k3"), limits: Limits{UniqueKeys: true}, reason: ReasonDuplicate},
		{name: "many distinct keys", body: manyKeys(40, ""), limits: Limits{UniqueKeys: true}},
		{name: "keys of a closed object forgotten", body: `[` + manyKeys(20, "") + `, {"k1": 1, "k2": {"k1": 2}, "k3": 3}]`, limits: Limits{UniqueKeys: true}},
		{name: "outer key repeated after an inner object", body: `{"a": {"b": 1, "c": 2}, "b": 3, "a": 4}`, limits: Limits{UniqueKeys: true}, reason: ReasonDuplicate},
		{name: "case differs", body: `{"a": 1, "A": 2}`, limits: Limits{UniqueKeys: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Check([]byte(tc.body), tc.limits)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != tc.reason {
				t.Fatalf("got %v, want reason %q", err, tc.reason)
			}
		})
	}
}

// manyKeys is an object with keys k0…k(n-1), then dup again if not "".
func manyKeys(n int, dup string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"k%d": %d, `, i, i)
	}
	if dup != "" {
		fmt.Fprintf(&b, `%q: 0, `, dup)
	}
	b.WriteString(`"last": 0}`)
	return b.String()
}

func TestCheck_Key(t *testing.T) {
	t.Parallel()
	var seen []string
	errNo := errors.New("no")
	err := Check([]byte(`{"a": {"inner": 1}, "b\u0063": [{"x": 1}]}`), Limits{Key: func(k []byte) error {
		seen = append(seen, string(k))
		return nil
	}})
	if err != nil || strings.Join(seen, ",") != "a,bc" {
		t.Fatalf("keys %q, error %v; want a,bc and nil", seen, err)
	}
	err = Check([]byte(`{"a": 1, "Tool": 2}`), Limits{Key: func(k []byte) error {
		if string(k) == "Tool" {
			return errNo
		}
		return nil
	}})
	if !errors.Is(err, errNo) {
		t.Fatalf("got %v, want the callback's error", err)
	}
}

// TestCheck_HostileCost: a hostile 1 MiB body costs the check at most one
// allocation (the error), whatever its shape.
func TestCheck_HostileCost(t *testing.T) {
	for _, body := range [][]byte{
		bytes.Repeat([]byte("["), 1<<20),
		[]byte(strings.Repeat(`{"a":`, 1<<20/5)),
		[]byte(`[` + strings.Repeat(`"\"",`, 1<<20/5) + `1]`),
	} {
		if n := testing.AllocsPerRun(5, func() { _ = Check(body, Limits{ValidUTF8: true}) }); n > 1 {
			t.Fatalf("%.20q…: %v allocations, want at most 1", body, n)
		}
	}
	// With duplicate keys tracked: the maps of the open objects, at most
	// MaxDepth of them.
	body := []byte(strings.Repeat(`{"a":`, 1<<20/5))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_ = Check(body, Limits{UniqueKeys: true})
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("checking 1 MiB of nested objects allocated %d bytes, want under 1 MiB", d)
	}
}

// reference is what Check decides, computed with encoding/json's tokenizer
// on a valid document.
func reference(data []byte, l Limits) string {
	if l.ValidUTF8 && !bytesValidUTF8(data) {
		return ReasonUTF8
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	// Numbers stay text: a valid number too large for a float64 (2e309)
	// is still valid JSON, which Check does not decode.
	dec.UseNumber()
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			return "invalid"
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.obj && top.key
		if top != nil && top.obj {
			top.key = !top.key
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if len(stack)+1 > l.MaxDepth {
					return ReasonDepth
				}
				stack = append(stack, &frame{obj: v == '{', keys: map[string]bool{}, key: true})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].key = true
				}
			}
		case string:
			if isKey {
				if l.UniqueKeys && top.keys[v] {
					return ReasonDuplicate
				}
				top.keys[v] = true
			}
		}
	}
}

func bytesValidUTF8(b []byte) bool { return strings.ToValidUTF8(string(b), "\uFFFD") == string(b) }

// FuzzCheck checks Check against a reference built on encoding/json's
// tokenizer: on every valid JSON document they refuse the same bodies for
// the same reason.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"a": 1, "a": 2}`, `[[[[1]]]]`, `{"a": {"b": {"c": {}}}}`, `{"\u0061": 1, "a": 2}`,
		`["a", "a", {"a": 1}]`, `{"a": "a"}`, "\"\xff\"", `[{"x":1},{"x":1}]`, `{"a":[{"a":{"a":1}}],"b":2,"a":3}`,
		`"[[[["`, `{"k\"": 1, "k\"": 2}`, manyKeys(20, "k0"), manyKeys(17, ""),
	} {
		f.Add([]byte(s), uint8(3), true, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint8, utf, unique bool) {
		if !json.Valid(data) {
			return
		}
		l := Limits{MaxDepth: int(depth%8) + 1, ValidUTF8: utf, UniqueKeys: unique}
		want := reference(data, l)
		got := ""
		if err := Check(data, l); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%q: error %v is not an *Error", data, err)
			}
			got = e.Reason
		}
		if got != want {
			t.Fatalf("%q %+v: Check says %q, reference %q", data, l, got, want)
		}
	})
}
