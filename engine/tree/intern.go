package tree

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/squallhq/squall/config"
)

// Compilation shares what rules repeat (docs/decisions.md decision 36):
// identical operators, extractors, action payloads and variable name
// lists compile once per tree, so that a large tree is small and the rule
// an event reaches touches memory other rules keep warm. The keys below
// tell apart everything that compiles differently, the Go type of a
// constant included (13 and 13.0 are different payloads).

// shared returns the compiled form of key kept in cache, or compiles it
// and keeps it there, so that what rules repeat compiles once.
func shared[V any](cache map[string]V, key string, compile func() (V, error)) (V, error) {
	if v, ok := cache[key]; ok {
		return v, nil
	}
	v, err := compile()
	if err != nil {
		var zero V
		return zero, err
	}
	cache[key] = v
	return v, nil
}

// appendString appends a string with its length, so that no two
// sequences of strings give the same key.
func appendString(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// appendValueKey appends the key of a configuration value.
func appendValueKey(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, 'z')
	case bool:
		if x {
			return append(b, 'T')
		}
		return append(b, 'F')
	case string:
		return appendString(append(b, 's'), x)
	case json.Number:
		return appendString(append(b, 'n'), string(x))
	case map[string]any:
		b = strconv.AppendInt(append(b, 'm'), int64(len(x)), 10)
		for _, k := range slices.Sorted(keysOf(x)) {
			b = appendValueKey(appendString(b, k), x[k])
		}
		return b
	case []any:
		b = strconv.AppendInt(append(b, 'a'), int64(len(x)), 10)
		for _, e := range x {
			b = appendValueKey(b, e)
		}
		return b
	}
	// Go values of trees built in Go: their type tells how they compile.
	return appendString(append(b, 'g'), fmt.Sprintf("%T:%#v", v, v))
}

// appendOperatorKey appends the key of an operator.
func appendOperatorKey(b []byte, op *config.Operator) []byte {
	if op == nil {
		return append(b, 'z')
	}
	b = appendString(append(b, 'O'), string(op.Type))
	b = strconv.AppendInt(b, int64(len(op.Operators)), 10)
	for _, o := range op.Operators {
		b = appendOperatorKey(b, o)
	}
	b = appendOperatorKey(b, op.Operator)
	b = appendValueKey(b, op.First)
	b = appendValueKey(b, op.Second)
	b = appendString(b, op.Regex)
	return appendString(b, op.Target)
}

// extractorKey is the key of a named extractor.
func extractorKey(name string, ex *config.Extractor) string {
	b := appendString(nil, name)
	b = appendString(b, ex.From)
	b = strconv.AppendInt(b, int64(ex.Regex.Kind), 10)
	b = appendString(b, ex.Regex.Pattern)
	idx := -1
	if ex.Regex.GroupMatchIdx != nil {
		idx = *ex.Regex.GroupMatchIdx
	}
	b = strconv.AppendInt(append(b, 'i'), int64(idx), 10)
	b = strconv.AppendBool(b, ex.Regex.AllMatches)
	for _, m := range ex.Modifiers {
		b = appendString(append(b, 'M'), string(m.Type))
		b = strconv.AppendInt(b, int64(len(m.Mapping)), 10)
		for _, k := range slices.Sorted(keysOf(m.Mapping)) {
			b = appendString(appendString(b, k), m.Mapping[k])
		}
		if m.DefaultValue != nil {
			b = appendString(append(b, 'd'), *m.DefaultValue)
		}
		b = appendString(b, m.Find)
		b = appendString(b, m.Replace)
		b = strconv.AppendBool(b, m.IsRegex)
		b = appendString(b, m.Timezone)
	}
	return string(b)
}

// names returns a shared copy of a list of variable names.
func (cc *compiler) names(list []string) []string {
	var b []byte
	for _, n := range list {
		b = appendString(b, n)
	}
	if s, ok := cc.nameLists[string(b)]; ok {
		return s
	}
	cc.nameLists[string(b)] = list
	return list
}
