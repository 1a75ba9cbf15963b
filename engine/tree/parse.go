package tree

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/squallhq/squall/internal/jsonlimit"
)

// maxDepth bounds the nesting of an event (the event object is level 1),
// so that evaluation never recurses without bound. The intake refuses to
// make a deeper event.
const maxDepth = jsonlimit.MaxEventDepth

// parser reads an event's JSON in one pass into a document. It accepts
// exactly what the decoder accepted before it (valyala/fastjson, whose
// grammar it follows, with the numbers of the payload and the metadata
// checked against the JSON grammar; docs/decisions.md decision 35):
//
//   - whitespace is space, tab, CR and LF;
//   - a string ends at the first quote not escaped by a backslash; its
//     bytes are not checked (control characters and invalid UTF-8 stay);
//     escapes are decoded best effort (an unknown or incomplete escape is
//     kept as written, a lone surrogate escape too, and a surrogate escape
//     followed by another \u escape decodes the pair, U+FFFD when it is
//     not a valid pair);
//   - a number is a run of digits, '.', '-', '+', 'e' and 'E', or
//     inf/nan (any case, with an optional sign): outside the payload and
//     the metadata any such run is accepted;
//   - true, false and null are recognized by their prefix.
//
// It works in the event's arena, a copy of its bytes: strings without
// escapes are slices of it, escaped ones are decoded in place (a decoded
// string is never longer than its escaped form).
type parser struct {
	buf   []byte
	pos   int
	nodes []jnode
	// strict checks numbers against the JSON grammar (payload and metadata).
	strict bool
}

var errSyntax = errors.New("invalid JSON")

// nodePool recycles the node lists of parsing; the document keeps an
// exact copy.
var nodePool = sync.Pool{New: func() any { s := make([]jnode, 0, 64); return &s }}

func (p *parser) syntax(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, p.pos)
}

func (p *parser) skipWS() {
	for p.pos < len(p.buf) {
		switch p.buf[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// str returns the arena bytes [start, end) as a string (arenaString).
func (p *parser) str(start, end int) string { return arenaString(p.buf, start, end) }

// rawString reads a string whose opening quote was consumed, and returns
// the bounds of its raw content and whether it holds a backslash.
func (p *parser) rawString() (start, end int, escaped bool, err error) {
	start = p.pos
	b := p.buf
	for i := start; ; {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			break
		}
		bs := bytes.IndexByte(b[i:i+q], '\\')
		if bs < 0 {
			p.pos = i + q + 1
			return start, i + q, escaped, nil
		}
		// The byte after a backslash is escaped, a quote included.
		escaped = true
		i += bs + 2
		if i > len(b) {
			break
		}
	}
	p.pos = len(b)
	return 0, 0, false, p.syntax(`missing closing '"'`)
}

// string reads a string whose opening quote was consumed, decoded, and
// returns its bounds in the arena.
func (p *parser) string() (start, end int, err error) {
	start, end, escaped, err := p.rawString()
	if err != nil {
		return 0, 0, err
	}
	if escaped {
		end = start + unescape(p.buf[start:end])
	}
	return start, end, nil
}

// oneByteEscapes maps the byte after a backslash to the byte the escape
// stands for, for the escapes of one byte (0: not one of them).
var oneByteEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescape decodes the escapes of b in place, best effort (see parser),
// and returns the decoded length.
func unescape(b []byte) int {
	w := 0
	for r := 0; r < len(b); {
		c := b[r]
		if c != '\\' {
			b[w] = c
			w++
			r++
			continue
		}
		if r+1 >= len(b) {
			// A trailing backslash (cannot end a parsed string) is dropped.
			break
		}
		r += 2
		e := b[r-1]
		if d := oneByteEscapes[e]; d != 0 {
			b[w] = d
			w++
			continue
		}
		switch e {
		case 'u':
			x, ok := hex4(b[r:])
			if !ok {
				// Kept as written; what follows "\u" is read again.
				w += copy(b[w:], `\u`)
				continue
			}
			r += 4
			if !utf16.IsSurrogate(rune(x)) {
				w += utf8.EncodeRune(b[w:], rune(x))
				continue
			}
			if r+6 > len(b) || b[r] != '\\' || b[r+1] != 'u' {
				w += copy(b[w:], b[r-6:r])
				continue
			}
			y, ok := hex4(b[r+2:])
			if !ok {
				w += copy(b[w:], b[r-6:r])
				continue
			}
			r += 6
			w += utf8.EncodeRune(b[w:], utf16.DecodeRune(rune(x), rune(y)))
		default:
			b[w], b[w+1] = '\\', e
			w += 2
		}
	}
	return w
}

// hex4 reads four hexadecimal digits.
func hex4(b []byte) (uint16, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var x uint16
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		x = x<<4 | uint16(c)
	}
	return x, true
}

// key reads an object member's key and the ':' after it, with the
// whitespace around them, and returns the key's bounds in the arena.
func (p *parser) key() (start, end int, err error) {
	p.skipWS()
	if p.pos >= len(p.buf) || p.buf[p.pos] != '"' {
		return 0, 0, p.syntax("missing object key")
	}
	p.pos++
	start, end, err = p.string()
	if err != nil {
		return 0, 0, err
	}
	p.skipWS()
	if p.pos >= len(p.buf) || p.buf[p.pos] != ':' {
		return 0, 0, p.syntax("missing ':' after object key")
	}
	p.pos++
	p.skipWS()
	return start, end, nil
}

// more reads what follows a member of an object or an element of an
// array: a ',' before another (more), or the closing byte. ok is false
// when it is neither (separatorError says why).
func (p *parser) more(closing byte) (more, ok bool) {
	p.skipWS()
	if p.pos < len(p.buf) {
		if c := p.buf[p.pos]; c == ',' || c == closing {
			p.pos++
			return c == ',', true
		}
	}
	return false, false
}

// separatorError is the syntax error where more found neither a ',' nor
// the closing byte after a value of an object or an array (what).
func (p *parser) separatorError(what string) error {
	if p.pos >= len(p.buf) {
		return p.syntax("unexpected end of " + what)
	}
	return p.syntax("missing ',' after " + what + " value")
}

func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'
}

// number reads a number token and returns its bounds.
func (p *parser) number() (start, end int, err error) {
	b := p.buf
	start = p.pos
	i := start
	for i < len(b) && isNumberByte(b[i]) {
		i++
	}
	if i < len(b) && (i == start || i == start+1 && (b[start] == '-' || b[start] == '+')) {
		if i+3 <= len(b) && (bytes.EqualFold(b[i:i+3], []byte("inf")) || bytes.EqualFold(b[i:i+3], []byte("nan"))) {
			i += 3
		} else {
			return 0, 0, p.syntax("unexpected character")
		}
	}
	p.pos = i
	return start, i, nil
}

// value reads a value (whitespace before it skipped) and appends it and
// its descendants to the nodes; key is the bounds of its key in the
// parent object.
func (p *parser) value(keyOff, keyEnd, depth int) error {
	depth++
	if depth > maxDepth {
		return p.syntax(fmt.Sprintf("nested deeper than %d", maxDepth))
	}
	b := p.buf
	if p.pos >= len(b) {
		return p.syntax("unexpected end")
	}
	i := len(p.nodes)
	p.nodes = append(p.nodes, jnode{})
	n := jnode{keyOff: uint32(keyOff), keyLen: uint32(keyEnd - keyOff)}
	switch c := b[p.pos]; c {
	case '{':
		p.pos++
		n.kind = jObject
		p.skipWS()
		if p.pos < len(b) && b[p.pos] == '}' {
			p.pos++
			break
		}
		for more := true; more; {
			ks, ke, err := p.key()
			if err != nil {
				return err
			}
			if err := p.value(ks, ke, depth); err != nil {
				return err
			}
			n.count++
			var ok bool
			if more, ok = p.more('}'); !ok {
				return p.separatorError("object")
			}
		}
	case '[':
		p.pos++
		n.kind = jArray
		p.skipWS()
		if p.pos < len(b) && b[p.pos] == ']' {
			p.pos++
			break
		}
		for more := true; more; {
			p.skipWS()
			if err := p.value(0, 0, depth); err != nil {
				return err
			}
			n.count++
			var ok bool
			if more, ok = p.more(']'); !ok {
				return p.separatorError("array")
			}
		}
	case '"':
		p.pos++
		start, end, err := p.string()
		if err != nil {
			return err
		}
		n.kind = jString
		n.strOff, n.strLen = uint32(start), uint32(end-start)
	case 't', 'f', 'n':
		lit, kind := "true", jTrue
		switch c {
		case 'f':
			lit, kind = "false", jFalse
		case 'n':
			lit, kind = "null", jNull
		}
		if p.pos+len(lit) <= len(b) && string(b[p.pos:p.pos+len(lit)]) == lit {
			p.pos += len(lit)
			n.kind = kind
			break
		}
		if c == 'n' && p.pos+3 <= len(b) && bytes.EqualFold(b[p.pos:p.pos+3], []byte("nan")) {
			if p.strict {
				return fmt.Errorf("invalid number %q", b[p.pos:p.pos+3])
			}
			n.kind = jNumber
			n.strOff, n.strLen = uint32(p.pos), 3
			p.pos += 3
			break
		}
		return p.syntax("unexpected value")
	default:
		start, end, err := p.number()
		if err != nil {
			return err
		}
		if p.strict && !validNumber(b[start:end]) {
			return fmt.Errorf("invalid number %q", b[start:end])
		}
		n.kind = jNumber
		n.strOff, n.strLen = uint32(start), uint32(end-start)
	}
	n.end = int32(len(p.nodes))
	p.nodes[i] = n
	return nil
}

// event reads a whole event into ev and its document.
func (p *parser) event(ev *Event) error {
	b := p.buf
	p.skipWS()
	if p.pos >= len(b) || b[p.pos] != '{' {
		return fmt.Errorf("%w: an event is a JSON object", ErrInvalidEvent)
	}
	p.pos++
	var seenType, seenCreated, seenPayload bool
	// ferr is the first field error; the rest of the event must still be
	// valid JSON.
	var ferr error
	fail := func(err error) {
		if ferr == nil {
			ferr = err
		}
	}
	p.skipWS()
	if p.pos < len(b) && b[p.pos] == '}' {
		p.pos++
	} else {
		for more := true; more; {
			ks, ke, err := p.key()
			if err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidEvent, err)
			}
			key := p.str(ks, ke)
			mark := len(p.nodes)
			p.strict = key == "payload" || key == "metadata"
			if err := p.value(0, 0, 1); err != nil {
				if p.strict && !errors.Is(err, errSyntax) {
					// A number of the payload or the metadata.
					return fmt.Errorf("%w: %s: %w", ErrInvalidEvent, key, err)
				}
				return fmt.Errorf("%w: %w", ErrInvalidEvent, err)
			}
			p.strict = false
			if ferr == nil {
				p.field(ev, key, int32(mark), &seenType, &seenCreated, &seenPayload, fail)
			}
			if key != "payload" && key != "metadata" {
				p.nodes = p.nodes[:mark]
			}
			var ok bool
			if more, ok = p.more('}'); !ok {
				return fmt.Errorf("%w: %w", ErrInvalidEvent, p.separatorError("object"))
			}
		}
	}
	p.skipWS()
	if p.pos != len(b) {
		return fmt.Errorf("%w: %w", ErrInvalidEvent, p.syntax("data after the event"))
	}
	switch {
	case ferr != nil:
		return ferr
	case !seenType:
		return fmt.Errorf("%w: missing type", ErrInvalidEvent)
	case !seenCreated:
		return fmt.Errorf("%w: missing created_ms", ErrInvalidEvent)
	case !seenPayload:
		return fmt.Errorf("%w: missing payload", ErrInvalidEvent)
	}
	return nil
}

// field applies a top-level field of the event, its value at node i.
func (p *parser) field(ev *Event, key string, i int32, seenType, seenCreated, seenPayload *bool, fail func(error)) {
	n := &p.nodes[i]
	str := func() string { return p.str(int(n.strOff), int(n.strOff+n.strLen)) }
	switch key {
	case "type":
		if n.kind != jString {
			fail(fmt.Errorf("%w: type must be a string", ErrInvalidEvent))
			return
		}
		ev.Type, *seenType = str(), true
	case "created_ms":
		v, err := strconv.ParseUint(str(), 10, 64)
		if n.kind != jNumber || err != nil {
			fail(fmt.Errorf("%w: created_ms must be an unsigned integer", ErrInvalidEvent))
			return
		}
		ev.CreatedMs, *seenCreated = v, true
	case "payload":
		if n.kind != jObject {
			fail(fmt.Errorf("%w: payload: must be a JSON object", ErrInvalidEvent))
			return
		}
		ev.doc.payload, *seenPayload = i, true
	case "metadata":
		switch n.kind {
		case jNull:
		case jObject:
			ev.doc.metadata = i
		default:
			fail(fmt.Errorf("%w: metadata: must be a JSON object", ErrInvalidEvent))
		}
	case "trace_id":
		switch n.kind {
		case jNull:
		case jString:
			ev.TraceID = str()
		default:
			fail(fmt.Errorf("%w: trace_id must be a string or null", ErrInvalidEvent))
		}
	}
}
