package tree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/valyala/fastjson"
)

// The decoder before the flat document (docs/decisions.md decision 35):
// fastjson, then the whole payload and metadata converted into Go maps.
// The differential tests hold the new decoder and evaluation to it.

var mapParserPool fastjson.ParserPool

// decodeEventMaps decodes an event as DecodeEvent did before the flat
// document: the event it returns holds maps, which evaluation walks.
func decodeEventMaps(data []byte) (*Event, error) {
	p := mapParserPool.Get()
	defer mapParserPool.Put(p)
	v, err := p.ParseBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	c := mapConverter{arena: make([]byte, 0, len(data))}
	return c.event(v)
}

// mapEvent returns an event whose payload and metadata are the maps, with
// no document to walk.
func mapEvent(ev *Event, payload, metadata map[string]any) *Event {
	ev.doc = &document{payload: -1, metadata: -1}
	if metadata == nil {
		metadata = map[string]any{}
	}
	ev.doc.payloadMap.Store(&payload)
	ev.doc.metadataMap.Store(&metadata)
	ev.typ = ev.Type
	return ev
}

// mapConverter turns parsed values into Go values. Every string it makes
// (object keys, string values, numbers) is copied into an arena, one
// allocation per event rather than one per string: an event's strings
// together are never longer than the event's JSON text, which is the
// arena's first size. Bytes written into the arena are never changed, so
// the strings pointing into it stay immutable; they keep the whole arena
// alive together, which is as long as the event lives.
type mapConverter struct {
	arena []byte
}

// str returns a string holding b, in the arena.
func (c *mapConverter) str(b []byte) string {
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
	return arenaString(c.arena, start, start+len(b))
}

func (c *mapConverter) event(v *fastjson.Value) (*Event, error) {
	obj, err := v.Object()
	if err != nil {
		return nil, fmt.Errorf("%w: an event is a JSON object", ErrInvalidEvent)
	}
	ev := &Event{}
	var payload, metadata map[string]any
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
			payload, seenPayload = m, true
		case "metadata":
			if fv.Type() == fastjson.TypeNull {
				return
			}
			m, err := c.object(fv)
			if err != nil {
				ferr = fmt.Errorf("%w: metadata: %w", ErrInvalidEvent, err)
				return
			}
			metadata = m
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
	return mapEvent(ev, payload, metadata), nil
}

func (c *mapConverter) object(v *fastjson.Value) (map[string]any, error) {
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
func (c *mapConverter) value(v *fastjson.Value) (any, error) {
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
