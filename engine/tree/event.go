package tree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/valyala/fastjson"
)

// Event is an event as the processing tree sees it. Free-form JSON values
// (payload, metadata, iterator items) are maps, slices, strings, bools, nil
// and json.Number, so that integers and floats keep their written form.
// An Event and its values must not be modified once evaluation started.
type Event struct {
	// TraceID is the legacy trace id; nil when absent (${event.trace_id} is then null).
	TraceID   any
	Type      string
	CreatedMs uint64
	Payload   map[string]any
	Metadata  map[string]any
	// Iterator is set on the events seen inside an iterator branch:
	// {"iteration": index or key, "item": element}.
	Iterator map[string]any

	// typ is Type as a value, so that reading it does not allocate.
	typ any
}

// ErrInvalidEvent classifies events that do not have the required shape.
var ErrInvalidEvent = errors.New("invalid event")

var parserPool fastjson.ParserPool

// DecodeEvent decodes an event (nested at most fastjson.MaxDepth deep, so
// that evaluation never recurses without bound): type (string) and created_ms (unsigned
// integer) and payload (object) are required; metadata (object) and
// trace_id (string or null) are optional; other top-level fields are ignored.
func DecodeEvent(data []byte) (*Event, error) {
	p := parserPool.Get()
	defer parserPool.Put(p)
	v, err := p.ParseBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	c := converter{arena: make([]byte, 0, len(data))}
	return c.event(v)
}

// converter turns parsed values into Go values. Every string it makes
// (object keys, string values, numbers) is copied into an arena, one
// allocation per event rather than one per string: an event's strings
// together are never longer than the event's JSON text, which is the
// arena's first size. Bytes written into the arena are never changed, so
// the strings pointing into it stay immutable; they keep the whole arena
// alive together, which is as long as the event lives.
type converter struct {
	arena []byte
}

// str returns a string holding b, in the arena.
func (c *converter) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(c.arena)-len(c.arena) < len(b) {
		// Never for a parsed event; a new chunk keeps it correct anyway
		// (the strings made so far still point into the old one).
		c.arena = make([]byte, 0, max(len(b), 512))
	}
	start := len(c.arena)
	c.arena = append(c.arena, b...)
	return unsafe.String(&c.arena[start], len(b))
}

func (c *converter) event(v *fastjson.Value) (*Event, error) {
	obj, err := v.Object()
	if err != nil {
		return nil, fmt.Errorf("%w: an event is a JSON object", ErrInvalidEvent)
	}
	ev := &Event{}
	var seenType, seenCreated, seenPayload bool
	var ferr error
	obj.Visit(func(key []byte, fv *fastjson.Value) {
		if ferr != nil {
			return
		}
		switch string(key) {
		case "type":
			s, err := fv.StringBytes()
			if err != nil {
				ferr = fmt.Errorf("%w: type must be a string", ErrInvalidEvent)
				return
			}
			ev.Type, seenType = c.str(s), true
		case "created_ms":
			n, err := fv.Uint64()
			if err != nil || fv.Type() != fastjson.TypeNumber || bytes.ContainsAny(fv.MarshalTo(nil), ".eE") {
				ferr = fmt.Errorf("%w: created_ms must be an unsigned integer", ErrInvalidEvent)
				return
			}
			ev.CreatedMs, seenCreated = n, true
		case "payload":
			m, err := c.object(fv)
			if err != nil {
				ferr = fmt.Errorf("%w: payload: %w", ErrInvalidEvent, err)
				return
			}
			ev.Payload, seenPayload = m, true
		case "metadata":
			if fv.Type() == fastjson.TypeNull {
				return
			}
			m, err := c.object(fv)
			if err != nil {
				ferr = fmt.Errorf("%w: metadata: %w", ErrInvalidEvent, err)
				return
			}
			ev.Metadata = m
		case "trace_id":
			switch fv.Type() {
			case fastjson.TypeNull:
			case fastjson.TypeString:
				s, _ := fv.StringBytes()
				ev.TraceID = c.str(s)
			default:
				ferr = fmt.Errorf("%w: trace_id must be a string or null", ErrInvalidEvent)
			}
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	switch {
	case !seenType:
		return nil, fmt.Errorf("%w: missing type", ErrInvalidEvent)
	case !seenCreated:
		return nil, fmt.Errorf("%w: missing created_ms", ErrInvalidEvent)
	case !seenPayload:
		return nil, fmt.Errorf("%w: missing payload", ErrInvalidEvent)
	}
	if ev.Metadata == nil {
		ev.Metadata = map[string]any{}
	}
	ev.typ = ev.Type
	return ev, nil
}

func (c *converter) object(v *fastjson.Value) (map[string]any, error) {
	if v.Type() != fastjson.TypeObject {
		return nil, errors.New("must be a JSON object")
	}
	x, err := c.value(v)
	if err != nil {
		return nil, err
	}
	return x.(map[string]any), nil
}

// value turns a parsed value into plain Go values. Recursion depth is
// bounded by the parser's own depth limit.
func (c *converter) value(v *fastjson.Value) (any, error) {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		m := make(map[string]any, o.Len())
		var err error
		o.Visit(func(k []byte, e *fastjson.Value) {
			if err != nil {
				return
			}
			var x any
			x, err = c.value(e)
			m[c.str(k)] = x
		})
		return m, err
	case fastjson.TypeArray:
		arr, _ := v.Array()
		s := make([]any, len(arr))
		for i, e := range arr {
			x, err := c.value(e)
			if err != nil {
				return nil, err
			}
			s[i] = x
		}
		return s, nil
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return c.str(b), nil
	case fastjson.TypeNumber:
		var buf [32]byte
		raw := v.MarshalTo(buf[:0])
		if !validNumber(raw) {
			return nil, fmt.Errorf("invalid number %q", raw)
		}
		return json.Number(c.str(raw)), nil
	case fastjson.TypeTrue:
		return true, nil
	case fastjson.TypeFalse:
		return false, nil
	}
	return nil, nil
}

// validNumber checks the JSON number grammar (the parser is lenient).
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i == len(b)
}

// field returns a top-level field of the event as ${event.<name>} sees it.
func (e *Event) field(name string) (any, bool) {
	switch name {
	case "type":
		if e.typ != nil {
			return e.typ, true
		}
		return e.Type, true
	case "created_ms":
		return json.Number(strconv.FormatUint(e.CreatedMs, 10)), true
	case "payload":
		return e.Payload, true
	case "metadata":
		return e.Metadata, true
	case "trace_id":
		return e.TraceID, true
	case "iterator":
		if e.Iterator == nil {
			return nil, false
		}
		return e.Iterator, true
	}
	return nil, false
}

// Value returns the whole event as ${event} sees it.
func (e *Event) Value() map[string]any {
	m := map[string]any{
		"trace_id":   e.TraceID,
		"type":       e.Type,
		"created_ms": json.Number(strconv.FormatUint(e.CreatedMs, 10)),
		"payload":    e.Payload,
		"metadata":   e.Metadata,
	}
	if e.Iterator != nil {
		m["iterator"] = e.Iterator
	}
	return m
}

// MarshalJSON writes the event as the test-event API echoes it:
// type, created_ms, metadata, payload, and iterator inside iterations.
func (e *Event) MarshalJSON() ([]byte, error) {
	md := e.Metadata
	if md == nil {
		md = map[string]any{}
	}
	pl := e.Payload
	if pl == nil {
		pl = map[string]any{}
	}
	return json.Marshal(struct {
		Type      string         `json:"type"`
		CreatedMs uint64         `json:"created_ms"`
		Metadata  map[string]any `json:"metadata"`
		Payload   map[string]any `json:"payload"`
		Iterator  map[string]any `json:"iterator,omitempty"`
	}{e.Type, e.CreatedMs, md, pl, e.Iterator})
}

// withIteration returns a copy of the event for one iteration.
func (e *Event) withIteration(iteration, item any) *Event {
	c := *e
	c.Iterator = map[string]any{"iteration": iteration, "item": item}
	return &c
}
