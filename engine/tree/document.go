package tree

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/squallhq/squall/config"
)

// document is an event's payload and metadata as parsed, in one flat
// slice of nodes: accessors walk it and only the values they reach become
// Go values, instead of the whole event being turned into maps first
// (docs/decisions.md decision 35).
//
// A node's children follow it; each child's end is where its next sibling
// starts, and the node's own end is past its last descendant. Object
// children carry their keys. All strings point into the event's arena.
// Nodes are never changed once built. The maps and slices made for
// objects and arrays are kept, so that reading one twice (an iterator's
// target, ${event.payload}, a payload copied into several actions) costs
// one conversion, and every reader shares one value, as when the whole
// event was converted up front.
type document struct {
	// buf is the arena the nodes' strings are in.
	buf   []byte
	nodes []jnode
	// payload and metadata are the nodes of the event's objects; -1 when
	// the object is not in nodes (no metadata, or an event built from maps).
	payload, metadata int32

	// payloadMap and metadataMap are the objects that are not nodes: the
	// maps of an event built from maps, an empty metadata.
	payloadMap, metadataMap atomic.Pointer[map[string]any]

	mu sync.Mutex
	// made holds the objects and arrays made so far, by node.
	made map[int32]any
}

// jnode is one JSON value of a document. It holds no pointers (its
// strings are bounds in the arena), which the collector need not scan.
type jnode struct {
	// keyOff and keyLen are the key in the parent object.
	keyOff, keyLen uint32
	// strOff and strLen are a string's value, a number's text.
	strOff, strLen uint32
	// end is the index past the node's subtree.
	end int32
	// count is the number of children of an object or an array.
	count int32
	kind  jkind
}

type jkind uint8

const (
	jNull jkind = iota
	jFalse
	jTrue
	jNumber
	jString
	jArray
	jObject
)

func (d *document) key(n *jnode) string {
	return arenaString(d.buf, int(n.keyOff), int(n.keyOff+n.keyLen))
}

func (d *document) str(n *jnode) string {
	return arenaString(d.buf, int(n.strOff), int(n.strOff+n.strLen))
}

// arenaString returns the bytes [start, end) of an event's arena as a
// string without a copy: the one use of unsafe in this module
// (docs/decisions.md decision 65). It is correct because the arena is the
// event's own copy of its JSON text (DecodeEvent copies the caller's
// bytes), because the parser writes a byte of it (decoding escapes in
// place) only before any string over that byte is made, and because
// nothing writes it after: such a string is immutable for as long as it
// lives, and it keeps the arena alive. The bounds are checked against
// the arena's length (slicing panics), so a wrong node cannot read past
// it. TestArenaStrings fails when the arena aliases the caller's bytes
// or is reused for another event; TestArenaString_bounds when the bounds
// are not checked.
func arenaString(arena []byte, start, end int) string {
	b := arena[start:end:len(arena)]
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// child returns the node of an object's member; when a key appears more
// than once the last one counts, as when the object is decoded into a map.
func (d *document) child(i int32, key string) (int32, bool) {
	n := &d.nodes[i]
	if n.kind != jObject {
		return 0, false
	}
	found := int32(-1)
	if key == "" {
		for c := i + 1; c < n.end; c = d.nodes[c].end {
			if d.nodes[c].keyLen == 0 {
				found = c
			}
		}
		return found, found >= 0
	}
	last := key[len(key)-1]
	for c := i + 1; c < n.end; c = d.nodes[c].end {
		// Keys of one object often differ only at the end (line_9, line_11).
		k := &d.nodes[c]
		if int(k.keyLen) == len(key) && d.buf[k.keyOff+k.keyLen-1] == last && d.key(k) == key {
			found = c
		}
	}
	return found, found >= 0
}

// elem returns the node of an array's element k.
func (d *document) elem(i int32, k int) (int32, bool) {
	n := &d.nodes[i]
	if n.kind != jArray || k < 0 || k >= int(n.count) {
		return 0, false
	}
	c := i + 1
	for ; k > 0; k-- {
		c = d.nodes[c].end
	}
	return c, true
}

// walk follows a path from node i, as config.Walk does on Go values.
func (d *document) walk(i int32, path []config.Segment) (int32, bool) {
	ok := true
	for _, seg := range path {
		if seg.IsIndex {
			i, ok = d.elem(i, seg.Index)
		} else {
			i, ok = d.child(i, seg.Key)
		}
		if !ok {
			return 0, false
		}
	}
	return i, true
}

// value returns node i as a Go value: what decoding the node's JSON into
// any gives, numbers as json.Number. Objects and arrays are new each time.
func (d *document) value(i int32) any {
	n := &d.nodes[i]
	switch n.kind {
	case jString:
		return d.str(n)
	case jNumber:
		return json.Number(d.str(n))
	case jTrue:
		return true
	case jFalse:
		return false
	case jArray, jObject:
		d.mu.Lock()
		v, ok := d.made[i]
		d.mu.Unlock()
		if ok {
			return v
		}
		// Made without the lock: the elements take it.
		v = d.make(i)
		d.mu.Lock()
		defer d.mu.Unlock()
		if w, ok := d.made[i]; ok {
			return w
		}
		if d.made == nil {
			d.made = make(map[int32]any, 4)
		}
		d.made[i] = v
		return v
	}
	return nil
}

// make converts an object or an array node.
func (d *document) make(i int32) any {
	n := &d.nodes[i]
	if n.kind == jArray {
		s := make([]any, 0, n.count)
		for c := i + 1; c < n.end; c = d.nodes[c].end {
			s = append(s, d.value(c))
		}
		return s
	}
	m := make(map[string]any, n.count)
	for c := i + 1; c < n.end; c = d.nodes[c].end {
		m[d.key(&d.nodes[c])] = d.value(c)
	}
	return m
}

// object returns the map of object node i, or when i is -1 the map p
// holds (an empty one when none).
func (d *document) object(p *atomic.Pointer[map[string]any], i int32) map[string]any {
	if i >= 0 {
		return d.value(i).(map[string]any)
	}
	if m := p.Load(); m != nil {
		return *m
	}
	m := map[string]any{}
	if !p.CompareAndSwap(nil, &m) {
		return *p.Load()
	}
	return m
}
