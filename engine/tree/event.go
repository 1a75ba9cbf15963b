package tree

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/squallhq/squall/config"
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
	// Iterator is set on the events seen inside an iterator branch:
	// {"iteration": index or key, "item": element}.
	Iterator map[string]any

	// doc holds the payload and the metadata; the events of an iterator's
	// iterations share it.
	doc *document
	// typ is Type as a value, so that reading it does not allocate.
	typ any
}

// Payload returns the event's payload. The map is made on the first use
// and shared by the next ones and by evaluation: it must not be modified.
func (e *Event) Payload() map[string]any {
	return e.doc.object(&e.doc.payloadMap, e.doc.payload)
}

// Metadata returns the event's metadata, empty when the event has none.
// The map is made on the first call and shared by the next ones: it must
// not be modified.
func (e *Event) Metadata() map[string]any {
	return e.doc.object(&e.doc.metadataMap, e.doc.metadata)
}

// ErrInvalidEvent classifies events that do not have the required shape.
var ErrInvalidEvent = errors.New("invalid event")

// DecodeEvent decodes an event (nested at most 300 levels deep, so
// that evaluation never recurses without bound): type (string) and created_ms (unsigned
// integer) and payload (object) are required; metadata (object) and
// trace_id (string or null) are optional; other top-level fields are ignored.
//
// The payload and the metadata are checked whole but kept in their parsed
// form: evaluation turns into Go values only what it reads
// (docs/decisions.md decision 35).
func DecodeEvent(data []byte) (*Event, error) {
	// The event and its document in one allocation, the arena in another,
	// the nodes in a third.
	d := &struct {
		ev  Event
		doc document
	}{}
	d.doc.payload, d.doc.metadata = -1, -1
	d.ev.doc = &d.doc
	d.doc.buf = append([]byte(nil), data...)
	scratch := nodePool.Get().(*[]jnode)
	p := parser{buf: d.doc.buf, nodes: (*scratch)[:0]}
	err := p.event(&d.ev)
	if err == nil {
		d.doc.nodes = make([]jnode, len(p.nodes))
		copy(d.doc.nodes, p.nodes)
	}
	if cap(p.nodes) <= maxPooledNodes {
		*scratch = p.nodes[:0]
		nodePool.Put(scratch)
	}
	if err != nil {
		return nil, err
	}
	d.ev.typ = d.ev.Type
	return &d.ev, nil
}

// maxPooledNodes bounds the node lists kept for the next events.
const maxPooledNodes = 1 << 14

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
		return e.Payload(), true
	case "metadata":
		return e.Metadata(), true
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

// docRoot returns the document node of a top-level field the document
// holds (the payload; the metadata when it is an object), or -1.
func (e *Event) docRoot(field string) int32 {
	switch field {
	case "payload":
		return e.doc.payload
	case "metadata":
		return e.doc.metadata
	}
	return -1
}

// lookup resolves ${event.<field><path>}. In the payload and the metadata
// it walks the document and converts only the value it reaches.
func (e *Event) lookup(field string, path []config.Segment) (any, bool) {
	if len(path) > 0 {
		if root := e.docRoot(field); root >= 0 {
			i, ok := e.doc.walk(root, path)
			if !ok {
				return nil, false
			}
			return e.doc.value(i), true
		}
	}
	v, ok := e.field(field)
	if !ok {
		return nil, false
	}
	return config.Walk(v, path)
}

// lookupString is lookup for readers that want a string, without making
// it a Go value: ok is false when the value is missing, isStr when it is
// not a string.
func (e *Event) lookupString(field string, path []config.Segment) (str string, isStr, ok bool) {
	if len(path) > 0 {
		if root := e.docRoot(field); root >= 0 {
			i, ok := e.doc.walk(root, path)
			if !ok {
				return "", false, false
			}
			n := &e.doc.nodes[i]
			if n.kind != jString {
				return "", false, true
			}
			return e.doc.str(n), true, true
		}
	} else if field == "type" {
		return e.Type, true, true
	}
	v, ok := e.lookup(field, path)
	str, isStr = v.(string)
	return str, isStr, ok
}

// Value returns the whole event as ${event} sees it.
func (e *Event) Value() map[string]any {
	m := map[string]any{
		"trace_id":   e.TraceID,
		"type":       e.Type,
		"created_ms": json.Number(strconv.FormatUint(e.CreatedMs, 10)),
		"payload":    e.Payload(),
		"metadata":   e.Metadata(),
	}
	if e.Iterator != nil {
		m["iterator"] = e.Iterator
	}
	return m
}

// MarshalJSON writes the event as the test-event API echoes it:
// type, created_ms, metadata, payload, and iterator inside iterations.
func (e *Event) MarshalJSON() ([]byte, error) {
	md, pl := e.Metadata(), e.Payload()
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

// IterationLabel writes the iteration of an event seen inside an iterator
// branch as action positions do: an array index, or an object key escaped
// as in a URL query.
func (e *Event) IterationLabel() string {
	switch v := e.Iterator["iteration"].(type) {
	case json.Number:
		return v.String()
	case string:
		return url.QueryEscape(v)
	}
	return fmt.Sprint(e.Iterator["iteration"])
}
