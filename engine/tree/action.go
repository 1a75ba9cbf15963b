package tree

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/squallhq/squall/config"
)

// Action is an action a matched rule asks to execute: its id, its resolved
// payload, and the created_ms of the event that produced it. Payloads may
// share values with the event and the tree: executors must not modify them.
type Action struct {
	ID        string
	Payload   map[string]any
	CreatedMs uint64
	// Position is where the action comes from in the tree: the path of
	// its ruleset from the root (each iterator's name followed by the
	// iteration in brackets: an array index, or an object key escaped as
	// in a URL query), its rule's name and its index among the rule's
	// actions, joined by "/": "root/alerts/notify/0",
	// "root/hosts[3]/alerts/notify/1". Names match ^[a-zA-Z0-9_]+$, so no
	// two actions of one event share a position. An action a foreach
	// produces has its foreach's position followed by ".<inner
	// action>.<item>" (indexes).
	Position string
	// EventID is the id of the event (the engine sets it from its
	// record's squall-event-id header); empty when unknown.
	EventID string
	// rule is the id of the rule that produced the action (0: unknown),
	// for [Counters.ActionDone].
	rule int32
}

// IdempotencyKey returns the action's idempotency key, derived from its
// event id and position, or "" when the event id is unknown: the same
// event processed twice yields the same keys, and every action of an event
// has its own. It is the unpadded base64url SHA-256 of the event id, a
// newline and the position (43 characters).
func (a Action) IdempotencyKey() string {
	if a.EventID == "" {
		return ""
	}
	var b [IdempotencyKeyLen]byte
	return string(a.AppendIdempotencyKey(b[:0]))
}

// IdempotencyKeyLen is the length of an idempotency key.
const IdempotencyKeyLen = 43

// AppendIdempotencyKey appends the action's idempotency key to b (nothing
// when the event id is unknown), without allocating when the event id and
// the position are short (under 200 bytes together) and b has room.
func (a Action) AppendIdempotencyKey(b []byte) []byte {
	if a.EventID == "" {
		return b
	}
	var in [200]byte
	msg := append(append(append(in[:0], a.EventID...), '\n'), a.Position...)
	sum := sha256.Sum256(msg)
	return base64.RawURLEncoding.AppendEncode(b, sum[:])
}

// MarshalJSON writes {id, payload}, the API form of an action, as
// config.Action writes it.
func (a Action) MarshalJSON() ([]byte, error) {
	return (&config.Action{ID: a.ID, Payload: a.Payload}).MarshalJSON()
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
	// pos is the action's position split at the iterations: one piece
	// more than the iterators above it; pos1 holds it outside iterators.
	pos  []string
	pos1 [1]string
}

// posBreak marks where an iteration goes in a position while compiling.
const posBreak = "\x00"

// position returns the action's position for the iterations of the
// iterators above it.
func (a *actionTemplate) position(iters []string) string {
	if len(a.pos) == 1 || len(iters) != len(a.pos)-1 {
		return a.pos[0]
	}
	n := len(a.pos[len(a.pos)-1])
	for i, it := range iters {
		n += len(a.pos[i]) + len(it) + 2
	}
	var b strings.Builder
	b.Grow(n)
	for i, it := range iters {
		b.WriteString(a.pos[i])
		b.WriteByte('[')
		b.WriteString(it)
		b.WriteByte(']')
	}
	b.WriteString(a.pos[len(a.pos)-1])
	return b.String()
}

func (cc *compiler) action(a *config.Action) (actionTemplate, error) {
	p := a.Payload
	if p == nil {
		p = map[string]any{}
	}
	t, err := shared(cc.templates, string(appendValueKey(nil, p)), func() (*template, error) { return cc.template(p) })
	if err != nil {
		return actionTemplate{}, fmt.Errorf("action %s payload.%w", a.ID, err)
	}
	return actionTemplate{id: a.ID, payload: t}, nil
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
