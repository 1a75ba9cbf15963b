// Package jsonlimit checks, in one pass over the bytes and before any
// decoder runs, what a JSON body may cost to decode: its nesting depth and,
// on request, that it is valid UTF-8 and that no object repeats a key.
//
// Decoders differ in what they refuse: segmentio/encoding recurses without
// a depth limit (a 1 MiB body of '[' took 800 MB of stack), encoding/json
// stops at 10,000 levels and accepts invalid UTF-8 and duplicate keys. Every
// endpoint that decodes an untrusted body runs [Check] first, with the same
// limits, so that what a body costs does not depend on which decoder reads
// it. Check does not validate the syntax: the decoder that follows does.
package jsonlimit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting depth of arrays and objects that every
// endpoint accepts: far more than any document of the APIs needs (a
// processing tree nests two levels per node), and little enough that a
// hostile body costs a few kilobytes of decoder stack.
const DefaultMaxDepth = 128

// MaxEventDepth is the nesting depth of an event (the event object is
// level 1) that the engines evaluate: they dead-letter a deeper one, so the
// intake refuses to make one (400) instead of accepting it.
const MaxEventDepth = 300

// Limits say what Check refuses.
type Limits struct {
	// MaxDepth bounds the nesting of arrays and objects (DefaultMaxDepth
	// when zero or negative).
	MaxDepth int
	// ValidUTF8 refuses a body that is not valid UTF-8 (encoding/json
	// would silently store U+FFFD in its place).
	ValidUTF8 bool
	// UniqueKeys refuses an object that has the same key twice, after
	// unescaping (encoding/json keeps the last one).
	UniqueKeys bool
	// Key, when set, is called with every key of the outermost object,
	// unescaped (the slice is only valid during the call); an error it
	// returns is Check's. It lets a caller refuse keys that a
	// case-insensitive decoder would match to a field.
	Key func(key []byte) error
}

// Error is a body Check refuses.
type Error struct {
	// Reason is "too deep", "invalid UTF-8" or "duplicate key".
	Reason string
	// Offset is the byte offset of the problem.
	Offset int
	// Key is the repeated key, for "duplicate key".
	Key string
	// Limit is MaxDepth, for "too deep".
	Limit int
}

func (e *Error) Error() string {
	switch e.Reason {
	case ReasonDepth:
		return fmt.Sprintf("the JSON nests deeper than %d levels (offset %d)", e.Limit, e.Offset)
	case ReasonDuplicate:
		return fmt.Sprintf("the JSON object repeats the key %q (offset %d)", e.Key, e.Offset)
	}
	return fmt.Sprintf("the body is not valid UTF-8 (offset %d)", e.Offset)
}

// Reasons of an Error.
const (
	ReasonDepth     = "too deep"
	ReasonUTF8      = "invalid UTF-8"
	ReasonDuplicate = "duplicate key"
)

// Check returns an *Error when data nests deeper than l.MaxDepth or breaks
// the other limits l asks for, else nil. It allocates nothing unless
// keys are tracked (l.UniqueKeys or l.Key), and then little: a frame per
// open array or object, and a map for objects of more than 16 keys. Malformed JSON that
// breaks no limit passes: the decoder that follows refuses it.
func Check(data []byte, l Limits) error {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.ValidUTF8 && !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, n := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return &Error{Reason: ReasonUTF8, Offset: off}
	}
	depth := 0
	track := l.UniqueKeys || l.Key != nil
	// open holds a frame per array or object open, and keys the keys of
	// the open objects, each object's after its parent's; only when keys
	// are tracked.
	var openBuf [16]frame
	var keysBuf [32][]byte
	open, keys := openBuf[:0], keysBuf[:0]
	// expectKey: the next string is an object key.
	expectKey := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			depth++
			if depth > l.MaxDepth {
				return &Error{Reason: ReasonDepth, Offset: i, Limit: l.MaxDepth}
			}
			expectKey = c == '{'
			if track {
				open = append(open, frame{object: c == '{', start: len(keys)})
			}
		case '}', ']':
			if depth > 0 {
				depth--
				if len(open) > 0 {
					keys = keys[:open[len(open)-1].start]
					open = open[:len(open)-1]
				}
			}
			expectKey = false
		case ',':
			expectKey = len(open) > 0 && open[len(open)-1].object
		case ':':
			expectKey = false
		case '"':
			end := stringEnd(data, i)
			if expectKey && len(open) > 0 && open[len(open)-1].object {
				key := unquote(data[i:end], l.ValidUTF8)
				f := &open[len(open)-1]
				var isNew bool
				if keys, isNew = f.add(keys, key); !isNew && l.UniqueKeys {
					return &Error{Reason: ReasonDuplicate, Offset: i, Key: string(key)}
				}
				if l.Key != nil && len(open) == 1 {
					if err := l.Key(key); err != nil {
						return err
					}
				}
			}
			expectKey = false
			i = end - 1
		}
	}
	return nil
}

// frame is an open array or object.
type frame struct {
	object bool
	// start is where the object's keys begin in Check's keys, while it
	// has at most smallKeys of them; m holds them all beyond.
	start int
	m     map[string]struct{}
}

const smallKeys = 16

// add records key, in keys or in f.m, and reports whether it is new.
func (f *frame) add(keys [][]byte, key []byte) ([][]byte, bool) {
	if f.m != nil {
		if _, dup := f.m[string(key)]; dup {
			return keys, false
		}
		f.m[string(key)] = struct{}{}
		return keys, true
	}
	for _, k := range keys[f.start:] {
		if bytes.Equal(k, key) {
			return keys, false
		}
	}
	keys = append(keys, key)
	if len(keys)-f.start > smallKeys {
		f.m = make(map[string]struct{}, 2*smallKeys)
		for _, k := range keys[f.start:] {
			f.m[string(k)] = struct{}{}
		}
		keys = keys[:f.start]
	}
	return keys, true
}

// stringEnd returns the offset just past the string that starts with the
// quote at data[i] (len(data) when it is not closed).
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// unquote returns the value of the quoted string q as encoding/json
// decodes it (invalid UTF-8 becomes U+FFFD, so "\xff" and "\x80" are the
// same key), or q itself when it does not decode (the decoder that follows
// refuses it). valid says the whole body was found valid UTF-8 already.
// It allocates only for a string with escapes or invalid UTF-8.
func unquote(q []byte, valid bool) []byte {
	if bytes.IndexByte(q, '\\') < 0 && len(q) >= 2 && (valid || utf8.Valid(q)) {
		return q[1 : len(q)-1]
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return q
	}
	return []byte(s)
}
