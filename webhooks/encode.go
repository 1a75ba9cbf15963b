package webhooks

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the JSON of ev to b, exactly as encoding/json with
// SetEscapeHTML(false) writes it (object keys sorted), without reflection:
// this is on the path of every webhook call. Values of types an event does
// not hold go through encoding/json.
func (ev Event) AppendJSON(b []byte) ([]byte, error) {
	b = appendEventHead(b, ev.Type, ev.CreatedMs)
	b, err := appendValue(b, ev.Metadata)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"payload":`...)
	if b, err = appendValue(b, ev.Payload); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendEventHead appends the start of an event's JSON, up to the value of
// "metadata".
func appendEventHead(b []byte, typ string, createdMs int64) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"created_ms":`...)
	b = strconv.AppendInt(b, createdMs, 10)
	return append(b, `,"metadata":`...)
}

func appendValue(b []byte, v any) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case json.Number:
		if !validNumber(string(v)) {
			return appendReflect(b, v) // encoding/json's error, or 0 for ""
		}
		return append(b, v...), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			if b, err = appendValue(b, v[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return appendReflect(b, v)
}

// appendReflect appends v as encoding/json writes it.
func appendReflect(b []byte, v any) ([]byte, error) {
	var buf jsonBuffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return append(b, buf[:len(buf)-1]...), nil // without the newline
}

type jsonBuffer []byte

func (j *jsonBuffer) Write(p []byte) (int, error) {
	*j = append(*j, p...)
	return len(p), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does
// without HTML escaping: quotes, backslashes, control characters, U+2028
// and U+2029 are escaped, and invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// validNumber reports whether s is a JSON number.
func validNumber(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}
