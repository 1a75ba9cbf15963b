package ruletest

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/big"
	"slices"
	"strconv"
)

// mismatch is a place where a value differs from its expectation.
type mismatch struct {
	// path is the place below the compared value: ".a.b[2]", "" for the
	// value itself.
	path      string
	want, got string
}

// mismatches compares got with want, both decoded JSON: objects of want are
// subsets (keys it leaves out are ignored), arrays and scalars must be
// equal, numbers by value.
func mismatches(path string, want, got any) []mismatch {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []mismatch{{path, compact(want), compact(got)}}
		}
		var out []mismatch
		for _, k := range sortedKeys(w) {
			kp := path + "." + k
			if !simpleKey(k) {
				kp = path + "[" + strconv.Quote(k) + "]"
			}
			gv, present := g[k]
			if !present {
				out = append(out, mismatch{kp, compact(w[k]), "no such field"})
				continue
			}
			out = append(out, mismatches(kp, w[k], gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []mismatch{{path, compact(want), compact(got)}}
		}
		var out []mismatch
		for i := range w {
			out = append(out, mismatches(path+"["+strconv.Itoa(i)+"]", w[i], g[i])...)
		}
		return out
	case json.Number:
		if g, ok := got.(json.Number); ok && numbersEqual(w, g) {
			return nil
		}
	default:
		// string, bool, nil
		if want == got {
			return nil
		}
	}
	return []mismatch{{path, compact(want), compact(got)}}
}

// numbersEqual compares two JSON numbers by value: 1, 1.0 and 1e0 are equal.
func numbersEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, okx := new(big.Rat).SetString(string(a))
	y, oky := new(big.Rat).SetString(string(b))
	return okx && oky && x.Cmp(y) == 0
}

// simpleKey reports whether a key can be written after a dot.
func simpleKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// maxShownValue bounds the length of a value written in a failure.
const maxShownValue = 200

// compact writes a value as compact JSON, cut at maxShownValue bytes.
func compact(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "?"
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > maxShownValue {
		return string(b[:maxShownValue]) + "…"
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
