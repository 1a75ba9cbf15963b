package webhooks

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/squallhq/squall/internal/jsonlimit"
)

// This file holds the direct path of [Collector.AppendEvent]: when the
// template's only expressions are ${@}, the event is written straight from
// the request body, without decoding it into Go values and encoding them
// back. The body is rewritten into the form the decoding path gives it
// (object keys sorted, no white space, strings escaped as Event.AppendJSON
// escapes them); bodies this path is not sure to rewrite exactly the same way
// (a number not in its shortest form, a duplicate or escaped key, deep
// nesting, invalid JSON) go the decoding path, so that both paths always give
// the same bytes. FuzzCollector_AppendEvent checks that they do.

// maxDirectDepth is the deepest nesting of arrays and objects the direct path
// takes: it copies an object's members once per enclosing object.
const maxDirectDepth = 16

// isIdentity reports whether a JMESPath expression is @ alone: the whole
// document.
func isIdentity(src string) bool {
	return string(bytes.Trim([]byte(src), " \t\r\n")) == "@"
}

// isDirect reports whether the template can be written by the direct path:
// a literal event type, and no expression other than ${@}.
func (c *Collector) isDirect() bool {
	if c.eventType.kind != kindLiteral {
		return false
	}
	// The event object holds the payload: a body the direct path takes
	// (at most maxDirectDepth deep) under the payload's deepest
	// expression stays within the engines' limit.
	if 1+c.payload.depth()+maxDirectDepth > jsonlimit.MaxEventDepth {
		return false
	}
	return c.payload.onlyIdentity()
}

// depth returns the nesting of the objects and arrays of the template at n
// (n itself included).
func (n *node) depth() int {
	if n.kind != kindObject && n.kind != kindArray {
		return 0
	}
	d := 0
	for i := range n.kids {
		d = max(d, n.kids[i].depth())
	}
	return 1 + d
}

func (n *node) onlyIdentity() bool {
	if n.kind == kindExpr {
		return isIdentity(n.expr.src)
	}
	for i := range n.kids {
		if !n.kids[i].onlyIdentity() {
			return false
		}
	}
	return true
}

// appendDirect writes the event as Event.AppendJSON writes what Collect
// returns, or reports false when it cannot be sure to (the caller then takes
// the decoding path, which also gives the errors).
func (c *Collector) appendDirect(dst, body []byte, createdMs int64, tenant string) ([]byte, bool) {
	if !utf8.Valid(body) {
		return nil, false
	}
	if !c.readsBody && !json.Valid(body) {
		return nil, false
	}
	b := appendEventHead(dst, c.eventType.lit.(string), createdMs)
	b = append(b, `{"tenant_id":`...)
	b = appendString(b, tenant)
	b = append(b, `},"payload":`...)
	members, _ := c.members.Get().(*[]member)
	if members == nil {
		members = new([]member)
	}
	w := directWriter{body: body, docStart: -1, members: (*members)[:0]}
	b, ok := w.node(b, &c.payload)
	if cap(w.members) <= 1024 {
		*members = w.members[:0]
		c.members.Put(members)
	}
	if !ok {
		return nil, false
	}
	return append(b, '}'), true
}

// directWriter writes a template node, the whole body standing for ${@}.
type directWriter struct {
	body []byte
	// docStart and docEnd locate the body's rewritten form in the output
	// once written: a template with several ${@} rewrites it once.
	docStart, docEnd int
	members          []member // scratch for canonicalizer.members
}

func (w *directWriter) node(b []byte, n *node) ([]byte, bool) {
	switch n.kind {
	case kindExpr:
		if w.docStart >= 0 {
			return append(b, b[w.docStart:w.docEnd]...), true
		}
		c := canonicalizer{body: w.body, members: w.members}
		start := len(b)
		b, ok := c.document(b)
		w.members = c.members[:0]
		if !ok {
			return nil, false
		}
		w.docStart, w.docEnd = start, len(b)
		return b, true
	case kindObject:
		b = append(b, '{')
		for i, k := range n.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = w.node(b, &n.kids[i]); !ok {
				return nil, false
			}
		}
		return append(b, '}'), true
	case kindArray:
		b = append(b, '[')
		for i := range n.kids {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = w.node(b, &n.kids[i]); !ok {
				return nil, false
			}
		}
		return append(b, ']'), true
	}
	b, err := appendValue(b, n.lit)
	return b, err == nil
}

// canonicalizer rewrites a JSON document: keys sorted, no white space,
// strings escaped as appendString does, numbers as written (only numbers
// already in their shortest form are taken).
type canonicalizer struct {
	body    []byte
	pos     int
	depth   int
	members []member // the members of the objects being rewritten, innermost last
}

// member is one member of an object: its key in the body, and its key:value
// text in the output.
type member struct {
	keyStart, keyEnd int
	start, end       int
}

// document rewrites the whole body, which must be exactly one JSON value
// with optional white space around it.
func (c *canonicalizer) document(b []byte) ([]byte, bool) {
	c.space()
	b, ok := c.value(b)
	if !ok {
		return nil, false
	}
	c.space()
	return b, c.pos == len(c.body)
}

func (c *canonicalizer) space() {
	for c.pos < len(c.body) {
		switch c.body[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) value(b []byte) ([]byte, bool) {
	if c.pos >= len(c.body) {
		return nil, false
	}
	switch ch := c.body[c.pos]; {
	case ch == '{':
		return c.object(b)
	case ch == '[':
		return c.array(b)
	case ch == '"':
		return c.string(b)
	case ch == '-' || ch >= '0' && ch <= '9':
		return c.number(b)
	case ch == 't':
		return c.literal(b, "true")
	case ch == 'f':
		return c.literal(b, "false")
	case ch == 'n':
		return c.literal(b, "null")
	}
	return nil, false
}

func (c *canonicalizer) literal(b []byte, word string) ([]byte, bool) {
	if !bytes.HasPrefix(c.body[c.pos:], []byte(word)) {
		return nil, false
	}
	c.pos += len(word)
	return append(b, word...), true
}

func (c *canonicalizer) array(b []byte) ([]byte, bool) {
	if c.depth++; c.depth > maxDirectDepth {
		return nil, false
	}
	c.pos++ // [
	b = append(b, '[')
	c.space()
	if c.pos < len(c.body) && c.body[c.pos] == ']' {
		c.pos++
		c.depth--
		return append(b, ']'), true
	}
	for {
		var ok bool
		if b, ok = c.value(b); !ok {
			return nil, false
		}
		c.space()
		if c.pos >= len(c.body) {
			return nil, false
		}
		switch c.body[c.pos] {
		case ',':
			c.pos++
			c.space()
			b = append(b, ',')
			continue
		case ']':
			c.pos++
			c.depth--
			return append(b, ']'), true
		}
		return nil, false
	}
}

// object rewrites an object with its members sorted by key. The members
// are first written in body order, separated by commas; when the keys were
// not in order, the sorted object is written after them and moved down.
func (c *canonicalizer) object(b []byte) ([]byte, bool) {
	if c.depth++; c.depth > maxDirectDepth {
		return nil, false
	}
	c.pos++ // {
	base := len(b)
	b = append(b, '{')
	c.space()
	if c.pos < len(c.body) && c.body[c.pos] == '}' {
		c.pos++
		c.depth--
		return append(b, '}'), true
	}
	mark := len(c.members)
	defer func() { c.members = c.members[:mark] }()
	for {
		if c.pos >= len(c.body) || c.body[c.pos] != '"' {
			return nil, false
		}
		keyStart := c.pos + 1
		keyEnd := keyStart
		for keyEnd < len(c.body) && c.body[keyEnd] != '"' {
			if c.body[keyEnd] == '\\' {
				return nil, false // escaped keys: the decoding path sorts them
			}
			keyEnd++
		}
		if len(b) > base+1 {
			b = append(b, ',')
		}
		start := len(b)
		var ok bool
		if b, ok = c.string(b); !ok {
			return nil, false
		}
		c.space()
		if c.pos >= len(c.body) || c.body[c.pos] != ':' {
			return nil, false
		}
		c.pos++
		c.space()
		b = append(b, ':')
		if b, ok = c.value(b); !ok {
			return nil, false
		}
		c.members = append(c.members, member{keyStart: keyStart, keyEnd: keyEnd, start: start, end: len(b)})
		c.space()
		if c.pos >= len(c.body) {
			return nil, false
		}
		if c.body[c.pos] == ',' {
			c.pos++
			c.space()
			continue
		}
		if c.body[c.pos] != '}' {
			return nil, false
		}
		c.pos++
		break
	}
	c.depth--
	ms := c.members[mark:]
	key := func(m member) []byte { return c.body[m.keyStart:m.keyEnd] }
	sorted := true
	for i := 1; i < len(ms); i++ {
		switch bytes.Compare(key(ms[i-1]), key(ms[i])) {
		case 0:
			return nil, false // a duplicate key: the decoding path keeps the last
		case 1:
			sorted = false
		}
	}
	if sorted {
		return append(b, '}'), true
	}
	// Equal keys are found below, once sorted.
	slices.SortFunc(ms, func(x, y member) int { return bytes.Compare(key(x), key(y)) })
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(key(ms[i-1]), key(ms[i])) {
			return nil, false
		}
	}
	end := len(b)
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, b[m.start:m.end]...)
	}
	b = append(b, '}')
	n := copy(b[base:], b[end:])
	return b[:base+n], true
}

// string rewrites a string as appendString writes its decoded value: the
// escapes of the body decoded as encoding/json decodes them (an unpaired
// surrogate becomes U+FFFD), then quotes, backslashes, control characters,
// U+2028 and U+2029 escaped. The body is valid UTF-8.
func (c *canonicalizer) string(b []byte) ([]byte, bool) {
	s := c.body
	i := c.pos + 1
	b = append(b, '"')
	start := i
	for {
		if i >= len(s) {
			return nil, false
		}
		ch := s[i]
		switch {
		case ch == '"':
			c.pos = i + 1
			return append(append(b, s[start:i]...), '"'), true
		case ch < 0x20:
			return nil, false
		case ch == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9):
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xf])
			i += 3
			start = i
		case ch == '\\':
			b = append(b, s[start:i]...)
			if i+1 >= len(s) {
				return nil, false
			}
			i += 2
			switch e := s[i-1]; e {
			case '"', '\\':
				b = append(b, '\\', e)
			case '/':
				b = append(b, '/')
			case 'b', 'f', 'n', 'r', 't':
				b = append(b, '\\', e)
			case 'u':
				r := hex4(s[i:])
				if r < 0 {
					return nil, false
				}
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						r2 = hex4(s[i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						i += 6
						r = dec
					} else {
						r = utf8.RuneError
					}
				}
				b = appendRune(b, r)
			default:
				return nil, false
			}
			start = i
		default:
			i++
		}
	}
}

// hex4 decodes the four hex digits at the start of s, or returns -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendRune appends a decoded rune of a string as appendString does.
func appendRune(b []byte, r rune) []byte {
	switch {
	case r == '"' || r == '\\':
		return append(b, '\\', byte(r))
	case r == '\b':
		return append(b, '\\', 'b')
	case r == '\f':
		return append(b, '\\', 'f')
	case r == '\n':
		return append(b, '\\', 'n')
	case r == '\r':
		return append(b, '\\', 'r')
	case r == '\t':
		return append(b, '\\', 't')
	case r < 0x20:
		return append(b, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
	case r == '\u2028' || r == '\u2029':
		return append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
	}
	return utf8.AppendRune(b, r)
}

// number copies a number that is in its shortest form; other numbers make
// the direct path give up, since the decoding path may rewrite them.
func (c *canonicalizer) number(b []byte) ([]byte, bool) {
	s := c.body
	i := c.pos
	if s[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return nil, false
	}
	integer := true
	if i < len(s) && s[i] == '.' {
		i++
		integer = false
		if !digits() {
			return nil, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		integer = false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	text := s[c.pos:i]
	// Integers of up to 15 digits are canonical; others are checked.
	n := len(text)
	if text[0] == '-' {
		n--
	}
	if !integer || n > 15 {
		if !canonical(string(text)) {
			return nil, false
		}
	}
	c.pos = i
	return append(b, text...), true
}
