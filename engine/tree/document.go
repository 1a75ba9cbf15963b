package tree

import (
	"encoding/json"
	"sync/atomic"
	"unsafe"

	"github.com/squallhq/squall/config"
)

// document is an event's payload and metadata as parsed, in one flat
// slice of nodes: accessors walk it and only the values they reach become
// Go values, instead of the whole event being turned into maps first
// (docs/decisions.md decision 36).
//
// A node's children follow it; each child's end is where its next sibling
// starts, and the node's own end is past its last descendant. Object
// children carry their keys. All strings point into the event's arena.
// Nodes are never changed once built; the maps made for the whole payload
// and metadata are kept, so that reading them twice costs one conversion.
type document struct {
	// buf is the arena the nodes' strings are in.
	buf   []byte
	nodes []jnode
	// payload and metadata are the nodes of the event's objects; -1 when
	// the object is not in nodes (no metadata, or an event built from maps).
	payload, metadata int32

	payloadMap, metadataMap atomic.Pointer[map[string]any]
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
	if n.keyLen == 0 {
		return ""
	}
	return unsafe.String(&d.buf[n.keyOff], n.keyLen)
}

func (d *document) str(n *jnode) string {
	if n.strLen == 0 {
		return ""
	}
	return unsafe.String(&d.buf[n.strOff], n.strLen)
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
	case jArray:
		s := make([]any, 0, n.count)
		for c := i + 1; c < n.end; c = d.nodes[c].end {
			s = append(s, d.value(c))
		}
		return s
	case jObject:
		return d.object(i)
	}
	return nil
}

func (d *document) object(i int32) map[string]any {
	n := &d.nodes[i]
	m := make(map[string]any, n.count)
	for c := i + 1; c < n.end; c = d.nodes[c].end {
		m[d.key(&d.nodes[c])] = d.value(c)
	}
	return m
}

// cached returns the map of object node i, made once.
func (d *document) cached(p *atomic.Pointer[map[string]any], i int32) map[string]any {
	if m := p.Load(); m != nil {
		return *m
	}
	var m map[string]any
	if i >= 0 {
		m = d.object(i)
	} else {
		m = map[string]any{}
	}
	if !p.CompareAndSwap(nil, &m) {
		return *p.Load()
	}
	return m
}
