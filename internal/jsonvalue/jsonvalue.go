// Package jsonvalue works on decoded JSON values: map[string]any, []any,
// strings, numbers, booleans and nil, as encoding/json decodes into any.
package jsonvalue

// Clone deep-copies the containers of v (objects and arrays); the other
// values, immutable, are shared.
func Clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = Clone(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = Clone(e)
		}
		return s
	}
	return v
}
