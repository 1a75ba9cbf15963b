package config

import (
	"encoding/json"
	"math"
	"strconv"
)

// Walk follows an accessor path through decoded JSON (maps, slices): a key
// on a non-object, an index on a non-array or out of range is missing (ok
// false). A present JSON null is a value.
func Walk(v any, path []Segment) (any, bool) {
	for _, seg := range path {
		if seg.IsIndex {
			arr, ok := v.([]any)
			if !ok || seg.Index >= len(arr) {
				return nil, false
			}
			v = arr[seg.Index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[seg.Key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// AppendText renders a value into an interpolated string: strings as they
// are, true and false, null, numbers in decimal without exponent (13.0 is
// written 13). Arrays, objects and non-finite numbers cannot be rendered:
// ok is false.
func AppendText(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case string:
		return append(b, x...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case nil:
		return append(b, "null"...), true
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return strconv.AppendInt(b, i, 10), true
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return strconv.AppendUint(b, u, 10), true
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			return strconv.AppendFloat(b, f, 'f', -1, 64), true
		}
		return append(b, x...), true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return b, false
		}
		return strconv.AppendFloat(b, x, 'f', -1, 64), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	}
	return b, false
}
