package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The decoders read a document in one pass of json.Valid, then walk it by
// slicing: each object or array is split into its members' raw bytes without
// decoding them, so that a tree is not re-read once per level of nesting
// (which made a 10 MB export take seconds). Only leaves are decoded.

var errBadJSON = errors.New("invalid JSON")

// checkJSON reports whether data is one valid JSON value, with
// encoding/json's syntax error if not.
func checkJSON(data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &DecodeError{Err: fmt.Errorf("%w: expected a JSON object", ErrWrongType)}
	}
	if json.Valid(data) {
		return nil
	}
	var v json.RawMessage
	err := json.Unmarshal(data, &v)
	if err == nil {
		err = errBadJSON
	}
	return &DecodeError{Err: err}
}

// member is one key and raw value of a JSON object.
type member struct {
	key string
	val json.RawMessage
}

// splitObject returns the members of the object data, in order, duplicates
// included. data must be valid JSON starting with '{' (checkJSON); out of
// range reads report errBadJSON rather than panic.
func splitObject(data []byte) ([]member, error) {
	var out []member
	i := skipSpace(data, 1)
	if i < len(data) && data[i] == '}' {
		return out, nil
	}
	for i < len(data) {
		kend, err := skipString(data, i)
		if err != nil {
			return nil, err
		}
		key, err := unquote(data[i:kend])
		if err != nil {
			return nil, err
		}
		i = skipSpace(data, kend)
		if i >= len(data) || data[i] != ':' {
			return nil, errBadJSON
		}
		i = skipSpace(data, i+1)
		vend, err := skipValue(data, i)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key, data[i:vend]})
		var more bool
		if i, more, err = afterValue(data, vend, '}'); err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
	}
	return nil, errBadJSON
}

// splitArray returns the raw elements of the array data (valid JSON, '[').
func splitArray(data []byte) ([]json.RawMessage, error) {
	out := []json.RawMessage{}
	i := skipSpace(data, 1)
	if i < len(data) && data[i] == ']' {
		return out, nil
	}
	for i < len(data) {
		end, err := skipValue(data, i)
		if err != nil {
			return nil, err
		}
		out = append(out, data[i:end])
		var more bool
		if i, more, err = afterValue(data, end, ']'); err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
	}
	return nil, errBadJSON
}

// afterValue reads what follows a member or an element ending at i: a ','
// (more, and the start of the next one) or the closing byte of the
// object or the array.
func afterValue(data []byte, i int, closing byte) (int, bool, error) {
	i = skipSpace(data, i)
	if i < len(data) {
		switch data[i] {
		case ',':
			return skipSpace(data, i+1), true, nil
		case closing:
			return i, false, nil
		}
	}
	return 0, false, errBadJSON
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at data[i].
func skipString(data []byte, i int) (int, error) {
	if i >= len(data) || data[i] != '"' {
		return 0, errBadJSON
	}
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errBadJSON
}

// skipValue returns the index after the value starting at data[i].
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, errBadJSON
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errBadJSON
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, nil
		}
		j++
	}
	return j, nil
}

// unquote decodes a JSON string literal as encoding/json does (invalid
// UTF-8 becomes U+FFFD).
func unquote(lit []byte) (string, error) {
	body := lit[1 : len(lit)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", errBadJSON
	}
	return s, nil
}
