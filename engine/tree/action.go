package tree

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/squallhq/squall/config"
)

// Action is an action a matched rule asks to execute: its id, its resolved
// payload, and the created_ms of the event that produced it. Payloads may
// share values with the event and the tree: executors must not modify them.
type Action struct {
	ID        string
	Payload   map[string]any
	CreatedMs uint64
}

// MarshalJSON writes {id, payload}, the API form of an action.
func (a Action) MarshalJSON() ([]byte, error) {
	p := a.Payload
	if p == nil {
		p = map[string]any{}
	}
	return json.Marshal(struct {
		ID      string         `json:"id"`
		Payload map[string]any `json:"payload"`
	}{a.ID, p})
}

// template is a compiled action payload value.
type template struct {
	// One of: expression leaf, object, array, constant.
	leaf     *expr
	keys     []string // object keys, sorted
	fields   []*template
	items    []*template
	constant any
	isObject bool
	isArray  bool
	// modified tells whether the value reads anything (meta.actions).
	modified bool
}

func (cc *compiler) template(v any) (*template, error) {
	switch x := v.(type) {
	case string:
		e, err := cc.expr(x)
		if err != nil {
			return nil, err
		}
		return &template{leaf: e, modified: e.kind != config.ExprConstant}, nil
	case map[string]any:
		t := &template{isObject: true, keys: slices.Sorted(keysOf(x))}
		for _, k := range t.keys {
			f, err := cc.template(x[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			t.fields = append(t.fields, f)
			t.modified = t.modified || f.modified
		}
		return t, nil
	case []any:
		t := &template{isArray: true}
		for i, e := range x {
			it, err := cc.template(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			t.items = append(t.items, it)
			t.modified = t.modified || it.modified
		}
		return t, nil
	}
	return &template{constant: normalize(v)}, nil
}

func keysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// resolve computes the payload value. Constant subtrees are shared.
func (t *template) resolve(s *scope) (any, error) {
	switch {
	case t.leaf != nil:
		v, ok := t.leaf.eval(s)
		if !ok {
			return nil, fmt.Errorf("%s cannot be resolved", t.leaf.describe())
		}
		return v, nil
	case t.isObject:
		m := make(map[string]any, len(t.keys))
		for i, k := range t.keys {
			v, err := t.fields[i].resolve(s)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case t.isArray:
		out := make([]any, len(t.items))
		for i, it := range t.items {
			v, err := it.resolve(s)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return t.constant, nil
}

// EnrichedValue is a value of meta.actions: the resolved value following
// the shape of the configured template, with whether it was computed.
type EnrichedValue struct {
	Content EnrichedContent `json:"content"`
	Meta    EnrichedMeta    `json:"meta"`
}

// EnrichedContent is the content of an EnrichedValue: Single, Map or Array.
type EnrichedContent struct {
	Type    string `json:"type"`
	Content any    `json:"content"`
}

// EnrichedMeta tells whether a value was computed (modified) and whether it is a leaf of the template.
type EnrichedMeta struct {
	Modified bool `json:"modified"`
	IsLeaf   bool `json:"is_leaf"`
}

// enrich builds the meta form of a resolved value.
func (t *template) enrich(v any) *EnrichedValue {
	switch {
	case t.isObject:
		m, _ := v.(map[string]any)
		out := make(map[string]*EnrichedValue, len(t.keys))
		for i, k := range t.keys {
			out[k] = t.fields[i].enrich(m[k])
		}
		return &EnrichedValue{EnrichedContent{"Map", out}, EnrichedMeta{t.modified, false}}
	case t.isArray:
		a, _ := v.([]any)
		out := make([]*EnrichedValue, len(t.items))
		for i, it := range t.items {
			var x any
			if i < len(a) {
				x = a[i]
			}
			out[i] = it.enrich(x)
		}
		return &EnrichedValue{EnrichedContent{"Array", out}, EnrichedMeta{t.modified, false}}
	}
	return &EnrichedValue{EnrichedContent{"Single", v}, EnrichedMeta{t.modified, true}}
}

// actionTemplate is a compiled rule action.
type actionTemplate struct {
	id      string
	payload *template
}

func (cc *compiler) action(a *config.Action) (*actionTemplate, error) {
	p := a.Payload
	if p == nil {
		p = map[string]any{}
	}
	t, err := cc.template(p)
	if err != nil {
		return nil, fmt.Errorf("action %s payload.%w", a.ID, err)
	}
	return &actionTemplate{id: a.ID, payload: t}, nil
}

// ActionMeta is an entry of a processed rule's meta.actions.
type ActionMeta struct {
	ID      string                    `json:"id"`
	Payload map[string]*EnrichedValue `json:"payload"`
}

func (a *actionTemplate) meta(resolved map[string]any) ActionMeta {
	e := a.payload.enrich(resolved)
	m, _ := e.Content.Content.(map[string]*EnrichedValue)
	return ActionMeta{ID: a.id, Payload: m}
}
