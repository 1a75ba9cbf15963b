package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// object is one JSON object of a webhook file, decoded one level deep, with
// its keys checked against the allowed set.
type object struct {
	path   string // JSON path of the object, "" for the root
	fields map[string]json.RawMessage
}

// decodeObject decodes raw as a JSON object whose keys must all be in
// allowed (exact, case-sensitive match) and appear once. Errors name the
// offending field.
func decodeObject(raw json.RawMessage, path string, allowed ...string) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, &ValidationError{Field: nonEmpty(path), Err: errors.New("must be a JSON object")}
	}
	o := &object{path: path, fields: make(map[string]json.RawMessage)}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &ValidationError{Field: nonEmpty(path), Err: err}
		}
		key := tok.(string) // object keys are always strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, &ValidationError{Field: o.field(key), Err: err}
		}
		switch {
		case !slices.Contains(allowed, key):
			return nil, &ValidationError{Field: o.field(key), Err: fmt.Errorf("unknown field (allowed: %s)", strings.Join(allowed, ", "))}
		case o.fields[key] != nil:
			return nil, &ValidationError{Field: o.field(key), Err: errors.New("duplicate field")}
		}
		o.fields[key] = v
	}
	return o, nil
}

// field returns the JSON path of the member key.
func (o *object) field(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

// present reports whether the member key is present and not null.
func (o *object) present(key string) bool {
	raw := o.fields[key]
	return raw != nil && string(raw) != "null"
}

// str decodes the member key as a string. When required, a missing member or
// null is ErrRequired and "" is errEmpty; otherwise both give "".
func (o *object) str(key string, required bool) (string, error) {
	raw := o.fields[key]
	if !o.present(key) {
		if required {
			return "", &ValidationError{Field: o.field(key), Err: ErrRequired}
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &ValidationError{Field: o.field(key), Err: errors.New("must be a string")}
	}
	if s == "" && required {
		return "", &ValidationError{Field: o.field(key), Err: errEmpty}
	}
	return s, nil
}

// decodeJSON decodes raw into v keeping numbers as json.Number, and requires
// raw to hold exactly one JSON value.
func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		if err == io.EOF {
			return errors.New("empty")
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

func nonEmpty(path string) string {
	if path == "" {
		return "(file)"
	}
	return path
}

// jsonText returns a JSON string's value, or the raw text of another JSON
// value, for ValidationError.Value.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
